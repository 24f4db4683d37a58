"""``cdc-lake repair`` against ``cdc-lake rebootstrap`` on one table under writes: wall time, side by side.

The table (``bootstrap_bench``'s: id, grp, val, amount, updated, flag) is created on the Postgres primary
with ``--rows`` rows, onboarded, bootstrapped and applied until LIVE.  A writer updates random keys at
``--rate`` changes per second for the whole run (one row per transaction).  Then, twice:

1. ``--keys`` rows are corrupted in the lake behind the pipeline's back (half updated with an ordering
   value above any the source streams, half removed), ``validate --json`` names them, and
   ``repair --keys`` of that output runs (timed);
2. the same corruption again, then ``rebootstrap`` of the table (timed, until switched and LIVE).

After each, the writer pauses, the table is applied until drained, and ``validate`` must match (exit 0):
the figures of a run that ends inexact are not printed as a result.  The ratio is repair / rebootstrap
in the same run.  Run it with the stack up::

    .venv/bin/python benchmarks/repair_bench.py --rows 1000000 --keys 100 --rate 500 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bootstrap_bench import TABLE, Bench, bench_database

from cdc_lake.cli.main import cli
from cdc_lake.config import Config, load_config
from cdc_lake.hudi.format import hudi_spec
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.columns import DELETED_COLUMN, ORDERING_COLUMN
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.target import target_for
from cdc_lake.spark import get_spark
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _cli(config: Path, *args: str, ok: tuple[int, ...] = (0,)) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    if result.exit_code not in ok:
        shown = result.stderr or result.output
        raise RuntimeError(f"cdc-lake {' '.join(args)} exited {result.exit_code}: {shown}")
    return result.exit_code, result.stdout


class Writer(threading.Thread):
    """Updates a random key's ``val`` at ``rate`` per second on the primary until stopped (``hold``
    pauses it)."""

    def __init__(self, bench: Bench, rate: int) -> None:
        super().__init__(name="writer", daemon=True)
        self.bench, self.rate = bench, rate
        self.stop, self.hold = threading.Event(), threading.Event()
        self.changes = 0

    def run(self) -> None:
        with self.bench.stack.postgres_primary.connect(self.bench.database) as conn:
            conn.autocommit = True
            started = time.monotonic()
            while not self.stop.is_set():
                if self.hold.is_set():
                    time.sleep(0.1)
                    continue
                key = random.randint(1, self.bench.rows)
                conn.execute(f"update public.{TABLE} set val = %s where id = %s", (f"w{self.changes}", key))
                self.changes += 1
                ahead = self.changes / self.rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)


def _corrupt(config: Config, table: str, keys: list[int]) -> None:
    """Half the keys updated with an ordering value above any the source streams, half removed, in the
    table's current copy (a rebootstrap moves it), as a stray writer would."""
    spark = get_spark(config.spark, config.lake)
    source, entry = config.table(table)
    with StateStore.open(config.state_store.url) as store:
        path = store.current_copy(table).path
    spec = hudi_spec(replace(target_for(config, source, entry), base_path=path).spec(("id",)))
    lake = read_table(spark, path).withColumn(DELETED_COLUMN, F.lit(False))
    half = len(keys) // 2
    changed = lake.where(F.col("id").isin(keys[:half])).withColumn("val", F.lit("stray"))
    write_batch(spark, spec, changed.withColumn(ORDERING_COLUMN, F.lit("9" * 40)), WriteOperation.UPSERT)
    write_batch(spark, spec, lake.where(F.col("id").isin(keys[half:])), WriteOperation.DELETE)


def _drain_and_validate(config_path: Path, table: str, writer: Writer) -> None:
    writer.hold.set()
    time.sleep(3)
    for _ in range(60):
        code, out = _cli(config_path, "apply", "--once", "--json", ok=(0, 1))
        if all(json.loads(line).get("offsets", 1) == 0 for line in out.splitlines() if line.startswith("{")):
            break
    code, out = _cli(config_path, "validate", table, "--json", ok=(0, 4))
    writer.hold.clear()
    if code != 0:
        raise RuntimeError(f"the lake differs after the step: {out[:2000]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    stack = LocalStack(Config.default(Path.cwd()).stack)
    figures: dict[str, Any] = {"rows": args.rows, "keys": args.keys, "rate": args.rate}
    with bench_database("postgres", stack, args.rows, None) as bench:
        config_path = bench.write_config("repair", {bench.source: bench.source_entry()})
        config = load_config(config_path)
        table = f"{bench.source}.{bench.schema_table}"
        _cli(config_path, "onboard", bench.source)
        with stack.postgres_primary.connect(bench.database) as conn:
            conn.autocommit = True
            conn.execute(f"update public.{TABLE} set val = val where id = 1")  # registers the schema
        _log(f"bootstrapping {table}")
        _cli(config_path, "bootstrap", table, "--apply")
        writer = Writer(bench, args.rate)
        writer.start()
        try:
            keys = random.sample(range(1, args.rows + 1), args.keys)
            _corrupt(config, table, keys)
            differs = Path(bench.work) / "differs.json"
            _log("validate: naming the corrupted keys")
            started = time.monotonic()
            _, out = _cli(config_path, "validate", table, "--json", ok=(4,))
            figures["validate_seconds"] = round(time.monotonic() - started, 1)
            differs.write_text(out, encoding="utf-8")
            _log(f"repair of {args.keys} keys under {args.rate} changes/s")
            started = time.monotonic()
            _, out = _cli(config_path, "repair", table, "--keys", str(differs), "--json")
            figures["repair_seconds"] = round(time.monotonic() - started, 1)
            figures["repair"] = json.loads(out)
            _drain_and_validate(config_path, table, writer)
            _corrupt(config, table, keys)
            _log(f"rebootstrap under {args.rate} changes/s")
            started = time.monotonic()
            _cli(config_path, "rebootstrap", table, "--reason", "benchmark")
            figures["rebootstrap_seconds"] = round(time.monotonic() - started, 1)
            _drain_and_validate(config_path, table, writer)
        finally:
            writer.stop.set()
            writer.join(30)
        figures["writer_changes"] = writer.changes
    figures["repair_over_rebootstrap"] = round(figures["repair_seconds"] / figures["rebootstrap_seconds"], 3)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
