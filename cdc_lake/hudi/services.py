"""Hudi's table services outside the writer's commit: executing compaction plans, and measuring the backlog.

A MERGE_ON_READ writer with ``lake.compaction.inline: false`` only schedules compaction plans
(:func:`~cdc_lake.hudi.options.compaction_options`).  :func:`execute_compactions` executes the pending
ones through Hudi's ``run_compaction`` procedure (Spark SQL, the session's Hudi extension) with the
writer's index, metadata and lock settings (:func:`~cdc_lake.hudi.options.table_service_options`), so it
may run while the writer commits: a plan covers the file slices that existed when it was scheduled, and
later delta commits write new slices.  The procedure takes its options as one ``k=v,k=v`` literal; the
values that hold a ``,`` (a composite key's fields) go through the session's conf for the call.

:func:`service_backlog` reads what a read-optimized reader (Trino, which reads base files only) misses:
the plans not yet executed and the oldest delta commit with a log file no executed compaction merged.
That is answered per file group: a plan need not cover every file group (Hudi's compaction strategies
bound a plan by IO, ``hoodie.compaction.target.io``), so a compaction newer than a delta commit merges
its logs only in the file groups the compaction wrote.  A compaction planned at instant ``c`` merges a
delta commit's logs when the delta commit completed before ``c`` (Hudi slices a file group's logs by
completion time from table version 8 on; before it, Hudi plans nothing while an earlier write is in
flight, so the completion time, or the requested one where the timeline keeps none, says the same).
"""

from __future__ import annotations

import calendar
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pyspark.sql import SparkSession

from cdc_lake.exceptions import LakeWriteError
from cdc_lake.hudi.options import HudiTableSpec, table_service_options
from cdc_lake.hudi.timeline import meta_client, table_exists
from cdc_lake.lake.format import PlanNow, ServiceBacklog
from cdc_lake.spark.errors import JVM_ERRORS, root_cause

_LIST_SEPARATORS = (",", "'", "\\")
"""Characters an entry of the procedure's ``options => 'k=v,k=v'`` literal cannot carry."""
_PATH_UNSAFE = (*_LIST_SEPARATORS, "=")
"""And those its ``path => '...'`` literal cannot carry."""


def _literal(table: str, what: str, value: str, unsafe: tuple[str, ...]) -> str:
    """``value`` for a literal of Hudi's run_compaction procedure; LakeWriteError if it holds ``unsafe``."""
    for character in unsafe:
        if character in value:
            raise LakeWriteError(
                f"table '{table}': {what} {value!r} holds {character!r}, which Hudi's run_compaction "
                "procedure cannot take; compaction cannot run outside the writer for it"
            )
    return value


_PLAN_NOW = {
    "hoodie.compact.inline.trigger.strategy": "NUM_COMMITS",
    "hoodie.compact.inline.max.delta.commits": "0",
}
"""A plan on request: due at once, whatever the table's own trigger (5 delta commits by default, which a
compaction requested after fewer would wait for, planning nothing), also without a delta commit since
the last compaction: that one may have been bounded (``plan_io_mb``) and left file groups with logs."""
_EVERY_FILE_GROUP = {
    **_PLAN_NOW,
    "hoodie.compaction.strategy": "org.apache.hudi.table.action.compact.strategy.UnBoundedCompactionStrategy",
}
"""And over every file group with logs, whatever the table's own bound (``lake.compaction.plan_io_mb``)."""


def _options(spec: HudiTableSpec, overrides: dict[str, str] | None = None) -> tuple[str, dict[str, str]]:
    """The service's options as the procedure's ``options`` literal, and those whose value the literal
    cannot carry (a composite key's fields: ``a,b``), which go through the session's conf instead."""
    literal, session = [], {}
    for key, value in {**table_service_options(spec), **(overrides or {})}.items():
        _literal(spec.table_name, "option", key, _LIST_SEPARATORS)
        if any(character in value for character in _LIST_SEPARATORS):
            session[key] = value
        else:
            literal.append(f"{key}={value}")
    return ",".join(literal), session


_SESSION_OPTIONS = threading.Lock()
"""One procedure call at a time sets options in the session's conf (:func:`_session_options`)."""


@contextmanager
def _session_options(spark: SparkSession, options: dict[str, str]) -> Iterator[None]:
    """``options`` in the Spark session's conf while the block runs, then as they were.

    Hudi's procedures build their write client from the session's ``hoodie.*`` conf under the options
    they are given (HoodieCLIUtils: defaults, catalog, table config, session conf, given options), and
    the given ones are a ``k=v,k=v`` literal, so a value holding ``,`` (the bucket index's hash fields
    and the record key fields of a composite key) can only come this way.  The writers pass these options
    explicitly, which win over the session's."""
    if not options:
        yield
        return
    with _SESSION_OPTIONS:
        previous = {key: spark.conf.get(key, None) for key in options}
        for key, value in options.items():
            spark.conf.set(key, value)
        try:
            yield
        finally:
            for key, old in previous.items():
                if old is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, old)


