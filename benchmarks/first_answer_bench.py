"""Time to the first answer of the one-shot verbs: ``validate`` and ``apply --once`` of a small table.

On the running stack, a small Postgres table (``--rows`` rows: id, note, amount, at) is created in a
fresh database, onboarded, bootstrapped and applied until LIVE, each by the ``cdc-lake`` command.  Then,
``--runs`` times in turn (A B C A B C ...), each a process of its own as a user runs it:

(a) a bare SparkSession start with the lake format's jars and settings, as PySpark starts one
    ("session": the machine's figure, the target's yardstick), and as cdc-lake's commands start theirs
    ("session_cdc_lake": ``cdc_lake.spark.get_spark``);
(b) ``cdc-lake validate TABLE`` (the lake caught up: counts and range checksums only);
(c) ``cdc-lake apply --once`` of ``--changes`` messages (one update a transaction, written on the
    primary and streamed by Debezium before the command starts).

A first round is a warm-up and is not counted.  The machine is shared and noisy, so the figures are the
ratios (b)/(a) and (c)/(a) of each round (each against the (a) of its own round), and their medians.
Then (b) and (c) run once more with ``-vv`` (not counted): cdc-lake's own log lines, each with the
seconds since its process started, show where the time goes (session start, the source's read, the
lake's read, the applier's seconds per step).  Figures are printed and written as JSON (``--json``,
default ``first-answer.json`` in the working directory).  Run it from the repository root with the stack up,
under the shared Spark lock::

    flock /tmp/spark.lock .venv/bin/python benchmarks/first_answer_bench.py [--rows 20] [--changes 30]
        [--runs 3] [--json OUT] [--baseline DIR]

``--baseline DIR`` (a tree of an earlier revision: ``git archive REV | tar -x -C DIR``) runs that
revision's (b) and (c) in the same rounds, right beside this checkout's, for a before/after that the
machine's load moves alike.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support.bootstrap import SourceDb, postgres_db, write_db_config  # noqa: E402

from cdc_lake.capture.plan import table_topic  # noqa: E402
from cdc_lake.config import Config, load_config  # noqa: E402
from cdc_lake.kafka.offsets import end_offsets  # noqa: E402
from cdc_lake.stack.manager import LocalStack  # noqa: E402

SESSION = """
import sys
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

from cdc_lake import jvm
from cdc_lake.config import load_config
from cdc_lake.spark import get_spark
from cdc_lake.spark.session import spark_conf

config = load_config(Path(sys.argv[1]))
if sys.argv[2] == "cdc-lake":
    get_spark(config.spark, config.lake)
else:
    jars = jvm.resolve(jvm.spark_jars(pyspark.__version__, config.lake.format))
    builder = SparkSession.builder
    for key, value in spark_conf(config.spark, config.lake, jars).items():
        builder = builder.config(key, value)
    builder.getOrCreate()
"""
"""(a): a SparkSession with the Hudi bundle, started as PySpark starts one: the config's Spark and Hudi
settings and the jars in ``spark.jars``, Spark's default JVM ("session": the machine's figure, the
target's yardstick); with ``cdc-lake`` as its second argument, started as cdc-lake's commands start
theirs (``cdc_lake.spark.get_spark``: the class-sharing archive, the jars on the classpath in local
mode; "session_cdc_lake")."""

_LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\w+) (cdc_lake\S*) (.*)$")


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _cdc_lake() -> str:
    """The ``cdc-lake`` script of the interpreter running this benchmark."""
    return str(Path(sys.executable).with_name("cdc-lake"))


def _run(
    argv: list[str], expect: tuple[int, ...] = (0,), env: dict[str, str] | None = None
) -> tuple[float, str]:
    """Run ``argv`` as a process; its wall seconds and stderr.  Raises when it exits otherwise."""
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT, env=env)
    seconds = time.monotonic() - started
    if done.returncode not in expect:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        raise RuntimeError(f"{' '.join(argv[:6])}... exited {done.returncode}:\n{tail}")
    return seconds, done.stderr


def _verb(config: Path, *args: str) -> list[str]:
    return [_cdc_lake(), "--config", str(config), *args]


def _steps(stderr: str, started: float) -> list[dict[str, Any]]:
    """cdc-lake's own log lines of a ``-vv`` run, each with the seconds since the process started."""
    steps = []
    for line in stderr.splitlines():
        found = _LOG_LINE.match(line)
        if found is None:
            continue
        at = dt.datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        steps.append({"at": round(at - started, 2), "logger": found[3], "message": found[4][:240]})
    return steps


