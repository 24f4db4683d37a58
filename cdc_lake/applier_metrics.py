"""The applier's Prometheus series, one set per process, and the labels of every series about a table.

The applier records each batch here (:func:`record_batch`, :func:`record_failure`): the events it
applied, its commits and failures (:data:`APPLIED_EVENTS`, :data:`COMMITS`, :data:`FAILURES`) and the
batch duration histogram (:data:`BATCH_SECONDS`); the table services outside the writes record the plans
they executed and their failures (:func:`record_services`); continuous validation the key ranges it
compared, the keys it confirmed diverged and its cycle's progress (:func:`record_validation`).  Every table
``run`` may apply has its counters at 0 from the start (:func:`zero_tables`, on each scrape), so a
dashboard or a ``rate()`` over them shows 0, not "No data", until the first failure.  ``cdc-lake run``
serves them with the lag gauges (:func:`cdc_lake.ops.metrics.registry_for`).  They are in the core, not
in either stage, because the apply stage records them and the operate stage serves them, and the stages
never import each other.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Gauge, Histogram, disable_created_metrics

TABLE_LABELS = ("source", "table", "tier")
"""The labels of every series about one table."""

BATCH_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
"""Bounds of the batch duration histogram, seconds (a batch of a small table takes about a second)."""


def table_labels(table: str, tier: int) -> dict[str, str]:
    """The labels of a series about ``table`` (``source.schema.table``; a re-bootstrap copy ``…~vN``)."""
    return {"source": table.split(".", 1)[0], "table": table, "tier": str(tier)}


# No `_created` series: in Prometheus' text format each would be one more gauge per counter and
# histogram, of no use to the rules or the dashboard (a process-wide prometheus_client setting).
disable_created_metrics()  # type: ignore[no-untyped-call]

# The applier's counters and histogram, one set per process, updated through the hooks below.
APPLIED_EVENTS = Counter(
    "cdc_lake_applied_events", "Change events applied to the lake", TABLE_LABELS, registry=None
)
COMMITS = Counter("cdc_lake_commits", "Lake commits made by the applier", TABLE_LABELS, registry=None)
FAILURES = Counter(
    "cdc_lake_failures", "Batches that failed and left the table FAILED", TABLE_LABELS, registry=None
)
COMPACTIONS = Counter(
    "cdc_lake_compactions",
    "Compaction plans executed outside the writes (run's table-service thread, cdc-lake compact)",
    TABLE_LABELS,
    registry=None,
)
SERVICE_FAILURES = Counter(
    "cdc_lake_table_service_failures",
    "Table-service executions that failed (retried at the next look; the table keeps applying)",
    TABLE_LABELS,
    registry=None,
)
VALIDATED_SLICES = Counter(
    "cdc_lake_validation_slices",
    "Key ranges continuous validation compared with the source (run's validator thread)",
    TABLE_LABELS,
    registry=None,
)
CONFIRMED_KEYS = Counter(
    "cdc_lake_validation_confirmed_keys",
    "Keys continuous validation confirmed diverged (the table is marked possibly diverged)",
    TABLE_LABELS,
    registry=None,
)
VALIDATION_FAILURES = Counter(
    "cdc_lake_validation_failures",
    "Key ranges whose comparison failed (tried again in the next cycle)",
    TABLE_LABELS,
    registry=None,
)
COUNTERS = (
    APPLIED_EVENTS, COMMITS, FAILURES, COMPACTIONS, SERVICE_FAILURES, VALIDATED_SLICES, CONFIRMED_KEYS,
    VALIDATION_FAILURES,
)
"""The applier's counters: a series per table from the start (:func:`zero_tables`)."""
BATCH_SECONDS = Histogram(
    "cdc_lake_batch_duration_seconds",
    "Time a batch that consumed messages took: read, decode, write and commit",
    TABLE_LABELS,
    buckets=BATCH_BUCKETS,
    registry=None,
)


def record_batch(
    table: str, tier: int, *, changes: int, offsets: int, committed: bool, seconds: float
) -> None:
    """Hook for the applier: a batch of ``table`` ended.

    It consumed ``offsets`` and applied ``changes`` events (with a commit if ``committed``) in
    ``seconds``; a poll that consumed nothing adds no batch duration.
    """
    labels = table_labels(table, tier)
    APPLIED_EVENTS.labels(**labels).inc(changes)
    if committed:
        COMMITS.labels(**labels).inc()
    if offsets:
        BATCH_SECONDS.labels(**labels).observe(seconds)


def zero_tables(tables: Iterable[tuple[str, int]]) -> None:
    """Give each ``(table, tier)`` its counters (:data:`COUNTERS`), at 0 unless they have counted already."""
    for table, tier in tables:
        labels = table_labels(table, tier)
        for counter in COUNTERS:
            counter.labels(**labels)


def record_services(table: str, tier: int, *, executed: int, failed: bool) -> None:
    """Hook for the table services: an execution for ``table`` ran ``executed`` plans, or failed."""
    labels = table_labels(table, tier)
    COMPACTIONS.labels(**labels).inc(executed)
    if failed:
        SERVICE_FAILURES.labels(**labels).inc()


VALIDATION_CYCLE = Gauge(
    "cdc_lake_validation_cycle_progress",
    "Share of its tables the current continuous validation cycle has compared (0 to 1)",
    registry=None,
)
GAUGES = (VALIDATION_CYCLE,)
"""The process's gauges (served with the counters)."""


def record_validation(table: str, tier: int, *, confirmed: int, failed: bool, progress: float) -> None:
    """Hook for continuous validation: a key range of ``table`` was compared (or its comparison failed),
    confirming ``confirmed`` keys diverged; the cycle is ``progress`` done."""
    labels = table_labels(table, tier)
    VALIDATED_SLICES.labels(**labels).inc()
    CONFIRMED_KEYS.labels(**labels).inc(confirmed)
    if failed:
        VALIDATION_FAILURES.labels(**labels).inc()
    VALIDATION_CYCLE.set(progress)


def record_failure(table: str, tier: int) -> None:
    """Hook for the applier: a batch of ``table`` failed."""
    FAILURES.labels(**table_labels(table, tier)).inc()
