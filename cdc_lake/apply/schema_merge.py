"""Merging one batch's writer schemas into its lake table's columns, on the driver.

Each value schema the batch uses before its partitions' cuts is restricted to the columns the table's
policy compares, classified against the lake columns (a column it adds without an Avro default takes
the default the source names, asked once per schema id; gaps older versions of the subject share with
the lake do not count) and merged.  A key schema fixes the record key of a table without a configured
key.  A schema the lake cannot follow cuts each partition before its first message using it; a
breaking change is kept as :attr:`SchemaMerge.schema_change` for the caller to report.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from pyspark.sql.types import StructType

from cdc_lake.apply.decoding import BadMessage, BatchSummary
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.decode.schema import TypedSchemas
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.lake.commit_metadata import CommitMetadata
from cdc_lake.lake.format import LakeFormat
from cdc_lake.lake.schema import merge_columns
from cdc_lake.lake.schema_change import (
    IncompatibleSchemaChange,
    SchemaDiff,
    SourceDefaults,
    WriterColumns,
    classify,
    key_change,
    policy_columns,
    widest_lengths,
)
from cdc_lake.lake.target import TableTarget

_LOG = logging.getLogger(__name__)


class SchemaMerge:
    """Merges one table's writer schemas batch after batch; keeps the source's answers per schema id."""

    def __init__(
        self,
        target: TableTarget,
        registry: SchemaRegistry,
        schemas: TypedSchemas,
        lake: LakeFormat,
        source_defaults: Callable[[str, Sequence[str]], SourceDefaults],
    ) -> None:
        self.target = target
        self.registry = registry
        self.schemas = schemas
        self.lake = lake
        self.source_defaults = source_defaults
        self.schema_change: SchemaDiff | None = None
        """The breaking schema change the last batch stopped at, if it stopped at one."""
        self._source_answers: dict[int, SourceDefaults] = {}
        """The source's answer about the columns each writer schema id adds (asked once per schema id)."""

    def columns(
        self,
        summary: BatchSummary,
        bad: dict[int, BadMessage],
        lake: StructType | None,
        lengths: dict[str, int],
    ) -> tuple[StructType | None, dict[str, int]]:
        """The lake columns and recorded character lengths after this batch, from the lake's ``lake``
        columns and ``lengths``; a schema that cannot be merged cuts the batch (``bad``) before it."""
        columns = lake
        for schema_id in sorted(summary.value_schemas):
            firsts = _before_cut(summary.value_schemas[schema_id], bad)
            if not firsts:
                continue
            try:
                writer = self._restricted_writer(schema_id, lake)
                self._classify(schema_id, writer, lake, lengths)
                evolution = merge_columns(columns, writer.struct)
                if evolution.added and columns is not None:
                    _LOG.info("%s: schema id %d adds columns %s", self.target.qualified_name, schema_id,
                              list(evolution.added))
                columns = evolution.columns
                lengths = widest_lengths(lengths, writer.lengths)
            except CdcLakeError as exc:
                _cut(bad, firsts, f"value schema id {schema_id}: {exc}")
        return columns, lengths

    def compared(self, lake: StructType | None) -> frozenset[str] | None:
        """The columns the table's policy compares and writes (None: every column)."""
        return policy_columns(
            self.target.schema_policy, self.target.columns, self.target.key_fields or (), lake
        )

    def key_fields(
        self, summary: BatchSummary, bad: dict[int, BadMessage], record_key: tuple[str, ...] | None
    ) -> tuple[str, ...] | None:
        """The record key after this batch: the configured key, else the lake's ``record_key`` or the
        batch's key schema; a key schema naming other columns cuts the batch (``bad``) before it."""
        if self.target.key_fields:
            return self.target.key_fields
        chosen = record_key
        for schema_id in sorted(summary.key_schemas):
            firsts = _before_cut(summary.key_schemas[schema_id], bad)
            if not firsts:
                continue
            try:
                names = tuple(self.schemas.get_schema(schema_id).row_converter.column_names)
            except CdcLakeError as exc:
                _cut(bad, firsts, f"key schema id {schema_id}: {exc}")
                continue
            if chosen is None:
                chosen = names
            elif names != chosen:
                diff = key_change(schema_id, chosen, names, table=self.target.qualified_name)
                self.schema_change = diff
                _cut(bad, firsts, diff.summary())
        return chosen

    def _restricted_writer(self, schema_id: int, lake: StructType | None) -> WriterColumns:
        """The writer schema's columns the table's policy compares and writes (frozen list, freeze)."""
        writer = WriterColumns.of(self.schemas.get_schema(schema_id))
        keep = self.compared(lake)
        return writer if keep is None else writer.restricted(keep)

    def _copied(self, lake: StructType) -> frozenset[str] | None:
        """The columns the lake was copied and applied with, when not every column: under a frozen list
        its columns (a listed column it lacks was never copied), else what its latest commit recorded
        (a table applied under ``freeze`` or a frozen list before the config changed)."""
        if self.target.columns:
            return frozenset(lake.fieldNames())
        commit = self.lake.latest_commit(self.target.base_path)
        return None if commit is None else CommitMetadata.from_dict(commit.metadata).compared_columns

    def _classify(
        self, schema_id: int, writer: WriterColumns, lake: StructType | None, lengths: dict[str, int]
    ) -> None:
        """Stop before a writer schema the lake table cannot follow (columns versions older than the lake's
        lack are fine; the subject's history is read only when something would stop the table);
        ``lengths``: the character lengths the lake holds values of so far."""
        if lake is None:
            return
        new = set(writer.struct.fieldNames()) - set(lake.fieldNames())
        diff = classify(
            schema_id, lake, writer, table=self.target.qualified_name,
            partition_fields=self.target.partition_fields, copied=self._copied(lake) if new else None,
            lengths=lengths,
        )
        if diff.added():
            diff = diff.with_source_defaults(self._source_defaults(schema_id, diff.added()))
        if diff.breaking:
            versions = self.registry.versions(f"{self.target.topic}-value")
            history = [(v.schema_id, self._restricted_writer(v.schema_id, lake)) for v in versions]
            diff = diff.without_older_version_gaps(history, lake, lengths)
        if diff.breaking:
            self.schema_change = diff
            raise IncompatibleSchemaChange(diff)

    def _source_defaults(self, schema_id: int, added: tuple[str, ...]) -> SourceDefaults:
        """What the source says of the columns writer schema ``schema_id`` adds without an Avro default:
        an answer naming every column is kept for the schema id; a failure, or a column the catalog lacks
        (the replica may catch up), is asked again on the next batch."""
        known = self._source_answers.get(schema_id)
        if known is not None:
            return known
        answer = self.source_defaults(self.target.qualified_name, added)
        if answer.error is None and set(added) <= set(answer.defaults):
            self._source_answers[schema_id] = answer
        return answer


def _before_cut(firsts: dict[int, int], bad: dict[int, BadMessage]) -> dict[int, int]:
    """The first offsets (per partition) that lie before each partition's cut."""
    return {p: o for p, o in firsts.items() if p not in bad or o < bad[p].offset}


def _cut(bad: dict[int, BadMessage], firsts: dict[int, int], reason: str) -> None:
    """Stop each partition at its first message in ``firsts``, with ``reason``."""
    for partition, offset in firsts.items():
        known = bad.get(partition)
        if known is None or offset < known.offset:
            bad[partition] = BadMessage(partition, offset, reason, None, None)
