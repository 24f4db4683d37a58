"""Plain, immutable values the state store returns (never live ORM rows)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cdc_lake.state.lifecycle import TableState


class RunOutcome(enum.StrEnum):
    """How a recorded command run ended."""

    OK = "ok"
    FAILED = "failed"
    ABORTED = "aborted"


@dataclass(frozen=True)
class SourceInfo:
    """An onboarded source and the Kafka Connect connectors that capture it."""

    name: str
    engine: str
    onboarded_at: datetime
    connector_names: tuple[str, ...]


@dataclass(frozen=True)
class TableInfo:
    """A table's lifecycle row."""

    qualified_name: str
    source: str
    tier: int
    state: TableState
    lake_base_path: str
    last_error: str | None
    updated_at: datetime
    possibly_diverged: str | None = None
    """Why the lake copy may differ from the source (a quarantined message; a commit completed after the
    apply lock was lost), until a re-bootstrap or a clean validate clears it; None when nothing is known
    to differ."""


@dataclass(frozen=True)
class BootstrapPartition:
    """One slice of a bootstrap read: a WHERE predicate for one Spark JDBC partition."""

    index: int
    predicate: str
    done: bool = False


@dataclass(frozen=True)
class Watermark:
    """The hand-off point of a bootstrap: Kafka offsets saved before the snapshot and its plan.

    ``offsets`` maps each partition of ``topic`` to the first offset the applier
    must replay; ``ts_source_ms`` is the source commit time of the newest event
    below them (None for an empty topic); ``source_position`` is the primary's
    position (Postgres LSN, MySQL/MariaDB GTID set) the replica must pass;
    ``history_offset`` the first offset of the connector's schema history not yet checked for a swap of
    the table (MySQL/MariaDB, :mod:`cdc_lake.apply.swaps`), or the first id of the source's table-rewrite
    log not yet checked for a rewrite of it (Postgres, :mod:`cdc_lake.apply.rewrites`); None: not
    recorded.  ``topic_id`` is the Kafka id of ``topic`` when ``offsets`` were read: a topic deleted and
    created again under its name has another id and offsets that start over (None: a watermark saved
    before ids were recorded, or a broker without them).
    """

    table: str
    topic: str
    offsets: dict[int, int]
    ts_source_ms: int | None
    source_position: str | None
    created_at: datetime
    replica_position_reached: bool
    partitions: tuple[BootstrapPartition, ...]
    history_offset: int | None = None
    topic_id: str | None = None

    @property
    def pending_partitions(self) -> tuple[BootstrapPartition, ...]:
        """Partitions of the plan not yet written to the lake."""
        return tuple(p for p in self.partitions if not p.done)


@dataclass(frozen=True)
class Run:
    """One recorded command run."""

    id: int
    command: str
    table: str | None
    started_at: datetime
    finished_at: datetime | None
    outcome: RunOutcome | None
    detail: dict[str, Any]


@dataclass
class RunHandle:
    """What ``StateStore.run`` yields: the run id and a detail dict saved when the run ends."""

    id: int
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ServicesBacklog:
    """What a read-optimized reader of the table missed when the table service last looked.

    ``pending_plans``: compaction plans scheduled, not executed; ``uncompacted_since_ms``: when the oldest
    write no base file holds yet completed (None: none); ``error``: why the last execution failed (None:
    it did not).
    """

    pending_plans: int
    uncompacted_since_ms: int | None
    error: str | None
    measured_at: datetime

    def staleness_seconds(self, now: datetime) -> float:
        """How old the oldest change a read-optimized reader misses is at ``now`` (0: none)."""
        if self.uncompacted_since_ms is None:
            return 0.0
        return max(0.0, now.timestamp() - self.uncompacted_since_ms / 1000)


@dataclass(frozen=True)
class Freshness:
    """The newest applied source change for a table and how far the applier trailed Kafka."""

    table: str
    newest_source_ts_ms: int | None
    lag_messages: int
    measured_at: datetime
    services: ServicesBacklog | None = None
    """The table-service backlog, for a table whose services run outside its writes (None: not measured)."""

    def age_seconds(self, now: datetime) -> float | None:
        """How stale the lake copy is at ``now``.

        With no lag at ``measured_at`` the lake matched the source then, so an
        idle table is as stale as the measurement; otherwise it is as old as the
        newest change applied.  None when nothing has been applied yet.
        """
        if self.lag_messages == 0:
            return max(0.0, (now - self.measured_at).total_seconds())
        if self.newest_source_ts_ms is None:
            return None
        return max(0.0, now.timestamp() - self.newest_source_ts_ms / 1000)


@dataclass(frozen=True)
class CurrentCopy:
    """The lake copy of a table that every verb reads and the applier writes, and how far it is.

    ``path`` is the configured base path until a re-bootstrap switches the table to ``<path>__vN``;
    ``applied_offsets`` are the next Kafka offsets to apply per partition, as held by the Hudi commit
    ``last_commit`` of that path (the bootstrap's last commit holds the watermark's); empty, and
    ``last_commit`` None, before the copy has a commit with offsets.
    """

    table: str
    path: str
    last_commit: str | None
    applied_offsets: dict[int, int]
    freshness: Freshness | None


@dataclass(frozen=True)
class QuarantinedMessage:
    """A message an operator chose to skip, kept with where it was and why.

    ``topic_id`` is the Kafka id of the topic it was read from (None: not known, a row older than
    topic ids): a topic created again under the same name never skips it.  ``lake_path`` is the copy
    of the table that lacks its change (None: not recorded).  ``replayed_at`` and ``replayed_by`` say
    when and by whom ``cdc-lake quarantine --replay`` applied it after a fix (None: still missing), and
    ``replay_commit`` the Hudi commit that did (None: the lake already held a later delete of its key).
    """

    id: int
    table: str
    topic: str
    partition: int
    offset: int
    reason: str
    key: bytes | None
    value: bytes | None
    quarantined_at: datetime
    topic_id: str | None = None
    lake_path: str | None = None
    replayed_at: datetime | None = None
    replayed_by: str | None = None
    replay_commit: str | None = None

    @property
    def missing(self) -> bool:
        """Whether the lake still lacks the message's change (it was not replayed)."""
        return self.replayed_at is None


class RebootstrapPhase(enum.StrEnum):
    """Where a re-bootstrap stands: copying (resumable), switched (old path kept), done or rolled back."""

    COPYING = "COPYING"
    SWITCHED = "SWITCHED"
    REMOVED = "REMOVED"
    ABORTED = "ABORTED"


@dataclass(frozen=True)
class Rebootstrap:
    """One re-bootstrap: the copy's state-store name, the old and new base paths, and its phase."""

    table: str
    version: int
    copy_name: str
    old_path: str
    new_path: str
    reason: str
    phase: RebootstrapPhase
    started_at: datetime
    switched_at: datetime | None
    remove_after: datetime | None
    read_from: str | None = None
    """``primary``: the copy is read from the primary (``--from-primary``); None: as the config says."""
