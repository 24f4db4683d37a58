"""From decoded changes to the DataFrame of one Hudi commit: last change per key, TOAST fill, metadata.

:func:`latest_frame` takes one of two paths to the batch's last change per key.  A batch decoded on the
driver is merged there in plain Python (:func:`cdc_lake.apply.last_change.last_changes`, which states
the merge's meaning) and enters Spark as one local DataFrame, one row per key: no shuffle, no Window
job.  A larger batch, still on the executors, runs the same merge as Spark steps:

1. :func:`change_frame`: every decoded change before the batch's cut-offs as a row of the merged lake
   columns plus its op, source time, ordering value, Kafka partition/offset and unavailable columns.
2. :func:`latest_changes`: per record key, the change with the highest source ordering value (Postgres
   LSN; MySQL/MariaDB Kafka offset, see :mod:`cdc_lake.decode.ordering`), ties broken by Kafka partition
   and offset.  Within one partition a key's changes arrive in source order, so this is the last change
   by offset.  A Postgres event Debezium re-sent after a restart carries its original (lower) LSN and
   never wins over newer changes; a re-sent binlog event has a new offset, but the re-sent suffix
   replays the same changes in the same order, so the last one is still the key's latest state (and
   re-sent events below the applied marks are skipped before).  Unavailable columns (unchanged
   Postgres TOAST values; with soft deletes, what a delete's before image lacks) take the value of the
   key's latest earlier change in the batch that had one.
   Before that, :func:`fill_moved` gives a *moved* row (an update that changed the configured key, or
   the create of a Postgres primary-key update, paired with its delete by stream position) the old
   key's values: its unavailable columns are the row's state before the move, which the new key never
   held.  Under REPLICA IDENTITY DEFAULT or USING INDEX the old tuple holds the key only, so Debezium
   sends the placeholder for an unchanged TOASTed column of the moved row (with FULL it fills it in
   itself).  The old key's state is its latest change of the batch before the move (its values, and
   the keys whose stored row gives the rest), else its stored row; the moved row adds its own key to
   those lookup keys, so a chain of moves carries every key of the chain.  A chain in one batch is
   resolved one link per pass.  The batch holds both halves of a primary-key update (the applier cuts
   it back to a half whose other half it lacks, :func:`cdc_lake.apply.key_change.key_update_cuts`);
   a create applied without its delete all the same (at the start of its partition's range) cannot
   name its old key (the create carries no before image) and gets null: a documented limit
   (docs/applier.md, "Postgres TOAST").

On both paths two keys are one key when the lake writes them as one record key: they are compared by
the lake format's :meth:`~cdc_lake.lake.format.FormatFacts.key_identity` (in Spark
:meth:`~cdc_lake.lake.format.FormatFacts.key_identity_column`: every window, join and lookup below),
not by Spark's equality, which takes ``-0.0`` for ``0.0`` where Hudi's text record key holds two keys.

Both paths leave each key's row with ``_cdc_missing`` (the columns still unavailable) and
``_cdc_lookups`` (the record keys whose stored row may hold them, oldest first: the key's own, or a
moved row's chain of keys then its own).  Then, on either path:

3. :func:`fill_from_lake`: what is still unavailable comes from the stored row of the first lookup key
   the lake holds (live, after the first key: a soft-deleted row is not the row's state), a join with a
   snapshot read of the table, only when some row needs it.  In steady operation the lake holds the
   first key; a bootstrap snapshot may have read a moved row under any later key of its chain (the
   catch-up replays the moves before the read).  A key none of whose lookups the lake holds gets null:
   the placeholder text is never written.
4. :func:`lake_frame`: the lake columns and metadata, with the delete flags.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark import RDD
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from cdc_lake.apply.decoding import Decoded, DecodedChange
from cdc_lake.apply.last_change import LastChange, last_changes
from cdc_lake.decode.ordering import SNAPSHOT_ORDERING_VALUE
from cdc_lake.lake.columns import (
    APPLIED_AT_COLUMN,
    DELETED_COLUMN,
    OP_COLUMN,
    ORDERING_COLUMN,
    SOFT_DELETED_COLUMN,
    SOURCE_TS_COLUMN,
    lake_struct,
    source_time,
)
from cdc_lake.lake.format import DEFAULT_FORMAT, format_facts

KAFKA_PARTITION_COLUMN = "_cdc_kafka_partition"
KAFKA_OFFSET_COLUMN = "_cdc_kafka_offset"
UNAVAILABLE_COLUMN = "_cdc_unavailable"
MOVED_FROM_COLUMN = "_cdc_moved_from"
POSITION_COLUMN = "_cdc_position"
MISSING_COLUMN = "_cdc_missing"
LOOKUPS_COLUMN = "_cdc_lookups"
_SEGMENT = "_cdc_segment"
_OLD_PREFIX = "_cdc_old_"
_FILL_PREFIX = "_cdc_fill_"
_STORED_PREFIX = "_cdc_stored_"
_STORED_KEY = "_cdc_stored_key"
_OWN_KEY = "_cdc_own_key"
_CANDIDATES = "_cdc_candidates"
_RANK = "_cdc_rank"
_PLACE = "_cdc_place"


def col(name: str) -> Column:
    """A column by its exact name (dots and backticks in source column names are not paths)."""
    return F.col("`" + name.replace("`", "``") + "`")


def _key_struct(columns: StructType, key_fields: Sequence[str]) -> StructType:
    return StructType([StructField(k, columns[k].dataType, True) for k in key_fields])


_Same = Callable[[Column], Column]
"""A key struct column as its record key tells it apart (:func:`_identity`)."""


def _identity(columns: StructType, key_fields: Sequence[str], lake_format: str) -> _Same:
    """How key structs of ``columns`` are compared: by ``lake_format``'s key identity, not Spark's
    equality (module docstring)."""
    facts, key_type = format_facts(lake_format), _key_struct(columns, key_fields)
    return lambda key: facts.key_identity_column(key, key_type)


def key_identity(columns: StructType, key_fields: Sequence[str], lake_format: str) -> Column:
    """The record key of a frame with ``columns`` as one column, as ``lake_format`` tells keys apart: what
    to join or group rows by key on."""
    return _identity(columns, key_fields, lake_format)(_own(key_fields))


_META = (OP_COLUMN, SOURCE_TS_COLUMN, ORDERING_COLUMN)


def change_struct(columns: StructType, key_fields: Sequence[str]) -> StructType:
    """Schema of :func:`change_frame`: the lake columns, then the change's metadata."""
    by_name = {f.name: f for f in lake_struct(columns).fields}
    return StructType(
        [
            *columns.fields,
            *[by_name[name] for name in _META],
            StructField(KAFKA_PARTITION_COLUMN, IntegerType(), False),
            StructField(KAFKA_OFFSET_COLUMN, LongType(), False),
            StructField(UNAVAILABLE_COLUMN, ArrayType(StringType(), False), False),
            StructField(MOVED_FROM_COLUMN, _key_struct(columns, key_fields), True),
            StructField(POSITION_COLUMN, StringType(), True),
        ]
    )


