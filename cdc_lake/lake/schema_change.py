"""Classifying a new writer schema against the lake table, before anything of it is written.

Each change between the lake table's columns (and record key) and the newest writer schema is one
:class:`Change`; two kinds evolve the table in place and the applier keeps going:

- ``ADDED``: a new column without a default (nullable): the source's existing rows hold NULL in it, as
  the lake's do once it has the column, so the lake stays exact;
- ``WIDENED``: a new type that holds every value of the lake column's and that Hudi promotes in place
  (int to bigint, float to double; a longer varchar is the same string type, no change): the lake
  column takes the wider type on write (:func:`cdc_lake.lake.schema.promotes`).

Character lengths are not in the lake's types (every ``varchar(n)``/``char(n)`` is a ``string``): the
connectors propagate the source type of character columns (``datatype.propagate.source.type``), so the
writer schema's field carries ``__debezium.source.column.length`` (:attr:`WriterColumns.lengths`), and
each commit records the lengths the lake was written with (``CommitMetadata.char_lengths``: the bootstrap's
from the registered schema it aligned with, the applier's the widest it applied).  A writer length
below the recorded one is ``NARROWED`` (the source may have truncated values, or refused them, without
a row event); a longer one is no change.  A length missing on either side (an older writer version, a
commit from before the connectors propagated it) is no change.

A new nullable column whose Avro field has no default is ``ADDED`` only once the source's catalog says
it has no default (:meth:`SchemaDiff.with_source_defaults`): Debezium carries no default for MySQL/MariaDB
expression defaults (``DEFAULT (uuid())``), a nullable ``TIMESTAMP DEFAULT CURRENT_TIMESTAMP`` nor Postgres
types without a default parser (``bytea``, arrays), so the writer schema alone cannot tell such a column
from one without a default.  The applier asks the source (:class:`SourceDefaults`, read outside this
module, which does no I/O); a column with a default there, missing there, or a source that could not be
asked, is ``ADDED_WITH_DEFAULT``.

Every other kind stops the table in SCHEMA_CHANGED with :meth:`SchemaDiff.report`, whose one-line
summary names the command that resolves it (``cdc-lake rebootstrap <table>``): ``ADDED_WITH_DEFAULT``
(a new column whose Avro field has a non-null default: Debezium puts the source column's default
there, and no ``ADD COLUMN`` emits row events, so the source's existing rows hold a value the lake
cannot know), ``DROPPED``, ``RENAMED`` (a column gone and one of the same type added in its place),
``NARROWED``, ``TYPE_CHANGED`` (incompatible, or a decimal's precision or scale changed even when the
new one holds every value: Hudi cannot change a decimal column in place), ``NOT_NULL_ADDED`` (a NOT
NULL column without default), ``KEY_CHANGED``, ``PARTITION_CHANGED`` (a partition column dropped or
retyped) and ``NOT_COPIED``: a column new to the lake that was outside the columns the lake table was
copied and applied with (a frozen ``columns`` list that grew, a list removed, ``freeze`` switched to
``evolve``): it may have held values in the source all along, so only a re-bootstrap makes the lake
exact.  ``TABLE_SWAPPED`` is no writer schema's: the source table was renamed away or another took its
name (an online schema-change tool's swap, read from the connector's schema history by
:mod:`cdc_lake.apply.swaps`, :func:`table_swap`), so the change events after it are another table's;
the copy a re-bootstrap reads is the new table's, on the replica as on the primary (the swap's rows
replicate as rows).  Each apply commit records the columns its policy compared
(``CommitMetadata.compared_columns``); under a frozen list every listed column the lake lacks counts as
not copied.

A message written with an older writer version is no change (:meth:`SchemaDiff.without_older_version_gaps`)
only while the subject's history shows that version predates the column: a column dropped and re-added
(or narrowed and widened again) stays a change, because the source's rows lost their values meanwhile.

The table's policy (config ``tables[].schema_changes``) decides what is compared: ``evolve`` compares
every column (restricted to the frozen ``columns`` list when there is one, so a change outside it is
invisible); ``freeze`` compares only the columns the lake table already has (new columns are ignored,
never added, with or without a default); ``rebootstrap`` classifies like ``evolve`` and ``cdc-lake run``
re-bootstraps the table when it stops (docs/schema-changes.md).
"""

