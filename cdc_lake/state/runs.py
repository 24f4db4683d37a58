"""Command runs (what ran, on which table, how it ended) and each table's freshness."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import select

from cdc_lake.exceptions import StateStoreError
from cdc_lake.state.models import FreshnessRow, RunRow, utcnow
from cdc_lake.state.records import Freshness, Run, RunHandle, RunOutcome, ServicesBacklog
from cdc_lake.state.session import StoreSession, one_line_text


class RunStore(StoreSession):
    """The recorded command runs and the latest freshness measurement of each table."""

    # Runs

    def start_run(
        self, command: str, table: str | None = None, detail: Mapping[str, Any] | None = None
    ) -> int:
        """Record that ``command`` started (on ``table``); returns the run id."""
        with self._transaction() as session:
            row = RunRow(command=command, table_name=table, started_at=utcnow(), detail=dict(detail or {}))
            session.add(row)
            session.flush()
            return row.id

    def finish_run(self, run_id: int, outcome: RunOutcome, detail: Mapping[str, Any] | None = None) -> None:
        """Record how run ``run_id`` ended; ``detail`` replaces the detail saved at start if given."""
        with self._transaction() as session:
            row = session.get(RunRow, run_id)
            if row is None:
                raise StateStoreError(f"run {run_id} does not exist")
            row.finished_at = utcnow()
            row.outcome = outcome.value
            if detail is not None:
                row.detail = dict(detail)

    @contextmanager
    def run(self, command: str, table: str | None = None) -> Iterator[RunHandle]:
        """Record a run around a block: ok when it returns, failed on an exception, aborted on Ctrl-C.

        Whatever the block puts in ``handle.detail`` is saved; a failure adds ``error``.
        """
        handle = RunHandle(self.start_run(command, table))
        try:
            yield handle
        except (KeyboardInterrupt, SystemExit) as exc:
            self.finish_run(handle.id, RunOutcome.ABORTED, {**handle.detail, "error": type(exc).__name__})
            raise
        except Exception as exc:
            error = one_line_text(f"{type(exc).__name__}: {exc}")
            self.finish_run(handle.id, RunOutcome.FAILED, {**handle.detail, "error": error})
            raise
        self.finish_run(handle.id, RunOutcome.OK, handle.detail)

    def list_runs(self, table: str | None = None, limit: int = 50, command: str | None = None) -> list[Run]:
        """The newest runs first (of ``table`` and of ``command`` if given)."""
        query = select(RunRow).order_by(RunRow.id.desc()).limit(limit)
        if table is not None:
            query = query.where(RunRow.table_name == table)
        if command is not None:
            query = query.where(RunRow.command == command)
        with self._transaction() as session:
            return [_run(row) for row in session.scalars(query)]

    # Freshness

    def record_freshness(
        self,
        table: str,
        newest_source_ts_ms: int | None,
        lag_messages: int,
        measured_at: datetime | None = None,
    ) -> Freshness:
        """Record the newest applied source change time of ``table`` and its Kafka lag in messages."""
        with self._transaction() as session:
            self._require_row(session, table)
            row = session.get(FreshnessRow, table)
            if row is None:
                row = FreshnessRow(table_name=table)
                session.add(row)
            row.newest_source_ts_ms = newest_source_ts_ms
            row.lag_messages = lag_messages
            row.measured_at = measured_at or utcnow()
            return freshness(row)

    def record_services(
        self,
        table: str,
        pending_plans: int,
        uncompacted_since_ms: int | None,
        error: str | None,
        *,
        keep_error: bool = False,
    ) -> bool:
        """Record ``table``'s table-service backlog beside its freshness; False when the applier has not
        measured the table yet (no freshness row: nothing to record it with).  ``keep_error``: a look that
        executed nothing (``run`` beside a job that executes the table's plans) leaves the executor's
        recorded failure as it is."""
        with self._transaction() as session:
            row = session.get(FreshnessRow, table)
            if row is None:
                return False
            row.pending_plans = pending_plans
            row.uncompacted_since_ms = uncompacted_since_ms
            if not keep_error:
                row.services_error = error
            row.services_measured_at = utcnow()
            return True

    def get_freshness(self, table: str) -> Freshness | None:
        """The latest freshness measurement of ``table``, if any."""
        with self._transaction() as session:
            row = session.get(FreshnessRow, table)
            return None if row is None else freshness(row)


def _run(row: RunRow) -> Run:
    return Run(
        id=row.id,
        command=row.command,
        table=row.table_name,
        started_at=row.started_at,
        finished_at=row.finished_at,
        outcome=None if row.outcome is None else RunOutcome(row.outcome),
        detail=dict(row.detail),
    )


def freshness(row: FreshnessRow) -> Freshness:
    """The plain record of a freshness row (a table's current copy holds it too)."""
    return Freshness(
        table=row.table_name,
        newest_source_ts_ms=row.newest_source_ts_ms,
        lag_messages=row.lag_messages,
        measured_at=row.measured_at,
        services=None
        if row.pending_plans is None or row.services_measured_at is None
        else ServicesBacklog(
            pending_plans=row.pending_plans,
            uncompacted_since_ms=row.uncompacted_since_ms,
            error=row.services_error,
            measured_at=row.services_measured_at,
        ),
    )
