"""``cdc-lake rebootstrap``: a fresh copy of a table in a new versioned base path, switched in atomically.

The way out of every stopped state (FAILED for a lost slot, a purged binlog or a bad message;
SCHEMA_CHANGED; BOOTSTRAPPING when the hand-off refused the copy, :mod:`cdc_lake_bootstrap.handoff`), and
the way to take a new schema in.  Steps, each resumable:

1. Under the table's bootstrap lock (a second re-bootstrap or bootstrap of the table is refused), the
   state store records the re-bootstrap (version N, reason, old and new path: ``<base>__vN``, a sibling of
   the configured path) and a *copy* row named ``TABLE~vN`` for the new path.
2. The copy is bootstrapped exactly like a new table (:class:`bootstrap.run.TableBootstrap`: watermark,
   replica wait, partitions, hand-off) and caught up until LIVE.  Meanwhile the table itself stays as it
   was: readable at its old path and still applied by ``cdc-lake run`` if it can be.
3. The switch, under the table's apply lock (no batch of the old table in flight): a last catch-up of the
   copy, then one state-store transaction gives the table the copy's path, bootstrap watermark,
   freshness and, as applied offsets, those its latest Hudi commit holds (read from its timeline: a copy
   the applier never committed to shows its bootstrap's commit and watermark), and makes it LIVE
   (clearing its error).  Its quarantine follows the copy: the copy read a snapshot holding every
   change before its watermark and skipped the table's quarantined offsets after it, so a row after
   the watermark stays (bound to the new path) with the possibly-diverged mark, and every other row,
   and the mark with the last one, goes (rows of a topic since re-created go too).  From then on every
   verb reads the new copy (:meth:`StateStore.current_copy`), and ``cdc-lake run`` takes the new path
   at its next batch.  The old path stays for ``lake.old_copy_keep_hours`` so readers that resolved it
   before the switch finish; ``cdc-lake rebootstrap --remove-old`` then removes it.

Killed in step 1 or 2, running the command again resumes the copy (the bootstrap resumes at its step);
``--abort`` rolls it back instead (the copy row and the new path are removed; the table is untouched).
A crash inside the switch leaves either the old or the new state: it is one transaction.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import SparkSession

from cdc_lake.capture.update import ConnectorUpdate
from cdc_lake.catalog.sync import CatalogSync
from cdc_lake.config import Config
from cdc_lake.decode.registry import registry_client
from cdc_lake.exceptions import BootstrapBusyError, CatalogError, CdcLakeError, RebootstrapError
from cdc_lake.kafka.group_offsets import delete_group
from cdc_lake.kafka.offsets import topic_state
from cdc_lake.kafka.reader import KafkaReadSettings
from cdc_lake.lake.applier import ApplierFactory
from cdc_lake.lake.checkpoint import checkpoint_from_commit
from cdc_lake.lake.format import LakeFormat, load_format
from cdc_lake.lake.schema import row_columns
from cdc_lake.lake.schema_change import SchemaDiff, SchemaPolicy
from cdc_lake.lake.target import TableTarget, target_for
from cdc_lake.spark import get_spark
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.locks import HeldLock, LockPurpose, table_lock, waited_table_lock
from cdc_lake.state.models import utcnow
from cdc_lake.state.records import Rebootstrap, RebootstrapPhase
from cdc_lake.state.store import StateStore, versioned_path
from cdc_lake_bootstrap.progress import LineView, ProgressView
from cdc_lake_bootstrap.run import APPLY_TIMEOUT_SECONDS, BUSY_RETRY_SECONDS, TableBootstrap

_LOG = logging.getLogger(__name__)

REBOOTSTRAP_RUN = "rebootstrap"
REMOVE_OLD_RUN = "rebootstrap remove-old"
PRIMARY = "primary"
"""``Rebootstrap.read_from`` of a re-bootstrap started with ``--from-primary``."""


@dataclass(frozen=True)
class RebootstrapResult:
    """How one table's re-bootstrap ended (or what ``--abort`` / ``--remove-old`` did)."""

    table: str
    version: int
    action: str
    path: str
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "table": self.table, "version": self.version, "action": self.action, "path": self.path,
            "seconds": round(self.seconds, 3),
        }


