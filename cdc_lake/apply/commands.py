"""What ``cdc-lake apply`` and ``cdc-lake run`` do, behind the click verbs in :mod:`cdc_lake.cli.main`.

``apply --once`` first compares each table's applied offsets (the state store's copy) with the topic's
end offsets on the driver: when no table has anything new, it returns without starting Spark at all.
The copy can only lag the Hudi commits, never lead them, so this never skips real work.  The same
comparison sizes the work: a backlog of at most :data:`SHORT_LIVED_BACKLOG` messages starts a driver
tuned for a short life (C1 compiler, serial collector), a larger one Spark's default JVM.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from types import FrameType
from typing import Protocol

from pyspark.sql import SparkSession

from cdc_lake.apply.runner import (
    ApplyRunner,
    TableOutcome,
    apply_once,
    failure_summary,
    skip_reason,
)
from cdc_lake.apply.service import ApplyService
from cdc_lake.apply.table_services import ServiceOutcome, ServiceThread, TableServices
from cdc_lake.config import Config
from cdc_lake.exceptions import ApplyError, ConfigError
from cdc_lake.kafka.board import OffsetBoard
from cdc_lake.kafka.offsets import end_offsets
from cdc_lake.lake.format import load_format
from cdc_lake.lake.layout import CompactionExecutor
from cdc_lake.lake.schema_change import SchemaDiff
from cdc_lake.lake.target import TableTarget, select_targets
from cdc_lake.spark import get_spark
from cdc_lake.spark.background import background_slot
from cdc_lake.spark.session import TABLE_SERVICES_POOL, DriverLife, use_pool
from cdc_lake.state.store import StateStore

_LOG = logging.getLogger(__name__)


def describe(outcome: TableOutcome) -> str:
    """One line about a table's outcome, for people."""
    if outcome.skipped:
        return f"{outcome.table}: skipped ({outcome.skipped})"
    if outcome.error:
        return f"{outcome.table}: FAILED: {outcome.error}"
    if not outcome.offsets:
        return f"{outcome.table}: up to date"
    lag = "" if outcome.lag_messages is None else f", lag {outcome.lag_messages}"
    return (
        f"{outcome.table}: {outcome.changes} changes from {outcome.offsets} messages in "
        f"{outcome.batches} commits (last {outcome.commit_instant}){lag}{describe_steps(outcome.steps)}"
    )


STEP_SHOWN_SECONDS = 0.05
"""A batch step shorter than this is left out of :func:`describe_steps` (``--json`` has every step)."""


def describe_steps(steps: Mapping[str, float]) -> str:
    """``", 2.4 s: decode 0.4, write 1.9"``: the batches' wall seconds and the steps that took some, in
    the batch's order (docs/applier.md, "One batch, step by step"); empty without steps."""
    if not steps:
        return ""
    shown = ", ".join(f"{name} {s:.1f}" for name, s in steps.items() if s >= STEP_SHOWN_SECONDS)
    return f", {sum(steps.values()):.1f} s" + (f": {shown}" if shown else "")


def outcome_json(outcome: TableOutcome) -> dict[str, object]:
    """A table's outcome as a JSON-ready dict, for ``--json``."""
    return {
        "table": outcome.table,
        "status": "skipped" if outcome.skipped else "failed" if outcome.error else "applied",
        "batches": outcome.batches,
        "changes": outcome.changes,
        "offsets": outcome.offsets,
        "commit_instant": outcome.commit_instant,
        "lag_messages": outcome.lag_messages,
        "redelivered": outcome.redelivered,
        "step_seconds": {name: round(seconds, 3) for name, seconds in outcome.steps.items()},
        "error": outcome.error,
        "skipped": outcome.skipped,
    }


SHORT_LIVED_BACKLOG = 10_000
"""``apply --once`` with at most this many messages to apply starts a short-lived driver
(:data:`cdc_lake.spark.session.SHORT_LIVED_JAVA_OPTIONS`): measured, such a driver answers 30 messages in
10.4-12.1 s instead of 14.2-14.3 s and applies 200,000 changes into a 1M-row table 12 to 53 % slower
(two pairs); the bound stays well inside the small side."""