from __future__ import annotations

import enum
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from pyspark.sql.types import DataType, StructType

from cdc_lake.decode.schema import RegisteredSchema
from cdc_lake.decode.types import row_schema
from cdc_lake.exceptions import SchemaChangeError
from cdc_lake.lake.schema import holds, lake_type, promotes


class SchemaPolicy(enum.StrEnum):
    """What a table does with a new writer schema (config ``tables[].schema_changes``)."""

    EVOLVE = "evolve"
    FREEZE = "freeze"
    REBOOTSTRAP = "rebootstrap"


class ChangeKind(enum.StrEnum):
    """One kind of difference between the lake table and a writer schema."""

    ADDED = "added"
    ADDED_WITH_DEFAULT = "added with a default"
    NOT_COPIED = "not copied"
    WIDENED = "widened"
    DROPPED = "dropped"
    RENAMED = "renamed"
    NARROWED = "narrowed"
    TYPE_CHANGED = "type changed"
    NOT_NULL_ADDED = "NOT NULL added"
    KEY_CHANGED = "key changed"
    PARTITION_CHANGED = "partition column changed"
    TABLE_SWAPPED = "swapped"
    ROWS_REPLACED = "rows replaced"
    TABLE_REWRITTEN = "rewritten"


EVOLVABLE = frozenset({ChangeKind.ADDED, ChangeKind.WIDENED})
_GONE = frozenset({ChangeKind.DROPPED, ChangeKind.RENAMED})
_OLDER_VERSION = _GONE | {ChangeKind.NARROWED, ChangeKind.PARTITION_CHANGED}


LENGTH_PARAMETER = "__debezium.source.column.length"
"""The Connect schema parameter Debezium puts the source column's length in."""