def latest_struct(columns: StructType, key_fields: Sequence[str]) -> StructType:
    """Schema of :func:`driver_latest`: the lake columns, the change's metadata, what is still missing."""
    by_name = {f.name: f for f in lake_struct(columns).fields}
    return StructType(
        [
            *columns.fields,
            *[by_name[name] for name in _META],
            StructField(MISSING_COLUMN, ArrayType(StringType(), False), False),
            StructField(LOOKUPS_COLUMN, ArrayType(_key_struct(columns, key_fields), False), True),
        ]
    )


def before_cutoffs(cutoffs: Mapping[int, int]) -> Callable[[Decoded], bool]:
    """Whether a record is a change before ``cutoffs`` (first offset NOT to apply, per partition)."""
    stops = dict(cutoffs)

    def wanted(record: Decoded) -> bool:
        if not isinstance(record, DecodedChange):
            return False
        return record.offset < stops.get(record.partition, record.offset + 1)

    return wanted


def change_frame(
    spark: SparkSession,
    decoded: RDD[Decoded],
    columns: StructType,
    cutoffs: Mapping[int, int],
    key_fields: Sequence[str],
) -> DataFrame:
    """The decoded changes before ``cutoffs`` (first offset NOT to apply, per partition) as rows."""
    names = [f.name for f in columns.fields]

    def as_tuple(record: Decoded) -> tuple[Any, ...]:
        assert isinstance(record, DecodedChange)
        row = record.row
        return (
            *(row.get(name) for name in names),
            record.op,
            source_time(record.source_ts_ms),
            record.ordering,
            record.partition,
            record.offset,
            list(record.unavailable),
            record.moved_from,
            record.position,
        )

    rows = decoded.filter(before_cutoffs(cutoffs)).map(as_tuple)
    return spark.createDataFrame(rows, change_struct(columns, key_fields), verifySchema=False)


