"""One configured table as a lake table: its topic, its lake path and its table layout settings.

Both writers (the bootstrap's bulk insert and the applier's upserts) write a table through the same
:class:`TableTarget`, so the applier's first upsert finds the table its own spec would have created.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc_lake.capture.plan import schema_history_topic, table_topic
from cdc_lake.config import Config, Source, Table
from cdc_lake.config.lake import CompactionSettings
from cdc_lake.lake.format import DEFAULT_FORMAT
from cdc_lake.lake.layout import (
    DEFAULT_TABLE_VERSION,
    CompactionExecutor,
    CompactionSpec,
    IndexType,
    TableSpec,
    TableType,
)
from cdc_lake.lake.schema_change import SchemaPolicy


@dataclass(frozen=True)
class TableTarget:
    """Everything a writer needs to know about one lake table, derived from the config.

    ``key_fields`` is None when the config names no key: the Debezium message key's columns are used.
    ``columns`` is the frozen column list, if the config has one.  ``lake_name`` is the Hudi table name
    when it differs from ``qualified_name`` (a re-bootstrap's copy is recorded as ``table~vN`` but is the
    same Hudi table, which Hudi checks on every write).
    """

    qualified_name: str
    engine: str
    topic: str
    tier: int
    base_path: str
    key_fields: tuple[str, ...] | None
    partition_fields: tuple[str, ...]
    columns: tuple[str, ...] | None
    table_type: TableType
    index: IndexType
    compaction: CompactionSpec
    soft_deletes: bool
    table_version: int = DEFAULT_TABLE_VERSION
    lake_name: str | None = None
    schema_policy: SchemaPolicy = SchemaPolicy.EVOLVE
    format_options: tuple[tuple[str, str], ...] = ()
    column_types: tuple[tuple[str, str], ...] = ()
    source_table: str = ""
    """``schema.table`` at the source (the qualified name without the source's)."""
    history_topic: str | None = None
    """The schema-history topic whose RENAME statements may swap the table (None: the engine has none)."""
    lake_format: str = DEFAULT_FORMAT
    """The ``lake.format`` the table is written in."""

    def spec(self, key_fields: tuple[str, ...]) -> TableSpec:
        """The table as a format writes it, keyed by ``key_fields``."""
        return TableSpec(
            name=self.lake_name or self.qualified_name,
            base_path=self.base_path,
            key_fields=key_fields,
            partition_fields=self.partition_fields,
            table_type=self.table_type,
            index=self.index,
            compaction=self.compaction,
            table_version=self.table_version,
            options=self.format_options,
        )


def compaction_spec(settings: CompactionSettings) -> CompactionSpec:
    """The compaction a table's writer and services follow, from the config's ``settings``."""
    return CompactionSpec(
        settings.inline,
        settings.max_delta_commits,
        settings.max_delta_seconds,
        settings.plan_io_mb,
        CompactionExecutor(settings.executor),
    )


def target_for(config: Config, source: Source, table: Table) -> TableTarget:
    """The lake target of ``table`` of ``source`` under ``config``'s lake settings."""
    qualified = table.qualified_name(source)
    lake = config.lake
    layout = lake.layout_of(table)
    return TableTarget(
        qualified_name=qualified,
        engine=source.engine,
        topic=table_topic(source, table),
        tier=table.tier,
        base_path=lake.table_base_path(qualified),
        key_fields=tuple(table.key) if table.key else None,
        partition_fields=tuple(table.partition_by or ()),
        columns=tuple(table.columns) if table.columns else None,
        table_type=TableType(layout.table_type),
        index=IndexType(layout.index),
        compaction=compaction_spec(layout.compaction),
        soft_deletes=lake.soft_deletes,
        table_version=lake.table_version,
        schema_policy=SchemaPolicy(table.schema_changes),
        format_options=tuple({**lake.format_options, **table.format_options}.items()),
        column_types=tuple(table.column_types.items()),
        source_table=table.name,
        history_topic=schema_history_topic(source, table),
        lake_format=lake.format,
    )


def select_targets(
    config: Config, tables: tuple[str, ...] = (), tier: int | None = None
) -> list[TableTarget]:
    """The configured tables to apply: those named (``source.schema.table``), else all; of ``tier`` if given.

    Raises UnknownTableError / UnknownSourceError for a name not in the config.
    """
    named = [config.table(name) for name in dict.fromkeys(tables)]
    chosen = named or list(config.iter_tables())
    targets = [target_for(config, source, table) for source, table in chosen]
    return [t for t in targets if tier is None or t.tier == tier]