@dataclass(frozen=True)
class Change:
    """One difference: its kind, the column it concerns, and what changed, for people."""

    kind: ChangeKind
    column: str
    detail: str
    from_primary: bool = False
    """The existing rows' values are the primary's alone: the replica computed its own (a MySQL/MariaDB
    DDL replicates as a statement, so a non-deterministic default such as ``uuid()`` runs there again);
    a re-bootstrap must read the primary (``cdc-lake rebootstrap TABLE --from-primary``)."""

    @property
    def evolvable(self) -> bool:
        """Whether the lake table follows this change in place."""
        return self.kind in EVOLVABLE

    def describe(self) -> str:
        """``column 'x' dropped``-style text (``table 'db.t' swapped: RENAME ...`` for a swap, ``table
        'public.t' rewritten: ...`` for a rewrite)."""
        if self.kind in (ChangeKind.TABLE_SWAPPED, ChangeKind.ROWS_REPLACED, ChangeKind.TABLE_REWRITTEN):
            return f"table {self.column!r} {self.kind.value}: {self.detail}"
        return f"column {self.column!r} {self.kind.value}" + (f": {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class SchemaDiff:
    """Every difference between the lake table (``table``, its qualified name) and one writer schema, or
    the table swap at offset ``history_offset`` of its connector's schema history, or the table rewrite
    at that id of its source's rewrite log (``schema_id`` None; ``history`` names which)."""

    table: str
    schema_id: int | None
    changes: tuple[Change, ...]
    history_offset: int | None = None
    history: str = "schema history offset"

    @property
    def origin(self) -> str:
        """Where the change was seen: ``writer schema id N``, ``schema history offset N`` or ``table
        rewrite log id N``."""
        if self.schema_id is None:
            return f"{self.history} {self.history_offset}"
        return f"writer schema id {self.schema_id}"

    @property
    def breaking(self) -> tuple[Change, ...]:
        """The changes the lake table cannot follow in place."""
        return tuple(c for c in self.changes if not c.evolvable)

    @property
    def needs_primary(self) -> bool:
        """Whether only a copy read from the primary is exact (a change :attr:`Change.from_primary`)."""
        return any(c.from_primary for c in self.breaking)

    def summary(self) -> str:
        """One line: the breaking changes (``last_error`` of a SCHEMA_CHANGED table)."""
        parts = "; ".join(c.describe() for c in self.breaking)
        if self.needs_primary:
            return (
                f"schema change ({self.origin}): {parts}; re-bootstrap the table "
                f"from the primary: cdc-lake rebootstrap {self.table} --from-primary"
            )
        return (
            f"schema change ({self.origin}): {parts}; "
            f"re-bootstrap the table: cdc-lake rebootstrap {self.table}"
        )

    def without_older_version_gaps(
        self,
        history: Sequence[tuple[int, WriterColumns]],
        lake: StructType,
        lengths: Mapping[str, int] | None = None,
    ) -> SchemaDiff:
        """Without what only an older writer version differs in: columns it lacks, or has narrower,
        while the newest registered version has them as the lake does (or wider) and no version
        registered before the writer's (its last registration) had them so.

        ``history`` is the subject's versions in registration order, ``(schema id, columns)`` restricted
        like the writer; ``lengths`` the character lengths the lake was written with (a version has a
        column "as the lake does" only with at least that length).  A writer that lacks a column some
        earlier version had is a real change (a column dropped, then maybe re-added: the source's rows
        lost their values), whatever came after; a writer outside the history cannot be placed, so
        nothing is forgiven.
        """
        ids = [schema_id for schema_id, _ in history]
        if self.schema_id not in ids:
            return self
        position = len(ids) - 1 - ids[::-1].index(self.schema_id)
        stored = {f.name: f.dataType for f in lake.fields}
        recorded = lengths or {}

        def as_lake(columns: WriterColumns, name: str) -> bool:
            found = [lake_type(f.dataType) for f in columns.struct.fields if f.name == name]
            long_enough = name not in recorded or columns.lengths.get(name, -1) >= recorded[name]
            return bool(found) and holds(found[0], stored[name]) and long_enough

        newest = history[-1][1]
        earlier = [columns for _, columns in history[:position]]
        candidates = {
            c.column
            for c in self.changes
            if c.kind in _GONE or (c.kind is ChangeKind.NARROWED and c.column in stored)
        }
        gaps = {
            name
            for name in candidates
            if name in stored and as_lake(newest, name) and not any(as_lake(v, name) for v in earlier)
        }
        kept = tuple(c for c in self.changes if not (c.column in gaps and c.kind in _OLDER_VERSION))
        return SchemaDiff(self.table, self.schema_id, kept)

    def added(self) -> tuple[str, ...]:
        """The new columns that would evolve the table: what :meth:`with_source_defaults` asks about."""
        return tuple(c.column for c in self.changes if c.kind is ChangeKind.ADDED)

    def with_source_defaults(self, source: SourceDefaults) -> SchemaDiff:
        """Each added column the source's catalog does not show without a default (it has one there, it is
        not there, or the source could not be asked) as ``ADDED_WITH_DEFAULT`` instead."""
        changes = []
        for change in self.changes:
            held = source.held(change.column) if change.kind is ChangeKind.ADDED else None
            primary = change.column in source.primary_only
            kind = ChangeKind.ADDED_WITH_DEFAULT
            stop = None if held is None else Change(kind, change.column, held, primary)
            changes.append(stop or change)
        return SchemaDiff(self.table, self.schema_id, tuple(changes))

    def report(self) -> list[str]:
        """Lines of at most 80 columns, breaking changes first, for the run's detail and the docs."""
        ordered = sorted(self.changes, key=lambda c: (c.evolvable, c.column))
        lines = []
        for change in ordered:
            head = "follows" if change.evolvable else "BREAKS "
            lines += textwrap.wrap(
                change.describe(), 80, initial_indent=f"{head}  ", subsequent_indent=" " * 9
            )
        return lines


@dataclass(frozen=True)
class SourceDefaults:
    """What the source's catalog says of the columns a writer schema adds: each column's default as the
    catalog spells it (None: no default), a column it lacks absent; ``error``: why it could not be asked."""

    defaults: Mapping[str, str | None]
    error: str | None = None
    primary_only: frozenset[str] = frozenset()
    """Columns whose default the replica asked evaluated for its own rows, so that they differ from the
    primary's (:meth:`cdc_lake.sources.base.SourceEngine.replica_evaluates`)."""

    def held(self, column: str) -> str | None:
        """Why the source's existing rows may hold a value in ``column`` (None: they hold NULL)."""
        if self.error is not None:
            return f"its default at the source is unknown ({self.error})"
        if column not in self.defaults:
            return "not in the source table's catalog, its default unknown"
        default = self.defaults[column]
        if default is None:
            return None
        if column in self.primary_only:
            return (
                f"{default} at the source (the existing rows hold values the lake cannot know, and the "
                "replica computed its own)"
            )
        return f"{default} at the source (the source's existing rows hold it, the lake cannot know them)"


@dataclass(frozen=True)
class WriterColumns:
    """The columns of a writer schema: lake types, which are NOT NULL without a default, the
    non-null Avro defaults (as Debezium wrote them: the source column's current default, or a
    placeholder such as 0 or the epoch for a function default like ``now()``), and the source lengths
    of the character columns whose field carries one (:data:`LENGTH_PARAMETER`)."""

    struct: StructType
    required_without_default: frozenset[str]
    defaults: Mapping[str, object] = field(default_factory=dict)
    lengths: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, schema: RegisteredSchema) -> WriterColumns:
        """The row columns of a Debezium value schema."""
        fields: Sequence[Mapping[str, Any]] = row_schema(schema.schema).get("fields", [])
        required = frozenset(
            str(f["name"]) for f in fields if not _nullable(f.get("type")) and "default" not in f
        )
        defaults = {str(f["name"]): f["default"] for f in fields if f.get("default") is not None}
        return cls(schema.struct_type, required, defaults, char_lengths(schema))

    def restricted(self, keep: frozenset[str]) -> WriterColumns:
        """Only the columns in ``keep`` (a frozen column list): changes elsewhere are invisible."""
        struct = StructType([f for f in self.struct.fields if f.name in keep])
        defaults = {name: value for name, value in self.defaults.items() if name in keep}
        lengths = {name: n for name, n in self.lengths.items() if name in keep}
        return WriterColumns(struct, self.required_without_default & keep, defaults, lengths)


