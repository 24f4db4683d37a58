"""Classifying a writer schema against the lake table: what evolves in place and what stops the table."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)
from support.debezium import PG_TOPIC, POSTGRES_SOURCE, character, envelope, optional, required

from cdc_lake.decode.schema import RegisteredSchema
from cdc_lake.lake.commit_metadata import CommitMetadata
from cdc_lake.lake.schema_change import (
    EVOLVABLE,
    ChangeKind,
    SchemaPolicy,
    SourceDefaults,
    WriterColumns,
    classify,
    key_change,
    policy_columns,
    widest_lengths,
)


def _stored(metadata: CommitMetadata) -> CommitMetadata:
    """``metadata`` as a commit stores and reads it back."""
    return CommitMetadata.from_dict(metadata.to_dict())


def _struct(**columns: DataType) -> StructType:
    return StructType([StructField(name, t, True) for name, t in columns.items()])


TABLE = "pg.public.orders"
LAKE = _struct(id=LongType(), name=StringType(), qty=IntegerType(), price=DecimalType(10, 2))


def _history(*versions: tuple[int, StructType]) -> list[tuple[int, WriterColumns]]:
    """A subject's history of versions without character lengths."""
    return [(schema_id, WriterColumns(columns, frozenset())) for schema_id, columns in versions]


def _kinds(writer: StructType, required: frozenset[str] = frozenset(), **kw: object) -> list[tuple[str, str]]:
    diff = classify(7, LAKE, WriterColumns(writer, required), table=TABLE, **kw)  # type: ignore[arg-type]
    return sorted((c.kind.value, c.column) for c in diff.changes)


def test_added_nullable_and_widened_columns_evolve() -> None:
    writer = _struct(
        id=LongType(), name=StringType(), qty=LongType(), price=DecimalType(10, 2), note=StringType()
    )

    diff = classify(7, LAKE, WriterColumns(writer, frozenset()), table=TABLE)

    assert not diff.breaking
    assert sorted((c.kind, c.column) for c in diff.changes) == [
        (ChangeKind.ADDED, "note"),
        (ChangeKind.WIDENED, "qty"),
    ]


@pytest.mark.parametrize(
    ("stored", "incoming"),
    [(IntegerType(), LongType()), (FloatType(), DoubleType()), (IntegerType(), DoubleType())],
    ids=["int-to-bigint", "real-to-double", "int-to-double"],
)
def test_a_value_preserving_widening_evolves(stored: DataType, incoming: DataType) -> None:
    """``ALTER ... TYPE bigint`` of an int column keeps every value: the lake column is widened."""
    diff = classify(
        7,
        _struct(id=LongType(), c=stored),
        WriterColumns(_struct(id=LongType(), c=incoming), frozenset()),
        table=TABLE,
    )

    assert [(c.kind, c.column) for c in diff.changes] == [(ChangeKind.WIDENED, "c")]
    assert not diff.breaking


@pytest.mark.parametrize(
    ("stored", "incoming", "detail"),
    [
        (DecimalType(10, 2), DecimalType(14, 2), "decimal(10,2) -> decimal(14,2) (a decimal's precision"),
        (DecimalType(10, 2), DecimalType(12, 4), "decimal(10,2) -> decimal(12,4) (a decimal's precision"),
        (DecimalType(10, 2), DecimalType(10, 4), "decimal(10,2) -> decimal(10,4) (incompatible)"),
        (StringType(), IntegerType(), "string -> int (incompatible)"),
        (TimestampNTZType(), TimestampType(), "timestamp_ntz -> timestamp (incompatible)"),
        (IntegerType(), StringType(), "int -> string (incompatible)"),
    ],
    ids=[
        "numeric-more-digits",
        "numeric-scale-and-digits",
        "numeric-scale",
        "text-to-int",
        "timestamp-to-timestamptz",
        "int-to-text",
    ],
)
def test_a_type_change_that_is_not_provably_value_preserving_stops_the_table(
    stored: DataType, incoming: DataType, detail: str
) -> None:
    """Issue 21: a decimal's precision or scale, even widened (``ALTER ... TYPE numeric(14,2)`` of a
    numeric(10,2), or a ``column_types`` override changed), is no in-place change: Hudi stores a decimal
    as an Avro fixed sized by its precision and failed the write mid-batch (MISSING_UNION_BRANCH)."""
    lake = _struct(id=LongType(), amount=stored)

    diff = classify(7, lake, WriterColumns(_struct(id=LongType(), amount=incoming), frozenset()), table=TABLE)

    assert [(c.kind, c.column) for c in diff.breaking] == [(ChangeKind.TYPE_CHANGED, "amount")]
    assert f"column 'amount' type changed: {detail}" in diff.summary()
    assert diff.summary().endswith("; re-bootstrap the table: cdc-lake rebootstrap pg.public.orders")
    assert all(len(line) <= 80 for line in diff.report())