def _profile(argv: list[str]) -> dict[str, Any]:
    """One ``-vv`` run of ``argv``: its wall seconds and its steps."""
    started = time.time()
    seconds, stderr = _run(argv)
    return {"seconds": round(seconds, 2), "steps": _steps(stderr, started)}


class SmallTable:
    """The benchmark's table on the stack: its config, and changes written and streamed on demand."""

    def __init__(self, db: SourceDb, directory: Path, rows: int) -> None:
        self.db = db
        self.rows = rows
        db.execute(
            "create table public.items (id bigint primary key, note text, amount numeric(10, 2), "
            "at timestamptz not null)",
            f"insert into public.items select g, 'n' || g, g / 4.0, timestamptz '2024-01-01 00:00Z' "
            f"+ g * interval '1 minute' from generate_series(1, {rows}) g",
        )
        self.config_path = write_db_config(
            directory / "cfg", db, [{"name": "items", "tier": 1}], str(directory / "lake")
        )
        self.config: Config = load_config(self.config_path)
        self.name = db.qualified("items")
        source, table = self.config.table(self.name)
        self.topic = table_topic(source, table)
        self._written = 0

    def published(self) -> int:
        """Messages in the table's topic now."""
        kafka = self.config.kafka
        return sum(end_offsets(kafka.bootstrap_servers, self.topic, extra=dict(kafka.consumer)).values())

    def change(self, count: int, timeout: float = 120.0) -> None:
        """Update ``count`` rows, one transaction each, and wait until Debezium published them all."""
        before = self.published()
        self.db.execute_transactions(
            [
                [f"update public.items set note = 'c{self._written + i}' where id = {i % self.rows + 1}"]
                for i in range(count)
            ]
        )
        self._written += count
        deadline = time.monotonic() + timeout
        while self.published() < before + count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"Debezium did not publish {count} changes within {timeout:.0f} s")
            time.sleep(0.2)