def _backlog(config: Config, store: StateStore, target: TableTarget) -> int:
    """Messages of ``target``'s topic past the state store's applied offsets now: 0 only when every
    partition is applied up to the topic's end.  The copy can only lag the Hudi commits, so this is at
    least the real backlog.

    A topic that does not exist yet (no change so far) has nothing new, unless offsets of it were applied
    (then 1: the applier finds out what happened).
    """
    applied = store.get_applied_offsets(target.qualified_name)
    ends = end_offsets(config.kafka.bootstrap_servers, target.topic, extra=dict(config.kafka.consumer))
    if not ends:
        return 1 if applied else 0
    return sum(max(0, end - applied.get(partition, 0)) for partition, end in ends.items())


def _check_supported(config: Config) -> None:
    if config.apply.dead_letter_topic is not None:
        raise ConfigError(
            "apply.dead_letter_topic: dead-lettering is not supported; a bad message stops its table "
            "(see docs/applier.md)"
        )


def _runner(config: Config, store: StateStore, slices: int, life: DriverLife) -> ApplyRunner:
    spark = get_spark(config.spark, config.lake, life=life)
    return ApplyRunner.for_config(spark, store, config, slices=slices)


def apply_once_command(
    config: Config,
    tables: Sequence[str],
    tier: int | None,
    workers: int,
    echo: Callable[[str], None],
    render: Callable[[TableOutcome], str] = describe,
) -> list[TableOutcome]:
    """Catch the chosen tables up to the end offsets seen now, then return; raises ApplyError on failures."""
    _check_supported(config)
    targets = select_targets(config, tuple(tables), tier)
    with StateStore.open(config.state_store.url) as store:
        outcomes: list[TableOutcome] = []
        pending = []
        backlog = 0
        for target in targets:
            reason = skip_reason(store, target)
            if reason is not None:
                outcomes.append(TableOutcome(target.qualified_name, skipped=reason))
                continue
            messages = _backlog(config, store, target)
            if not messages:
                outcomes.append(TableOutcome(target.qualified_name))
            else:
                pending.append(target)
                backlog += messages
        for outcome in outcomes:
            echo(render(outcome))
        if pending:
            life = DriverLife.SMALL if backlog <= SHORT_LIVED_BACKLOG else DriverLife.ONE_SHOT
            runner = _runner(config, store, max(2, workers), life)
            applied = apply_once(runner, pending, workers, on_done=lambda o: echo(render(o)))
            outcomes += applied
            done = {o.table for o in applied if o.error is None and o.skipped is None}
            applied_targets = [t for t in pending if t.qualified_name in done]
            _execute_pending_plans(config, store, runner.spark, applied_targets)
    error = failure_summary(outcomes)
    if error is not None:
        raise error
    return outcomes


def _execute_pending_plans(
    config: Config, store: StateStore, spark: SparkSession, targets: Sequence[TableTarget]
) -> None:
    """Execute the compaction plans ``apply --once``'s batches left pending on tables whose writes only plan
    them: a scheduler running ``apply --once`` has no ``run`` thread to (docs/hudi.md, "Table services"),
    except those a ``compact`` job executes (``compaction.executor: job``), whose backlog it records.
    A failure is recorded and logged as ``run``'s thread does, and fails nothing: the next run retries."""
    services = TableServices(
        load_format(spark, config.lake.format), store, config.state_store.url, beside_writer=False
    )
    for target in services.serviced(targets):
        services.step(target)


@contextmanager
def _stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """Call ``stop`` on SIGTERM or SIGINT while the block runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        _LOG.info("received %s: finishing running batches", signal.Signals(signum).name)
        stop()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


BOARD_REUSE_POLLS = 5
"""A step plans from batched end offsets up to this many polls old (newer ones arrive every poll)."""


def service_for(
    config: Config, store: StateStore, targets: Sequence[TableTarget], workers: int, poll_seconds: float = 1.0
) -> ApplyService:
    """The ``run`` service for ``targets``: one runner whose batch plans read the service's offset board."""
    runner = _runner(config, store, max(2, workers), DriverLife.SERVICE)
    board = OffsetBoard(
        runner.options.kafka, max_age_seconds=poll_seconds, reuse_seconds=BOARD_REUSE_POLLS * poll_seconds
    )
    runner.options = replace(runner.options, board=board)
    return ApplyService(
        runner, targets, lambda t: float(config.apply.interval_for(t)), workers, poll_seconds, board=board
    )