def test_an_older_writer_with_a_narrower_decimal_is_no_change_once_the_lake_has_the_wider_one() -> None:
    """After the re-bootstrap that took numeric(14,2) in, a message of the older numeric(10,2) version
    is an older version's, not a change (the lake column holds its values)."""
    lake = _struct(id=LongType(), amount=DecimalType(14, 2))
    older = _struct(id=LongType(), amount=DecimalType(10, 2))

    diff = classify(3, lake, WriterColumns(older, frozenset()), table=TABLE)

    assert not diff.without_older_version_gaps(_history((3, older), (4, lake)), lake).breaking


@pytest.mark.parametrize(
    ("writer", "required", "expected"),
    [
        (
            _struct(id=LongType(), name=StringType(), price=DecimalType(10, 2)),
            frozenset(),
            [("dropped", "qty")],
        ),
        (
            _struct(id=LongType(), title=StringType(), qty=IntegerType(), price=DecimalType(10, 2)),
            frozenset(),
            [("renamed", "name")],
        ),
        (
            _struct(id=LongType(), name=StringType(), qty=StringType(), price=DecimalType(10, 2)),
            frozenset(),
            [("type changed", "qty")],
        ),
        (
            _struct(id=IntegerType(), name=StringType(), qty=IntegerType(), price=DecimalType(10, 2)),
            frozenset(),
            [("narrowed", "id")],
        ),
        (
            _struct(id=LongType(), name=StringType(), qty=IntegerType(), price=DecimalType(10, 4)),
            frozenset(),
            [("type changed", "price")],
        ),
        (
            _struct(
                id=LongType(),
                name=StringType(),
                qty=IntegerType(),
                price=DecimalType(10, 2),
                must=FloatType(),
            ),
            frozenset({"must"}),
            [("NOT NULL added", "must")],
        ),
    ],
    ids=["drop", "rename", "incompatible", "narrowing", "fewer-integer-digits", "not-null-without-default"],
)
def test_other_changes_stop_the_table(
    writer: StructType, required: frozenset[str], expected: list[tuple[str, str]]
) -> None:
    assert _kinds(writer, required) == expected
    diff = classify(7, LAKE, WriterColumns(writer, required), table=TABLE)
    assert diff.breaking and diff.summary().startswith("schema change (writer schema id 7): column ")
    assert all(len(line) <= 80 for line in diff.report())


def test_a_retyped_partition_column_is_a_partition_change() -> None:
    writer = _struct(id=LongType(), name=StringType(), qty=StringType(), price=DecimalType(10, 2))

    assert _kinds(writer, partition_fields=("qty",)) == [
        ("partition column changed", "qty"),
        ("type changed", "qty"),
    ]
    assert _kinds(writer) == [("type changed", "qty")]


def test_what_only_an_older_writer_version_lacks_is_no_change() -> None:
    older = _struct(id=IntegerType(), name=StringType(), qty=IntegerType())
    diff = classify(3, LAKE, WriterColumns(older, frozenset()), table=TABLE)

    assert sorted(c.column for c in diff.breaking) == ["id", "price"]
    assert not diff.without_older_version_gaps(_history((3, older), (4, LAKE)), LAKE).breaking
    assert diff.without_older_version_gaps(_history((3, older)), LAKE).breaking
    assert diff.without_older_version_gaps(_history((4, LAKE)), LAKE).breaking, "a writer outside the history"


def test_a_column_dropped_and_re_added_stays_a_change() -> None:
    """Finding 1 of issue 21: the source's rows lost the column's values at the drop; once the newest
    version has the column again, the writer that lacks it is no older version: the table stays stopped."""
    dropped = _struct(id=LongType(), name=StringType(), price=DecimalType(10, 2))
    re_added = _struct(id=LongType(), name=StringType(), price=DecimalType(10, 2), qty=IntegerType())
    diff = classify(2, LAKE, WriterColumns(dropped, frozenset()), table=TABLE)

    kept = diff.without_older_version_gaps(_history((1, LAKE), (2, dropped), (3, re_added)), LAKE)

    assert [(c.kind, c.column) for c in kept.breaking] == [(ChangeKind.DROPPED, "qty")]
    assert [
        (c.kind, c.column)
        for c in diff.without_older_version_gaps(_history((1, LAKE), (2, dropped), (1, LAKE)), LAKE).breaking
    ] == [(ChangeKind.DROPPED, "qty")]


