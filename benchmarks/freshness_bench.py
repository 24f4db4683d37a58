"""Tier-0 freshness per event under random-key updates, inserts and deletes (issue 24, goal 3).

Run it with the stack up, from the stack's directory::

    .venv/bin/python benchmarks/freshness_bench.py [--rows 1000000] [--rates 500] [--seconds 600]
        [--layout default|cow-ri|mor-ri|mor-ri-async|mor-bucket-async] [--spark-conf KEY=VALUE]...
        [--rows-per-bucket N]
        [--kills cold,standby --kill-after S --restart-after N]
        [--bootstrap-under RATE --bootstrap-load-seconds S]
        [--json out.json] [--logs DIR]

1. A Postgres database with a ``--rows``-row table (``bootstrap_bench.bench_database``: ``insert ...
   select generate_series``), onboarded and bootstrapped as users do (``cdc-lake onboard``, ``cdc-lake
   bootstrap``, both as subprocesses), tier 0, in the ``--layout``: ``default`` (COPY_ON_WRITE +
   GLOBAL_BLOOM), ``mor-ri`` (MERGE_ON_READ + RECORD_INDEX, inline compaction every 5 delta commits),
   ``mor-ri-async`` and ``mor-bucket-async`` (MERGE_ON_READ + RECORD_INDEX or the bucket index, the
   compaction planned every 5 delta commits and executed by ``run``'s table-service thread).
2. ``cdc-lake run`` as a subprocess (the real CLI); one row is changed and, once ``run`` has committed
   it (Spark started, one batch done), the load starts ``--warmup`` seconds later.
3. For each rate of ``--rates``: ``pgbench --rate`` for ``--seconds`` with weighted scripts: 70% update
   of a random existing key, 15% insert of a new key, 15% delete of a random existing key (the key at or
   above a random one in 1..rows, so each transaction changes one row), then a wait until ``run`` has
   applied the whole topic.
4. Per event, exact: every commit of the table stores in its metadata the next Kafka offset to apply
   per partition (``cdc_lake.lake.checkpoint``), so the event at offset ``o`` of partition ``p`` became
   visible at the completion time of the first commit whose stored offset for ``p`` exceeds ``o``.  The
   benchmark watches ``.hoodie/timeline`` (every 0.2 s, so no commit is archived unseen) and reads each
   completed commit's offsets and completion time; after the run it reads every change event of the
   topic (the product's decoder) for its source commit time (Debezium ``source.ts_ms``).  Lag = commit
   completion - source commit.  Figures per rate: p50/p95/p99/max over the events whose source commit
   fell in that rate's window, and per 10 s.  Updates overwrite a row, so the lake's rows cannot give
   this; the offsets can, for every event including deletes.
5. At the end ``run`` is stopped (SIGTERM) and ``cdc-lake validate`` compares the lake with the read
   replica (row count, keys, a checksum of every column per key bucket).
6. ``--kills cold,standby,...`` (one per phase, ``none`` for none): SIGKILL of a ``run`` ``--kill-after``
   seconds into the phase.  ``cold``: a new ``run`` starts ``--restart-after`` seconds later (Spark
   starts again).  ``standby``: before the phase a second ``run`` is started beside the first (each batch
   takes the table's apply lock, so the two share the batches and the survivor takes the next one), and
   the older one is killed.  Figure: seconds from the kill to the first commit at which the table's
   freshness (now minus the source commit time of the oldest event not yet visible) is under 15 s.
7. ``--bootstrap-under RATE``: the bootstrap itself runs under the load (issue 35, goal 3's catch-up):
   pgbench at RATE starts after the onboarding and lasts ``--bootstrap-load-seconds``; ``run`` starts as
   soon as ``cdc-lake bootstrap`` returns (its hand-off), without a warm-up.  Figures of that first phase:
   the bootstrap's seconds under load, seconds from the hand-off to the table's LIVE state in the state
   store (``live_after_handoff_seconds``) and to the first commit at which its freshness is under 15 s
   (``fresh_after_handoff_seconds``), then its p50/p99 like any phase.  The ``--rates`` phases follow.

8. A layout whose ``compaction.executor`` is ``job`` (``mor-bucket-job``): ``run``'s table-service thread
   executes none of its plans; ``cdc-lake compact --every 5`` runs beside ``run`` as a process of its
   own, at ``--compact-nice`` (19 by default: the writer takes the cores first), and is stopped with it.

9. ``--no-continuous-validation``: ``run`` without its continuous validation (``validation.continuous:
   false``), whose sample every 300 s reads the table's whole snapshot on the bucket index (no file
   holds a key range): the arm that measures what the sample costs the freshness.
   With it on, the figures list every sample ``run`` took (``samples``: its end, seconds, candidates,
   outcome and error, from the state store's ``validate-sample`` runs), and a failed sample is printed:
   a run whose sample failed did not pay a sample's whole cost.

The load average at start and end is in the figures.  ``--plot PNG`` draws each phase's p99 per 10 s
of source commit time (needs the ``bench`` extra, ``matplotlib``); ``--replot A.json,B.json --plot PNG``
draws earlier runs' figures without measuring.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import datetime as dt
import itertools
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import fastavro
import yaml
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apply_bench import lag_percentiles, per_interval, plotting, run_pgbench
from bootstrap_bench import TABLE, Bench, bench_database
from layouts import LAYOUTS
from process_cpu import Sample, cpu_between, sample

from cdc_lake.apply.decoding import DecodedChange, DecodeSettings, decode_messages
from cdc_lake.config import Config, load_config
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.hudi.options import COMMIT_METADATA_PREFIX
from cdc_lake.kafka.offsets import OffsetRange, end_offsets
from cdc_lake.kafka.reader import KafkaReadSettings, iter_range
from cdc_lake.lake.commit_metadata import OFFSETS_KEY
from cdc_lake.lake.target import select_targets
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import Run
from cdc_lake.state.store import StateStore
from cdc_lake_bootstrap.continuous import SAMPLE_RUN

WORKLOAD = {"update": 70, "insert": 15, "delete": 15}
FRESH_SECONDS = 15.0
"""The freshness a restarted ``run`` must reach again (issue 24, goal 3)."""


class Commit(NamedTuple):
    """A completed apply commit: when it became visible, and the next offset to apply per partition."""

    completion_ms: int
    offsets: dict[int, int]


class Written(NamedTuple):
    """A completed delta commit or compaction of a MERGE_ON_READ table: its completion instant (text)
    and time (ms), and the file groups it wrote (a delta commit's: those it wrote log files to)."""

    completed: str
    completion_ms: int
    file_groups: frozenset[str]


class Event(NamedTuple):
    """One change event of the topic: where it is and its source commit time."""

    partition: int
    offset: int
    source_ms: int


def instant_ms(instant: str) -> int:
    """A Hudi instant time ``yyyyMMddHHmmssSSS`` (this machine's timeline is UTC) in ms since the epoch."""
    stamp = dt.datetime.strptime(instant, "%Y%m%d%H%M%S%f").replace(tzinfo=dt.UTC)
    return round(stamp.timestamp() * 1000)


def completion_ms(file_name: str) -> int:
    """Completion time (ms since the epoch, UTC) in a Hudi 1.x completed instant's file name
    ``<requested>_<completion>.<action>``."""
    return instant_ms(file_name.split(".")[0].split("_")[1])


BATCH_LINE = re.compile(r"\(last (?P<instant>\d{17})\).*?, (?P<seconds>[\d.]+) s(?:: (?P<steps>.*))?$")
"""``run``'s line per applied table (:func:`cdc_lake.apply.commands.describe`): its last commit's instant,
the batches' wall seconds and the steps that took some."""


def batch_steps(lines: Iterable[str], start_ms: int, end_ms: int, minute: int = 60) -> list[dict[str, Any]]:
    """Per ``minute`` seconds of a phase, from ``run``'s lines: the commits started in it and the mean
    seconds of a batch and of each step shown (a step left out of a line counts as 0 there)."""
    windows: dict[int, list[tuple[float, dict[str, float]]]] = {}
    for line in lines:
        found = BATCH_LINE.search(line.rstrip())
        if found is None:
            continue
        at = instant_ms(found["instant"])
        if not start_ms <= at < end_ms:
            continue
        shown = [part.rsplit(" ", 1) for part in (found["steps"] or "").split(", ") if part]
        windows.setdefault((at - start_ms) // (minute * 1000), []).append(
            (float(found["seconds"]), {name: float(value) for name, value in shown})
        )
    figures = []
    for index in sorted(windows):
        batches = windows[index]
        names = list(dict.fromkeys(name for _, steps in batches for name in steps))
        figures.append({
            "from_seconds": index * minute,
            "commits": len(batches),
            "batch_seconds": round(statistics.fmean(seconds for seconds, _ in batches), 2),
            "steps": {n: round(statistics.fmean(b.get(n, 0.0) for _, b in batches), 2) for n in names},
        })  # fmt: skip
    return figures


def event_lags(events: Iterable[Event], commits: Sequence[Commit]) -> list[tuple[Event, int]]:
    """Each event and the completion time (ms) of the first commit that made it visible: the earliest
    commit whose next offset for the event's partition is above the event's offset.

    A single writer commits offsets that never decrease, so per partition the commits in completion
    order are searched by bisection.  Raises ValueError for an event no commit covers.
    """
    ordered = sorted(commits)
    by_partition: dict[int, tuple[list[int], list[int]]] = {}
    for commit in ordered:
        for partition, offset in commit.offsets.items():
            nexts, completions = by_partition.setdefault(partition, ([], []))
            if nexts and offset < nexts[-1]:
                raise ValueError(f"partition {partition}: offsets went back from {nexts[-1]} to {offset}")
            nexts.append(offset)
            completions.append(commit.completion_ms)
    out = []
    for event in events:
        nexts, completions = by_partition.get(event.partition, ([], []))
        index = bisect.bisect_right(nexts, event.offset)
        if index == len(nexts):
            raise ValueError(f"partition {event.partition} offset {event.offset}: no commit applied it")
        out.append((event, completions[index]))
    return out


def freshness_at(at_ms: int, visible: Sequence[tuple[Event, int]]) -> float:
    """The table's freshness at ``at_ms`` in seconds: ``at_ms`` minus the source commit time of the
    oldest event committed at the source by then and not yet visible (0 when none is pending)."""
    pending = [event.source_ms for event, shown in visible if event.source_ms <= at_ms < shown]
    return (at_ms - min(pending)) / 1000 if pending else 0.0


def recovery_seconds(
    kill_ms: int, visible: Sequence[tuple[Event, int]], limit: float = FRESH_SECONDS
) -> float:
    """Seconds from ``kill_ms`` to the first commit completed after it at which the freshness is under
    ``limit``; freshness only falls when a commit completes, so commit completion times are the
    candidates.  Raises ValueError when no commit after the kill gets there."""
    for shown in sorted({shown for _, shown in visible if shown >= kill_ms}):
        if freshness_at(shown, visible) < limit:
            return (shown - kill_ms) / 1000
    raise ValueError(f"freshness never fell under {limit} s after the kill")


def read_optimized_staleness(
    deltas: dict[str, Written], compactions: dict[str, Written], start_ms: int, end_ms: int
) -> float | None:
    """The most a read-optimized reader (base files only: Trino) lagged during ``[start_ms, end_ms]``,
    seconds: at time t, t minus the completion of the oldest delta commit completed by t with a log file
    that no compaction completed by t merged.  A compaction planned at instant ``c`` merges a delta
    commit's logs in the file groups it wrote when the delta commit completed before ``c`` (a plan need
    not cover every file group: ``lake.compaction.plan_io_mb``).  It grows between compaction
    completions, so it peaks just before each and at the end.  ``deltas`` and ``compactions`` are keyed
    by requested instant.  None for a table without delta commits (COPY_ON_WRITE)."""
    if not deltas:
        return None

    def merged(delta: Written, group: str, done: list[tuple[str, Written]]) -> bool:
        return any(group in c.file_groups and planned > delta.completed for planned, c in done)

    def staleness(at: int) -> float:
        done = [(planned, c) for planned, c in compactions.items() if c.completion_ms <= at]
        waiting = [
            d.completion_ms
            for d in deltas.values()
            if d.completion_ms <= at and not all(merged(d, group, done) for group in d.file_groups)
        ]
        return (at - min(waiting)) / 1000 if waiting else 0.0

    moments = [c.completion_ms - 1 for c in compactions.values() if start_ms < c.completion_ms <= end_ms]
    return round(max(staleness(at) for at in [*moments, end_ms]), 1)


def phase_figures(
    visible: Sequence[tuple[Event, int]], start_ms: int, end_ms: int, rate: int
) -> dict[str, Any]:
    """Figures of the events whose source commit fell in ``[start_ms, end_ms)``: changes/s achieved,
    lag percentiles, the commits that made them visible and the time between those, and per 10 s of
    source commit time."""
    chosen = [(event, shown) for event, shown in visible if start_ms <= event.source_ms < end_ms]
    if not chosen:
        raise ValueError(f"no event between {start_ms} and {end_ms}")
    timeline = sorted((event.source_ms / 1000, (shown - event.source_ms) / 1000) for event, shown in chosen)
    shown_at = sorted({shown for _, shown in chosen})
    gaps = [(later - earlier) / 1000 for earlier, later in itertools.pairwise(shown_at)]
    return {
        "rate": rate,
        "changes_per_second": round(len(chosen) / ((end_ms - start_ms) / 1000), 1),
        **lag_percentiles([lag for _, lag in timeline]),
        "commits": len(shown_at),
        "commit_gap_p50_seconds": round(statistics.median(gaps), 1) if gaps else None,
        "commit_gap_max_seconds": round(max(gaps), 1) if gaps else None,
        "timeline": per_interval(timeline, 10),
    }


class CommitWatcher:
    """Polls a table's ``.hoodie/timeline`` and keeps every completed apply commit it sees (compaction
    and bootstrap commits carry no offsets and are left out)."""

    def __init__(self, base_path: Path, poll_seconds: float = 0.2) -> None:
        self.timeline = base_path / ".hoodie" / "timeline"
        self.poll_seconds = poll_seconds
        self.commits: dict[str, Commit] = {}
        self.deltas: dict[str, Written] = {}
        """Delta commits (MERGE_ON_READ writes) by requested instant."""
        self.compactions: dict[str, Written] = {}
        """Commits without offsets of a table with delta commits (its compactions), the same."""
        self._seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def poll(self) -> None:
        for path in self.timeline.glob("*_*.*commit"):
            if path.name in self._seen:
                continue
            try:
                with path.open("rb") as stream:
                    (record,) = [dict(r) for r in fastavro.reader(stream) if isinstance(r, dict)]
            except (OSError, ValueError, EOFError):
                continue  # being written: read at the next poll
            self._seen.add(path.name)
            requested = path.name.split("_")[0]
            raw = (record.get("extraMetadata") or {}).get(f"{COMMIT_METADATA_PREFIX}{OFFSETS_KEY}")
            stats = [stat for group in (record.get("partitionToWriteStats") or {}).values() for stat in group]
            completed = path.name.split(".")[0].split("_")[1]
            if path.name.endswith(".deltacommit"):
                logs = frozenset(str(s["fileId"]) for s in stats if ".log." in str(s.get("path")))
                self.deltas[requested] = Written(completed, completion_ms(path.name), logs)
            elif raw is None:
                written = frozenset(str(s["fileId"]) for s in stats)
                self.compactions[requested] = Written(completed, completion_ms(path.name), written)
            if raw is not None:
                offsets = {int(p): int(o) for p, o in json.loads(raw).items()}
                self.commits[path.name.split("_")[0]] = Commit(completion_ms(path.name), offsets)

    def applied(self) -> dict[int, int]:
        """The highest next offset per partition committed so far."""
        out: dict[int, int] = {}
        for commit in self.commits.values():
            for partition, offset in commit.offsets.items():
                out[partition] = max(out.get(partition, 0), offset)
        return out

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self.poll_seconds)


