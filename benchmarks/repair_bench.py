"""``cdc-lake repair`` against ``cdc-lake rebootstrap`` on one table under writes: wall time, side by side.

The table (``bootstrap_bench``'s: id, grp, val, amount, updated, flag) is created on the Postgres primary
with ``--rows`` rows, onboarded as tier 0, bootstrapped and applied until LIVE, and ``cdc-lake run``
applies it from then on (a process of its own).  A writer updates random keys at ``--rate`` changes per
second (one row per transaction).  Then:

1. ``--keys`` rows are corrupted in the lake behind the pipeline's back (half updated with an ordering
   value above any the source streams, half removed); with the writer paused (``validate`` compares at
   a common point, and rows changed meanwhile would count as differences), ``validate --json`` names
   them; the writer resumes and ``repair --keys`` of that output runs under it (timed);
2. the same corruption again, then ``rebootstrap`` of the table under the writer (timed, until switched).

After each, the writer pauses and ``validate`` (waiting for ``run`` to drain the topic) must match
(exit 0): a run that ends inexact prints no result.  The ratio is repair / rebootstrap
in the same run.  ``--layout`` names the table's layout (``benchmarks/layouts.py``; the product's
default when omitted).  Run it with the stack up::

    .venv/bin/python benchmarks/repair_bench.py --rows 1000000 --keys 100 --rate 500 \
        [--layout mor-bucket-async] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
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
from layouts import LAYOUTS

from cdc_lake.cli.main import cli
from cdc_lake.config import Config, load_config
from cdc_lake.hudi.format import hudi_spec
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.columns import DELETED_COLUMN, ORDERING_COLUMN
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.target import target_for
from cdc_lake.spark import get_spark
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.locks import LockPurpose, waited_table_lock
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
    """Half the keys updated with an ordering value above any the source streams, half removed."""
    half = len(keys) // 2
    stray_write(config, table, keys[:half], keys[half:])


def stray_write(config: Config, table: str, updated: list[int], removed: list[int]) -> None:
    """The ``updated`` keys' rows given ``val`` 'stray' and an ordering value above any the source streams
    (every later change of the key loses to it), the ``removed`` keys' rows deleted, in the table's current
    copy (a rebootstrap moves it), as a stray writer would."""
    spark = get_spark(config.spark, config.lake)
    source, entry = config.table(table)
    with StateStore.open(config.state_store.url) as store:
        path = store.current_copy(table).path
    spec = hudi_spec(replace(target_for(config, source, entry), base_path=path).spec(("id",)))
    # Under the table's apply lock, in turn: Hudi runs single-writer, and `run` applies the table meanwhile.
    with waited_table_lock(config.state_store.url, LockPurpose.APPLY, table, 300) as lock:
        if not lock:
            raise RuntimeError(f"{table}: the apply lock stayed held for 300 s")
        lake = read_table(spark, path).withColumn(DELETED_COLUMN, F.lit(False))
        changed = lake.where(F.col("id").isin(updated)).withColumn("val", F.lit("stray"))
        stray = changed.withColumn(ORDERING_COLUMN, F.lit("9" * 40))
        write_batch(spark, spec, stray, WriteOperation.UPSERT)
        if removed:
            write_batch(spark, spec, lake.where(F.col("id").isin(removed)), WriteOperation.DELETE)


def _validate(config_path: Path, table: str, writer: Writer, ok: tuple[int, ...]) -> str:
    """``validate --json`` with the writer paused (its output); the writer resumes after."""
    writer.hold.set()
    time.sleep(3)
    try:
        code, out = _cli(config_path, "validate", table, "--json", "--max-keys", "100000", ok=(0, 4))
    finally:
        writer.hold.clear()
    if code not in ok:
        raise RuntimeError(f"validate exited {code}: {out[:2000]}")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--layout", choices=sorted(LAYOUTS), help="default: the product's")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    stack = LocalStack(Config.default(Path.cwd()).stack)
    figures: dict[str, Any] = {"rows": args.rows, "keys": args.keys, "rate": args.rate, "layout": args.layout}
    lake = {} if args.layout is None else LAYOUTS[args.layout]
    with bench_database("postgres", stack, args.rows, None) as bench:
        entry = bench.source_entry()
        entry["tables"] = [{**entry["tables"][0], "tier": 0}]
        # Continuous validation off: its samples would take CPU from one arm and not the other (its own
        # cost is benchmarks/continuous_validation_bench.py's).
        config_path = bench.write_config(
            "repair", {bench.source: entry}, {"validation": {"continuous": False}, "lake": lake}
        )
        config = load_config(config_path)
        table = f"{bench.source}.{bench.schema_table}"
        _cli(config_path, "onboard", bench.source)
        with stack.postgres_primary.connect(bench.database) as conn:
            conn.autocommit = True
            conn.execute(f"update public.{TABLE} set val = val where id = 1")  # registers the schema
        _log(f"bootstrapping {table}")
        _cli(config_path, "bootstrap", table, "--apply")
        log = (Path(bench.work) / "run.log").open("ab")
        service = subprocess.Popen(
            [sys.executable, "-m", "cdc_lake", "--config", str(config_path), "run"], stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True,
        )
        writer = Writer(bench, args.rate)
        writer.start()
        try:
            keys = random.sample(range(1, args.rows + 1), args.keys)
            _corrupt(config, table, keys)
            differs = Path(bench.work) / "differs.json"
            _log("validate: naming the corrupted keys")
            started = time.monotonic()
            differs.write_text(_validate(config_path, table, writer, (4,)), encoding="utf-8")
            figures["validate_seconds"] = round(time.monotonic() - started, 1)
            _log(f"repair of {args.keys} keys under {args.rate} changes/s")
            started = time.monotonic()
            _, out = _cli(config_path, "repair", table, "--keys", str(differs), "--json")
            figures["repair_seconds"] = round(time.monotonic() - started, 1)
            figures["repair"] = json.loads(out)
            _log(f"repaired in {figures['repair_seconds']} s; validate")
            _validate(config_path, table, writer, (0,))
            _corrupt(config, table, keys)
            _log(f"rebootstrap under {args.rate} changes/s")
            started = time.monotonic()
            _cli(config_path, "rebootstrap", table, "--reason", "benchmark")
            figures["rebootstrap_seconds"] = round(time.monotonic() - started, 1)
            _log(f"re-bootstrapped in {figures['rebootstrap_seconds']} s; validate")
            _validate(config_path, table, writer, (0,))
        finally:
            writer.stop.set()
            writer.join(30)
            service.send_signal(signal.SIGTERM)
            service.wait(120)
        figures["writer_changes"] = writer.changes
    figures["repair_over_rebootstrap"] = round(figures["repair_seconds"] / figures["rebootstrap_seconds"], 3)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