@contextmanager
def _bootstrap_lock(config: Config, name: str) -> Iterator[HeldLock]:
    """The table's bootstrap lock: a second re-bootstrap (or a bootstrap) of it is refused."""
    with table_lock(config.state_store.url, LockPurpose.BOOTSTRAP, name) as acquired:
        if not acquired:
            raise BootstrapBusyError(
                f"table {name}: another bootstrap of this table is running; wait for it, or stop it and "
                "run again"
            )
        yield acquired


def copy_target(config: Config, table: str, record: Rebootstrap) -> TableTarget:
    """The lake target of the re-bootstrap's copy: the same Hudi table, in the new path."""
    source, configured = config.table(table)
    target = target_for(config, source, configured)
    return replace(target, qualified_name=record.copy_name, base_path=record.new_path, lake_name=table)


def rebootstrap_tables(
    config: Config,
    tables: Sequence[str],
    reason: str,
    view: ProgressView,
    applier: ApplierFactory,
    update_connectors: ConnectorUpdate | None = None,
    from_primary: bool = False,
) -> list[RebootstrapResult]:
    """Re-bootstrap each table in turn and switch it; the first failure stops the command (resumable).

    ``from_primary`` reads the copies from the primary even where a replica is configured; a resumed
    re-bootstrap must be asked for the side it started on (recorded with it): partitions copied from
    both would mix two sources.

    ``applier`` catches the copy up after its hand-off and once more before the switch.

    ``update_connectors`` (onboarding's, from the command line) first brings the source's connectors in
    line with the config for a table with a frozen column list: a changed list is captured before the
    copy is read.
    """
    results = []
    with StateStore.open(config.state_store.url) as store:
        for name in dict.fromkeys(tables):
            source, table = config.table(name)
            with _bootstrap_lock(config, name) as lock:
                if table.columns and update_connectors is not None:
                    for action in update_connectors(config, source.name, table.name):
                        _LOG.info("%s: %s", name, action)
                results.append(_rebootstrap(config, store, name, reason, view, applier, from_primary, lock))
    return results


def _rebootstrap(
    config: Config,
    store: StateStore,
    name: str,
    reason: str,
    view: ProgressView,
    applier: ApplierFactory,
    from_primary: bool,
    lock: HeldLock,
) -> RebootstrapResult:
    """``lock``: the table's bootstrap lock, held by the caller; the copy's commits verify it."""
    began = time.monotonic()
    info = store.require_table(name)
    if info.state is TableState.PENDING_BOOTSTRAP and store.get_watermark(name) is None:
        # Never copied.  One copied before (onboarded again after a lost position) keeps its lake copy
        # until the new one is switched in: `bootstrap` refuses a path holding a lake table.
        raise RebootstrapError(f"table {name} is {info.state.value}: run `cdc-lake bootstrap {name}` instead")
    if info.state is TableState.OFFBOARDED:
        raise RebootstrapError(f"table {name} is OFFBOARDED: onboard it again first")
    read_from = PRIMARY if from_primary else None
    record = store.start_rebootstrap(
        name, reason, lambda version: versioned_path(config.lake.table_base_path(name), version), read_from
    )
    if record.read_from != read_from:
        started = "from the primary" if record.read_from == PRIMARY else "where the config says"
        again = "with" if record.read_from == PRIMARY else "without"
        raise RebootstrapError(
            f"table {name}: its unfinished re-bootstrap v{record.version} reads {started}; run it again "
            f"{again} --from-primary, or roll it back: cdc-lake rebootstrap {name} --abort"
        )
    source, table = config.table(name)
    target = copy_target(config, name, record)
    if store.get_table(record.copy_name) is None:
        store.upsert_table(record.copy_name, source.name, table.tier, record.new_path)
    _LOG.info("%s: re-bootstrap v%d into %s (%s)", name, record.version, record.new_path, record.reason)
    with store.run(REBOOTSTRAP_RUN, name) as handle:
        handle.detail.update({
            "version": record.version, "reason": record.reason, "path": record.new_path,
            "read_from": record.read_from or "as configured",
        })
        registry = registry_client(config)
        copy = TableBootstrap(
            config, source, table, store, registry, view, apply=True, applier=applier, target=target,
            read_primary=from_primary,
        )
        copy.run(lock)
        spark = get_spark(config.spark, config.lake)
        switched = _switch(config, store, spark, name, record, target, applier)
        handle.detail.update({"switched_at": switched.isoformat()})
    return RebootstrapResult(name, record.version, "switched", record.new_path, time.monotonic() - began)