class Background(Protocol):
    """Work ``run`` starts on a thread of its own beside the batches and stops with them (continuous
    validation: :meth:`cdc_lake.cli.stages.BootstrapStage.validator`)."""

    def start(self) -> bool:
        """Start; False when the config leaves it off."""

    def stop(self) -> None:
        """Finish the step under way and return."""

    @property
    def description(self) -> str:
        """What it does, for the start note."""


BackgroundFactory = Callable[[SparkSession, StateStore, Sequence[str]], Background]
"""Background work of ``run`` for its Spark session, state store and tables."""


def service_thread(
    config: Config, spark: SparkSession, store: StateStore, targets: Sequence[TableTarget]
) -> ServiceThread:
    """``run``'s table-service thread for ``targets``: it looks every ``lake`` ``check_seconds`` and submits
    its Spark jobs to the table services' scheduler pool, beside the applier's writes, each execution in
    its turn with continuous validation's looks (:func:`~cdc_lake.spark.background.background_slot`)."""
    services = TableServices(
        load_format(spark, config.lake.format),
        store,
        config.state_store.url,
        beside_writer=True,
        turn=background_slot(spark),
    )
    return ServiceThread(
        services,
        targets,
        config.lake.check_seconds,
        on_start=lambda: use_pool(spark, TABLE_SERVICES_POOL),
    )


def run_command(
    config: Config,
    tables: Sequence[str],
    tier: int | None,
    workers: int,
    echo: Callable[[str], None],
    poll_seconds: float = 1.0,
    serve_metrics: Callable[[], object] | None = None,
    render: Callable[[TableOutcome], str] = describe,
    note: Callable[[str], None] | None = None,
    on_schema_change: Callable[[str, SchemaDiff], None] | None = None,
    background: BackgroundFactory | None = None,
) -> None:
    """Run the applier service for the chosen tables until SIGTERM or SIGINT.

    ``serve_metrics`` starts the metrics endpoint once the Spark application is up.
    ``on_schema_change`` is called when a table stops in SCHEMA_CHANGED (the CLI passes the automatic
    re-bootstrap of tables whose policy is ``rebootstrap``).  ``background`` is started beside the
    batches (the CLI passes the bootstrap stage's continuous validation) and stopped with them.
    """
    _check_supported(config)
    targets = select_targets(config, tuple(tables), tier)
    with StateStore.open(config.state_store.url) as store:
        service = service_for(config, store, targets, workers, poll_seconds)
        service.runner.on_schema_change = on_schema_change

        def report(outcome: TableOutcome) -> None:
            if outcome.offsets or outcome.error:
                echo(render(outcome))

        note = note or echo
        if serve_metrics is not None:
            serve_metrics()
        services = service_thread(config, service.runner.spark, store, targets)
        if services.start():
            note(f"table services of {len(services.targets)} tables every {services.check_seconds:g} s")
        beside = (
            background(service.runner.spark, store, [t.qualified_name for t in targets])
            if background is not None
            else None
        )
        if beside is not None and beside.start():
            note(beside.description)
        note(f"applying {len(targets)} tables; stop with SIGTERM or Ctrl-C")
        try:
            with _stop_on_signals(service.stop):
                service.run(on_outcome=report)
        finally:
            services.stop()
            if beside is not None:
                beside.stop()
        note("stopped")


def describe_services(outcome: ServiceOutcome) -> str:
    """One line about a table's services, for people."""
    if outcome.skipped:
        return f"{outcome.table}: skipped ({outcome.skipped})"
    backlog = outcome.backlog
    pending = "" if backlog is None else f"; {backlog.pending_plans} pending"
    if outcome.error:
        return f"{outcome.table}: FAILED: {outcome.error}{pending}"
    if not outcome.executed:
        return f"{outcome.table}: nothing to compact{pending}"
    plans = "1 compaction plan" if len(outcome.executed) == 1 else f"{len(outcome.executed)} compaction plans"
    return f"{outcome.table}: executed {plans} in {outcome.seconds:.1f} s{pending}"