def read_events(bootstrap_servers: str, registry_url: str, topic: str) -> list[Event]:
    """Every change event of ``topic`` (tombstones carry none), decoded by the applier's decoder."""
    settings = DecodeSettings(topic, SchemaRegistry(registry_url), ("id",), False)
    read = KafkaReadSettings(bootstrap_servers)
    events = []
    for partition, end in end_offsets(bootstrap_servers, topic).items():
        messages = iter_range(read, OffsetRange(topic, partition, 0, end))
        for change in decode_messages(settings, messages):
            if not isinstance(change, DecodedChange):
                raise RuntimeError(f"{topic} partition {partition}: undecodable message {change}")
            events.append(Event(change.partition, change.offset, change.source_ts_ms))
    return events


def workload_scripts(rows: int) -> list[tuple[str, int]]:
    """pgbench scripts and weights: a random existing key updated or deleted, a new key inserted."""
    table = f"public.{TABLE}"
    existing = f"(select id from {table} where id >= :k order by id limit 1)"
    pick = f"\\set k random(1, {rows})\n"
    scripts = {
        "update": f"{pick}update {table} set val = 'u-' || :k, amount = amount + 1, updated = now(), "
        f"flag = not flag where id = {existing};\n",
        "insert": f"insert into {table} (id, grp, val, amount, updated, flag) values "
        "(nextval('public.fresh_ids'), 1, 'new', 1.00, now(), true);\n",
        "delete": f"{pick}delete from {table} where id = {existing};\n",
    }
    return [(scripts[kind], weight) for kind, weight in WORKLOAD.items()]


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _load() -> list[float]:
    return [round(load, 2) for load in os.getloadavg()]