def driver_latest(
    spark: SparkSession,
    records: Sequence[Decoded],
    columns: StructType,
    cutoffs: Mapping[int, int],
    key_fields: Sequence[str],
    fill_columns: Sequence[str],
    lake_format: str = DEFAULT_FORMAT,
) -> DataFrame:
    """The last change per key of a batch on the driver, merged in Python, as one local DataFrame.

    Its rows are converted in the JVM, and no Python worker runs when Spark reads them.
    """
    names = [f.name for f in columns.fields]
    wanted = before_cutoffs(cutoffs)
    changes = [record for record in records if isinstance(record, DecodedChange) and wanted(record)]

    def as_tuple(last: LastChange) -> tuple[Any, ...]:
        change = last.change
        return (
            *(change.row.get(name) for name in names),
            change.op,
            source_time(change.source_ts_ms),
            change.ordering,
            list(last.missing),
            list(last.lookups) if last.missing else None,
        )

    rows = [as_tuple(last) for last in last_changes(changes, key_fields, fill_columns, lake_format)]
    return spark.createDataFrame(rows, latest_struct(columns, key_fields), verifySchema=False)


def latest_frame(
    spark: SparkSession,
    records: RDD[Decoded] | list[Decoded],
    columns: StructType,
    cutoffs: Mapping[int, int],
    key_fields: Sequence[str],
    fill_columns: Sequence[str],
    moves: int,
    lake_format: str = DEFAULT_FORMAT,
) -> DataFrame:
    """The batch's last change per key, filled from the batch: in Python for records on the driver, else
    in Spark (``moves``: the moved rows with unavailable columns, the passes :func:`fill_moved` may take);
    keys compared as ``lake_format``'s record key tells them apart.
    """
    if isinstance(records, list):
        return driver_latest(spark, records, columns, cutoffs, key_fields, fill_columns, lake_format)
    changes = placed(change_frame(spark, records, columns, cutoffs, key_fields), key_fields, lake_format)
    changes = fill_moved(changes, key_fields, fill_columns, moves, lake_format)
    return latest_changes(changes, key_fields, fill_columns, lake_format)


def one_row_per_key(columns: StructType, key_fields: Sequence[str], stored: DataFrame | None) -> bool:
    """Whether :func:`latest_frame`'s rows hold each Hudi record key once, so Hudi need not combine them.

    Both paths keep one row per record key, keys compared by the format's key identity.  Not relied on:
    the fill from the lake (``stored``: a join); and a floating-point or decimal key, for which Hudi's
    combine stays on (it kept a NaN key one row while the driver's merge compared keys as Python does).
    """
    nan_able = (FloatType, DoubleType, DecimalType)
    return stored is None and not any(isinstance(columns[name].dataType, nan_able) for name in key_fields)


_ORDER_NAMES = (ORDERING_COLUMN, KAFKA_PARTITION_COLUMN, KAFKA_OFFSET_COLUMN)


def _order(prefix: str = "") -> list[Column]:
    return [col(prefix + name) for name in _ORDER_NAMES]


