"""What a source engine declares about itself, once: the facts shared code asks instead of comparing names.

Each engine package (:mod:`cdc_lake.sources.postgres`, :mod:`cdc_lake.sources.mysql`) declares one
:class:`EngineCapabilities` per engine name in its ``__init__``, which imports no database driver, so
the applier's decode path and the onboarding can read them on a machine that has only some drivers
installed.  :mod:`cdc_lake.sources` keeps the registry (``capabilities_for``,
``capabilities_for_connector``, ``codec_for_mark``) and loads an engine's class, and so its driver,
only when asked.

An engine's change positions are its one hook into the decode path, a :class:`PositionCodec` (as
Hudi's ``DebeziumSource`` has one subclass per database): it reads a streamed change's Debezium
``source`` block into the change's per-key order (:mod:`cdc_lake.decode.ordering` encodes it as the
Hudi ordering value) and into its place in the connector's change stream, the key of the re-send
marks (:mod:`cdc_lake.apply.redelivery`).  The rules every engine shares stay there: snapshot reads
sort below every streamed change and have no stream position; an event strictly below its
partition's mark is skipped.

An engine's hook into the config is its ``source_model``, a subclass of
:class:`~cdc_lake.sources.settings.Source` in its package (``sources/<engine>/settings.py``) holding
its own settings (and, in its ``connection_model``, its connections' TLS settings), whose validators
require what the engine needs and fill its defaults (Postgres: slot and publication names), raising
``PydanticCustomError``, which the config reports as one line under ``sources.<name>``.  The config
finds the model in the registry by the source's ``engine``, so no engine falls into another's rules,
and a source setting another engine's setting is refused in one line naming the engines that take it.

An engine's table renames are its hook into the swap detection (:mod:`cdc_lake.capture.history`):
``table_renames`` reads one DDL statement of its connector's schema history into the tables it renames
(:class:`TableRename`), so that a table swapped under its name by an online schema-change tool (gh-ost,
pt-online-schema-change: ``RENAME TABLE t TO _t_old, _t_new TO t``) stops instead of applying another
table's changes over the old copy.  None where the connector keeps no schema history (Postgres, whose
pg_repack keeps the table's identity and values: nothing to detect).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Final

from cdc_lake.exceptions import DecodeError

if TYPE_CHECKING:
    from cdc_lake.sources.settings import Source

ORDERING_WIDTH: Final = 40
"""Digits of every ordering value, so string order is numeric order (a Hudi ordering field, a string)."""


def fixed_digits(name: str, value: int, digits: int) -> str:
    """``value`` zero-padded to ``digits``; DecodeError naming it when it does not fit."""
    if not 0 <= value < 10**digits:
        raise DecodeError(f"{name} {value} is outside 0..{10**digits - 1}")
    return f"{value:0{digits}d}"


class PositionCodec(ABC):
    """One engine's change positions: per-key order, ordering value and re-send mark of a streamed change.

    ``source`` is the envelope's decoded ``source`` record (Debezium's field names).  ``mark_kind``
    tags the engine's marks in commit metadata (``<kind>:<body>``); engines that share a kind share one
    codec.
    """

    mark_kind: ClassVar[str]
    orders_incremental_snapshots: ClassVar[bool]
    """Whether an incremental snapshot chunk's row orders at its streamed position, like a change: only
    where the ordering is the row's place in its partition (a chunk row is its key's state there, and
    every later change of the key follows it), never where the position it carries can lie above a
    newer change of its key (Postgres: the close marker's LSN); otherwise it orders as a snapshot row."""

    @abstractmethod
    def ordering(self, source: Mapping[str, Any], kafka_offset: int) -> tuple[int, ...]:
        """The per-key position of a streamed change at ``kafka_offset``, compared as a tuple.

        It must grow with every change of one key for the life of the lake table; DecodeError when the
        event has none.
        """

    @abstractmethod
    def ordering_value(self, parts: tuple[int, ...]) -> str:
        """``parts`` (from :meth:`ordering`) as :data:`ORDERING_WIDTH` digits, in the same order.

        Never all zeros: that value is the snapshot rows'.
        """

    @abstractmethod
    def stream_key(self, source: Mapping[str, Any]) -> tuple[str, int] | None:
        """Where a streamed change sits in its connector's stream: (origin, number), or None without one.

        Numbers of one origin follow the order Debezium emits events in, across a failover too.
        """

    @abstractmethod
    def write_mark(self, highest: Mapping[str, int]) -> str:
        """The body of a mark holding the highest number seen per origin."""

    @abstractmethod
    def read_mark(self, body: str) -> dict[str, int] | None:
        """A mark's body as the highest number per origin; None when it is not this codec's."""


@dataclass(frozen=True)
class TableRename:
    """One table renamed by a DDL statement: ``schema.table`` before and after (the statement's default
    schema filled in; a bare name when the statement had none), or, with ``replaces``, a table whose rows
    the statement replaced in place (``old == new``: dropped, created or replaced, a partition dropped,
    truncated or exchanged), which no row event shows either.

    ``old_bare``/``new_bare``: the statement named that table without a schema.  The default schema a
    history record gives is not always the statement's (Debezium records a rename's pair under the new
    table's database), so a bare name is matched on its table part alone.
    """

    old: str
    new: str
    replaces: bool = False
    old_bare: bool = False
    new_bare: bool = False

    def touches(self, table: str) -> bool:
        """Whether ``table`` (``schema.table``) is this rename's old or new name (any case)."""
        return _same_table(self.old, self.old_bare, table) or _same_table(self.new, self.new_bare, table)


def _same_table(name: str, bare: bool, table: str) -> bool:
    if bare:
        return name.rpartition(".")[2].casefold() == table.rpartition(".")[2].casefold()
    return name.casefold() == table.casefold()


@dataclass(frozen=True)
class TableRewrite:
    """One rewrite of a table's rows a source logged (Postgres: :mod:`cdc_lake.sources.postgres.rewrites`):
    its log id, the statement on one line, and ``stop``, why it changed values no row event shows (None:
    it kept them, as a plain widening cast does)."""

    log_id: int
    statement: str
    stop: str | None


@dataclass(frozen=True)
class ConnectorTemplate:
    """Where an engine's reviewed Debezium connector template is: ``resource``, a JSON file of package data
    in ``package`` (the engine's own), read by :mod:`cdc_lake.connect.render`."""

    package: str
    resource: str


@dataclass(frozen=True)
class JvmArtifacts:
    """An engine's jars, which :mod:`cdc_lake.jvm` resolves through Maven: its Debezium connector plugin
    (``debezium_connector``, an ``io.debezium`` artifact id at the Debezium version :mod:`cdc_lake.jvm`
    pins, one plugin directory of the Connect workers) and its JDBC driver (``jdbc_driver``,
    ``group:artifact:version``, one self-contained jar on Spark's classpath for the bootstrap's replica
    reads; the engine names its class in its JDBC access)."""

    debezium_connector: str
    jdbc_driver: str


@dataclass(frozen=True)
class EngineCapabilities:
    """One source engine's facts: its names, change positions, the objects it keeps and its config rules.

    ``connector_values`` are the ``source.connector`` values its Debezium connector writes into every
    change event; ``positions`` reads those events' positions; ``replication_slots`` says the source
    keeps a replication slot (and a publication) per connector, which onboarding creates, checks and
    releases; ``source_model`` is its sources' config model (its own settings, its rules and defaults);
    ``engine_module``/``engine_class`` locate the engine
    class (which imports the Python driver);
    ``column_module`` is the module whose ``column_read`` tells how the bootstrap reads each catalog
    type (a :data:`~cdc_lake.sources.column_types.ColumnReader`; it imports pyspark);
    ``connector_template`` is its Debezium connector template (package data of its package) and
    ``jvm_artifacts`` its Debezium plugin and JDBC driver;
    ``table_renames`` reads a schema-history statement (and its default schema) into the renames it
    makes, None where the connector keeps no schema history.
    """

    name: str
    connector_values: frozenset[str]
    positions: PositionCodec
    replication_slots: bool
    source_model: type[Source]
    engine_module: str
    engine_class: str
    column_module: str
    connector_template: ConnectorTemplate
    jvm_artifacts: JvmArtifacts
    table_renames: Callable[[str, str], tuple[TableRename, ...]] | None = None
    rewrite_log: bool = False
    """The source logs table rewrites once onboarding installed the log (Postgres): the applier reads
    it before each batch and warns where it is missing."""
    unavailable_placeholders: bool = False
    """The connector sends an unchanged TOASTed value as its unavailable-value placeholder (Postgres,
    in the after image of an update, or of the create a primary-key update becomes): the decoder looks
    for it there only (:meth:`cdc_lake.decode.types.RowConverter.convert`)."""
    transaction_progress_offset_keys: tuple[str, ...] = ()
    """Keys of the connector's stored offset that count what it had already emitted of the transaction
    it stopped in, which a restart skips (Debezium's binlog readers: ``event``, ``row``).  Every restart
    cdc-lake makes drops them first (:mod:`cdc_lake.connect.restart`): the count can be wrong."""

    @property
    def settings(self) -> frozenset[str]:
        """The engine-specific settings its sources and connections take (``server_id``, ``sslmode``)."""
        return self.source_model.own_settings() | self.source_model.connection_model.own_settings()