def cdc_lake(config_path: Path, *args: str, log: Path) -> str:
    """``cdc-lake ARGS`` as a subprocess (no Spark left in this process); its stdout."""
    with log.open("a") as err:
        done = subprocess.run(
            [sys.executable, "-m", "cdc_lake", "--config", str(config_path), *args],
            stdout=subprocess.PIPE, stderr=err, text=True, check=False,
        )  # fmt: skip
    if done.returncode not in (0, 4):
        raise RuntimeError(f"cdc-lake {' '.join(args)} exited {done.returncode}; see {log}")
    return done.stdout


@dataclass
class Runs:
    """The ``cdc-lake run`` subprocesses started, each logging to a file of its own."""

    config_path: Path
    work: Path
    started: list[subprocess.Popen[bytes]]
    compact_nice: int | None = None
    """Also run ``nice -n <this> cdc-lake compact --every 5`` beside (a layout of executor ``job``)."""
    compactor: subprocess.Popen[bytes] | None = None

    def start_compactor(self) -> None:
        log = (self.work / "compact.log").open("wb")
        cli = [sys.executable, "-m", "cdc_lake", "--config", str(self.config_path), "compact", "--every", "5"]
        self.compactor = subprocess.Popen(
            ["nice", "-n", str(self.compact_nice), *cli],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        _log(f"compact --every 5 started at nice {self.compact_nice}, pid {self.compactor.pid}")

    def start(self) -> subprocess.Popen[bytes]:
        log = (self.work / f"run-{len(self.started)}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "cdc_lake", "--config", str(self.config_path), "run"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.started.append(process)
        _log(f"run started, pid {process.pid}")
        return process

    def stop_all(self) -> None:
        """SIGTERM each live ``run`` and the compaction job (batches finish), then SIGKILL a process group
        that lingers."""
        every = [*self.started, *([self.compactor] if self.compactor is not None else [])]
        for process in every:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in every:
            try:
                process.wait(timeout=180)
            except subprocess.TimeoutExpired:
                process.kill()
            with contextlib.suppress(ProcessLookupError):  # a Spark JVM left behind by a killed driver
                os.killpg(process.pid, signal.SIGKILL)


def _cpu_sample(runs: Runs) -> Sample:
    """Every process's CPU seconds now (``benchmarks/process_cpu.py``), ``run``, the compaction job and
    this benchmark (its commit watcher, pgbench's parent) named."""
    sessions = {process.pid: "run" for process in runs.started}
    if runs.compactor is not None:
        sessions[runs.compactor.pid] = "compact job"
    return sample({**sessions, os.getsid(0): "benchmark"})


def _configure(
    bench: Bench,
    layout: str,
    driver_memory: str,
    spark_conf: dict[str, str],
    rows_per_bucket: int | None,
    continuous_validation: bool,
) -> Path:
    entry = bench.source_entry()
    entry["tables"][0]["tier"] = 0
    spark = {"driver_memory": driver_memory, "conf": spark_conf}
    path = bench.write_config("fresh", {bench.source: entry}, {"spark": spark})
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["lake"].update(LAYOUTS[layout])
    if rows_per_bucket is not None:
        data["lake"]["rows_per_bucket"] = rows_per_bucket
    data["monitoring"] = {"metrics_port": 0}  # a standby beside the first run must not need the port
    if not continuous_validation:
        data["validation"] = {"continuous": False}
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _wait_applied(watcher: CommitWatcher, bootstrap_servers: str, topic: str, timeout: float) -> float:
    """Wait until the commits cover the topic's end offsets; returns the seconds waited."""
    began = time.monotonic()
    time.sleep(3)  # Debezium's last events reach Kafka
    ends = end_offsets(bootstrap_servers, topic)
    while any(watcher.applied().get(p, 0) < end for p, end in ends.items() if end):
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"{topic}: not applied within {timeout} s: {watcher.applied()} < {ends}")
        time.sleep(1)
    return time.monotonic() - began


def _warm_up(stack: LocalStack, database: str, watcher: CommitWatcher, topic: str, timeout: float) -> None:
    """Change one row and wait for the commit applying it: ``run``'s Spark is up and has done a batch."""
    kafka = stack.kafka.address()
    before = sum(end_offsets(kafka, topic).values())
    with stack.postgres_primary.connect(database) as conn:
        conn.execute(f"update public.{TABLE} set val = 'warm-up' where id = 1")
    began = time.monotonic()
    while True:
        ends = end_offsets(kafka, topic)
        applied = watcher.applied()
        if sum(ends.values()) > before and all(applied.get(p, 0) >= end for p, end in ends.items()):
            break
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"run did not apply the warm-up change within {timeout} s")
        time.sleep(0.5)
    _log(f"run applied the warm-up change in {time.monotonic() - began:.0f} s")