def execute_compactions(
    spark: SparkSession, spec: HudiTableSpec, *, plan: PlanNow = PlanNow.NOTHING
) -> tuple[str, ...]:
    """Execute the table's pending compaction plans, then plan as ``plan`` says (the table's next plan,
    or one over every file slice that still has logs) and execute it; the instants of the plans
    executed, oldest first.

    Hudi plans no file group a pending plan holds, so the pending plans are executed before planning:
    planning first would leave the logs written after them uncompacted.  A plan made here is due at
    once, whatever the table's trigger.  Beside the writer, Hudi plans nothing while an earlier write is
    in flight on a table of version 6 (it logs "Hence skipping to schedule compaction"): the next look
    plans."""
    path = _literal(spec.table_name, "path", spec.base_path, _PATH_UNSAFE)
    steps = [("execute", _options(spec))]
    if plan is not PlanNow.NOTHING:
        overrides = _EVERY_FILE_GROUP if plan is PlanNow.EVERY_FILE_GROUP else _PLAN_NOW
        steps.append(("scheduleandexecute", _options(spec, overrides)))
    rows = []
    for op, (options, session) in steps:
        statement = f"CALL run_compaction(op => '{op}', path => '{path}', options => '{options}')"
        try:
            with _session_options(spark, session):
                rows += spark.sql(statement).collect()
        except JVM_ERRORS as exc:
            raise LakeWriteError(
                f"compaction of table '{spec.table_name}' at {spec.base_path} failed: {root_cause(exc)}"
            ) from exc
    return tuple(sorted({str(row["timestamp"]) for row in rows if str(row["state"]) == "COMPLETED"}))


def _stamp(instant: Any) -> str:
    """When ``instant`` completed, as an instant time (its requested time where the timeline keeps none)."""
    return str(instant.getCompletionTime() or instant.requestedTime())


def _epoch(stamp: str) -> float:
    """The instant time ``stamp`` (yyyyMMddHHmmss[SSS], UTC) in epoch seconds."""
    parsed = time.strptime(stamp[:14], "%Y%m%d%H%M%S")
    millis = int(stamp[14:17]) / 1000 if stamp[14:17].isdigit() else 0.0
    return calendar.timegm(parsed) + millis


_WRITTEN_CACHE_SIZE = 65_536
_written: dict[tuple[str, str, str], tuple[frozenset[str], frozenset[str]]] = {}
"""(base path, instant, action) -> the file groups a completed commit wrote, and those it wrote log files
to.  A completed commit's metadata never changes, so each is read once per process, not at every backlog
check; cleared whole when it reaches its size."""


def _file_groups(base_path: str, timeline: Any, instant: Any, *, logs: bool) -> frozenset[str]:
    """The file groups the completed commit ``instant`` wrote (with ``logs``: only those it wrote log
    files to; a bulk insert, or a delta commit's new file groups, write base files)."""
    key = (base_path, str(instant.requestedTime()), str(instant.getAction()))
    if key not in _written:
        if len(_written) >= _WRITTEN_CACHE_SIZE:
            _written.clear()
        stats = list(timeline.readCommitMetadata(instant).getWriteStats())
        written = frozenset(str(stat.getFileId()) for stat in stats)
        _written[key] = (written, frozenset(str(s.getFileId()) for s in stats if ".log." in str(s.getPath())))
    return _written[key][1 if logs else 0]


def service_backlog(spark: SparkSession, base_path: str) -> ServiceBacklog:
    """Pending compaction plans and the oldest delta commit with a log file no executed compaction merged
    (None: none), file group by file group."""
    try:
        if not table_exists(spark, base_path):
            return ServiceBacklog(pending_plans=0, uncompacted_since=None)
        timeline = meta_client(spark, base_path).getActiveTimeline()
        pending = int(timeline.filterPendingCompactionTimeline().countInstants())
        executed = timeline.getCommitTimeline().filterCompletedInstants().getInstants()
        merged: dict[str, str] = {}  # file group -> the newest executed compaction plan that wrote it
        for compaction in (i for i in executed if str(i.getAction()) == "commit"):
            for file_group in _file_groups(base_path, timeline, compaction, logs=False):
                merged[file_group] = max(merged.get(file_group, ""), str(compaction.requestedTime()))
        deltas = timeline.getDeltaCommitTimeline().filterCompletedInstants().getInstants()
        waiting = []
        for delta in deltas:
            stamp = _stamp(delta)
            groups = _file_groups(base_path, timeline, delta, logs=True)
            if any(merged.get(group, "") <= stamp for group in groups):
                waiting.append(stamp)
    except JVM_ERRORS as exc:
        raise LakeWriteError(f"reading the Hudi timeline at {base_path} failed: {root_cause(exc)}") from exc
    since = min((_epoch(stamp) for stamp in waiting), default=None)
    return ServiceBacklog(pending_plans=pending, uncompacted_since=since)
