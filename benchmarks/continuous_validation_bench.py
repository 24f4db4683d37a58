"""Continuous validation inside ``cdc-lake run``: its CPU against the applier's, and how soon it finds a
planted divergence (issue 38's goals: at most 5 % of the applier's CPU at the defaults; a divergence found
within one sampling period).

The table (``bootstrap_bench``'s) is created on the Postgres primary with ``--rows`` rows, onboarded as
tier 0, bootstrapped and applied until LIVE.  A writer updates a random key's ``val`` at ``--rate`` changes
per second throughout.  Then arms of ``--minutes`` each, ``off`` and ``on`` in turn for ``--pairs`` pairs
(off, on, off, on: the machine's drift moves both alike), each a ``cdc-lake run`` process of its own:

- ``off``: ``validation.continuous: false``;
- ``on``: continuous validation at the defaults (a sample every 300 s, a cycle of 24 h), or at
  ``--sample-seconds`` / ``--cycle-hours``.

An arm's CPU is its process tree's user and system seconds (the Python driver, the Spark JVM, its Python
workers), read from ``/proc`` every 2 s (each process's last reading counts, so a worker that ended early
still counts).  In an ``on`` arm, once a sample recorded where the rotation stands, one key of the next
slice it will compare is corrupted in the lake (a stray update with an ordering value above any the source
streams, under the table's apply lock); the seconds until the table is marked ``continuous validation
confirmed`` are the detection time, against ``sample_seconds``.  The figures: CPU seconds per arm, the
``on / off`` ratio per pair and its median, each ``on`` arm's samples and detection time.  Run it with the
stack up::

    .venv/bin/python benchmarks/continuous_validation_bench.py --rows 1000000 --rate 500 --minutes 12 \\
        --pairs 2 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bootstrap_bench import TABLE, bench_database
from repair_bench import Writer, _cli, _log, stray_write

from cdc_lake.config import Config, load_config
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.continuous import SAMPLE_RUN

_TICKS = os.sysconf("SC_CLK_TCK")


def _tree(root: int) -> dict[int, float]:
    """CPU seconds (user + system) of ``root`` and every process below it, by pid."""
    parents: dict[int, int] = {}
    seconds: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        seconds[pid] = (int(fields[11]) + int(fields[12])) / _TICKS
    wanted, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in wanted]
        wanted.update(children)
        frontier.extend(children)
    return {pid: seconds[pid] for pid in wanted if pid in seconds}


def _next_key(store: StateStore, table: str) -> int | None:
    """A key of the slice the rotation compares next (None until a sample recorded the rotation)."""
    for run in store.list_runs(table, limit=1, command=SAMPLE_RUN):
        rotation = run.detail.get("rotation") or {}
        slices, index = rotation.get("slices") or [], int(rotation.get("slice_index") or 0)
        if rotation.get("table") != table or index >= len(slices):
            return None
        lo, hi = slices[index]
        return max(1, lo if lo is not None else (hi - 1 if hi is not None else 1))
    return None


def _arm(name: str, config_path: Path, table: str, minutes: float, plant: bool) -> dict[str, Any]:
    """One ``run`` process for ``minutes``: its CPU, and (``plant``) the planted key's detection."""
    config = load_config(config_path)
    with StateStore.open(config.state_store.url) as store:
        store.clear_possibly_diverged(table)
        before = len(store.list_runs(table, limit=10_000, command=SAMPLE_RUN))
    log = (config_path.parent / f"run-{name}.log").open("ab")
    service = subprocess.Popen(
        [sys.executable, "-m", "cdc_lake", "--config", str(config_path), "run"], stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )
    cpu: dict[int, float] = {}
    figures: dict[str, Any] = {"arm": name}
    planted_at: float | None = None
    began = time.monotonic()
    try:
        while time.monotonic() - began < minutes * 60:
            cpu.update(_tree(service.pid))
            if plant:
                with StateStore.open(config.state_store.url) as store:
                    if planted_at is None and (key := _next_key(store, table)) is not None:
                        stray_write(config, table, [key], [])
                        planted_at = time.monotonic()
                        figures["planted_key"] = key
                        _log(f"{name}: key {key} corrupted in the lake, in the next slice")
                    mark = store.require_table(table).possibly_diverged or ""
                    if planted_at is not None and "continuous validation confirmed" in mark:
                        figures.setdefault("detected_seconds", round(time.monotonic() - planted_at, 1))
            time.sleep(2)
    finally:
        service.send_signal(signal.SIGTERM)
        service.wait(180)
    figures["cpu_seconds"] = round(sum(cpu.values()), 1)
    figures["seconds"] = round(time.monotonic() - began, 1)
    with StateStore.open(config.state_store.url) as store:
        recorded = store.list_runs(table, limit=10_000, command=SAMPLE_RUN)
    samples = recorded[: len(recorded) - before]  # the newest first: this arm's
    figures["samples"] = len(samples)
    figures["sample_seconds"] = [r.detail.get("seconds") for r in reversed(samples)]
    _log(f"{name}: {figures}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=500)
    parser.add_argument("--minutes", type=float, default=12.0, help="each arm's length")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--sample-seconds", type=float, help="validation.sample_seconds (else its default)")
    parser.add_argument("--cycle-hours", type=float, help="validation.cycle_hours (else its default)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    stack = LocalStack(Config.default(Path.cwd()).stack)
    validation: dict[str, Any] = {}
    if args.sample_seconds is not None:
        validation["sample_seconds"] = args.sample_seconds
    if args.cycle_hours is not None:
        validation["cycle_hours"] = args.cycle_hours
    figures: dict[str, Any] = {
        "rows": args.rows, "rate": args.rate, "minutes": args.minutes, "validation": validation, "arms": []
    }
    with bench_database("postgres", stack, args.rows, None) as bench:
        entry = bench.source_entry()
        entry["tables"] = [{**entry["tables"][0], "tier": 0}]
        on_path = bench.write_config("validation", {bench.source: entry}, {"validation": validation})
        # The same state store and lake, continuous validation off.
        off = yaml.safe_load(on_path.read_text())
        off["validation"] = {**off.get("validation", {}), "continuous": False}
        off_path = on_path.with_name("off.yaml")
        off_path.write_text(yaml.safe_dump(off, sort_keys=False))
        table = f"{bench.source}.{bench.schema_table}"
        _cli(on_path, "onboard", bench.source)
        with stack.postgres_primary.connect(bench.database) as conn:
            conn.autocommit = True
            conn.execute(f"update public.{TABLE} set val = val where id = 1")  # registers the schema
        _log(f"bootstrapping {table}")
        _cli(on_path, "bootstrap", table, "--apply")
        writer = Writer(bench, args.rate)
        writer.start()
        try:
            for pair in range(args.pairs):
                off = _arm(f"off-{pair}", off_path, table, args.minutes, plant=False)
                on = _arm(f"on-{pair}", on_path, table, args.minutes, plant=True)
                on["over_off"] = round(on["cpu_seconds"] / off["cpu_seconds"], 3)
                figures["arms"] += [off, on]
        finally:
            writer.stop.set()
            writer.join(30)
        figures["writer_changes"] = writer.changes
    ratios = [a["over_off"] for a in figures["arms"] if "over_off" in a]
    figures["median_on_over_off"] = statistics.median(ratios)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