def sample_runs(runs: Iterable[Run]) -> list[dict[str, Any]]:
    """``run``'s continuous validation samples (the state store's ``validate-sample`` runs, each recorded
    when its slice was judged), oldest first: its end (UTC), seconds (the slice's own), candidates,
    outcome and error."""
    return [
        {
            "ended_utc": run.started_at.strftime("%H:%M:%S"),
            "seconds": run.detail.get("seconds"),
            "candidates": run.detail.get("candidates"),
            "outcome": None if run.outcome is None else run.outcome.value,
            "error": run.detail.get("error"),
        }
        for run in sorted(runs, key=lambda run: run.id)
    ]


def _wait_live(config: Config, table: str, timeout: float) -> float:
    """Seconds until the state store holds ``table`` LIVE (``run`` passed the bootstrap's snapshot point)."""
    began = time.monotonic()
    with StateStore.open(config.state_store.url) as store:
        while True:
            info = store.get_table(table)
            if info is not None and info.state == TableState.LIVE:
                return round(time.monotonic() - began, 1)
            if time.monotonic() - began > timeout:
                raise RuntimeError(f"{table}: not LIVE within {timeout} s ({info.state if info else None})")
            time.sleep(0.5)


def _start_standby(runs: Runs, timeout: float) -> None:
    """Start a second ``run`` and wait until its Spark application is up, plus 30 s of taking batches."""
    process = runs.start()
    log = runs.work / f"run-{len(runs.started) - 1}.log"
    began = time.monotonic()
    while "applying" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() - began > timeout:
            raise RuntimeError(f"the standby run did not start; see {log}")
        time.sleep(1)
    time.sleep(30)


