"""Hudi's table services outside the writer's commit: executing compaction plans, and measuring the backlog.

A MERGE_ON_READ writer with ``lake.compaction.inline: false`` only schedules compaction plans
(:func:`~cdc_lake.hudi.options.compaction_options`).  :func:`execute_compactions` executes the pending
ones through Hudi's ``run_compaction`` procedure (Spark SQL, the session's Hudi extension) with the
writer's index, metadata and lock settings (:func:`~cdc_lake.hudi.options.table_service_options`), so it
may run while the writer commits: a plan covers the file slices that existed when it was scheduled, and
later delta commits write new slices.

:func:`service_backlog` reads what a read-optimized reader (Trino, which reads base files only) misses:
the plans not yet executed and the oldest delta commit that wrote log files after the newest executed
compaction's plan: its changes are in no base file yet.
"""

from __future__ import annotations

import calendar
import time
from typing import Any

from pyspark.sql import SparkSession

from cdc_lake.exceptions import LakeWriteError
from cdc_lake.hudi.options import HudiTableSpec, table_service_options
from cdc_lake.hudi.timeline import meta_client, table_exists
from cdc_lake.lake.format import ServiceBacklog
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
    "hoodie.compact.inline.max.delta.commits": "1",
}
"""A plan on request: due after one delta commit, whatever the table's own trigger (5 delta commits by
default, which a compaction requested after fewer would wait for, planning nothing)."""


def _options_literal(spec: HudiTableSpec, overrides: dict[str, str] | None = None) -> str:
    options = {**table_service_options(spec), **(overrides or {})}
    return ",".join(
        f"{_literal(spec.table_name, 'option', key, _LIST_SEPARATORS)}="
        f"{_literal(spec.table_name, f'option {key} value', value, _LIST_SEPARATORS)}"
        for key, value in options.items()
    )


def execute_compactions(
    spark: SparkSession, spec: HudiTableSpec, *, schedule: bool = False
) -> tuple[str, ...]:
    """Execute the table's pending compaction plans (with ``schedule``: then plan one over every file slice
    that still has logs, and execute it); the instants of the plans executed, oldest first.

    Hudi plans no file group a pending plan holds, so ``schedule`` executes the pending plans before it
    plans: planning first would leave the logs written after them uncompacted.  Its plan is due after one
    delta commit, whatever the table's trigger."""
    path = _literal(spec.table_name, "path", spec.base_path, _PATH_UNSAFE)
    steps = [("execute", _options_literal(spec))]
    if schedule:
        steps.append(("scheduleandexecute", _options_literal(spec, _PLAN_NOW)))
    rows = []
    for op, options in steps:
        statement = f"CALL run_compaction(op => '{op}', path => '{path}', options => '{options}')"
        try:
            rows += spark.sql(statement).collect()
        except JVM_ERRORS as exc:
            raise LakeWriteError(
                f"compaction of table '{spec.table_name}' at {spec.base_path} failed: {root_cause(exc)}"
            ) from exc
    return tuple(sorted({str(row["timestamp"]) for row in rows if str(row["state"]) == "COMPLETED"}))


def _epoch(instant: Any) -> float:
    """When ``instant`` completed (its requested time where the timeline has no completion time), epoch s."""
    stamp = instant.getCompletionTime() or instant.requestedTime()
    text = str(stamp)
    parsed = time.strptime(text[:14], "%Y%m%d%H%M%S")
    millis = int(text[14:17]) / 1000 if text[14:17].isdigit() else 0.0
    return calendar.timegm(parsed) + millis


def _wrote_logs(timeline: Any, instant: Any) -> bool:
    """Whether the delta commit wrote log files (a bulk insert or new file groups write base files)."""
    stats = timeline.readCommitMetadata(instant).getWriteStats()
    return any(".log." in str(stat.getPath()) for stat in stats)


def service_backlog(spark: SparkSession, base_path: str) -> ServiceBacklog:
    """Pending compaction plans and the oldest delta commit no executed compaction covers (None: none)."""
    try:
        if not table_exists(spark, base_path):
            return ServiceBacklog(pending_plans=0, uncompacted_since=None)
        timeline = meta_client(spark, base_path).getActiveTimeline()
        pending = int(timeline.filterPendingCompactionTimeline().countInstants())
        executed = timeline.getCommitTimeline().filterCompletedInstants().getInstants()
        compacted = [str(i.requestedTime()) for i in executed if str(i.getAction()) == "commit"]
        newest_plan = max(compacted, default="")
        deltas = timeline.getDeltaCommitTimeline().filterCompletedInstants().getInstants()
        uncompacted = [d for d in deltas if str(d.requestedTime()) > newest_plan and _wrote_logs(timeline, d)]
    except JVM_ERRORS as exc:
        raise LakeWriteError(f"reading the Hudi timeline at {base_path} failed: {root_cause(exc)}") from exc
    since = min((_epoch(d) for d in uncompacted), default=None)
    return ServiceBacklog(pending_plans=pending, uncompacted_since=since)