def baseline_env(tree: Path) -> dict[str, str]:
    """The environment that runs ``cdc-lake`` from the source tree ``tree`` (``git archive REV``), not
    this checkout: its ``cdc_lake`` and ``cdc_lake_bootstrap`` come first on the path (the editable
    install's finder is consulted after it)."""
    path = [str(tree), str(tree / "bootstrap"), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def _check_baseline(tree: Path) -> None:
    """Refuse a baseline tree the verbs would not run from."""
    code = "import cdc_lake, cdc_lake_bootstrap; print(cdc_lake.__file__); print(cdc_lake_bootstrap.__file__)"
    found = subprocess.run(
        [sys.executable, "-P", "-c", code], capture_output=True, text=True, check=True, env=baseline_env(tree)
    ).stdout.split()
    if not all(Path(f).resolve().is_relative_to(tree.resolve()) for f in found):
        raise SystemExit(f"--baseline {tree}: the verbs would run {found}, not the tree's")


def _round(table: SmallTable, changes: int, baseline: Path | None, number: int) -> dict[str, float]:
    """One round: (a) session, (b) validate, then ``changes`` changes, (c) apply --once; with a baseline
    tree, (b) and (c) of the tree too, each right beside this checkout's (which goes first alternates)."""
    session, _ = _run([sys.executable, "-c", SESSION, str(table.config_path), "pyspark"])
    ours, _ = _run([sys.executable, "-c", SESSION, str(table.config_path), "cdc-lake"])
    found = {"session": round(session, 2), "session_cdc_lake": round(ours, 2)}
    arms: list[tuple[str, dict[str, str] | None]] = [("", None)]
    if baseline is not None:
        arms.append(("_baseline", baseline_env(baseline)))
        if number % 2:
            arms.reverse()
    for suffix, env in arms:
        seconds, _ = _run(_verb(table.config_path, "validate", table.name), env=env)
        found[f"validate{suffix}"] = round(seconds, 2)
    for suffix, env in arms:
        table.change(changes)
        seconds, _ = _run(_verb(table.config_path, "apply", "--once"), env=env)
        found[f"apply_once{suffix}"] = round(seconds, 2)
    return found


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--changes", type=int, default=30, help="messages each apply --once applies")
    parser.add_argument("--runs", type=int, default=3, help="counted rounds (after one warm-up)")
    parser.add_argument("--json", type=Path, default=Path("first-answer.json"))
    parser.add_argument(
        "--baseline",
        type=Path,
        help="a source tree of an earlier revision (git archive REV | tar -x -C DIR): its validate and "
        "apply --once run in the same rounds, for a before/after on a noisy machine",
    )
    args = parser.parse_args(argv)
    if args.baseline is not None:
        _check_baseline(args.baseline)
    stack = LocalStack(Config.default(ROOT).stack)
    load_before = os.getloadavg()
    with postgres_db(stack) as db, TemporaryDirectory(prefix="first-answer-") as directory:
        table = SmallTable(db, Path(directory), args.rows)
        _log(f"onboarding and bootstrapping {table.name} ({args.rows} rows)")
        _run(_verb(table.config_path, "onboard", db.source))
        _run(_verb(table.config_path, "bootstrap", table.name))
        _run(_verb(table.config_path, "apply", "--once"))
        _log("warm-up round")
        _round(table, args.changes, args.baseline, 0)
        rounds = []
        for number in range(1, args.runs + 1):
            rounds.append(_round(table, args.changes, args.baseline, number))
            _log(f"round {number}: {rounds[-1]}")
        _log("profiles (-vv)")
        validate_steps = _profile(_verb(table.config_path, "-vv", "validate", table.name))
        table.change(args.changes)
        apply_steps = _profile(_verb(table.config_path, "-vv", "apply", "--once"))
    load_after = os.getloadavg()
    figures = {
        "date": dt.date.today().isoformat(),
        "rows": args.rows,
        "changes": args.changes,
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in load_after],
        "rounds": rounds,
        "median_seconds": {key: _median([r[key] for r in rounds]) for key in rounds[0]},
        "baseline": None if args.baseline is None else str(args.baseline),
        "profiles": {"validate": validate_steps, "apply_once": apply_steps},
    }
    verbs = [key for key in rounds[0] if not key.startswith("session")]
    for verb in verbs:
        ratios = [round(r[verb] / r["session"], 2) for r in rounds]
        figures[f"{verb}_over_session"] = ratios
        figures[f"median_{verb}_over_session"] = _median(ratios)
    args.json.write_text(json.dumps(figures, indent=1))
    for verb, profile in figures["profiles"].items():
        print(f"{verb} -vv: {profile['seconds']} s")
        for step in profile["steps"]:
            print(f"  {step['at']:6.2f} s  {step['logger']}: {step['message']}")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    for number, found in enumerate(rounds, 1):
        print(f"round {number}: " + ", ".join(f"{k} {v:.2f} s" for k, v in found.items()))
    print(f"median seconds: {figures['median_seconds']}")
    for verb in verbs:
        ratios, median = figures[f"{verb}_over_session"], figures[f"median_{verb}_over_session"]
        print(f"{verb} / session: {ratios} (median {median})")
    print(f"figures: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