def _figures(
    results: dict[str, Any],
    phases: list[dict[str, Any]],
    watcher: CommitWatcher,
    stack: LocalStack,
    topic: str,
) -> None:
    """Per-event figures of the phases so far into ``results`` (read from the topic and the commits)."""
    watcher.poll()
    events = read_events(stack.kafka.address(), stack.registry.confluent_url, topic)
    visible = event_lags(events, list(watcher.commits.values()))
    results.update({"events": len(events), "apply_commits": len(watcher.commits), "phases": []})
    for phase in phases:
        figures = phase_figures(visible, phase["start_ms"], phase["end_ms"], phase["rate"])
        figures["read_optimized_staleness_max_seconds"] = read_optimized_staleness(
            watcher.deltas, watcher.compactions, phase["start_ms"], phase["end_ms"]
        )
        if "kill_ms" in phase:
            figures["recovery_seconds"] = round(recovery_seconds(phase["kill_ms"], visible), 1)
        if "handoff_ms" in phase:
            figures["fresh_after_handoff_seconds"] = round(recovery_seconds(phase["handoff_ms"], visible), 1)
        results["phases"].append({**figures, **{k: v for k, v in phase.items() if k not in figures}})


def _pgbench_into(
    phase: dict[str, Any],
    stack: LocalStack,
    database: str,
    scripts: list[tuple[str, int]],
    rate: int,
    length: int,
) -> None:
    """pgbench's summary lines into ``phase`` (the load thread's target)."""
    phase["pgbench"] = run_pgbench(stack, database, scripts, rate, length)


