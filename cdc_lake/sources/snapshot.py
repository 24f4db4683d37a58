"""What the bootstrap reads from a source engine besides positions: table shape, key samples, JDBC access.

The engines (:mod:`cdc_lake.sources.postgres.engine`, :mod:`cdc_lake.sources.mysql.engine`) implement
:class:`SnapshotSource` next to their onboarding methods; the bootstrap turns what they return into
partition predicates, Spark JDBC reads and lake types.  Everything here is read from the role the
caller names (the read replica, unless the config allows reading the primary).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

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


@dataclass(frozen=True)
class JdbcAccess:
    """How Spark reaches one database server over JDBC.

    ``properties`` holds the driver class, user and password: it is a secret, never log it.
    ``session_init`` runs on every connection before the read (read-only session, UTC, ISO formats).
    """

    url: str
    properties: dict[str, str]
    session_init: str

    def __repr__(self) -> str:
        return f"JdbcAccess(url={self.url!r})"


class SnapshotSource(Protocol):
    """What the bootstrap needs of a source engine to plan and run a partitioned snapshot.

    The positions are :class:`~cdc_lake.sources.base.SourceEngine`'s; the rest is added for bootstrap.
    """

    position_type: ClassVar[type[LogPosition]]
    """The type the positions below parse into (:mod:`cdc_lake.sources.positions`)."""

    def current_position(self) -> str:
        """The primary's position now (Postgres: WAL LSN; MySQL/MariaDB: GTID set)."""
        ...

    def replica_position(self) -> str:
        """The position the read replica has replayed (same form as :meth:`current_position`)."""
        ...

    def wait_replica_past(self, position: str, timeout: float) -> str:
        """Block until the replica has replayed ``position``; SourceEngineError after ``timeout``."""
        ...

    @property
    def row_comparisons(self) -> bool:
        """True when ``(a, b) >= (x, y)`` uses the key index; else predicates are spelled out."""
        ...

    def quote_identifier(self, name: str) -> str:
        """``name`` quoted as an identifier of this engine."""
        ...

    def quote_table(self, qualified: str) -> str:
        """``schema.table`` (MySQL: ``database.table``) quoted as a table reference."""
        ...

    def jdbc_access(self, role: str) -> JdbcAccess:
        """The JDBC URL, properties and session statements to read from ``role`` (replica or primary)."""
        ...

    def table_shape(self, table: str, role: str) -> TableShape:
        """Columns, primary key and size estimates of ``table`` read on ``role``.

        Raises SourceEngineError when the table does not exist there.
        """
        ...

    def sample_key_literals(
        self, table: str, key: tuple[str, ...], sample_rows: int, estimated_rows: int, role: str
    ) -> list[tuple[str, ...]]:
        """About ``sample_rows`` keys of ``table``, sorted by key, each as SQL literals of this engine."""
        ...

    def check_replica(self) -> str:
        """Describe the read replica; raise SourceEngineError when it is missing or not replicating."""
        ...

    def primary_clock_ms(self) -> int:
        """The primary's clock now, in epoch milliseconds."""
        ...

    def replica_replay_time_ms(self) -> int | None:
        """Commit time (epoch ms) of the newest transaction the replica has replayed, when it knows it."""
        ...

    def replica_lag(self, position: str) -> str:
        """How far the replica is behind ``position``, in words (bytes, seconds, GTIDs)."""
        ...