def _switch(
    config: Config,
    store: StateStore,
    spark: SparkSession,
    name: str,
    record: Rebootstrap,
    target: TableTarget,
    applier: ApplierFactory,
) -> dt.datetime:
    """Under the table's apply lock: catch the copy up once more, then switch in one transaction."""
    runner = applier(spark, store, config)
    keep = dt.timedelta(hours=config.lake.old_copy_keep_hours)
    deadline = time.monotonic() + APPLY_TIMEOUT_SECONDS
    while True:
        left = max(0.0, deadline - time.monotonic())
        # In turn: `cdc-lake run` takes the lock again right after each batch of the table.
        with waited_table_lock(config.state_store.url, LockPurpose.APPLY, name, left) as acquired:
            if acquired:
                outcome = runner.catch_up(target)
                if outcome.failed:
                    raise RebootstrapError(
                        f"table {name}: the re-bootstrap copy failed while catching up: {outcome.error}; "
                        "run the rebootstrap again to resume, or --abort"
                    )
                if store.require_table(record.copy_name).state is TableState.LIVE:
                    latest = _latest_commit(load_format(spark, config.lake.format), name, target)
                    # The id of the topic the copy read: quarantine rows of a topic since re-created go.
                    topic_id = topic_state(
                        config.kafka.bootstrap_servers, target.topic, extra=config.kafka.consumer
                    ).topic_id
                    done = store.switch_rebootstrap(name, record.version, keep, latest, topic_id)
                    _LOG.info("%s: switched to %s (v%d)", name, done.new_path, done.version)
                    _register(config, store, spark, name, target)
                    # Nothing commits to the old copy's group again: gone now, not stale until --remove-old.
                    delete_group(KafkaReadSettings.of(config.kafka), name, record.old_path)
                    return done.switched_at or utcnow()
        if time.monotonic() > deadline:
            raise RebootstrapError(
                f"table {name}: the copy did not catch up within {APPLY_TIMEOUT_SECONDS:.0f}s; run again"
            )
        time.sleep(BUSY_RETRY_SECONDS)


def _latest_commit(lake: LakeFormat, name: str, target: TableTarget) -> tuple[str, dict[int, int]] | None:
    """The copy's latest commit and the offsets it holds (its bootstrap's last commit: the watermark's)."""
    commit = lake.latest_commit(target.base_path)
    if commit is None:
        return None
    checkpoint = checkpoint_from_commit(commit, target.topic, f"table {name} copy at {target.base_path}")
    return None if checkpoint is None else (commit.instant, checkpoint.offsets)


def _register(config: Config, store: StateStore, spark: SparkSession, name: str, target: TableTarget) -> None:
    """Point the catalog entries at the table's current copy: the switch readers of ``database.table`` see.

    Right after the state-store switch, under the apply lock.  When it fails (or the process dies before
    it), the entries still name the old path: the applier's next batch of the table registers the current
    copy, and ``--remove-old`` keeps the old path until no entry names it.
    """
    catalog = CatalogSync.for_config(config)
    if catalog is None:
        return
    path = store.current_copy(name).path
    lake = load_format(spark, config.lake.format)
    columns = row_columns(lake.read(path).schema)
    partitions = lake.partitions(path) if target.partition_fields else ()
    try:
        for known in catalog.register(name, path, columns, target.partition_fields, partitions):
            _LOG.info("%s: catalog entry %s now at %s", name, known, path)
    except CatalogError as exc:
        raise RebootstrapError(
            f"table {name}: switched to {path}, but a catalog entry still points at the old path ({exc}); "
            f"`cdc-lake apply --once --tables {name}` registers the current path; --remove-old keeps the "
            "old one until then"
        ) from exc


def abort_rebootstraps(config: Config, tables: Sequence[str]) -> list[RebootstrapResult]:
    """Roll back each table's unfinished re-bootstrap: forget its copy and remove the new path."""
    results = []
    with StateStore.open(config.state_store.url) as store:
        for name in dict.fromkeys(tables):
            with _bootstrap_lock(config, name):
                open_ones = [r for r in store.rebootstraps(name) if r.phase is RebootstrapPhase.COPYING]
                if not open_ones:
                    raise RebootstrapError(f"table {name}: no unfinished re-bootstrap to abort")
                record = open_ones[-1]
                with table_lock(config.state_store.url, LockPurpose.APPLY, record.copy_name) as acquired:
                    if not acquired:
                        raise RebootstrapError(f"table {name}: its copy is being applied; stop that first")
                    _remove_lake_path(config, name, record.new_path, "new")
                    store.abort_rebootstrap(name, record.version)
                results.append(RebootstrapResult(name, record.version, "aborted", record.new_path))
    return results