def _save(results: dict[str, Any], path: Path | None) -> None:
    if path is not None:
        path.write_text(json.dumps(results, indent=2), encoding="utf-8")


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """One database, one layout, the rates in order (figures saved after each); figures as a dict."""
    stack = LocalStack(Config.default(Path.cwd()).stack)
    rates = [int(rate) for rate in args.rates.split(",")]
    seconds = [int(value) for value in args.seconds.split(",")]
    spark_conf = dict(entry.split("=", 1) for entry in args.spark_conf)
    kills = args.kills.split(",") if args.kills else []
    results: dict[str, Any] = {
        "layout": LAYOUTS[args.layout],
        "driver_memory": args.driver_memory,
        "spark_conf": spark_conf,
        "rows_per_bucket": args.rows_per_bucket,
        "continuous_validation": not args.no_continuous_validation,
        "rows": args.rows,
        "workload_percent": WORKLOAD,
        "started_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "load_average_start": _load(),
    }
    with bench_database("postgres", stack, args.rows, None) as bench:
        with stack.postgres_primary.connect(bench.database) as conn:
            conn.execute(
                sql.SQL("create sequence public.fresh_ids start {}").format(sql.Literal(args.rows + 1))
            )
        config_path = _configure(
            bench, args.layout, args.driver_memory, spark_conf, args.rows_per_bucket,
            not args.no_continuous_validation,
        )  # fmt: skip
        config = load_config(config_path)
        (target,) = select_targets(config)
        table = f"{bench.source}.{bench.schema_table}"
        log = bench.work / "cli.log"
        _log(f"onboarding and bootstrapping {table} ({args.rows:,} rows)")
        cdc_lake(config_path, "onboard", bench.source, log=log)
        under: dict[str, Any] | None = None
        under_load: threading.Thread | None = None
        if args.bootstrap_under:
            rate, length = args.bootstrap_under, args.bootstrap_load_seconds
            under = {"rate": rate, "seconds": length, "bootstrap_under_load": True}
            under["load_average_start"] = _load()
            scripts = workload_scripts(args.rows)
            under_load = threading.Thread(
                target=_pgbench_into, args=(under, stack, bench.database, scripts, rate, length)
            )
            under["start_ms"] = int(time.time() * 1000)
            under_load.start()
            _log(f"pgbench at {rate}/s for {length} s, the bootstrap under it")
        began = time.monotonic()
        cdc_lake(config_path, "bootstrap", table, log=log)
        results["bootstrap_seconds"] = round(time.monotonic() - began, 1)
        # A bucket-index table's buckets (one file group each, sized by lake.rows_per_bucket).
        base_files = Path(target.base_path).glob("*.parquet")
        results["file_groups"] = len({path.name.split("_", 1)[0] for path in base_files})
        watcher = CommitWatcher(Path(target.base_path))
        watcher.start()
        job = LAYOUTS[args.layout].get("compaction", {}).get("executor") == "job"
        runs = Runs(config_path, bench.work, [], args.compact_nice if job else None)
        results["compact_nice"] = runs.compact_nice
        kafka = stack.kafka.address()
        phases: list[dict[str, Any]] = []
        try:
            runs.start()
            if runs.compact_nice is not None:
                runs.start_compactor()
            if under is not None and under_load is not None:
                under["handoff_ms"] = int(time.time() * 1000)
                under["live_after_handoff_seconds"] = _wait_live(config, table, args.timeout)
                _log(f"LIVE {under['live_after_handoff_seconds']} s after the hand-off")
                under_load.join()
                under["end_ms"] = int(time.time() * 1000)
                under["load_average_end"] = _load()
                waited = _wait_applied(watcher, kafka, target.topic, args.timeout)
                under["catch_up_seconds"] = round(waited, 1)
                phases.append(under)
                _figures(results, phases, watcher, stack, target.topic)
                _save(results, args.json)
            _warm_up(stack, bench.database, watcher, target.topic, args.timeout)
            time.sleep(args.warmup)
            for number, rate in enumerate(rates):
                length = seconds[min(number, len(seconds) - 1)]
                kill = kills[number] if number < len(kills) else "none"
                live = [process for process in runs.started if process.poll() is None]
                if kill == "standby" and len(live) == 1:
                    _start_standby(runs, args.timeout)
                    live = [process for process in runs.started if process.poll() is None]
                _log(f"pgbench at {rate}/s for {length} s" + (f", {kill} kill" if kill != "none" else ""))
                phase: dict[str, Any] = {"rate": rate, "seconds": length, "load_average_start": _load()}
                scripts = workload_scripts(args.rows)
                load = threading.Thread(
                    target=_pgbench_into, args=(phase, stack, bench.database, scripts, rate, length)
                )
                cpu_before = _cpu_sample(runs)
                phase["start_ms"] = int(time.time() * 1000)
                load.start()
                if kill != "none":
                    time.sleep(args.kill_after)
                    phase["kill_ms"] = int(time.time() * 1000)
                    live[0].send_signal(signal.SIGKILL)
                    _log(f"SIGKILL to run pid {live[0].pid} ({len(live)} running)")
                    phase["arrangement"] = kill
                    if kill == "cold":
                        time.sleep(args.restart_after)
                        phase["restart_after_seconds"] = args.restart_after
                        runs.start()
                load.join()
                phase["end_ms"] = int(time.time() * 1000)
                phase["load_average_end"] = _load()
                phase["cpu"] = cpu_between(cpu_before, _cpu_sample(runs))
                _log(f"rate {rate}: CPU seconds of {phase['cpu']['busy_seconds']} busy: " + ", ".join(
                    f"{name} {seconds}" for name, seconds in list(phase["cpu"]["by_process"].items())[:8]
                ))
                waited = _wait_applied(watcher, kafka, target.topic, args.timeout)
                phase["catch_up_seconds"] = round(waited, 1)
                _log(f"rate {rate}: applied {waited:.0f} s after the load ended")
                phases.append(phase)
                _figures(results, phases, watcher, stack, target.topic)
                _save(results, args.json)
                p99 = results["phases"][-1]["p99_seconds"]
                sweeping = kill == "none" and number > 0 and rate > rates[number - 1]
                if sweeping and args.stop_above is not None and p99 > args.stop_above:
                    _log(f"rate {rate}: p99 {p99} s is above {args.stop_above} s; no higher rate")
                    break
        finally:
            runs.stop_all()
            watcher.stop()
        results["load_average_end"] = _load()
        _log("validating the lake against the replica")
        (check,) = json.loads(cdc_lake(config_path, "validate", table, "--json", log=log))
        kept = ("matches", "source_rows", "lake_rows", "missing_count", "extra_count", "different_count")
        results["validate"] = {key: check.get(key) for key in kept}
        with StateStore.open(config.state_store.url) as store:
            results["samples"] = sample_runs(store.list_runs(table, limit=100, command=SAMPLE_RUN))
        for failed in (sample for sample in results["samples"] if sample["outcome"] != "ok"):
            _log(f"a continuous validation sample failed ({failed['ended_utc']}): {failed['error']}")
        lines = [line for path in sorted(bench.work.glob("run-*.log")) for line in _text_lines(path)]
        for phase in results.get("phases", []):
            phase["batch_steps"] = batch_steps(lines, phase["start_ms"], phase["end_ms"])
            for window in phase["batch_steps"]:
                shown = ", ".join(f"{name} {value}" for name, value in window["steps"].items())
                _log(f"rate {phase['rate']}, from {window['from_seconds']} s: {window['commits']} commits, "
                     f"{window['batch_seconds']} s a batch ({shown})")
        _save(results, args.json)
        if args.logs:
            args.logs.mkdir(parents=True, exist_ok=True)
            for path in bench.work.glob("*.log"):
                shutil.copy(path, args.logs / path.name)
    return results