def _nullable(avro_type: Any) -> bool:
    return isinstance(avro_type, list) and "null" in avro_type


def char_lengths(schema: RegisteredSchema) -> dict[str, int]:
    """The source lengths of the row columns whose field carries one (character columns)."""
    fields: Sequence[Mapping[str, Any]] = row_schema(schema.schema).get("fields", [])
    return {str(f["name"]): n for f in fields if (n := _char_length(f.get("type"))) is not None}


def _char_length(avro_type: Any) -> int | None:
    """The source length of a string field's column, when Debezium propagated it."""
    for branch in avro_type if isinstance(avro_type, list) else [avro_type]:
        if isinstance(branch, dict) and branch.get("type") == "string":
            parameters = cast(Mapping[str, str], branch.get("connect.parameters") or {})
            if LENGTH_PARAMETER in parameters:
                return int(parameters[LENGTH_PARAMETER])
    return None


def widest_lengths(recorded: Mapping[str, int], writer: Mapping[str, int]) -> dict[str, int]:
    """The lengths a commit records after applying ``writer`` over ``recorded``: the longer of each."""
    both = {**recorded, **writer}
    return {name: max(recorded.get(name, n), writer.get(name, n)) for name, n in both.items()}


def _type_name(data_type: DataType) -> str:
    return data_type.simpleString()