def _remove_lake_path(config: Config, table: str, path: str, which: str) -> None:
    """Delete a re-bootstrap's ``which`` (old/new) base path, which the state store holds; only in the lake.

    A path outside ``lake.base_path`` (a tampered or mistaken state store, a changed config) is refused, and
    so is a path a configured catalog's entry of the table still names (readers resolve it there: a switch
    whose catalog update failed or was cut short).
    """
    if not config.lake.holds(path):
        raise RebootstrapError(
            f"table {table}: {which} path {path} is not under lake.base_path {config.lake.base_path}; "
            "not removed"
        )
    spark = get_spark(config.spark, config.lake)
    catalog = CatalogSync.for_config(config)
    named = [] if catalog is None else catalog.entries_at(table, path)
    if named:
        raise RebootstrapError(
            f"table {table}: {', '.join(named)} still points at the {which} path {path}; not removed "
            f"(`cdc-lake apply --once --tables {table}` registers the table's current copy; run this again "
            "once readers have moved)"
        )
    load_format(spark, config.lake.format).remove(path)


def remove_old_paths(config: Config, now: bool = False) -> list[RebootstrapResult]:
    """Remove the previous base paths whose keep time has passed (every switched one with ``now``)."""
    results = []
    kafka = KafkaReadSettings.of(config.kafka)
    with StateStore.open(config.state_store.url) as store:
        due = [
            r for r in store.rebootstraps()
            if r.phase is RebootstrapPhase.SWITCHED and (now or (r.remove_after or utcnow()) <= utcnow())
        ]
        for record in due:
            current = store.current_copy(record.table).path
            if record.old_path == current:
                raise RebootstrapError(f"table {record.table}: {record.old_path} is its current path")
            with store.run(REMOVE_OLD_RUN, record.table) as handle:
                handle.detail.update({"version": record.version, "path": record.old_path})
                _remove_lake_path(config, record.table, record.old_path, "old")
                store.mark_old_path_removed(record.table, record.version)
                delete_group(kafka, record.table, record.old_path)
            results.append(RebootstrapResult(record.table, record.version, "removed", record.old_path))
    return results


class AutoRebootstrap:
    """The ``rebootstrap`` schema policy: re-bootstrap a table that stopped in SCHEMA_CHANGED, in a thread.

    ``cdc-lake run`` calls it with the table and its schema difference; tables of other policies stay
    stopped for the operator, and so does a change only a copy of the primary resolves
    (:attr:`~cdc_lake.lake.schema_change.SchemaDiff.needs_primary`: the re-bootstrap would read the
    replica, and reading the primary is the operator's decision).  One thread per table at a time; the
    table's bootstrap lock refuses a re-bootstrap another process already runs (logged, not retried).
    """

    def __init__(self, config: Config, applier: ApplierFactory) -> None:
        self.config = config
        self.applier = applier
        self._running: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def __call__(self, table: str, diff: SchemaDiff) -> None:
        """Start the re-bootstrap of ``table`` if its policy asks for it and none is running here."""
        _source, configured = self.config.table(table)
        if SchemaPolicy(configured.schema_changes) is not SchemaPolicy.REBOOTSTRAP:
            return
        if diff.needs_primary:
            # Reading the primary is the operator's call (its load); a copy of the replica would differ.
            _LOG.error(
                "%s: no automatic re-bootstrap: only a copy read from the primary is exact (%s)", table,
                diff.summary(),
            )
            return
        with self._lock:
            running = self._running.get(table)
            if running is not None and running.is_alive():
                return
            thread = threading.Thread(
                target=self._rebootstrap, args=(table, diff), name=f"rebootstrap {table}", daemon=True
            )
            self._running[table] = thread
            thread.start()

    def _rebootstrap(self, table: str, diff: SchemaDiff) -> None:
        reason = f"automatic (schema_changes: rebootstrap): {diff.summary()}"
        _LOG.warning("%s: re-bootstrapping: %s", table, reason)
        try:
            for result in rebootstrap_tables(self.config, [table], reason, LineView(_LOG.info), self.applier):
                _LOG.warning("%s: re-bootstrap v%d switched to %s", table, result.version, result.path)
        except CdcLakeError as exc:
            _LOG.error("%s: automatic re-bootstrap stopped: %s (`rebootstrap` resumes it)", table, exc)
