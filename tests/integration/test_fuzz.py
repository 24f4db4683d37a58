"""The differential fuzzer in CI: one fixed seed per engine, at CI size, through the real pipeline.

``support.fuzz`` generates the seed's table (here one, on a composite key of two columns; the driver's
seeds have two tables, one keyed on one column) and its workload, bulk loads among it (COPY on
Postgres, LOAD DATA on MariaDB, multi-row INSERTs), runs it around a real bootstrap (changes before it,
during it from a thread, after it), applies until LIVE, and checks the lake against the source with
both readers and with ``cdc-lake validate``, the record keys for duplicates, and the bootstrap's record
keys against the applier's.  The SIGKILLed ``apply --once`` the generator draws for some cases is left
to the driver (the CI seeds draw none): it starts a second Spark application, about 50 s.
``benchmarks/fuzz_bench.py`` runs many seeds; a failing seed is saved under
``tests/integration/data/fuzz_regressions/`` and replayed with ``fuzz_bench.py --replay FILE...`` (not
here: each case costs a bootstrap and an apply, and this file's budget is one case per engine).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from support.bootstrap import SourceDb
from support.engines import StackEngine
from support.fuzz import generate, run_case

from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(600)]

CI_SEED = {"postgres": 2, "mariadb": 49}
"""The seed CI runs per engine, chosen for its coverage (see the driver's figures for others): Postgres a
``(real, integer)`` key whose zero is moved to ``-0`` and back, a multi-row INSERT and two COPYs;
MariaDB a ``(year, mediumint)`` key, LOAD DATA during the bootstrap and after it.  Neither draws the
applier's crash."""

CI_TIER = {"postgres": 0, "mariadb": 1}
"""The tier, hence the layout, each engine's CI case runs in: Postgres the tier-0 default (MERGE_ON_READ +
BUCKET, compaction outside the writes, its own connector), MariaDB every other tier's (COPY_ON_WRITE +
GLOBAL_BLOOM); ``fuzz_bench.py --tier`` runs many seeds in either."""

BULK = {"postgres": "copy", "mariadb": "load"}
"""The first word of each engine's bulk load statement."""


@pytest.fixture(scope="module")
def db(engine: StackEngine, local_stack: LocalStack) -> Iterator[SourceDb]:
    with engine.database(local_stack) as created:
        yield created


def test_a_fuzzed_table_and_workload_end_equal_through_bootstrap_and_applier(
    engine: StackEngine, spark: SparkSession, db: SourceDb, tmp_path: Path
) -> None:
    case = generate(engine.name, CI_SEED[engine.name], tables=1, keys=(2,))
    kinds = {s.split()[0] for t in case.tables for txn in (*t.before, *t.during, *t.after) for s in txn}
    assert kinds == {"insert", "update", "delete", BULK[engine.name]}
    assert any(len(txn) > 1 for t in case.tables for txn in t.after)
    assert case.crash is None

    result = run_case(spark, db, case, tmp_path, tier=CI_TIER[engine.name])

    assert all(rows > 100 for rows in result.rows.values()), result.rows
    assert result.record_keys_compared > 10
    assert result.validated == len(case.tables)
    # Tier 0: run's table-service thread executed plans beside the applier's commits (run_case).
    assert (result.compactions > 0) == (CI_TIER[engine.name] == 0), result.compactions
