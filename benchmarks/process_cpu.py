"""CPU seconds each part of this machine used over a stretch of time: the stack's services, ``run``, the load.

A benchmark on a 2-core machine shares its cores with the whole local stack; this says with whom.  Every
process is read from ``/proc`` (user and system time) and counted under its *session*: the local stack
starts each service in a session of its own (Postgres' backends, a JVM's threads and children stay in
it), and so does the benchmark for ``run`` and a compaction job.  A session is named by its leader's
command line (:data:`SERVICES`), or by the name the caller gives it (``sessions``); in the named
sessions, a JVM is told apart from its Python driver (``run (java)``, ``run (python3)``).  A process
whose session names nothing takes its parent's service (Postgres' backends each lead a session of their
own, under the postmaster of their server).  pgbench is
named on its own, wherever it runs.  A process that started during the stretch counts from zero.  A
process counts the time of its children that ended and that it waited for (``cutime``, ``cstime``): the
Postgres backends of pgbench's connections count under their server, pgbench under the benchmark that
started it; a child that ended before the stretch's end and whose parent had not waited for it yet is
lost, and one that was alive at the start and was waited for during it counts its whole life (before the
start too): the total, ``accounted``, says how much of the machine's busy time the processes account for
(100.2% in a 10M freshness run).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

SERVICES: tuple[tuple[str, str], ...] = (
    ("/postgres/primary", "postgres-primary"),
    ("/postgres/replica", "postgres-replica"),
    ("/mariadb/primary", "mariadb-primary"),
    ("/mariadb/replica", "mariadb-replica"),
    ("/connect-secure/", "kafka-connect-secure"),
    ("ConnectDistributed", "kafka-connect"),
    ("kafka.Kafka", "kafka"),
    ("apicurio", "schema-registry"),
    ("keycloak", "keycloak"),
    ("spark.deploy.master", "spark-master"),
    ("spark.deploy.worker", "spark-worker"),
    ("trino", "trino"),
    ("metastore", "hive-metastore"),
    ("versitygw", "object-store"),
    ("glue", "glue-catalog"),
)
"""A session leader's command-line fragment and the service it names, first match wins."""

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    """Each live process's CPU seconds, keyed by (pid, start time), with its label; the machine's busy
    seconds over all cores."""

    processes: Mapping[tuple[int, int], tuple[str, float]]
    busy_seconds: float


def service_of(leader_args: str) -> str | None:
    """The service a session leader's command line names (:data:`SERVICES`), None if none."""
    return next((name for fragment, name in SERVICES if fragment in leader_args), None)


def label(comm: str, leader_args: str, session_name: str | None) -> str:
    """What a process is counted as: pgbench; a named session (its JVM apart); a service; else its
    session leader's name."""
    if comm == "pgbench":
        return "pgbench"
    if session_name is not None:
        return f"{session_name} ({comm})" if comm in {"java", "python3", "python"} else session_name
    return service_of(leader_args) or (leader_args.split(" ", 1)[0].rsplit("/", 1)[-1] or comm)


@dataclass(frozen=True)
class _Stat:
    comm: str
    parent: int
    session: int
    seconds: float
    started: int


def _stat(pid: int) -> _Stat | None:
    """A process's name, parent, session, CPU seconds and start time (``/proc/PID/stat``); None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = text[text.index("(") + 1 : text.rindex(")")]
    fields = text[text.rindex(")") + 2 :].split()
    # Fields after the name: state(0) ppid(1) pgrp(2) session(3) ... utime(11) stime(12) cutime(13)
    # cstime(14) ... starttime(19).
    seconds = sum(int(fields[i]) for i in (11, 12, 13, 14)) / _TICKS
    return _Stat(comm, int(fields[1]), int(fields[3]), seconds, int(fields[19]))


def _args(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def busy_seconds() -> float:
    """Seconds the machine's cores were busy since boot (``/proc/stat``: all but idle and iowait)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / _TICKS


def sample(sessions: Mapping[int, str]) -> Sample:
    """Every process's CPU seconds now, labelled; ``sessions``: session id -> name (``run``, ...)."""
    pids = map(int, filter(str.isdigit, os.listdir("/proc")))
    stats = {pid: stat for pid in pids if (stat := _stat(pid)) is not None}
    leaders = {session: _args(session) for session in {s.session for s in stats.values()} if session > 0}
    processes: dict[tuple[int, int], tuple[str, float]] = {}
    for pid, stat in stats.items():
        leader = leaders.get(stat.session, "")
        parent = stats.get(stat.parent)
        if stat.session not in sessions and service_of(leader) is None and parent is not None:
            parents = leaders.get(parent.session, "")
            leader = parents if service_of(parents) is not None else leader
        name = label(stat.comm, leader, sessions.get(stat.session))
        processes[(pid, stat.started)] = (name, stat.seconds)
    return Sample(processes, busy_seconds())


def cpu_between(before: Sample, after: Sample) -> dict[str, object]:
    """CPU seconds per label from ``before`` to ``after``, largest first, the machine's busy seconds, and
    the share of those the listed processes account for."""
    per: dict[str, float] = {}
    for key, (name, seconds) in after.processes.items():
        start = before.processes.get(key, (name, 0.0))[1]
        per[name] = per.get(name, 0.0) + max(0.0, seconds - start)
    busy = after.busy_seconds - before.busy_seconds
    listed = sum(per.values())
    largest = sorted(per.items(), key=lambda item: -item[1])
    return {
        "busy_seconds": round(busy, 1),
        "accounted": round(listed / busy, 3) if busy > 0 else None,
        "by_process": {name: round(seconds, 1) for name, seconds in largest if seconds >= 0.1},
    }
