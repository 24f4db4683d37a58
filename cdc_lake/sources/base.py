"""What every source engine (Postgres, MySQL, MariaDB) offers onboarding and bootstrap.

An engine wraps one configured :class:`~cdc_lake.config.Source`.  Onboarding asks it for
preflight checks, for the database objects a connector needs (prepared before the connector
is registered, published after it streams), and for the connector's template parameters.
Bootstrap asks it for positions: where the primary is now, where the read replica is, and
to wait until the replica has replayed past a primary position.

What every engine does alike lives here once, each engine adding only its hook: opening a
session with a role and turning driver errors into one-line errors (:meth:`SourceEngine.opened`,
the engine says how to open), the preflight's connection check (:meth:`SourceEngine.judge_primary`
reads and judges the rest) and the connector parameters every template takes
(:meth:`SourceEngine.engine_connector_params` adds the engine's own).  The engine's facts are its
:attr:`SourceEngine.capabilities` (:mod:`cdc_lake.sources.capabilities`).

The contract is enforced where an engine is built: every method the stages ask of an engine is
abstract, here or in the bootstrap's part it extends (:class:`~cdc_lake.sources.snapshot.SnapshotSource`),
so an engine that forgets one is a ``TypeError`` when it is instantiated, never a method answering None.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.capabilities import EngineCapabilities, TableRewrite
from cdc_lake.sources.checks import CheckResult
from cdc_lake.sources.connector import ConnectorParams, ConverterSettings
from cdc_lake.sources.settings import CaptureIds, Connection, Source, Table
from cdc_lake.sources.snapshot import SnapshotSource

_Session = TypeVar("_Session", bound=AbstractContextManager[Any])


@dataclass(frozen=True)
class Capture:
    """What one connector captures: its tables and the ids its engine names it by on the source (a
    :class:`~cdc_lake.sources.settings.CaptureIds` of the engine's package: slot and publication, or
    server id)."""

    connector: str
    tables: tuple[Table, ...]
    ids: CaptureIds = field(default_factory=CaptureIds)

    @property
    def table_names(self) -> tuple[str, ...]:
        """The captured tables as ``schema.table``."""
        return tuple(table.name for table in self.tables)


def captured_keys(captures: Sequence[Capture]) -> dict[str, tuple[str, ...]]:
    """Every captured table's configured key columns (empty where the primary key serves)."""
    return {table.name: tuple(table.key or ()) for capture in captures for table in capture.tables}


@dataclass(frozen=True)
class Change:
    """A change made to a source database, and how to undo it (None when it stays on purpose)."""

    description: str
    undo: Callable[[], str] | None = None