def placed(changes: DataFrame, key_fields: Sequence[str], lake_format: str = DEFAULT_FORMAT) -> DataFrame:
    """Adds ``_cdc_place``: the ordering value of the change's place among its key's states
    (:mod:`cdc_lake.apply.last_change`): its own, or for a row at the snapshot position (a Postgres
    incremental snapshot's chunk row) the highest of its key's changes before it in its partition."""
    same = _identity(changes.schema, key_fields, lake_format)
    before = Window.partitionBy(same(_own(key_fields)), col(KAFKA_PARTITION_COLUMN)).orderBy(
        col(KAFKA_OFFSET_COLUMN)
    ).rowsBetween(Window.unboundedPreceding, -1)
    snapshot = col(ORDERING_COLUMN) == F.lit(SNAPSHOT_ORDERING_VALUE)
    streamed_before = F.max(F.when(~snapshot, col(ORDERING_COLUMN))).over(before)
    own = col(ORDERING_COLUMN)
    return changes.withColumn(_PLACE, F.when(snapshot, F.coalesce(streamed_before, own)).otherwise(own))


def _place_order(prefix: str = "") -> list[Column]:
    """The order of a key's states: :func:`placed`'s place, then Kafka partition and offset."""
    return [col(prefix + name) for name in (_PLACE, KAFKA_PARTITION_COLUMN, KAFKA_OFFSET_COLUMN)]


def _own(key_fields: Sequence[str]) -> Column:
    """The row's record key as one struct."""
    return F.struct(*[col(k) for k in key_fields])


def _pending() -> Column:
    """A moved row whose lookup keys are not known yet (its old key's state is still pending)."""
    return col(MOVED_FROM_COLUMN).isNotNull() & col(LOOKUPS_COLUMN).isNull()


def _pair_moves(changes: DataFrame, key_fields: Sequence[str], fill_columns: Sequence[str]) -> DataFrame:
    """Name the old key of each Postgres primary-key update's create: the delete at its stream position.

    A streamed create with unavailable columns is always such a create (an insert's values are all in
    the WAL).  Without its delete in the batch, the old key is unknown (a key of nulls, which matches
    no row): its unavailable columns are null and it looks nothing up.  Adds ``_cdc_lookups``: the
    key's own for a row that is not moved or lacks no fill column, empty for an unknown old key, null
    (pending) for the moved rows :func:`fill_moved` resolves.
    """
    is_create = col(OP_COLUMN) == F.lit("c")
    create = is_create & (F.size(col(UNAVAILABLE_COLUMN)) > 0) & col(MOVED_FROM_COLUMN).isNull()
    deletes = changes.where((col(OP_COLUMN) == F.lit("d")) & col(POSITION_COLUMN).isNotNull()).select(
        col(POSITION_COLUMN).alias("_cdc_pair_position"),
        F.struct(*[col(k) for k in key_fields]).alias("_cdc_pair"),
    )
    paired = changes.join(deletes, create & (col(POSITION_COLUMN) == col("_cdc_pair_position")), "left")
    unknown_key = F.struct(*[F.lit(None).cast(changes.schema[k].dataType).alias(k) for k in key_fields])
    unknown = create & col("_cdc_pair").isNull()
    moved = F.when(create, F.coalesce(col("_cdc_pair"), unknown_key)).otherwise(col(MOVED_FROM_COLUMN))
    wanted = F.array(*[F.lit(name) for name in fill_columns])
    lacking = F.size(F.array_intersect(col(UNAVAILABLE_COLUMN), wanted)) > 0
    no_key = F.array().cast(ArrayType(_key_struct(changes.schema, key_fields), False))
    lookups = F.when(unknown, no_key).when(moved.isNull() | ~lacking, F.array(_own(key_fields)))
    values: dict[str, Column] = {
        n: F.when(unknown & F.array_contains(col(UNAVAILABLE_COLUMN), n), F.lit(None)).otherwise(col(n))
        for n in fill_columns
    }
    values[MOVED_FROM_COLUMN] = moved
    values[UNAVAILABLE_COLUMN] = F.when(unknown, F.array_except(col(UNAVAILABLE_COLUMN), wanted)).otherwise(
        col(UNAVAILABLE_COLUMN)
    )
    return paired.select(
        *[values.get(n, col(n)).alias(n) for n in changes.columns], lookups.alias(LOOKUPS_COLUMN)
    )