def test_a_column_narrowed_and_widened_again_stays_a_change() -> None:
    narrowed = _struct(id=IntegerType(), name=StringType(), qty=IntegerType(), price=DecimalType(10, 2))
    diff = classify(2, LAKE, WriterColumns(narrowed, frozenset()), table=TABLE)

    kept = diff.without_older_version_gaps(_history((1, LAKE), (2, narrowed), (3, LAKE)), LAKE)

    assert [(c.kind, c.column) for c in kept.breaking] == [(ChangeKind.NARROWED, "id")]
    assert not diff.without_older_version_gaps(_history((2, narrowed), (3, LAKE)), LAKE).breaking


def test_the_frozen_list_and_freeze_hide_changes_outside_them() -> None:
    writer = WriterColumns(_struct(id=LongType(), qty=StringType(), extra=StringType()), frozenset({"extra"}))

    keep = policy_columns(SchemaPolicy.EVOLVE, ["qty"], ["id"], LAKE)
    frozen = policy_columns(SchemaPolicy.FREEZE, None, ["id"], _struct(id=LongType()))

    assert keep == {"id", "qty"} and frozen == {"id"}
    assert policy_columns(SchemaPolicy.EVOLVE, None, ["id"], LAKE) is None
    assert not classify(1, _struct(id=LongType()), writer.restricted(frozen), table=TABLE).changes
    assert [c.kind for c in classify(1, LAKE, writer.restricted(keep), table=TABLE).breaking] == [
        ChangeKind.DROPPED,
        ChangeKind.DROPPED,
        ChangeKind.TYPE_CHANGED,
    ]


def test_a_key_change_is_reported() -> None:
    diff = key_change(4, ["id"], ["id", "region"], table=TABLE)

    assert [c.kind for c in diff.breaking] == [ChangeKind.KEY_CHANGED]
    assert "record key was ['id']" in diff.summary()
    assert diff.summary().endswith("; re-bootstrap the table: cdc-lake rebootstrap pg.public.orders")


def test_not_null_without_default_is_read_from_the_avro_row_schema() -> None:
    row = {
        "type": "record",
        "name": "Value",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "opt", "type": ["null", "string"], "default": None},
            {"name": "dflt", "type": "int", "default": 0},
            {"name": "region", "type": ["string", "null"], "default": "eu"},
        ],
    }
    envelope = {
        "type": "record",
        "name": "t.Envelope",
        "fields": [
            {"name": "before", "type": ["null", row], "default": None},
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
            {"name": "source", "type": {"type": "record", "name": "Source", "fields": []}},
        ],
    }

    columns = WriterColumns.of(RegisteredSchema(5, envelope))

    assert columns.required_without_default == {"id"}
    assert columns.struct.fieldNames() == ["id", "opt", "dflt", "region"]
    assert columns.defaults == {"dflt": 0, "region": "eu"}
    assert columns.restricted(frozenset({"id", "region"})).defaults == {"region": "eu"}


def test_a_column_added_with_a_default_stops_the_table_naming_the_default_and_the_command() -> None:
    """ADD COLUMN ... DEFAULT: the source's existing rows hold the default (no row event says so), the
    lake would read null; whatever the column's nullability, the table stops."""
    writer = _struct(
        id=LongType(), name=StringType(), qty=IntegerType(), price=DecimalType(10, 2), region=StringType()
    )

    diff = classify(7, LAKE, WriterColumns(writer, frozenset(), {"region": "eu"}), table=TABLE)

    assert [(c.kind, c.column) for c in diff.breaking] == [(ChangeKind.ADDED_WITH_DEFAULT, "region")]
    assert diff.summary() == (
        "schema change (writer schema id 7): column 'region' added with a default: 'eu' (the source's "
        "existing rows hold it, the lake cannot know them); re-bootstrap the table: "
        "cdc-lake rebootstrap pg.public.orders"
    )
    assert ChangeKind.ADDED_WITH_DEFAULT not in EVOLVABLE
    assert all(len(line) <= 80 for line in diff.report())