@dataclass(frozen=True)
class PreflightOptions:
    """What the checks must know beyond the captures.

    ``registered`` names the planned connectors Kafka Connect already runs for this source
    (their slots are ours); ``replica_required`` is False when bootstrap may read the
    primary; ``replica_identity_full`` means onboarding will set REPLICA IDENTITY FULL
    where the default identity is not enough (Postgres); ``server_ids_in_use`` maps the
    server ids of other connectors reading this source to their names (MySQL/MariaDB).
    """

    registered: frozenset[str] = field(default_factory=frozenset)
    replica_required: bool = True
    replica_identity_full: bool = False
    server_ids_in_use: Mapping[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConnectorEndpoints:
    """Where the connector's converters and schema history live, and the password's variable name."""

    password_env: str
    registry_url: str
    kafka_bootstrap: str
    converter: ConverterSettings = field(default_factory=ConverterSettings)
    kafka_clients: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CaptureLag:
    """What the primary keeps for one connector, and how far the connector's reader trails it.

    Postgres fills the slot fields (``status`` is the slot's ``wal_status``: reserved, extended,
    unreserved or lost; ``missing`` when the slot does not exist); MySQL/MariaDB fill the binlog
    ones (``status`` is ``retained``, ``purged`` when the file the connector needs is gone, or
    ``unknown`` before the connector committed an offset).  ``retained_bytes`` is WAL held by the
    slot, or binlog bytes from the connector's position to the end of the newest file.
    """

    connector: str
    status: str
    retained_bytes: int | None = None
    unconfirmed_bytes: int | None = None
    slot: str | None = None
    active: bool | None = None
    safe_bytes: int | None = None
    files_ahead_of_purge: int | None = None
    position: str | None = None
    primary_position: str | None = None


def tls_failure_hint(error: str, setting: str, value: str | None) -> str:
    """`` over TLS verified with SETTING VALUE`` when ``error`` is a failed certificate check, else empty.

    Connection errors name the CA setting at fault, so a wrong CA reads as one (not as a bad password).
    """
    lowered = error.lower()
    if value is None or not any(word in lowered for word in ("certificate", "ssl", "tls")):
        return ""
    return f" over TLS verified with {setting} {value}"


def connection_fix(found: str, settings: str, default: str) -> str:
    """The fix of a failed connection check: the TLS settings when the failure names them."""
    return (
        f"check {settings} (the CA that signed the server's certificate)"
        if "verified with" in found
        else default
    )


@dataclass(frozen=True)
class ReplicaDelay:
    """How far the read replica trails the primary: bytes (Postgres WAL) and seconds."""

    behind_bytes: int | None
    behind_seconds: float | None
    replaying: bool
    position: str | None


class SourceEngine(SnapshotSource):
    """One source database engine; its package declares it in :mod:`cdc_lake.sources` by its capabilities.

    Every engine is a :class:`SnapshotSource` too (the bootstrap's reads and the positions), so callers
    take the engine :func:`cdc_lake.sources.engine_for` returns as it is, never testing or casting it.

    Every method opens its own short-lived connections, so an engine holds nothing to close.
    """

    capabilities: ClassVar[EngineCapabilities]
    """What this engine declares about itself (:mod:`cdc_lake.sources.capabilities`)."""
    ca_setting: ClassVar[str]
    """The connection setting naming the CA file that verifies the server's certificate."""
    primary_tls_settings: ClassVar[str]
    """The config settings that verify the primary's TLS certificate, named when a connection fails on it."""
    primary_connection_fix: ClassVar[str]
    """What to check when connecting to the primary fails otherwise."""

    def __init__(self, source: Source) -> None:
        self.source = source

    def connection(self, role: str) -> Connection:
        """The configured ``role`` (``primary`` or ``replica``) of the source; an error when it has none."""
        connection = self.source.primary if role == "primary" else self.source.replica
        if connection is None:
            raise SourceEngineError(f"source {self.source.name}: no {role} configured")
        return connection

    def address(self, connection: Connection) -> str:
        """Where ``connection`` points, as errors and checks name it."""
        return f"{connection.host}:{connection.port}"

    @contextmanager
    def opened(
        self,
        role: str,
        open_connection: Callable[[Connection], _Session],
        errors: type[Exception],
        first_line: Callable[[BaseException], str],
    ) -> Iterator[_Session]:
        """A session with ``role`` opened by ``open_connection``, closed after the block.

        A driver error (``errors``) becomes a one-line error naming the source, role and address,
        and the CA setting (:attr:`ca_setting`) when the server's certificate failed the check.
        """
        connection = self.connection(role)
        where = f"source {self.source.name}: {role} {self.address(connection)}"
        try:
            session = open_connection(connection)
        except errors as exc:
            ca: str | None = getattr(connection, self.ca_setting)
            raise SourceEngineError(
                f"{where}: cannot connect as {connection.user}"
                f"{tls_failure_hint(str(exc), f'{role}.{self.ca_setting}', ca)}: {first_line(exc)}"
            ) from None
        try:
            with session:
                yield session
        except errors as exc:
            raise SourceEngineError(f"{where}: {first_line(exc)}") from None

    def preflight(self, captures: Sequence[Capture], options: PreflightOptions) -> list[CheckResult]:
        """Check the primary (and replica) for everything ``captures`` need; never changes anything.

        Connecting to the primary comes first: when it fails, that is the only result.
        """
        try:
            connected, checks = self.judge_primary(captures, options)
        except SourceEngineError as exc:
            found = str(exc).removeprefix(f"source {self.source.name}: ")
            fix = connection_fix(found, self.primary_tls_settings, self.primary_connection_fix)
            return [CheckResult.fail("primary connection", found, fix)]
        return [CheckResult.ok("primary connection", connected), *checks]

    @abstractmethod
    def judge_primary(
        self, captures: Sequence[Capture], options: PreflightOptions
    ) -> tuple[str, list[CheckResult]]:
        """Read the primary's and replica's facts and judge them: where it connected as whom, and the checks.

        Raises :class:`~cdc_lake.exceptions.SourceEngineError` when the primary cannot be read.
        """

    @abstractmethod
    def planned_changes(self, capture: Capture, options: PreflightOptions) -> list[str]:
        """What :meth:`prepare` and :meth:`publish` would change for ``capture``, for a dry run."""

    @abstractmethod
    def prepare(self, capture: Capture, options: PreflightOptions) -> list[Change]:
        """Create what the connector needs before it is registered (Postgres: heartbeat, publication)."""

    @abstractmethod
    def publish(self, capture: Capture) -> list[Change]:
        """Align what the connector reads with ``capture`` once it streams (Postgres: the publication).

        Tables are added only after the connector's include list has them, so no change is
        filtered out by a connector that does not know the table yet.
        """

    @abstractmethod
    def release(
        self, slot_name: str | None, publication_name: str | None, drop_slot: bool
    ) -> tuple[list[str], list[str]]:
        """Drop what a deleted connector used (its slot and publication), or keep them to resume from.

        Returns what was done, and warnings (a slot kept holds WAL until it is dropped).
        """

    @abstractmethod
    def slot_exists(self, slot_name: str) -> bool:
        """Whether the replication slot ``slot_name`` exists (engines without slots: never)."""

    def fork_ordering(self) -> str:
        """The ordering value (:mod:`cdc_lake.decode.ordering`) of the point where the primary, promoted
        in a failover, forked from the server it replicated: every change it made since sorts above it,
        and so does every change of a transaction the old primary committed after it (which this one never
        received).  ``cdc-lake onboard --after-failover`` records it (:mod:`cdc_lake.state.recaptures`).

        Only an engine whose capture position does not survive a failover has one (Postgres before
        failover slots); a binlog engine's GTID position does, and says so here."""
        raise SourceEngineError(
            f"source {self.source.name}: a {self.source.engine} failover keeps the connector's position (its "
            f"GTIDs): re-point the source at the new primary and run cdc-lake onboard {self.source.name} "
            "without --after-failover"
        )

    def connector_params(self, capture: Capture, endpoints: ConnectorEndpoints) -> ConnectorParams:
        """The parameters of the engine's connector template for ``capture``."""
        primary = self.source.primary
        shared = ConnectorParams(
            host=primary.host,
            port=primary.port,
            user=primary.user,
            password_env=endpoints.password_env,
            topic_prefix=self.source.topic_prefix or self.source.name,
            tables=list(capture.table_names),
            registry_url=endpoints.registry_url,
            converter=endpoints.converter,
            columns={t.name: t.columns for t in capture.tables if t.columns},
            heartbeat_interval_ms=round(self.source.heartbeat_interval_seconds * 1000),
        )
        return self.engine_connector_params(shared, capture, endpoints)

    @abstractmethod
    def engine_connector_params(
        self, shared: ConnectorParams, capture: Capture, endpoints: ConnectorEndpoints
    ) -> ConnectorParams:
        """``shared`` (what every connector template takes) with this engine's own parameters added."""

    @abstractmethod
    def capture_lag(
        self, captures: Sequence[Capture], offsets: Mapping[str, Mapping[str, object]]
    ) -> list[CaptureLag]:
        """One :class:`CaptureLag` per capture; ``offsets`` are connectors' committed source offsets."""

    @abstractmethod
    def replica_delay(self) -> ReplicaDelay:
        """How far the read replica trails the primary now."""

    @abstractmethod
    def column_defaults(self, table: str, columns: Sequence[str], role: str) -> dict[str, str | None]:
        """The defaults of ``columns`` of ``table`` as ``role``'s catalog spells them (None: no default,
        so a column added without one holds NULL in the existing rows; identity, auto-increment and
        generated columns have one); a column the table lacks is absent.  The applier asks before a new
        column evolves the lake, since Debezium's schema drops some defaults (docs/schema-changes.md)."""

    @abstractmethod
    def rewrite_log_start(self, table: str) -> int | None:
        """Where a check of ``table``'s rewrites starts now: one past the newest rewrite of it the source
        logged (those are a copy's from now on); None when the source keeps no rewrite log (MySQL and
        MariaDB record their DDL in the connector's schema history instead, :mod:`cdc_lake.apply.swaps`;
        a Postgres source whose log was not installed)."""

    @abstractmethod
    def rewrite_log_version(self) -> tuple[int, int] | None:
        """The source's table-rewrite log as (newest id, rows), which every rewrite that commits changes
        (ids are drawn before the commit, so the newest id alone may stay); None when it keeps none."""

    @abstractmethod
    def table_rewrites(self, table: str, start: int) -> list[TableRewrite]:
        """The rewrites of ``table`` the source logged at ids ``start`` and above, in id order."""

    def update_may_omit_old_key(self, table: str, key: Sequence[str]) -> bool:
        """Whether an update of ``table`` that keeps its configured ``key`` (not the primary key) may
        arrive without the key's old value in its before image, as the source is set up now.

        Everywhere but a Postgres table with ``REPLICA IDENTITY USING INDEX`` over exactly the key, an
        update without it means the source no longer logs the old key (a Postgres identity set back to
        DEFAULT, a MySQL ``binlog_row_image`` other than FULL): the applier cannot tell whether the key
        changed, and stops the table (:func:`cdc_lake.apply.key_change.unlogged_old_key_reason`).  The
        binlog engines need no query: a FULL row image always carries it."""
        return False

    @abstractmethod
    def replica_evaluates(self, default: str) -> bool:
        """Whether a replica computed ``default`` (as :meth:`column_defaults` spells it) for the existing
        rows itself, with values that may differ from the primary's: a copy read from the replica would
        not be the source's (``cdc-lake rebootstrap TABLE --from-primary`` reads the primary)."""
