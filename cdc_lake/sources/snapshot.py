"""What the bootstrap reads from a source engine: positions, table shape, key samples, JDBC access.

:class:`SnapshotSource` is the bootstrap's part of the engine contract, an abstract base that
:class:`~cdc_lake.sources.base.SourceEngine` extends with onboarding's and the operations' part, so
every method is abstract and an engine that forgets one cannot be built.  The engines
(:mod:`cdc_lake.sources.postgres.engine`, :mod:`cdc_lake.sources.mysql.engine`) implement it next to
their onboarding methods; the bootstrap, which asks only for this part, turns what they return into
partition predicates, Spark JDBC reads and lake types.  Everything here is read from the role the
caller names (the read replica, unless the config allows reading the primary).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from cdc_lake.sources.positions import LogPosition


@dataclass(frozen=True)
class SourceColumn:
    """One column of a source table as its catalog describes it.

    ``type_name`` is the engine's base type name in lower case (Postgres ``pg_type.typname`` such as
    ``int4`` or ``timestamptz``; MySQL ``DATA_TYPE`` such as ``int`` or ``datetime``) and
    ``declared`` the full declared type (``numeric(12,2)``, ``int(10) unsigned``).  ``kind`` is
    ``base``, ``enum``, ``range``, ``array`` (``element`` names the element type, ``element_kind`` its
    kind) or ``other``.  A Postgres domain is described by its base type (Debezium sends base values).
    """

    name: str
    type_name: str
    declared: str
    nullable: bool
    precision: int | None = None
    scale: int | None = None
    kind: str = "base"
    element: str | None = None
    element_kind: str | None = None

    @property
    def unsigned(self) -> bool:
        """MySQL/MariaDB: whether the declared integer or decimal type is unsigned."""
        return "unsigned" in self.declared.lower()


@dataclass(frozen=True)
class TableShape:
    """A source table's columns (in table order), primary key, and size estimates from the catalog."""

    name: str
    columns: tuple[SourceColumn, ...]
    primary_key: tuple[str, ...]
    estimated_rows: int
    estimated_bytes: int

    def column(self, name: str) -> SourceColumn | None:
        """The column called ``name``, if the table has one."""
        return next((c for c in self.columns if c.name == name), None)


SESSION_WAIT_FAILED = "cdc-lake session wait:"
"""How the message a JDBC session's replica wait fails with begins (:class:`SessionWait`), whatever the
engine wraps it in: the bootstrap finds it in the failed read's cause."""


@dataclass(frozen=True)
class SessionWait:
    """What every JDBC session reading a replica asserts before its query: its server has replayed
    ``position`` (the watermark's), waiting for it at most ``timeout_seconds``.

    The bootstrap waits for the replica on a connection of its own; Spark's partitions open their own,
    which a load-balanced reader endpoint (a cloud reader endpoint, HAProxy, a pooler) may send to
    another replica, one further behind.  The engine's session statement waits like the bootstrap's
    wait, then fails the session (the read) with a message starting :data:`SESSION_WAIT_FAILED`.
    """

    position: str
    timeout_seconds: float


@dataclass(frozen=True)
class JdbcAccess:
    """How Spark reaches one database server over JDBC.

    ``properties`` holds the driver class, user and password: it is a secret, never log it.
    ``session_init`` runs on every connection before the read (read-only session, UTC, ISO formats;
    with a :class:`SessionWait`, the wait for its position too).
    """

    url: str
    properties: dict[str, str]
    session_init: str

    def __repr__(self) -> str:
        return f"JdbcAccess(url={self.url!r})"


class SnapshotSource(ABC):
    """What the bootstrap needs of a source engine to plan and run a partitioned snapshot."""

    position_type: ClassVar[type[LogPosition]]
    """The type of this engine's positions (:meth:`current_position`, connector offsets)."""

    @abstractmethod
    def current_position(self) -> str:
        """The primary's position now (Postgres: WAL LSN; MySQL/MariaDB: GTID set)."""

    @abstractmethod
    def replica_position(self) -> str:
        """The position the read replica has replayed (same form as :meth:`current_position`)."""

    @abstractmethod
    def wait_replica_past(self, position: str, timeout: float) -> str:
        """Block until the replica has replayed ``position``; returns its position then.

        Raises :class:`~cdc_lake.exceptions.SourceEngineError` after ``timeout`` seconds.
        """

    @property
    @abstractmethod
    def row_comparisons(self) -> bool:
        """True when ``(a, b) >= (x, y)`` uses the key index; else predicates are spelled out."""

    @abstractmethod
    def quote_identifier(self, name: str) -> str:
        """``name`` quoted as an identifier of this engine."""

    @abstractmethod
    def quote_table(self, qualified: str) -> str:
        """``schema.table`` (MySQL: ``database.table``) quoted as a table reference."""

    @abstractmethod
    def jdbc_access(self, role: str, wait: SessionWait | None = None) -> JdbcAccess:
        """The JDBC URL, properties and session statements to read from ``role`` (replica or primary).

        With ``wait``, the session statements also wait until the session's server has replayed
        ``wait.position`` and fail the session, their message starting :data:`SESSION_WAIT_FAILED`,
        when it has not within ``wait.timeout_seconds`` (or is no replica).  Raises SourceEngineError
        when the position is not one of this engine's.
        """

    @abstractmethod
    def table_shape(self, table: str, role: str) -> TableShape:
        """Columns, primary key and size estimates of ``table`` read on ``role``.

        Raises SourceEngineError when the table does not exist there.
        """

    @abstractmethod
    def sample_key_literals(
        self, table: str, key: tuple[str, ...], sample_rows: int, estimated_rows: int, role: str
    ) -> list[tuple[str, ...]]:
        """About ``sample_rows`` keys of ``table``, sorted by key, each as SQL literals of this engine."""

    @abstractmethod
    def check_replica(self) -> str:
        """Describe the read replica; raise SourceEngineError when it is missing or not replicating."""

    @abstractmethod
    def primary_clock_ms(self) -> int:
        """The primary's clock now, in epoch milliseconds."""

    @abstractmethod
    def replica_replay_time_ms(self) -> int | None:
        """Commit time (epoch ms) of the newest transaction the replica has replayed, when it knows it."""

    @abstractmethod
    def replica_lag(self, position: str) -> str:
        """How far the replica is behind ``position``, in words (bytes, seconds, GTIDs)."""

    @abstractmethod
    def streamed_through(self, offset: Mapping[str, Any]) -> str | None:
        """A position up to which a connector whose committed source offset is ``offset`` has streamed
        every row change, read on the primary; None when the offset's own position is all there is.

        The hand-off asks only when that position (:meth:`LogPosition.from_connector_offset`) stops
        short of the snapshot point.
        """