def test_a_nullable_column_whose_default_only_the_source_knows_stops_the_table() -> None:
    """Issue 21's remaining gap: Debezium carries no default for MariaDB's ``DEFAULT (uuid())`` (nor
    Postgres ``bytea``/array defaults), so the writer schema shows a plain nullable add; the source's
    catalog shows the default, and the table stops naming it.  A column without a default there evolves;
    one the catalog lacks, or a source that could not be asked, stops too."""
    writer = WriterColumns(
        _struct(id=LongType(), name=StringType(), qty=IntegerType(), price=DecimalType(10, 2),
                u=StringType(), note=StringType()),
        frozenset(),
    )
    diff = classify(7, LAKE, writer, table=TABLE)

    assert diff.added() == ("u", "note")
    asked = diff.with_source_defaults(SourceDefaults({"u": "uuid()", "note": None}))

    assert [(c.kind, c.column) for c in asked.breaking] == [(ChangeKind.ADDED_WITH_DEFAULT, "u")]
    assert [c.column for c in asked.changes if c.evolvable] == ["note"]
    assert asked.summary() == (
        "schema change (writer schema id 7): column 'u' added with a default: uuid() at the source (the "
        "source's existing rows hold it, the lake cannot know them); re-bootstrap the table: "
        "cdc-lake rebootstrap pg.public.orders"
    )
    assert all(len(line) <= 80 for line in asked.report())
    gone = diff.with_source_defaults(SourceDefaults({"note": None}))
    assert [(c.column, c.detail) for c in gone.breaking] == [
        ("u", "not in the source table's catalog, its default unknown")
    ]
    unasked = diff.with_source_defaults(SourceDefaults({}, error="source pg: replica down"))
    assert sorted(c.column for c in unasked.breaking) == ["note", "u"]
    assert "(source pg: replica down)" in unasked.summary()


def test_a_default_the_replica_computed_itself_names_a_rebootstrap_from_the_primary() -> None:
    """MariaDB replicates ``ADD COLUMN u ... DEFAULT (uuid())`` as a statement: the replica draws UUIDs of
    its own, so a re-bootstrap read there would hold the replica's values; the stop names the command
    that reads the primary, and only when such a column is among the breaking changes."""
    writer = WriterColumns(
        _struct(id=LongType(), name=StringType(), qty=IntegerType(), price=DecimalType(10, 2),
                u=StringType(), v=StringType()),
        frozenset(),
    )
    diff = classify(7, LAKE, writer, table=TABLE)

    both = diff.with_source_defaults(
        SourceDefaults({"u": "uuid()", "v": "'x'"}, primary_only=frozenset({"u"}))
    )
    plain = diff.with_source_defaults(SourceDefaults({"u": "uuid()", "v": "'x'"}))

    assert both.needs_primary and not plain.needs_primary
    assert [c.column for c in both.breaking if c.from_primary] == ["u"]
    assert both.summary().endswith(
        "re-bootstrap the table from the primary: cdc-lake rebootstrap pg.public.orders --from-primary"
    )
    assert "the replica computed its own" in both.summary()
    assert plain.summary().endswith("re-bootstrap the table: cdc-lake rebootstrap pg.public.orders")
    assert all(len(line) <= 80 for line in both.report())


def test_freeze_ignores_a_column_added_with_a_default_like_any_new_column() -> None:
    writer = WriterColumns(_struct(id=LongType(), region=StringType()), frozenset(), {"region": "eu"})
    lake = _struct(id=LongType())

    keep = policy_columns(SchemaPolicy.FREEZE, None, ["id"], lake)

    assert keep is not None
    assert not classify(2, lake, writer.restricted(keep), table=TABLE).changes


def test_a_column_the_lake_was_not_copied_with_stops_the_table() -> None:
    """Finding 2 of issue 21: a column entering the compared columns (a frozen list that grew, freeze
    switched to evolve) existed in the source with values the lake never got: no evolving to NULLs."""
    writer = WriterColumns(
        _struct(
            id=LongType(), name=StringType(), qty=IntegerType(), price=DecimalType(10, 2), note=StringType()
        ),
        frozenset(),
    )

    diff = classify(9, LAKE, writer, table=TABLE, copied=frozenset(LAKE.fieldNames()))

    assert [(c.kind, c.column) for c in diff.breaking] == [(ChangeKind.NOT_COPIED, "note")]
    assert "cdc-lake rebootstrap pg.public.orders" in diff.summary()
    assert not classify(9, LAKE, writer, table=TABLE, copied=frozenset([*LAKE.fieldNames(), "note"])).breaking
    assert not classify(9, LAKE, writer, table=TABLE).breaking


