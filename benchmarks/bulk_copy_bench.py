"""The exactly-once issue's first measured scenario at full size: bulk COPYs and key changes under run.

A tier-0 Postgres table of 1,000 rows is onboarded and bootstrapped; ``cdc-lake run`` applies it
continuously while the primary takes four ``COPY ... FROM STDIN`` of 40,000 rows each, each followed
by ``UPDATE ... SET id = id + 5000000`` of 6 of the copied rows (a primary-key change: Debezium's
delete + tombstone + create, one position).  Rows of one COPY heap page share one WAL position, so
batch ends fall inside shared-position groups: the case that lost 277-378 of 161,000 rows before the
re-send fix.  Then ``cdc-lake validate`` is polled until the lake equals the source (or the timeout),
``run`` is stopped with SIGTERM and ``validate`` runs once more.  Printed and written (``--json``):
source and lake rows, missing and differing counts, seconds from the last write to an equal lake.
CI runs the same shape at reduced size (``tests/integration/test_apply_batch_cuts.py``).  Run it
with the stack up, from the stack's directory::

    .venv/bin/python benchmarks/bulk_copy_bench.py [--copies 4] [--rows-per-copy 40000] [--json out.json]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bootstrap_bench import TABLE, bench_database
from validate_bench import _cli

from cdc_lake.config import Config
from cdc_lake.stack.manager import LocalStack

KEY_SHIFT = 5_000_000
MOVED_PER_COPY = 6


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _validate(config_path: Path, table: str) -> dict[str, Any]:
    _, out = _cli(config_path, "validate", table, "--json")
    (result,) = json.loads(out)
    return dict(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000, help="rows before the copies")
    parser.add_argument("--copies", type=int, default=4)
    parser.add_argument("--rows-per-copy", type=int, default=40_000)
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for the lake to become equal")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    stack = LocalStack(Config.default(Path.cwd()).stack)
    with bench_database("postgres", stack, args.rows, None) as bench:
        entry = bench.source_entry()
        entry["tables"][0]["tier"] = 0
        config_path = bench.write_config("bulk", {bench.source: entry})
        table = f"{bench.source}.{bench.schema_table}"
        _cli(config_path, "onboard", bench.source)
        _log(f"bootstrapping {table}")
        _cli(config_path, "bootstrap", table)
        log = (bench.work / "run.log").open("w")
        runner = subprocess.Popen(
            [sys.executable, "-m", "cdc_lake", "--config", str(config_path), "run"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            next_key = args.rows + 1
            with stack.postgres_primary.connect(bench.database) as conn:
                for copy in range(args.copies):
                    first = next_key
                    with (
                        conn.cursor() as cur,
                        cur.copy(
                            f"copy public.{TABLE} (id, grp, val, amount, updated, flag) from stdin"
                        ) as rows,
                    ):
                        for key in range(first, first + args.rows_per_copy):
                            when = dt.datetime(2024, 1, 1)
                            rows.write_row((key, key % 10, f"copied-{key}", key / 7, when, key % 2 == 0))
                    conn.commit()
                    next_key += args.rows_per_copy
                    conn.execute(
                        f"update public.{TABLE} set id = id + %s where id between %s and %s",
                        (KEY_SHIFT, first, first + MOVED_PER_COPY - 1),
                    )
                    conn.commit()
                    _log(f"copy {copy + 1}: {args.rows_per_copy:,} rows, {MOVED_PER_COPY} keys moved")
            written = time.monotonic()
            deadline = written + args.timeout
            while True:
                result = _validate(config_path, table)
                if result["matches"] or time.monotonic() > deadline:
                    break
                _log(f"not yet equal: source {result['source_rows']:,}, lake {result['lake_rows']:,}")
                time.sleep(10)
            equal_after = time.monotonic() - written
        finally:
            runner.send_signal(signal.SIGTERM)
            runner.wait(timeout=180)
            log.close()
        final = _validate(config_path, table)
    figures = {
        "rows_before": args.rows,
        "copies": args.copies,
        "rows_per_copy": args.rows_per_copy,
        "keys_moved": args.copies * MOVED_PER_COPY,
        "source_rows": final["source_rows"],
        "lake_rows": final["lake_rows"],
        "matches": final["matches"],
        "missing": final["missing_count"],
        "extra": final["extra_count"],
        "different": final["different_count"],
        "seconds_to_equal": round(equal_after, 1),
        "run_exit_code": runner.returncode,
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    return 0 if final["matches"] else 1


if __name__ == "__main__":
    sys.exit(main())
