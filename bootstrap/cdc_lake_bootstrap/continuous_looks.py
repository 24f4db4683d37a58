"""Continuous validation's looks in Spark: one slice compared in two looks, and what a confirmed key does.

:class:`SparkLooks` is the :class:`~cdc_lake_bootstrap.continuous.ValidationSteps` ``run`` uses.  The first
look is ``validate``'s comparison of the slice (:func:`~cdc_lake_bootstrap.validate.validate_table` with
its key range), then the lake's rows of its candidates; the second reads the candidates' source rows (their
keys alone), waits as a repair's read does for the point they were read at to be streamed
(:func:`~cdc_lake_bootstrap.repair.streamed_point`) and for the lake to apply the topic up to there
(``run``'s own batches bring it), and reads their lake rows again.  The rule that judges them is
:func:`~cdc_lake_bootstrap.continuous.confirmed_keys`; its module says why it is sound.

Each look's lake reads take their turn with ``run``'s table services (:mod:`cdc_lake.spark.background`),
from the listing of the lake's files to the last row read, so no compaction replaces (and no clean after
it removes) a file slice a look listed: the comparison, the first look's rows of its candidates, the
second look's lake read.  The waits for the applier to bring the lake to a point read, and the source's
rows of the candidates, hold no turn.  In
``local[N]`` the looks' lake reads run at most ``N - 1`` tasks at once (coalesced), so the applier's
next job finds a core free.

A confirmed key marks the table possibly diverged, naming the slice and the kinds; with
``validation.auto_repair`` the confirmed keys are repaired (:func:`~cdc_lake_bootstrap.repair.repair_table`
with those keys, through the :class:`~cdc_lake.lake.applier.Repair` ``run`` passes, under the table's
apply lock).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from cdc_lake.config import Config
from cdc_lake.exceptions import BootstrapError
from cdc_lake.lake.applier import Repair
from cdc_lake.lake.columns import ORDERING_COLUMN, SOFT_DELETED_COLUMN
from cdc_lake.lake.format import format_facts, load_format
from cdc_lake.lake.target import select_targets
from cdc_lake.spark.background import background_slot, background_tasks
from cdc_lake.spark.errors import describe_failure
from cdc_lake.spark.session import VALIDATION_POOL, use_pool
from cdc_lake.state.store import StateStore
from cdc_lake.validation import ValidateResult, json_key
from cdc_lake_bootstrap.continuous import (
    LakeLook,
    Slice,
    SliceResult,
    TableFacts,
    confirmed_keys,
    live_tables,
)
from cdc_lake_bootstrap.repair import RepairOptions, repair_table, rows_of_keys, streamed_point, typed_keys
from cdc_lake_bootstrap.validate import (
    HASH,
    ValidateOptions,
    estimated_rows,
    hashed,
    key_facts,
    lake_caught_up,
    source_frame,
    validate_table,
)

_LOG = logging.getLogger(__name__)

_KINDS = ("missing", "extra", "different")


def _col(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


class SparkLooks:
    """The looks of ``run``'s validator thread, on ``run``'s Spark session and state store."""

    def __init__(
        self,
        spark: SparkSession,
        config: Config,
        store: StateStore,
        tables: Sequence[str],
        repairer: Repair | None,
    ) -> None:
        self.spark = spark
        self.config = config
        self.store = store
        self.names = list(tables)
        self.repairer = repairer

    def tables(self) -> list[str]:
        """The LIVE ones of ``run``'s tables."""
        return live_tables(self.store, self.names)

    def rows(self, table: str) -> int | None:
        """The table's estimated rows on its replica (the catalog's statistic); None (logged) if
        unreadable."""
        try:
            return estimated_rows(self.config, table)
        except Exception as exc:  # counted as empty: the rotation still reaches it
            _LOG.warning("table %s: continuous validation cannot estimate its rows: %s", table,
                         describe_failure(exc))
            return None

    def facts(self, table: str) -> TableFacts | None:
        """The table's estimated rows and integral key bounds on its replica; None (logged) if unreadable."""
        try:
            rows, bounds = key_facts(self.spark, self.config, table)
        except Exception as exc:  # a JDBC job's error too: the rotation must not stall on one table
            _LOG.warning("table %s: continuous validation passes it by this round: %s", table,
                         describe_failure(exc))
            return None
        return TableFacts(rows, bounds)

    def check(self, piece: Slice) -> SliceResult:
        """Compare ``piece`` in two looks; mark (and repair) what they confirm."""
        name = piece.table
        bounded = piece.key_range.lo is not None or piece.key_range.hi is not None
        settings = self.config.validation
        options = ValidateOptions(max_keys=settings.max_keys, key_range=piece.key_range if bounded else None)
        result = SliceResult(name, piece.index, piece.count, piece.key_range)
        use_pool(self.spark, VALIDATION_POOL)
        kept: list[DataFrame] = []

        def keep(rows: DataFrame) -> DataFrame:
            kept.append(self._bounded(rows).cache())
            return kept[-1]

        try:
            # A slice's rows are about a budget's worth; a table compared whole is not kept (every row of
            # every column): its first look reads the table again.
            keeping = keep if bounded else self._bounded
            found = validate_table(
                self.spark, self.config, self.store, name, options, keep_lake=keeping,
                turn=lambda: self._turn(name),
            )
            return self._judge(piece, options, found, kept[0] if kept else None, result)
        finally:
            for rows in kept:
                rows.unpersist()

    def _judge(
        self,
        piece: Slice,
        options: ValidateOptions,
        found: ValidateResult,
        first_rows: DataFrame | None,
        result: SliceResult,
    ) -> SliceResult:
        """Take the second look at the first look's candidates (``first_rows``: the lake's rows the
        comparison read, None if not kept) and act on what it confirms."""
        name = piece.table
        result.caught_up = found.caught_up
        counts = {k: getattr(found, f"{k}_count") for k in _KINDS}
        result.candidates = sum(counts.values())
        result.too_many = any(counts[k] > len(getattr(found, k)) for k in _KINDS)
        if found.duplicate_count:
            result.confirmed["duplicate"] = found.duplicate_count
        if not found.caught_up:
            _LOG.info("table %s: slice %d/%d not judged: the lake did not catch up", name, piece.index + 1,
                      piece.count)
            return result
        listed = {k: [json_key(key) for key in getattr(found, k)] for k in _KINDS}
        confirmed: list[dict[str, Any]] = []
        if any(listed.values()):
            counts, confirmed = self._second_look(name, listed, first_rows, options)
            result.confirmed.update(counts)
        if result.differing:
            self._act(name, piece, result, confirmed)
        return result

    def _second_look(
        self,
        name: str,
        listed: Mapping[str, list[dict[str, Any]]],
        kept: DataFrame | None,
        options: ValidateOptions,
    ) -> tuple[dict[str, int], list[dict[str, Any]]]:
        """The candidates ``listed`` (JSON keys by kind) the second look confirms: counted by kind, and
        their keys as JSON values.  The first look reads them from ``kept``, the rows the comparison
        read (else from the table, read again); the second reads the slice again (a table whose files
        are cut by key ranges reads those that can hold it)."""
        lake = load_format(self.spark, self.config.lake.format)
        path = self.store.current_copy(name).path
        key_fields = list(lake.record_key_fields(path) or ())
        if not key_fields:
            raise BootstrapError(f"table {name}: the lake table at {path} names no record key fields")
        facts = format_facts(self.config.lake.format)
        with self._turn(name):  # from the kept rows; a table compared whole is read (listed) again
            stored = kept if kept is not None else self._bounded(lake.read(path))
            key_type = StructType([stored.schema[k] for k in key_fields])
            values = typed_keys(self.spark, key_type, [k for keys in listed.values() for k in keys], name)
            missing = typed_keys(self.spark, key_type, listed["missing"], name)
            first = _lake_looks(stored, key_type, values, None, self.config.lake.format)
        held_first = {facts.key_identity(v) for v in missing}
        frame, _, names, _, topic = source_frame(self.spark, self.config, name, ValidateOptions(), values)
        lake_types = {f.name: f.dataType for f in stored.schema.fields}
        columns = [n for n in names if n in lake_types]
        frame = frame.select(*[_col(n).cast(lake_types[n]).alias(n) for n in columns])
        frame = rows_of_keys(frame, key_type, values, self.config.lake.format)
        value_columns = [n for n in columns if n not in key_fields]
        source = {
            facts.key_identity(tuple(row[k] for k in key_fields)): row[HASH]
            for row in hashed(frame, key_fields, value_columns).collect()
        }
        streamed = streamed_point(self.config, name)
        timeout = ValidateOptions().catch_up_timeout
        if not lake_caught_up(self.spark, self.config, self.store, name, topic, streamed.ends, timeout):
            _LOG.info("table %s: second look not judged: the lake did not reach %s", name, streamed.point)
            return {}, []
        with self._turn(name):  # from the listing of the lake's files on
            again = self._bounded(lake.read(path))
            if options.key_range is not None:
                again = again.where(options.key_range.column(_col(key_fields[0])))
            second = _lake_looks(again, key_type, values, value_columns, self.config.lake.format)
        keeps_deletes = select_targets(self.config, (name,))[0].soft_deletes
        by_identity = {facts.key_identity(v): v for v in values}
        confirmed = confirmed_keys(by_identity, first, second, held_first, source, keeps_deletes)
        counts: dict[str, int] = {}
        for kind in confirmed.values():
            counts[kind] = counts.get(kind, 0) + 1
        keys = [json_key(dict(zip(key_fields, by_identity[k], strict=True))) for k in confirmed]
        return counts, keys

    def _bounded(self, rows: DataFrame) -> DataFrame:
        """The lake's ``rows`` read by at most as many tasks at once as a background step may run
        (:func:`~cdc_lake.spark.background.background_tasks`: in-process, every core but the applier's)."""
        tasks = background_tasks(self.spark)
        return rows if tasks is None else rows.coalesce(tasks)

    def _turn(self, name: str) -> AbstractContextManager[float]:
        """The application's background turn for a look at ``name`` (a long wait is logged there)."""
        return background_slot(self.spark).turn(f"continuous validation of {name}")

    def _act(self, name: str, piece: Slice, result: SliceResult, keys: list[dict[str, Any]]) -> None:
        """Mark the table and, with ``validation.auto_repair``, repair the confirmed ``keys``."""
        kinds = ", ".join(f"{count} {kind}" for kind, count in sorted(result.confirmed.items()))
        where = piece.key_range.describe()
        self.store.mark_possibly_diverged(
            name, f"continuous validation confirmed {kinds} key(s) in {where} (cdc-lake repair {name})"
        )
        _LOG.warning("table %s: continuous validation confirmed %s key(s) in %s", name, kinds, where)
        if not self.config.validation.auto_repair or self.repairer is None or not keys:
            return
        options = RepairOptions(keys=tuple(keys), max_keys=self.config.validation.max_keys)
        repaired = repair_table(self.spark, self.config, self.store, name, options, self.repairer)
        result.repaired = repaired.keys
        _LOG.info("table %s: repaired %d confirmed key(s) (commit %s)", name, repaired.keys, repaired.commit)


def _lake_looks(
    stored: DataFrame,
    key_type: StructType,
    values: Sequence[tuple[Any, ...]],
    value_columns: Sequence[str] | None,
    lake_format: str,
) -> dict[Hashable, LakeLook]:
    """The lake's rows of the keys ``values`` (soft-deleted ones too), matched by the format's key identity:
    ordering value, liveness and, with ``value_columns``, the values' hash as the source side's is taken."""
    names = key_type.fieldNames()
    facts = format_facts(lake_format)
    rows = rows_of_keys(stored, key_type, values, lake_format)
    digest = F.xxhash64(*[_col(v) for v in value_columns]) if value_columns else F.lit(None)
    soft = _col(SOFT_DELETED_COLUMN) if SOFT_DELETED_COLUMN in stored.columns else F.lit(False)
    picked = rows.select(
        *[_col(n) for n in names],
        _col(ORDERING_COLUMN).alias("_o"),
        (~F.coalesce(soft, F.lit(False))).alias("_live"),
        digest.alias("_h"),
    )
    return {
        facts.key_identity(tuple(row[n] for n in names)): LakeLook(row["_o"], row["_live"], row["_h"])
        for row in picked.collect()
    }
