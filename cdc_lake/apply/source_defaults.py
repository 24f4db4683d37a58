"""Asking a table's source whether the columns a writer schema adds have a default there (and which
source and engine a table has, for the rewrite checks of :mod:`cdc_lake.apply.rewrites`, and whether
an update of a configured-key table may lack the key's old value, :mod:`cdc_lake.apply.key_change`).

Debezium's schema drops some defaults (MySQL/MariaDB expression defaults, a nullable ``TIMESTAMP DEFAULT
CURRENT_TIMESTAMP``, Postgres types without a default parser such as ``bytea`` and arrays), so before a
new column without an Avro default evolves the lake the applier asks the source's catalog
(:meth:`cdc_lake.sources.base.SourceEngine.column_defaults`) and hands the answer to the pure
classification (:meth:`cdc_lake.lake.schema_change.SchemaDiff.with_source_defaults`).  The catalog is
read on the replica (after it replayed the primary's position now, so it has the DDL the writer schema
came from), or on the primary when the source has no replica: one catalog query, not the bulk read
``bootstrap.allow_primary_reads`` guards.  A failure is the answer's ``error``, never an exception: the
table stops naming it.  A default the replica computed for its own rows (``uuid()`` on MySQL/MariaDB,
whose DDL replicates as a statement) is marked: the stop then names ``cdc-lake rebootstrap TABLE
--from-primary``, since a copy of the replica would hold the replica's values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cdc_lake.config import Config
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.lake.schema_change import SourceDefaults
from cdc_lake.lake.target import TableTarget
from cdc_lake.sources import engine_for
from cdc_lake.sources.base import SourceEngine


@dataclass(frozen=True)
class SourceCatalog:
    """The configured sources' catalogs, asked for column defaults by qualified table name."""

    config: Config

    def defaults(self, table: str, columns: Sequence[str]) -> SourceDefaults:
        """The defaults of ``columns`` of ``table`` (``source.schema.table``) in its source's catalog."""
        try:
            source, entry = self.config.table(table)
            engine = engine_for(source)
            role = "primary"
            if source.replica is not None:
                role = "replica"
                timeout = self.config.bootstrap.replica_wait_timeout_seconds
                engine.wait_replica_past(engine.current_position(), timeout)
            found = engine.column_defaults(entry.name, columns, role)
            primary_only = frozenset(
                column
                for column, default in found.items()
                if role == "replica" and default is not None and engine.replica_evaluates(default)
            )
            return SourceDefaults(found, primary_only=primary_only)
        except CdcLakeError as exc:
            return SourceDefaults({}, error=str(exc))

    def old_key_optional(self, target: TableTarget) -> bool:
        """Whether an update of ``target`` (a table with a configured key) may arrive without the key's
        old value now (:meth:`cdc_lake.sources.base.SourceEngine.update_may_omit_old_key`)."""
        _, engine = self.rewrite_source(target.qualified_name)
        return engine.update_may_omit_old_key(target.source_table, target.key_fields or ())

    def rewrite_source(self, table: str) -> tuple[str, SourceEngine]:
        """The source name and engine of ``table`` (``source.schema.table``, or a re-bootstrap's copy
        ``source.schema.table~vN``), for its rewrite checks (:mod:`cdc_lake.apply.rewrites`)."""
        source = self.config.source(table.split(".", 1)[0])
        return source.name, engine_for(source)