def fill_moved(
    changes: DataFrame,
    key_fields: Sequence[str],
    fill_columns: Sequence[str],
    passes: int,
    lake_format: str = DEFAULT_FORMAT,
) -> DataFrame:
    """Fill the unavailable columns of moved rows from their old key's state before the move, and name
    the keys whose stored row gives the rest (``_cdc_lookups``).

    The old key's state is the latest change of the old key before the move's ordering value (the
    columns it lacked taken from that key's earlier changes since its own last move, the rest from the
    lookup keys of that stretch's first change), else the old key's stored row.  When that stretch
    starts with a moved row still pending, the next pass resolves it: at most ``passes`` passes (the
    number of moved rows with unavailable columns), stopping when none is left.
    """
    if passes == 0 or not fill_columns:
        return changes
    changes = _pair_moves(changes, key_fields, fill_columns)
    same = _identity(changes.schema, key_fields, lake_format)
    for _ in range(passes):
        changes = _fill_moved_once(changes, key_fields, fill_columns, same).localCheckpoint()
        if changes.where(_pending()).isEmpty():
            break
    return changes


def _segmented(changes: DataFrame, key_fields: Sequence[str], same: _Same) -> DataFrame:
    """Every change with its key's segment: the moves into the key so far, in source order."""
    by_key = (
        Window.partitionBy(same(_own(key_fields)))
        .orderBy(*_place_order())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return changes.withColumn(_SEGMENT, F.sum(col(MOVED_FROM_COLUMN).isNotNull().cast("int")).over(by_key))


def _old_key_states(
    changes: DataFrame, key_fields: Sequence[str], fill_columns: Sequence[str], same: _Same
) -> DataFrame:
    """Every change's key (its identity), order, the last value of each column in its segment and the
    segment's lookups."""
    own = same(_own(key_fields))
    before = Window.unboundedPreceding, Window.currentRow
    in_segment = Window.partitionBy(own, col(_SEGMENT)).orderBy(*_place_order()).rowsBetween(*before)
    unavailable = col(UNAVAILABLE_COLUMN)
    return _segmented(changes, key_fields, same).select(
        own.alias(_OLD_PREFIX + "key"),
        *[col(name).alias(_OLD_PREFIX + name) for name in (_PLACE, *_ORDER_NAMES)],
        F.first(col(LOOKUPS_COLUMN)).over(in_segment).alias(_OLD_PREFIX + "lookups"),
        *[
            F.last(F.when(~F.array_contains(unavailable, n), F.struct(col(n).alias("v"))), ignorenulls=True)
            .over(in_segment)
            .alias(_OLD_PREFIX + "v_" + n)
            for n in fill_columns
        ],
    )


def _fill_moved_once(
    changes: DataFrame, key_fields: Sequence[str], fill_columns: Sequence[str], same: _Same
) -> DataFrame:
    """One pass of :func:`fill_moved`: each pending moved row takes what its old key's state names."""
    states = _old_key_states(changes, key_fields, fill_columns, same)
    pending = changes.where(_pending())
    rest = changes.where(~_pending())
    earlier = col(_OLD_PREFIX + _PLACE) < col(ORDERING_COLUMN)
    old_key = same(col(MOVED_FROM_COLUMN)) == col(_OLD_PREFIX + "key")
    matched = pending.join(states, old_key & earlier, "left")
    latest_first = Window.partitionBy(col(KAFKA_PARTITION_COLUMN), col(KAFKA_OFFSET_COLUMN)).orderBy(
        *[c.desc_nulls_last() for c in _place_order(_OLD_PREFIX)]
    )
    rank = F.row_number().over(latest_first).alias(_RANK)
    matched = matched.select("*", rank).where(F.col(_RANK) == 1)
    found = col(_OLD_PREFIX + ORDERING_COLUMN).isNotNull()
    base = F.when(found, col(_OLD_PREFIX + "lookups")).otherwise(F.array(col(MOVED_FROM_COLUMN)))
    ready = base.isNotNull()
    own = _own(key_fields)
    held = (F.size(base) == 0) | F.exists(base, lambda key: same(key) == same(own))
    lookups = F.when(ready, F.when(held, base).otherwise(F.concat(base, F.array(own))))
    unavailable = col(UNAVAILABLE_COLUMN)
    values: dict[str, Column] = {LOOKUPS_COLUMN: lookups}
    taken: dict[str, Column] = {}
    for n in fill_columns:
        state = col(_OLD_PREFIX + "v_" + n)
        taken[n] = ready & found & state.isNotNull()
        values[n] = F.when(F.array_contains(unavailable, n) & taken[n], state.getField("v")).otherwise(col(n))
    values[UNAVAILABLE_COLUMN] = F.filter(unavailable, lambda name: ~_flag(name, taken))
    updated = matched.select(*[values.get(n, col(n)).alias(n) for n in changes.columns])
    return rest.unionByName(updated)


def _flag(name: Column, flags: Mapping[str, Column]) -> Column:
    """The flag of column ``name`` (a string column) among ``flags``; False for other names."""
    condition = F.lit(False)
    for candidate, flag in flags.items():
        condition = F.when(name == candidate, flag).otherwise(condition)
    return condition


def latest_changes(
    changes: DataFrame,
    key_fields: Sequence[str],
    fill_columns: Sequence[str],
    lake_format: str = DEFAULT_FORMAT,
) -> DataFrame:
    """The last change of each key, its unavailable columns filled from earlier changes in the batch since
    the last move into the key (a moved row's values before it were filled by :func:`fill_moved`).

    Adds ``_cdc_missing``: the columns still unavailable after that; and ``_cdc_lookups``: those of the
    stretch's first change (:func:`fill_moved`'s), else the key's own.
    """
    same = _identity(changes.schema, key_fields, lake_format)
    key = same(_own(key_fields))
    segmented = _segmented(changes, key_fields, same)
    window = Window.partitionBy(key, col(_SEGMENT)).orderBy(*_place_order())
    unavailable = col(UNAVAILABLE_COLUMN)
    fills = [
        F.last(F.when(~F.array_contains(unavailable, name), F.struct(col(name).alias("v"))), ignorenulls=True)
        .over(window)
        .alias(_FILL_PREFIX + name)
        for name in fill_columns
    ]
    own = F.array(_own(key_fields))
    first = F.first(col(LOOKUPS_COLUMN)).over(window) if LOOKUPS_COLUMN in changes.columns else own
    is_last = F.lead(col(KAFKA_OFFSET_COLUMN), 1).over(Window.partitionBy(key).orderBy(*_order())).isNull()
    ranked = segmented.select(
        "*", *fills, first.alias("_cdc_first_lookups"), is_last.alias("_cdc_is_last")
    ).where(F.col("_cdc_is_last"))
    filled = {
        name: F.when(F.array_contains(unavailable, name), col(_FILL_PREFIX + name).getField("v"))
        .otherwise(col(name))
        .alias(name)
        for name in fill_columns
    }
    missing = F.filter(unavailable, lambda name: _fill_missing(name, fill_columns))
    dropped = (UNAVAILABLE_COLUMN, LOOKUPS_COLUMN, _PLACE)
    base = [filled.get(f, col(f)) for f in changes.columns if f not in dropped]
    return ranked.select(
        *base, missing.alias(MISSING_COLUMN), col("_cdc_first_lookups").alias(LOOKUPS_COLUMN)
    )


def _fill_missing(name: Column, fill_columns: Sequence[str]) -> Column:
    """True for an unavailable column the batch had no value for."""
    condition = F.lit(True)
    for candidate in fill_columns:
        condition = F.when(name == candidate, col(_FILL_PREFIX + candidate).isNull()).otherwise(condition)
    return condition


def fill_from_lake(
    latest: DataFrame,
    stored: DataFrame,
    key_fields: Sequence[str],
    fill_columns: Sequence[str],
    lake_format: str = DEFAULT_FORMAT,
) -> DataFrame:
    """Fill the ``_cdc_missing`` columns of ``latest`` from ``stored`` (the lake table): the row of the
    first ``_cdc_lookups`` key the lake holds, any row for the first key and a live one for the others.

    The first key is the one whose stored row holds the row's state (its own, or where a moved row's
    chain of keys started); a bootstrap snapshot read after a move holds the row under a later key of
    the chain (or a re-sent move already applied does), and that row holds the values the moves left
    unchanged.  Only the keys that need it are looked up; a row none of whose keys the lake holds, or a
    column the lake does not have yet, leaves the column null.  Keys are matched by their identity in
    ``lake_format``'s record key.
    """
    same = _identity(latest.schema, key_fields, lake_format)
    own = same(_own(key_fields))
    lookups = F.transform(col(LOOKUPS_COLUMN), same)
    needing = (
        latest.where(F.size(col(MISSING_COLUMN)) > 0)
        .select(own.alias(_OWN_KEY), lookups.alias(_CANDIDATES))
        .distinct()
    )
    candidates = needing.select("*", F.posexplode(col(_CANDIDATES)).alias(_RANK, _STORED_KEY))
    stored_same = _identity(stored.schema, key_fields, lake_format)
    values = _stored_values(stored, key_fields, fill_columns, stored_same)
    values = values.join(candidates.select(_STORED_KEY).distinct(), [_STORED_KEY], "left_semi")
    held = candidates.join(values, [_STORED_KEY])
    if SOFT_DELETED_COLUMN in stored.columns:
        deleted = F.coalesce(col(_STORED_PREFIX + SOFT_DELETED_COLUMN), F.lit(False))
        held = held.where((col(_RANK) == 0) | ~deleted)
    fill = [name for name in fill_columns if _STORED_PREFIX + name in values.columns]
    first = Window.partitionBy(col(_OWN_KEY), col(_CANDIDATES)).orderBy(col(_RANK))
    chosen = (
        held.select("*", F.row_number().over(first).alias("_cdc_choice"))
        .where(F.col("_cdc_choice") == 1)
        .select(col(_OWN_KEY), col(_CANDIDATES), *[col(_STORED_PREFIX + n) for n in fill])
    )
    joined = latest.join(chosen, (own == col(_OWN_KEY)) & (lookups == col(_CANDIDATES)), "left")
    missing = col(MISSING_COLUMN)
    filled = {
        name: F.when(F.array_contains(missing, name), col(_STORED_PREFIX + name))
        .otherwise(col(name))
        .alias(name)
        for name in fill
    }
    return joined.select(*[filled.get(name, col(name)) for name in latest.columns])


def _stored_values(
    stored: DataFrame, key_fields: Sequence[str], fill_columns: Sequence[str], same: _Same
) -> DataFrame:
    """The lake's record key as one struct column (its identity), and the fill columns it has (prefixed),
    with the soft-delete flag when the table has one."""
    names = set(stored.columns) - set(key_fields)
    wanted = dict.fromkeys([*fill_columns, SOFT_DELETED_COLUMN])
    return stored.select(
        same(_own(key_fields)).alias(_STORED_KEY),
        *[col(name).alias(_STORED_PREFIX + name) for name in wanted if name in names],
    )


def lake_frame(
    latest: DataFrame, columns: StructType, applied_at: dt.datetime, soft_deletes: bool
) -> DataFrame:
    """The rows to write: the lake columns, then the metadata columns with the delete flags."""
    is_delete = col(OP_COLUMN) == F.lit("d")
    no = F.lit(False)
    return latest.select(
        *[col(f.name) for f in columns.fields],
        col(OP_COLUMN),
        col(SOURCE_TS_COLUMN),
        col(ORDERING_COLUMN),
        F.lit(applied_at).cast("timestamp").alias(APPLIED_AT_COLUMN),
        (is_delete if soft_deletes else no).alias(SOFT_DELETED_COLUMN),
        (no if soft_deletes else is_delete).alias(DELETED_COLUMN),
    )
