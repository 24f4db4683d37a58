"""``cdc-lake repair`` makes the keys where the lake differs exact, while the source keeps changing.

Per engine, a LIVE table (bootstrapped, applied) is corrupted behind the pipeline's back, through the lake
format as a stray writer would: rows updated with an ordering value above any the source streams (Hudi's
event-time merge would keep them against every later change), rows updated with a low one, rows removed,
and rows of keys the source never had added.  ``validate --json`` names them (exit 4); ``repair --keys``
of that output, with ``--dry-run`` first (insert, update, delete per key, nothing written), repairs them
while a writer changes the table (some repaired keys among its changes); once the writer stops and the
table is drained, the lake equals the source in every column with all three readers (Spark+Hudi, hudi-rs,
Trino through the catalog), no duplicate key, and ``validate`` matches.

Then a repair interrupted between its removal commit and its batch (the batch's write made to fail):
the table is FAILED naming ``cdc-lake repair TABLE --resume``, ``apply --once`` leaves it alone (the
removed keys stay absent instead of being rebuilt from a replay), and ``repair --resume`` finishes it:
LIVE again and equal to the source.  Last, a repair of a quiet table (nothing new in Kafka: the batch is
the rows read alone; it failed first: the stray commits hold no checkpoint, and the applier resumed from
the bootstrap's watermark, replaying 1,135 offsets, until it resumed from its own latest commit and
marked the table possibly diverged, asserted after the first repair).

The first phase failed on the code before ``repair`` (no such command); the removal is what makes the
high-ordering rows go (without it they stay: ``must_remove`` in tests/unit/apply/test_repair_rules.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from support.bootstrap import (
    ChangeWriter,
    SourceDb,
    apply_until_live,
    assert_lake_equals_source,
    onboard,
    state_of,
    wait_for_schema,
    wait_streamed,
    write_db_config,
)
from support.common import cli_run, load
from support.engines import StackEngine

from cdc_lake.apply.runner import ApplyRunner
from cdc_lake.cli.context import repair_factory
from cdc_lake.config import Config
from cdc_lake.config.runtime import ValidationSettings
from cdc_lake.hudi.format import HudiFormat, hudi_spec
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.columns import DELETED_COLUMN, ORDERING_COLUMN
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.target import target_for
from cdc_lake.spark.background import background_slot
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap import continuous
from cdc_lake_bootstrap.continuous import ContinuousValidation, SliceResult
from cdc_lake_bootstrap.continuous_looks import SparkLooks

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(1200)]

ROWS = 400
HIGH = "9" * 40
LOW = "0" * 39 + "1"


@pytest.fixture(scope="module")
def db(engine: StackEngine, local_stack: LocalStack) -> Iterator[SourceDb]:
    with engine.database(local_stack) as created:
        yield created


def _corrupt(spark: SparkSession, config: Config, table: str, *, high: list[int], low: list[int],
             removed: list[int], extra: list[int]) -> None:
    """Write the lake behind the pipeline's back, as a stray writer would."""
    source, entry = config.table(table)
    spec = hudi_spec(target_for(config, source, entry).spec(("id",)))
    # The rows as the table stores them: the delete marker column too (the upsert's schema needs it).
    lake = read_table(spark, config.lake.table_base_path(table)).withColumn(DELETED_COLUMN, F.lit(False))
    changed = F.concat(F.lit("stray "), F.col("val"))
    # One commit per kind of damage asked for (an empty list writes nothing).
    for keys, ordering in ((high, HIGH), (low, LOW)):
        if keys:
            rows = lake.where(F.col("id").isin(keys)).withColumn("val", changed)
            write_batch(spark, spec, rows.withColumn(ORDERING_COLUMN, F.lit(ordering)), WriteOperation.UPSERT)
    if removed:
        write_batch(spark, spec, lake.where(F.col("id").isin(removed)), WriteOperation.DELETE)
    if extra:
        strays = lake.where(F.col("id").isin([k - 900_000 for k in extra]))
        strays = strays.withColumn("id", F.col("id") + F.lit(900_000))
        write_batch(spark, spec, strays.withColumn(ORDERING_COLUMN, F.lit(HIGH)), WriteOperation.UPSERT)


