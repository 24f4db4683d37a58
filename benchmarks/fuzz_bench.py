"""The differential fuzzer over many seeds (issue 34): N generated cases per engine through the real pipeline.

Each seed is one case of ``tests/support/fuzz.py`` (read its docstring for what the generator
draws and what is checked): two tables of exact types (one keyed on one column, one on a composite key of
two or three key types, every key type the engine allows), rows with edge values, a workload of
transactions and bulk loads (COPY / LOAD DATA / multi-row INSERT) written before, during (a thread) and
after a real ``cdc-lake bootstrap``; in some cases a real ``cdc-lake apply --once`` SIGKILLed after its
first lake commit; applied until LIVE (on ``--tier 0`` with ``run``'s table-service thread executing
compaction plans beside the applier's commits); then the lake is compared with the source in every column by
Spark+Hudi, the second reader and ``cdc-lake validate``, the record keys are checked for duplicates,
and the record keys the bootstrap wrote against those the applier wrote.  Each seed gets a fresh source
database (its connectors, slots and database dropped afterwards) and a local lake.

A seed that fails is a mismatch: its case (schema and workload as SQL, and the error) is saved to
``tests/integration/data/fuzz_regressions/<engine>-<seed>.json``; ``--replay FILE...`` runs saved cases
again.  Figures (per seed and the totals: seeds, tables, rows, types and key types covered, bulk loads,
crashes drawn and killed while applying, tables ``validate`` reported equal, compaction plans executed,
mismatches) are printed and
written as JSON (``--json``, default ``fuzz-<engine>.json`` in the working directory).
Run it from the repository root with the stack up, under the shared Spark lock::

    flock /tmp/spark.lock .venv/bin/python benchmarks/fuzz_bench.py --engine postgres --seeds 10
        [--first-seed 1000] [--size 1] [--tier 0|1] [--deadline SECONDS] [--json OUT] [--replay FILE...]

Exit status 1 when any seed mismatched.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support.bootstrap import mariadb_db, postgres_db  # noqa: E402
from support.fuzz import FuzzCase, coverage, generate, run_case  # noqa: E402

from cdc_lake.config import Config  # noqa: E402
from cdc_lake.spark import get_spark  # noqa: E402
from cdc_lake.stack.manager import LocalStack  # noqa: E402


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_one(stack: LocalStack, case: FuzzCase, save: bool, tier: int = 1) -> dict[str, Any]:
    """Run ``case`` on a fresh database, its tables in ``tier`` (so in that tier's default layout); its
    figures, and its mismatch (saved when ``save``)."""
    config = Config.default(Path.cwd())
    spark = get_spark(config.spark, config.lake)
    figures: dict[str, Any] = {
        "engine": case.engine,
        "seed": case.seed,
        "tier": tier,
        "tables": [
            {
                "name": t.name,
                "key": t.key_types(),
                "replica_identity": t.replica_identity,
                "columns": len(t.columns),
                "transactions": len(t.before) + len(t.during) + len(t.after),
            }
            for t in case.tables
        ],
        "statements": case.statements(),
        **coverage(case),
    }
    started = time.monotonic()
    database = postgres_db if case.engine == "postgres" else mariadb_db
    try:
        with database(stack) as db, TemporaryDirectory(prefix="fuzz-") as directory:
            result = run_case(spark, db, case, Path(directory), tier=tier)
        figures |= {
            "rows": result.rows,
            "record_keys_compared": result.record_keys_compared,
            "validated": result.validated,
            "compactions": result.compactions,
            "killed": result.killed,
            "mismatch": None,
        }
    except Exception as exc:  # a mismatch or a failure of the pipeline: both are findings
        message = f"{type(exc).__name__}: {exc}"
        figures |= {"rows": {}, "mismatch": message[:4000], "trace": traceback.format_exc()[-3000:]}
        if save:
            case.error = message[:4000]
            figures["saved"] = str(case.save())
    figures["seconds"] = round(time.monotonic() - started, 1)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--engine", choices=("postgres", "mariadb"), required=True)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=1000)
    parser.add_argument("--size", type=int, default=1, help="rows and transactions scale (1: CI size)")
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--tier", type=int, choices=(0, 1), default=1,
        help="the tables' tier, hence layout: 0 MERGE_ON_READ + BUCKET (compaction outside), 1 COPY_ON_WRITE",
    )  # fmt: skip
    parser.add_argument("--replay", type=Path, nargs="+", help="run saved cases instead of seeds")
    parser.add_argument(
        "--avoid-known", action="store_true", help="steer clear of the open findings (see generate())"
    )
    parser.add_argument("--deadline", type=float, default=0, help="stop starting seeds after N seconds")
    args = parser.parse_args(argv)
    stack = LocalStack(Config.default(Path.cwd()).stack)
    if args.replay:
        cases = [FuzzCase.load(path) for path in args.replay]
    else:
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        cases = [generate(args.engine, seed, args.size, avoid_known=args.avoid_known) for seed in seeds]
    started = time.monotonic()
    results: list[dict[str, Any]] = []
    out = args.json or Path(f"fuzz-{args.engine}.json")
    for case in cases:
        if args.deadline and time.monotonic() - started > args.deadline:
            _log(f"deadline reached: {len(results)} of {len(cases)} seeds run")
            break
        _log(f"{case.engine} seed {case.seed}: {[t.key_types() for t in case.tables]}")
        figures = run_one(stack, case, save=not args.replay, tier=args.tier)
        results.append(figures)
        rows = sum(figures["rows"].values())
        crash = "" if figures["crash"] is None else f", apply killed {figures['crash']} s after a commit"
        _log(f"  {rows} rows, {len(figures['loads'])} bulk loads{crash}, {figures['seconds']} s")
        _log(f"  mismatch: {figures['mismatch'] or 'none'}")
        out.write_text(json.dumps({"summary": summary(results), "seeds": results}, indent=1, default=str))
    totals = summary(results)
    print(f"engine {args.engine}: {totals['seeds']} seeds, {totals['tables']} tables, {totals['rows']} rows")
    print(f"types covered ({len(totals['types'])}): {', '.join(totals['types'])}")
    print(f"key types covered ({len(totals['key_types'])}): {', '.join(totals['key_types'])}")
    print(f"keys: {', '.join(totals['keys'])}")
    print(f"bulk loads: {totals['bulk_loads']} ({totals['bulk_rows']} rows): {totals['bulk_kinds']}")
    print(f"apply --once SIGKILLed: {totals['crashes']} drawn, {totals['killed']} killed while applying")
    print(f"validate reported equal: {totals['validated']} tables")
    print(f"compaction plans executed beside the applier: {totals['compactions']}")
    print(f"mismatches: {totals['mismatches']}")
    for figures in results:
        if figures["mismatch"]:
            print(f"  seed {figures['seed']}: {figures['mismatch'][:500]} -> {figures.get('saved')}")
    print(f"figures: {out}")
    return 1 if totals["mismatches"] else 0


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The totals over ``results``."""
    loads = [load for r in results for load in r["loads"]]
    return {
        "seeds": len(results),
        "tables": sum(len(r["tables"]) for r in results),
        "rows": sum(sum(r["rows"].values()) for r in results),
        "statements": sum(r["statements"] for r in results),
        "record_keys_compared": sum(r.get("record_keys_compared", 0) for r in results),
        "types": sorted({t for r in results for t in r["types"]}),
        "key_types": sorted({k for r in results for t in r["tables"] for k in t["key"]}),
        "keys": sorted({"+".join(t["key"]) for r in results for t in r["tables"]}),
        "replica_identity": sorted({i for r in results for i in r["replica_identity"]}),
        "bulk_loads": len(loads),
        "bulk_rows": sum(int(load.split()[-1]) for load in loads),
        "bulk_kinds": dict(Counter(" ".join(load.split()[2:-1]) for load in loads)),
        "crashes": sum(1 for r in results if r["crash"] is not None),
        "killed": sum(1 for r in results if r.get("killed")),
        "validated": sum(r.get("validated", 0) for r in results),
        "compactions": sum(r.get("compactions", 0) for r in results),
        "mismatches": sum(1 for r in results if r["mismatch"]),
        "seconds": round(sum(r["seconds"] for r in results), 1),
    }


if __name__ == "__main__":
    sys.exit(main())