def _text_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()


def _phase_label(results: dict[str, Any], phase: dict[str, Any]) -> str:
    layout = results["layout"]
    name = "default" if not layout else f"{layout['table_type']} + {layout['index']}"
    kill = f", {phase['arrangement']} kill" if "arrangement" in phase else ""
    return f"{name}, {phase['rate']}/s{kill}: p99 {phase['p99_seconds']:g} s"


def plot_phases(runs: Sequence[dict[str, Any]], path: Path) -> None:
    """PNG of each phase's p99 lag per 10 s of source commit time, the goal's two lines drawn."""
    pyplot = plotting()

    fig, ax = pyplot.subplots(figsize=(8, 4.5))
    for results in runs:
        for phase in results["phases"]:
            points = phase["timeline"]
            label = _phase_label(results, phase)
            ax.plot([p["second"] for p in points], [p["p99"] for p in points], label=label)
    for limit, what in ((10, "goal p99 10 s at 500/s"), (30, "goal p99 30 s at the highest rate")):
        ax.axhline(limit, color="grey", linestyle="--", linewidth=1)
        ax.annotate(what, (0, limit), textcoords="offset points", xytext=(2, 2), fontsize=7, color="grey")
    ax.set_title("Tier-0 freshness, random-key updates/inserts/deletes (70/15/15), 1M rows")
    ax.set_xlabel("seconds into the phase (source commit time)")
    ax.set_ylabel("p99 per 10 s: source commit to visible (s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rates", default="500", help="changes/s, comma list: one phase each, in order")
    parser.add_argument(
        "--seconds", default="600", help="seconds of load per phase, comma list (last repeats)"
    )
    parser.add_argument("--layout", choices=sorted(LAYOUTS), default="default")
    parser.add_argument("--driver-memory", default="1g", help="spark.driver_memory of bootstrap and run")
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a spark.conf entry of bootstrap and run (repeatable), e.g. spark.scheduler.mode=FIFO",
    )
    parser.add_argument(
        "--rows-per-bucket", type=int, help="lake.rows_per_bucket of the bootstrap (the bucket count)"
    )
    parser.add_argument("--warmup", type=int, default=20, help="seconds from run's first commit to the load")
    parser.add_argument(
        "--kills", help="per phase: none, cold (SIGKILL, restart) or standby (SIGKILL one of two)"
    )
    parser.add_argument("--kill-after", type=int, default=120, help="seconds into a phase to SIGKILL run")
    parser.add_argument("--restart-after", type=int, default=10, help="cold restart this long after the kill")
    parser.add_argument(
        "--stop-above",
        type=float,
        help="end a sweep (rising rates, no kill) at the first phase whose p99 (s) is above this",
    )
    parser.add_argument(
        "--bootstrap-under", type=int, metavar="RATE", help="changes/s during the bootstrap and its catch-up"
    )
    parser.add_argument(
        "--bootstrap-load-seconds", type=int, default=300, help="how long the load of --bootstrap-under lasts"
    )
    parser.add_argument(
        "--no-continuous-validation",
        action="store_true",
        help="validation.continuous: false (run's sample every 300 s reads the whole lake table)",
    )
    parser.add_argument(
        "--compact-nice", type=int, default=19, help="niceness of the compaction job (executor job layouts)"
    )
    parser.add_argument("--timeout", type=float, default=900, help="seconds to catch up after a phase")
    parser.add_argument("--json", type=Path, help="figures, written after each phase and at the end")
    parser.add_argument("--logs", type=Path, help="directory to keep the run and CLI logs in")
    parser.add_argument("--plot", type=Path, help="PNG of each phase's p99 per 10 s (the bench extra)")
    parser.add_argument("--replot", help="comma list of earlier --json files: plot them, measure nothing")
    args = parser.parse_args(argv)
    if args.replot:
        if args.plot is None:
            parser.error("--replot needs --plot PNG")
        plot_phases([json.loads(Path(name).read_text()) for name in args.replot.split(",")], args.plot)
        return 0
    results = measure(args)
    if args.plot is not None:
        plot_phases([results], args.plot)
    summary = {k: v for k, v in results.items() if k != "phases"}
    summary["phases"] = [{k: v for k, v in p.items() if k != "timeline"} for p in results["phases"]]
    print(json.dumps(summary, indent=2))
    return 0 if results["validate"]["matches"] else 1


if __name__ == "__main__":
    sys.exit(main())