def services_json(outcome: ServiceOutcome, now: float) -> dict[str, object]:
    """A table's service outcome as a JSON-ready dict, for ``--json``."""
    backlog = outcome.backlog
    return {
        "table": outcome.table,
        "status": "skipped" if outcome.skipped else "failed" if outcome.error else "ok",
        "executed": list(outcome.executed),
        "seconds": round(outcome.seconds, 3),
        "pending_plans": None if backlog is None else backlog.pending_plans,
        "read_optimized_staleness_seconds": None
        if backlog is None
        else round(backlog.staleness_seconds(now), 3),
        "error": outcome.error,
        "skipped": outcome.skipped,
    }


def compact_command(
    config: Config,
    tables: Sequence[str],
    schedule: bool,
    echo: Callable[[str], None],
    render: Callable[[ServiceOutcome], str] = describe_services,
    note: Callable[[str], None] | None = None,
    every: float | None = None,
) -> list[ServiceOutcome]:
    """``cdc-lake compact``: execute the chosen tables' pending compaction plans once, as a job; with
    ``every``, look again every that many seconds until SIGTERM or SIGINT, beside a writer (``run``), so
    a due plan is the table's next one within ``plan_io_mb``; a failed look is logged and retried.  With
    ``every`` and no tables named, the tables of ``compaction.executor: job`` (``run`` executes the rest).

    Only tables whose writes leave compaction outside (MERGE_ON_READ with ``inline: false`` compaction: the
    tier-0 default layout, or ``lake.compaction``) are chosen;
    naming another is a ConfigError.  Raises ApplyError when any table's execution failed (once).
    """
    targets = select_targets(config, tuple(tables))
    with StateStore.open(config.state_store.url) as store:
        spark = get_spark(config.spark, config.lake)
        lake = load_format(spark, config.lake.format)
        services = TableServices(
            lake,
            store,
            config.state_store.url,
            beside_writer=every is not None,
            same_process=False,
            executor=CompactionExecutor.JOB,
        )
        serviced = services.serviced(targets)
        if tables and len(serviced) < len(targets):
            others = sorted({t.qualified_name for t in targets} - {t.qualified_name for t in serviced})
            raise ConfigError(
                f"table {others[0]}: its writes run compaction themselves or it has none (compact needs a "
                "MERGE_ON_READ table with compaction inline: false, as tier 0's default layout in "
                "lake.tier_layouts, or lake.table_type MERGE_ON_READ with lake.compaction.inline: false)"
            )
        jobs_own = every is not None and not tables  # run's thread executes the other tables
        if jobs_own:
            serviced = [t for t in serviced if t.compaction.executor is CompactionExecutor.JOB]
        if not serviced:
            (note or echo)(
                "no table has compaction.executor: job: nothing to do"
                if jobs_own
                else "no table leaves compaction outside its writes (a MERGE_ON_READ table with compaction "
                "inline: false, as tier 0's default layout): nothing to do"
            )
            return []
        if every is not None:
            _compact_every(services, serviced, every, lambda o: echo(render(o)), note or echo)
            return []
        outcomes = []
        for target in serviced:
            outcome = services.step(target, schedule=schedule)
            echo(render(outcome))
            outcomes.append(outcome)
    failed = [o for o in outcomes if o.error]
    if failed:
        raise ApplyError(f"compaction failed for {len(failed)} of {len(outcomes)} tables: {failed[0].error}")
    return outcomes


def _compact_every(
    services: TableServices,
    targets: Sequence[TableTarget],
    every: float,
    report: Callable[[ServiceOutcome], None],
    note: Callable[[str], None],
) -> None:
    """``compact --every``: the looks of ``run``'s table-service thread in a process of its own, until
    SIGTERM or SIGINT; a look that executed or failed is reported.  A table without a lock provider
    shared by processes is BUSY for its applier while its plan executes: said once at the start."""
    for target in targets:
        if not services.lake.services_lock_shared(target.spec(target.key_fields or ())):
            _LOG.warning(
                "table %s: lake.format_options name no lock provider shared by processes: its applier "
                "skips the table while a plan executes",
                target.qualified_name,
            )
    thread = ServiceThread(
        services, targets, every, on_outcome=lambda o: report(o) if o.executed or o.error else None
    )
    stopped = threading.Event()
    thread.start()
    note(f"table services of {len(thread.targets)} tables every {every:g} s; stop with SIGTERM or Ctrl-C")
    with _stop_on_signals(stopped.set):
        while not stopped.wait(1.0):
            pass
    thread.stop()
    note("stopped")