def classify(
    schema_id: int,
    lake: StructType,
    writer: WriterColumns,
    *,
    table: str,
    partition_fields: Iterable[str] = (),
    copied: frozenset[str] | None = None,
    lengths: Mapping[str, int] | None = None,
) -> SchemaDiff:
    """The differences between the lake columns of ``table`` and the writer's (both already restricted
    by policy); ``copied``: the columns the lake was copied and applied with, when not every column;
    ``lengths``: the character lengths the lake was written with (``CommitMetadata.char_lengths``)."""
    recorded = lengths or {}
    incoming = {f.name: lake_type(f.dataType) for f in writer.struct.fields}
    stored = {f.name: f.dataType for f in lake.fields}
    changes: list[Change] = []
    gone = [name for name in stored if name not in incoming]
    new = [name for name in incoming if name not in stored]
    renamed: dict[str, str] = {}
    for old in gone:
        kind = _type_name(stored[old])
        same = [n for n in new if n not in renamed.values() and _type_name(incoming[n]) == kind]
        if len(same) == 1 and len(gone) == len(new):
            renamed[old] = same[0]
    partitions = set(partition_fields)
    for name in gone:
        if name in renamed:
            changes.append(Change(ChangeKind.RENAMED, name, f"now {renamed[name]!r}?"))
        else:
            changes.append(Change(ChangeKind.DROPPED, name, "no longer in the source table"))
        if name in partitions:
            changes.append(Change(ChangeKind.PARTITION_CHANGED, name, "the table is partitioned by it"))
    for name in new:
        if name in renamed.values():
            continue
        if copied is not None and name not in copied:
            held = "outside the columns the lake table was copied with; its existing rows' values are unknown"
            changes.append(Change(ChangeKind.NOT_COPIED, name, held))
        elif name in writer.required_without_default:
            changes.append(Change(ChangeKind.NOT_NULL_ADDED, name, "NOT NULL without a default"))
        elif name in writer.defaults:
            held = f"{writer.defaults[name]!r} (the source's existing rows hold it, "
            held += "the lake cannot know them)"
            changes.append(Change(ChangeKind.ADDED_WITH_DEFAULT, name, held))
        else:
            changes.append(Change(ChangeKind.ADDED, name, _type_name(incoming[name])))
    for name, old_type in stored.items():
        new_type = incoming.get(name)
        if new_type is None:
            continue
        if _type_name(new_type) == _type_name(old_type):
            old_length, new_length = recorded.get(name), writer.lengths.get(name)
            if old_length is not None and new_length is not None and new_length < old_length:
                detail = f"character length {old_length} -> {new_length}"
                changes.append(Change(ChangeKind.NARROWED, name, detail))
            continue
        detail = f"{_type_name(old_type)} -> {_type_name(new_type)}"
        if promotes(old_type, new_type):
            changes.append(Change(ChangeKind.WIDENED, name, detail))
            continue
        if holds(old_type, new_type):
            changes.append(Change(ChangeKind.NARROWED, name, detail))
        elif holds(new_type, old_type):
            held = f"{detail} (a decimal's precision or scale: the lake format cannot change it in place)"
            changes.append(Change(ChangeKind.TYPE_CHANGED, name, held))
        else:
            changes.append(Change(ChangeKind.TYPE_CHANGED, name, f"{detail} (incompatible)"))
        if name in partitions:
            changes.append(Change(ChangeKind.PARTITION_CHANGED, name, "the table is partitioned by it"))
    return SchemaDiff(table, schema_id, tuple(changes))


def key_change(schema_id: int, stored: Sequence[str], incoming: Sequence[str], *, table: str) -> SchemaDiff:
    """The difference of a key schema of ``table`` whose columns differ from its record key."""
    change = Change(ChangeKind.KEY_CHANGED, ",".join(incoming), f"record key was {list(stored)}")
    return SchemaDiff(table, schema_id, (change,))


def table_swap(
    table: str, source_table: str, history_offset: int, statement: str, replaced: bool = False
) -> SchemaDiff:
    """The stop of ``table`` (its source table ``source_table``) at the schema-history record
    ``history_offset`` whose ``statement`` renames it away or gives its name to another table, or,
    ``replaced``, replaces its rows in place (dropped, re-created, a partition dropped or exchanged)."""
    kind = ChangeKind.ROWS_REPLACED if replaced else ChangeKind.TABLE_SWAPPED
    change = Change(kind, source_table, statement)
    return SchemaDiff(table, None, (change,), history_offset)


def table_rewrite(table: str, source_table: str, log_id: int, stop: str) -> SchemaDiff:
    """The stop of ``table`` (its source table ``source_table``) at the rewrite ``log_id`` of its
    source's rewrite log, ``stop`` saying what it changed and by which statement."""
    change = Change(ChangeKind.TABLE_REWRITTEN, source_table, stop)
    return SchemaDiff(table, None, (change,), log_id, "table rewrite log id")


class IncompatibleSchemaChange(SchemaChangeError):
    """A writer schema the lake table cannot follow; carries the classified difference."""

    def __init__(self, diff: SchemaDiff) -> None:
        super().__init__(diff.summary())
        self.diff = diff


def policy_columns(
    policy: SchemaPolicy, frozen: Sequence[str] | None, key: Sequence[str], lake: StructType | None
) -> frozenset[str] | None:
    """The columns a policy compares (None: all): the frozen list, or under ``freeze`` the lake's."""
    if frozen:
        return frozenset([*frozen, *key])
    if policy is SchemaPolicy.FREEZE and lake is not None:
        return frozenset(lake.fieldNames())
    return None