def _validate(config_path: Path, table: str) -> tuple[int, list[dict[str, Any]]]:
    result = cli_run(config_path, "validate", table, "--buckets", "16", "--json")
    return result.exit_code, json.loads(result.stdout or "[]")


def test_repair_makes_the_differing_keys_exact_while_the_source_changes(
    engine: StackEngine, spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    engine.aware_items(db, "fixed", ROWS)
    config_path = write_db_config(tmp_path, db, [{"name": "fixed"}], str(tmp_path / "lake"))
    onboard(config_path, db.source)
    table = db.qualified("fixed")
    config = load(config_path)
    db.execute(engine_update(db, 1))  # a change registers the topic's schema
    wait_for_schema(config, table)
    assert cli_run(config_path, "bootstrap", table).exit_code == 0
    apply_until_live(spark, config, table)

    high, low, removed, extra = [3, 5, 8], [13, 21], [34, 55], [900_001, 900_002]
    _corrupt(spark, config, table, high=high, low=low, removed=removed, extra=extra)
    code, results = _validate(config_path, table)
    assert code == 4, results
    [found] = results
    assert sorted(k["id"] for k in found["different"]) == sorted(high + low), found
    assert [k["id"] for k in found["missing"]] == removed and [k["id"] for k in found["extra"]] == extra
    keys_file = tmp_path / "differs.json"
    keys_file.write_text(json.dumps(results), encoding="utf-8")

    planned = cli_run(config_path, "repair", table, "--keys", str(keys_file), "--dry-run", "--json")
    assert planned.exit_code == 0, planned.stderr or planned.output
    actions = {a["id"]: a["action"] for a in json.loads(planned.stdout)["actions"]}
    expected = {**dict.fromkeys(high + low, "update"), **dict.fromkeys(removed, "insert")}
    assert actions == {**expected, **dict.fromkeys(extra, "delete")}, actions
    stray = read_table(spark, config.lake.table_base_path(table)).where(F.col("id").isin(high))
    assert all(r["val"].startswith("stray ") for r in stray.collect()), "a dry run wrote something"

    # The writer changes random keys among the first ROWS, the repaired ones among them.
    writer = ChangeWriter(db, "fixed", ROWS, max_transactions=300, pause=0.02).start()
    repaired = cli_run(config_path, "repair", table, "--keys", str(keys_file), "--json")
    assert repaired.exit_code == 0, repaired.stderr or repaired.output
    outcome = json.loads(repaired.stdout)
    assert outcome["keys"] == len(high + low + removed + extra) and outcome["commit"], outcome
    # The stray writer's commits hold no checkpoint: the applier resumed from its own latest commit (not
    # the bootstrap's watermark) and marked the table possibly diverged, naming validate and repair.
    with StateStore.open(config.state_store.url) as store:
        mark = store.require_table(table).possibly_diverged
    assert mark is not None and "made by another writer" in mark and f"cdc-lake repair {table}" in mark, mark
    writer.stop()
    wait_streamed(config, table)
    apply_until_live(spark, config, table)
    assert state_of(config, table) is TableState.LIVE
    assert assert_lake_equals_source(spark, config, db, "fixed") > 0
    assert _validate(config_path, table)[0] == 0
    with StateStore.open(config.state_store.url) as store:
        assert store.require_table(table).possibly_diverged is None, "a clean validate clears the mark"

    # Interrupted between the removal and the batch: the table waits for --resume.
    _corrupt(spark, config, table, high=[89], low=[], removed=[], extra=[900_003])
    original = HudiFormat.write

    def fail_upserts(
        self: HudiFormat, spec: Any, rows: Any, operation: WriteOperation, *a: Any, **k: Any
    ) -> str:
        if operation is WriteOperation.UPSERT:
            raise RuntimeError("the repair's process died here")
        return original(self, spec, rows, operation, *a, **k)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(HudiFormat, "write", fail_upserts)
        stopped = cli_run(config_path, "repair", table)
    assert stopped.exit_code != 0
    with StateStore.open(config.state_store.url) as store:
        info = store.require_table(table)
    assert info.state is TableState.FAILED and info.last_error is not None, info
    assert f"cdc-lake repair {table} --resume" in info.last_error, info.last_error
    lake_ids = {r["id"] for r in read_table(spark, config.lake.table_base_path(table)).collect()}
    assert 89 not in lake_ids and 900_003 not in lake_ids, "the removal commit did not happen"
    db.execute(engine_update(db, 89))
    wait_streamed(config, table)
    applied = cli_run(config_path, "apply", "--once", "--tables", table, "--json")
    (skipped,) = [json.loads(line) for line in applied.stdout.splitlines() if line.startswith("{")]
    assert skipped["status"] == "skipped" and "--resume" in skipped["skipped"], skipped
    assert state_of(config, table) is TableState.FAILED, "the applier applied a table a repair left half done"
    assert 89 not in {r["id"] for r in read_table(spark, config.lake.table_base_path(table)).collect()}

    resumed = cli_run(config_path, "repair", table, "--resume", "--json")
    assert resumed.exit_code == 0, resumed.stderr or resumed.output
    assert state_of(config, table) is TableState.LIVE
    apply_until_live(spark, config, table)
    assert assert_lake_equals_source(spark, config, db, "fixed") > 0

    # A quiet table: nothing new in Kafka, the batch is the rows read alone.
    _corrupt(spark, config, table, high=[144], low=[], removed=[], extra=[])
    one = tmp_path / "one.json"
    one.write_text(json.dumps([{"id": 144}]), encoding="utf-8")
    quiet = cli_run(config_path, "repair", table, "--keys", str(one), "--json")
    assert quiet.exit_code == 0, quiet.stderr or quiet.output
    assert json.loads(quiet.stdout)["offsets"] == 0 and json.loads(quiet.stdout)["commit"], quiet.stdout
    assert assert_lake_equals_source(spark, config, db, "fixed") > 0

    _continuous_validation_confirms_and_repairs(spark, config, db, table)


def _continuous_validation_confirms_and_repairs(
    spark: SparkSession, config: Config, db: SourceDb, table: str
) -> None:
    """``run``'s validator over one cycle (two slices of the id range: the budget is two fifths of the
    table, so each slice has a key range and its first look takes the comparison's kept rows),
    its samples driven here while a thread applies the table as ``run``'s batches do and a writer changes
    ids up to 200 and ids it inserts past 20,000,000: the stray rows, which the writer never touches, are
    confirmed in two looks, marked and repaired (``auto_repair``); the writer's changes, which a first
    look may see, are never confirmed.  Failed first: no validator."""
    # Keys the earlier phases' writer left in place (it moved and deleted some of the first 400); the low
    # ordering value only beats a row the bootstrap wrote and nothing changed since (ordering 0).
    held = {
        r["id"]: r[ORDERING_COLUMN]
        for r in read_table(spark, config.lake.table_base_path(table)).collect()
        if 200 < r["id"] <= ROWS
    }
    pristine = sorted(k for k, ordering in held.items() if not ordering.strip("0"))
    low = pristine[0]
    high, removed, copied = [k for k in sorted(held) if k != low][:3]
    _corrupt(spark, config, table, high=[high], low=[low], removed=[removed], extra=[900_000 + copied])
    settings = ValidationSettings(sample_seconds=1.0, cycle_hours=2.5 / 3600, auto_repair=True)
    checked = config.model_copy(update={"validation": settings})
    source, entry = config.table(table)
    target = target_for(config, source, entry)
    stop = threading.Event()
    failures: list[str] = []

    def apply_as_run_does() -> None:
        with StateStore.open(config.state_store.url) as store:
            runner = ApplyRunner.for_config(spark, store, checked)
            while not stop.is_set():
                outcome = runner.step(target)
                if outcome.error:
                    failures.append(outcome.error)
                stop.wait(0.5)

    applier = threading.Thread(target=apply_as_run_does, daemon=True)
    turn = background_slot(spark)
    looking = f"continuous validation of {table}"
    turns_before = turn.taken[looking]
    # Who held the turn at each lake read the looks planned (Hudi lists the file slices then): a read
    # listed before its turn read slices a compaction could replace, and a clean remove, meanwhile.
    # The repairs' reads are the repair's own (under the apply lock), not a look's.
    looks_thread = threading.current_thread()
    holders_at_reads: list[str | None] = []
    repairing = threading.local()
    hudi_read, act = HudiFormat.read, SparkLooks._act

    def read_noting_the_turn(self: HudiFormat, base_path: str, *, meta_columns: bool = False) -> DataFrame:
        if threading.current_thread() is looks_thread and not getattr(repairing, "on", False):
            holders_at_reads.append(turn.holder)
        return hudi_read(self, base_path, meta_columns=meta_columns)

    def act_noting_the_repair(self: SparkLooks, *args: Any, **kwargs: Any) -> None:
        repairing.on = True
        try:
            act(self, *args, **kwargs)
        finally:
            repairing.on = False
    # No deletes or moves: a key the writer deletes, brings back and deletes again around both looks, with
    # the applier past each look's position, is the one false "missing" the two looks cannot rule out
    # (cdc_lake_bootstrap/continuous.py says so); this phase counts confirmations exactly.  Updates,
    # atomic re-inserts and inserts still change keys between the looks.
    never_absent = ("insert", "update", "update", "reinsert")
    writer = ChangeWriter(
        db, "fixed", 200, max_transactions=400, pause=0.05, new_ids_from=20_000_000, operations=never_absent
    ).start()
    applier.start()
    results: list[SliceResult] = []
    try:
        with StateStore.open(config.state_store.url) as store, pytest.MonkeyPatch.context() as patch:
            patch.setattr(continuous, "MIN_BUDGET_ROWS", 100)
            patch.setattr(HudiFormat, "read", read_noting_the_turn)
            patch.setattr(SparkLooks, "_act", act_noting_the_repair)
            repairer = repair_factory()(spark, store, checked)
            looks = SparkLooks(spark, checked, store, [table], repairer)
            validator = ContinuousValidation(checked, store, looks)
            while not results or validator.rotation is not None:
                results += validator.sample()
                assert len(results) <= 4, results
            mark = store.require_table(table).possibly_diverged
    finally:
        stop.set()
        applier.join(timeout=300)
        writer.stop()
    assert not failures, failures
    assert [r.index for r in results] == list(range(results[0].count)), results
    # Each slice's comparison, and its first and second looks where it had candidates, ran in the turn
    # `run`'s table services take (cdc_lake/spark/background.py): never beside a compaction.
    with_candidates = sum(1 for r in results if r.candidates)
    taken = turn.taken[looking] - turns_before
    assert len(results) + with_candidates <= taken <= len(results) + 2 * with_candidates, (taken, results)
    assert holders_at_reads and set(holders_at_reads) == {looking}, holders_at_reads
    assert results[0].count >= 2, "a slice of a key range keeps its rows for the first look"
    assert all(r.caught_up and r.error is None for r in results), results
    confirmed: dict[str, int] = {}
    for result in results:
        for kind, count in result.confirmed.items():
            confirmed[kind] = confirmed.get(kind, 0) + count
    assert confirmed == {"different": 2, "missing": 1, "extra": 1}, results
    assert sum(r.repaired for r in results) == 4, results
    assert sum(r.candidates for r in results) >= 4, results
    assert mark is not None and "continuous validation confirmed" in mark, mark
    wait_streamed(config, table)
    apply_until_live(spark, config, table)
    assert assert_lake_equals_source(spark, config, db, "fixed") > 0


def engine_update(db: SourceDb, key: int) -> str:
    """An update of ``val`` of ``key`` on ``db``'s primary."""
    if db.engine == "postgres":
        return f"update public.fixed set val = 'after the stop' where id = {key}"
    return f"update fixed set val = 'after the stop' where id = {key}"