def test_commits_record_the_columns_a_policy_compared() -> None:
    frozen = policy_columns(SchemaPolicy.FREEZE, None, ["id"], LAKE)

    assert _stored(CommitMetadata(compared_columns=frozen)).compared_columns == frozenset(LAKE.fieldNames())
    assert _stored(CommitMetadata(compared_columns=None)).compared_columns is None
    assert CommitMetadata.from_dict({}).compared_columns is None


def _writer(**lengths: int | None) -> WriterColumns:
    """The columns of a Debezium envelope with ``id`` and one string column per keyword (a length: the
    source's, propagated; None: a plain string, as before the connectors propagated lengths)."""
    columns = [required("id", "long")]
    columns += [optional(n, "string" if n_ is None else character(n_)) for n, n_ in lengths.items()]
    return WriterColumns.of(RegisteredSchema(5, envelope(PG_TOPIC, columns, POSTGRES_SOURCE)))


CHAR_LAKE = _struct(id=LongType(), val=StringType(), note=StringType())


def test_a_shorter_character_length_stops_the_table_naming_the_column_and_the_lengths() -> None:
    """Issue 21: ``ALTER ... TYPE varchar(20)`` of a varchar(200) (MySQL ``MODIFY val varchar(20)``) may
    have truncated values without a row event; both are strings in the lake, so only the length Debezium
    propagates shows it."""
    writer = _writer(val=20, note=None)

    diff = classify(8, CHAR_LAKE, writer, table=TABLE, lengths={"val": 200})

    assert writer.lengths == {"val": 20}
    assert [(c.kind, c.column) for c in diff.breaking] == [(ChangeKind.NARROWED, "val")]
    assert diff.summary() == (
        "schema change (writer schema id 8): column 'val' narrowed: character length 200 -> 20; "
        "re-bootstrap the table: cdc-lake rebootstrap pg.public.orders"
    )
    assert all(len(line) <= 80 for line in diff.report())


@pytest.mark.parametrize(
    ("writer", "recorded"),
    [
        (_writer(val=400, note=None), {"val": 200}),
        (_writer(val=200, note=None), {"val": 200}),
        (_writer(val=None, note=None), {"val": 200}),
        (_writer(val=20, note=None), {}),
        (_writer(val=20, note=None), {"note": 200}),
    ],
    ids=["longer", "same", "writer-without-length", "lake-without-length", "other-column"],
)
def test_a_longer_or_unknown_character_length_is_no_change(
    writer: WriterColumns, recorded: dict[str, int]
) -> None:
    """A longer varchar holds every value; a length missing on either side (an older writer version,
    a commit from before the connectors propagated lengths) is no change."""
    assert not classify(8, CHAR_LAKE, writer, table=TABLE, lengths=recorded).changes


def test_commits_record_the_widest_character_length_applied() -> None:
    recorded = widest_lengths({"val": 200, "note": 10}, _writer(val=300, note=None, extra=5).lengths)

    assert recorded == {"val": 300, "note": 10, "extra": 5}
    assert _stored(CommitMetadata(char_lengths=recorded)).char_lengths == recorded
    assert CommitMetadata(char_lengths={}).to_dict() == {} and CommitMetadata.from_dict({}).char_lengths == {}
    assert _writer(val=20, note=30).restricted(frozenset({"id", "note"})).lengths == {"note": 30}


def test_an_older_writer_with_a_shorter_length_is_no_change_once_a_newer_version_is_longer() -> None:
    """A message of the varchar(20) version arriving after the lake applied the widened varchar(200)
    one (another partition) is an older version's; narrowed after being longer, it stays a change."""
    short, long = _writer(val=20, note=None), _writer(val=200, note=None)
    unknown = _writer(val=None, note=None)
    diff = classify(2, CHAR_LAKE, short, table=TABLE, lengths={"val": 200})

    forgiven = diff.without_older_version_gaps([(1, unknown), (2, short), (3, long)], CHAR_LAKE, {"val": 200})
    assert not forgiven.breaking
    kept = diff.without_older_version_gaps([(1, long), (2, short), (3, long)], CHAR_LAKE, {"val": 200})
    assert [(c.kind, c.column) for c in kept.breaking] == [(ChangeKind.NARROWED, "val")]
