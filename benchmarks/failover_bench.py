"""A Postgres failover on a ``--rows`` table: repaired (``onboard --after-failover``, ``repair``) against
copied again (``offboard``, ``onboard``, ``rebootstrap``), wall time side by side in one run.

The table (``bootstrap_bench``'s) is onboarded as tier 0 and bootstrapped until LIVE.  A writer updates
random keys at ``--rate`` per second on the primary; the stack's replica stops receiving WAL, the old
primary commits ``--lost-seconds`` of changes only it will ever have (Debezium streams them and the lake
applies them), stops, and the replica is promoted; the writer goes on on the new primary (changes before
any slot exists there) and the stack rebuilds its pair (the old primary's server follows the new one).

1. The repair path, timed from ``offboard`` to the end of ``repair``: the config on the new pair,
   ``offboard``, ``onboard --after-failover``, ``cdc-lake run`` (a process of its own) until the table is
   LIVE, ``repair`` (validate's keys and those above the fork).  Then ``run`` drains and ``validate`` must
   match (exit 0), with the writer paused.
2. The copy path on the same table (docs/runbooks/position-lost.md's), timed from ``offboard`` to the
   switch: ``offboard --drop-slot``, ``onboard``, ``rebootstrap`` (the lake copy is kept until the new one is
   switched in) under the writer and ``run``; ``validate`` must match.

A run that ends inexact prints no result.  The stack's pair is restored at the end.  Run it with the
stack up::

    .venv/bin/python benchmarks/failover_bench.py --rows 1000000 --rate 100 [--json out.json]
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
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bootstrap_bench import TABLE, Bench, bench_database
from repair_bench import _cli, _log

from cdc_lake.config import Config, load_config
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.postgres import PostgresServer, restore_pair
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore


class Writer(threading.Thread):
    """Updates a random key's ``val`` at ``rate`` per second on ``server`` (switchable) until stopped;
    ``hold`` pauses it.  A failed statement (the server stopping under it) is retried on the next one."""

    def __init__(self, bench: Bench, server: PostgresServer, rate: int) -> None:
        super().__init__(name="writer", daemon=True)
        self.bench, self.server, self.rate = bench, server, rate
        self.stop, self.hold = threading.Event(), threading.Event()
        self.changes = 0

    def run(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set():
            server = self.server
            try:
                with server.connect(self.bench.database) as conn:
                    conn.autocommit = True
                    while not self.stop.is_set() and server is self.server:
                        if self.hold.is_set():
                            time.sleep(0.1)
                            continue
                        key = random.randint(1, self.bench.rows)
                        update = f"update public.{TABLE} set val = %s where id = %s"
                        conn.execute(update, (f"w{self.changes}", key))
                        self.changes += 1
                        ahead = self.changes / self.rate - (time.monotonic() - started)
                        if ahead > 0:
                            time.sleep(ahead)
            except Exception:  # the old primary stopping under it: the next server is set
                time.sleep(0.5)


def _state(config: Config, table: str) -> TableState:
    with StateStore.open(config.state_store.url) as store:
        return store.require_table(table).state


def _wait_live(config: Config, table: str, timeout: float = 3600) -> None:
    deadline = time.monotonic() + timeout
    while _state(config, table) is not TableState.LIVE:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{table} not LIVE after {timeout:.0f}s")
        time.sleep(1)


def _run_service(bench: Bench, config_path: Path) -> subprocess.Popen[bytes]:
    log = (Path(bench.work) / "run.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "cdc_lake", "--config", str(config_path), "run"], stdout=log,
        stderr=subprocess.STDOUT, start_new_session=True,
    )


def _stop(service: subprocess.Popen[bytes]) -> None:
    service.send_signal(signal.SIGTERM)
    service.wait(180)


def _validate_quiet(config_path: Path, table: str, writer: Writer) -> None:
    """``validate`` (exit 0 required) with the writer paused, after ``apply --once`` drained the table."""
    writer.hold.set()
    try:
        time.sleep(3)
        _cli(config_path, "apply", "--once")
        _cli(config_path, "validate", table)
    finally:
        writer.hold.clear()


def _config(bench: Bench, name: str, primary: PostgresServer, replica: PostgresServer) -> Path:
    entry = bench.source_entry()
    entry["tables"] = [{**entry["tables"][0], "tier": 0}]
    entry["primary"] = {**entry["primary"], "port": primary.port}
    entry["replica"] = {**entry["replica"], "port": replica.port}
    # The bench's state store and lake by ``name``: one for both phases (the table goes on).
    return bench.write_config(name, {bench.source: entry}, {"validation": {"continuous": False}})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=100)
    parser.add_argument("--lost-seconds", type=float, default=10.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    stack = LocalStack(Config.default(Path.cwd()).stack)
    old, new = stack.postgres_primary, stack.postgres_replica
    figures: dict[str, Any] = {"rows": args.rows, "rate": args.rate, "lost_seconds": args.lost_seconds}
    with bench_database("postgres", stack, args.rows, None) as bench:
        table = f"{bench.source}.{bench.schema_table}"
        config_path = _config(bench, "failover", old, new)
        _cli(config_path, "onboard", bench.source)
        with old.connect(bench.database) as conn:
            conn.autocommit = True
            conn.execute(f"update public.{TABLE} set val = val where id = 1")  # registers the schema
        _log(f"bootstrapping {table}")
        _cli(config_path, "bootstrap", table, "--apply")
        writer = Writer(bench, old, args.rate)
        writer.start()
        failed_over = False
        try:
            time.sleep(5)
            new.stop_receiving()
            failed_over = True
            _log(f"replica cut off: {args.lost_seconds:.0f} s of changes only the old primary has")
            time.sleep(args.lost_seconds)
            writer.hold.set()
            _cli(config_path, "apply", "--once")
            old.stop()
            new.promote()
            writer.server = new
            writer.hold.clear()
            _log("promoted; the stack rebuilds its pair")
            old.follow(new)
            config_path = _config(bench, "failover", new, old)
            config = load_config(config_path)

            _log("the repair path: offboard, onboard --after-failover, run until LIVE, repair")
            started = time.monotonic()
            _cli(config_path, "offboard", bench.source)
            _cli(config_path, "onboard", bench.source, "--after-failover")
            service = _run_service(bench, config_path)
            try:
                _wait_live(config, table)
                figures["recapture_live_seconds"] = round(time.monotonic() - started, 1)
                _, out = _cli(config_path, "repair", table, "--json", "--max-keys", "1000000")
                figures["repair_path_seconds"] = round(time.monotonic() - started, 1)
                repaired = json.loads(out)
                figures["repair"] = {k: repaired[k] for k in ("keys", "above_fork", "source_rows", "seconds")}
                _log(f"repair path {figures['repair_path_seconds']} s ({repaired['keys']} keys); validate")
            finally:
                _stop(service)
            _validate_quiet(config_path, table, writer)

            _log("the copy path: offboard --drop-slot, onboard, rebootstrap")
            started = time.monotonic()
            _cli(config_path, "offboard", bench.source, "--drop-slot")
            _cli(config_path, "onboard", bench.source)
            service = _run_service(bench, config_path)
            try:
                _cli(config_path, "rebootstrap", table, "--reason", "position lost")
                figures["copy_path_seconds"] = round(time.monotonic() - started, 1)
            finally:
                _stop(service)
            _log(f"copy path {figures['copy_path_seconds']} s; validate")
            _validate_quiet(config_path, table, writer)
        finally:
            writer.stop.set()
            writer.join(30)
            if failed_over:
                if new.in_recovery():
                    new.follow(old)
                else:
                    restore_pair(old, new)
        figures["writer_changes"] = writer.changes
    figures["repair_over_copy"] = round(figures["repair_path_seconds"] / figures["copy_path_seconds"], 3)
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
