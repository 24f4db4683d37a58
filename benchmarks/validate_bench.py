"""`cdc-lake validate` on one table of the local stack: wall time and peak memory, one run.

The table (``bootstrap_bench``'s: id, grp, val, amount, updated, flag) is created on the primary,
onboarded and bootstrapped into the lake with ``cdc-lake bootstrap``; then ``validate`` runs twice:

(a) lake equal to the source: counts and range checksums only;
(b) after one row is deleted directly in the lake: the differing range is joined down to its key.

Memory is the peak resident set of the driver (this Python process plus the Spark JVM it started,
sampled every 0.2 s while ``validate`` runs).  Run it with the stack up::

    .venv/bin/python benchmarks/validate_bench.py --rows 1000000 [--buckets 256] [--partitions 8]
        [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from pyspark.sql import functions as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bootstrap_bench import bench_database

from cdc_lake.cli.main import cli
from cdc_lake.config import Config, load_config
from cdc_lake.hudi.format import hudi_spec
from cdc_lake.hudi.writer import read_table, write_batch
from cdc_lake.lake.format import WriteOperation
from cdc_lake.lake.target import target_for
from cdc_lake.spark import get_spark
from cdc_lake.stack.manager import LocalStack


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _rss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


@contextmanager
def peak_rss(pids: list[int]) -> Iterator[Callable[[], int]]:
    """Sample the summed RSS of ``pids`` until the block ends; yields the peak so far."""
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], sum(_rss_bytes(pid) for pid in pids))
            done.wait(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield lambda: peak[0]
    finally:
        done.set()
        thread.join()


def _cli(config: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    if result.exit_code not in (0, 4):
        raise RuntimeError(f"cdc-lake {' '.join(args)} failed: {result.stderr or result.output}")
    return result.exit_code, result.stdout


def _validate(config_path: Path, config: Config, table: str, args: argparse.Namespace) -> dict[str, Any]:
    spark = get_spark(config.spark, config.lake)
    jvm_pid = int(spark.sparkContext._jvm.ProcessHandle.current().pid())  # type: ignore[union-attr]
    with peak_rss([os.getpid(), jvm_pid]) as peak:
        started = time.monotonic()
        code, out = _cli(
            config_path, "validate", table, "--json", "--buckets", str(args.buckets),
            "--partitions", str(args.partitions),
        )
        seconds = time.monotonic() - started
        peak_bytes = peak()
    (result,) = json.loads(out)
    return {
        "exit_code": code,
        "seconds": round(seconds, 1),
        "peak_rss_mib": round(peak_bytes / 2**20),
        "source_rows": result["source_rows"],
        "lake_rows": result["lake_rows"],
        "differing_ranges": result["differing_ranges"],
        "missing": result["missing"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--buckets", type=int, default=256)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    stack = LocalStack(Config.default(Path.cwd()).stack)
    with bench_database("postgres", stack, args.rows, None) as bench:
        config_path = bench.write_config("validate", {bench.source: bench.source_entry()})
        config = load_config(config_path)
        table = f"{bench.source}.{bench.schema_table}"
        _cli(config_path, "onboard", bench.source)
        _log(f"bootstrapping {table}")
        _cli(config_path, "bootstrap", table)
        _log("validate (a): lake equal to the source")
        equal = _validate(config_path, config, table, args)
        _log(json.dumps(equal))
        spark = get_spark(config.spark, config.lake)
        source, entry = config.table(table)
        doomed = read_table(spark, config.lake.table_base_path(table)).where(F.col("id") == args.rows // 2)
        spec = hudi_spec(target_for(config, source, entry).spec(("id",)))
        write_batch(spark, spec, doomed, WriteOperation.DELETE)
        _log("validate (b): one row deleted in the lake")
        differs = _validate(config_path, config, table, args)
        _log(json.dumps(differs))
    figures = {
        "rows": args.rows,
        "buckets": args.buckets,
        "partitions": args.partitions,
        "driver_memory": config.spark.driver_memory,
        "equal": equal,
        "one_row_deleted": differs,
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    named = differs["missing"] == [{"id": args.rows // 2}]
    ok = equal["exit_code"] == 0 and differs["exit_code"] == 4 and named
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
