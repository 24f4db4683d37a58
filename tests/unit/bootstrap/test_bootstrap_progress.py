"""Progress while a bootstrap runs, and the view of it ``status --json`` rebuilds from the state store."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import cast

import pytest

from cdc_lake.config import load_config
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.lake.applier import ApplierFactory
from cdc_lake.state import BootstrapPartition, RunOutcome, StateStore, TableState
from cdc_lake.state.locks import HeldLock
from cdc_lake_bootstrap import run
from cdc_lake_bootstrap.progress import COMMIT_RUN, PLAN_RUN, RUN, LineView, TableProgress, bootstrap_status

TABLE = "src.s.t"


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    opened = StateStore.open(f"sqlite:///{tmp_path / 'state.db'}")
    opened.upsert_source("src", "postgres", ["cdc-lake.src"])
    opened.upsert_table(TABLE, "src", 1, "/lake/src/s/t")
    return opened


def test_rate_and_eta_count_only_this_runs_rows() -> None:
    progress = TableProgress(TABLE, estimated_rows=1000, rows_written=400, rows_before=400, started=100.0)
    progress.rows_written = 600
    progress.rows_in_flight = 100

    assert progress.rows_read == 700
    assert progress.rows_per_second(110.0) == 30.0
    assert progress.eta_seconds(110.0) == 10.0
    assert TableProgress(TABLE, started=100.0).rows_per_second(110.0) is None


def test_rows_and_eta_never_go_back_while_hudi_adds_stages() -> None:
    # Measured: the running commit's estimate from Spark's task counts fell each time Hudi added a
    # stage (5,000 -> 2,500 -> 5,000 -> 3,333 rows), and a commit wrote fewer rows than estimated.
    progress = TableProgress(TABLE, partitions_total=2, estimated_rows=10_000, started=100.0)
    shown: list[int] = []
    etas: list[float | None] = []
    for event in (5_000, 2_500, 5_000, 3_333, ("commit", 4_000), 1_000, ("commit", 5_500)):
        if isinstance(event, tuple):
            progress.committed(event[1], partitions=1)
        else:
            progress.reading(event)
        shown.append(progress.rows_read)
        etas.append(progress.eta_seconds(110.0))  # one instant: only the rows move the ETA

    assert shown == sorted(shown)
    assert shown[:4] == [5_000] * 4
    assert (progress.rows_written, progress.partitions_done, progress.rows_in_flight) == (9_500, 2, 0)
    known = [eta for eta in etas if eta is not None]
    assert known == sorted(known, reverse=True)


class _Stop(Exception):
    """Ends the bootstrap at the step under test."""


class _Phases:
    """A view that records each phase it is shown."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    def show(self, progress: TableProgress) -> None:
        if not self.shown or self.shown[-1] != progress.phase:
            self.shown.append(progress.phase)

    def close(self) -> None:
        """Nothing to finish."""


def test_the_first_slow_steps_are_named_before_they_start(
    tmp_path: Path, store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Measured: about 100 s without a phase while the source was checked and Spark started.
    config_file = tmp_path / "cdc-lake.yaml"
    config_file.write_text(
        f"state_store:\n  url: sqlite:///{tmp_path}/state.db\nlake:\n  base_path: {tmp_path}/lake\n"
        "sources:\n  src:\n    engine: postgres\n    primary: {port: 1, database: d, user: u}\n"
        "    tables:\n      - name: s.t\n"
    )
    config = load_config(config_file)
    source, table = next(config.iter_tables())
    view = _Phases()
    seen: dict[str, list[str]] = {}

    class Engine:
        def table_shape(self, name: str, role: str) -> object:
            seen["table shape"] = list(view.shown)
            return object()

        def quote_identifier(self, name: str) -> str:
            return name

    def spark_start(*_: object) -> object:
        seen["spark"] = list(view.shown)
        raise _Stop

    monkeypatch.setattr(run, "engine_for", lambda _: Engine())
    for step in ("record_key", "selected_columns", "column_reads"):
        monkeypatch.setattr(run, step, lambda *_, **__: ())
    monkeypatch.setattr(run, "align_with_registry", lambda *_: ((), "agreed", {}))
    monkeypatch.setattr(run, "get_spark", spark_start)
    registry, applier = cast(SchemaRegistry, None), cast(ApplierFactory, None)
    bootstrap = run.TableBootstrap(
        config, source, table, store, registry, view, False, applier, read_primary=True
    )

    with pytest.raises(_Stop):
        bootstrap.run(HeldLock(True, "the bootstrap lock of src.s.t"))

    assert seen == {
        "table shape": ["checking the source"],
        "spark": ["checking the source", "starting Spark"],
    }


def test_line_view_prints_phase_changes_and_commits_once() -> None:
    lines: list[str] = []
    view = LineView(lines.append)
    progress = TableProgress(TABLE, phase="copying", partitions_total=4, estimated_rows=100)

    view.show(progress)
    view.show(progress)
    progress.partitions_done, progress.rows_written = 2, 50
    view.show(progress)

    assert len(lines) == 2
    assert lines[1].startswith("src.s.t: copying: 2/4 partitions, 50 rows written")


def test_never_bootstrapped_has_no_status(store: StateStore) -> None:
    assert bootstrap_status(store, TABLE, TableState.PENDING_BOOTSTRAP) is None


def test_status_rebuilds_progress_from_the_plan_and_commits(store: StateStore) -> None:
    store.transition(TABLE, TableState.BOOTSTRAPPING)
    watermark = store.save_watermark(
        TABLE, topic="src.s.t", offsets={0: 42}, ts_source_ms=5, source_position="0/9"
    )
    store.mark_replica_position_reached(TABLE)
    store.set_partition_plan(TABLE, [BootstrapPartition(i, f"p{i}") for i in range(4)])
    run = store.start_run(RUN, TABLE)
    attempt = watermark.created_at.isoformat()
    plan = store.start_run(PLAN_RUN, TABLE, {"attempt": attempt, "estimated_rows": 1000})
    store.finish_run(plan, RunOutcome.OK)
    for indexes in ([0], [1]):
        commit = store.start_run(COMMIT_RUN, TABLE, {"attempt": attempt, "partitions": indexes, "rows": 250})
        store.finish_run(commit, RunOutcome.OK)
        store.mark_partition_done(TABLE, indexes[0])
    started = next(r for r in store.list_runs(TABLE) if r.id == run).started_at

    status = bootstrap_status(store, TABLE, TableState.BOOTSTRAPPING, now=started + dt.timedelta(seconds=10))

    assert status is not None
    assert status["phase"] == "copying"
    assert status["watermark"]["offsets"] == {"0": 42}
    assert (status["partitions_total"], status["partitions_done"]) == (4, 2)
    assert (status["estimated_rows"], status["rows_written"]) == (1000, 500)
    assert status["rows_per_second"] == 50.0
    assert status["eta_seconds"] == 10.0
    assert status["last_run"]["finished_at"] is None


def test_a_failed_run_shows_its_error(store: StateStore) -> None:
    store.transition(TABLE, TableState.BOOTSTRAPPING)
    store.save_watermark(TABLE, topic="src.s.t", offsets={}, ts_source_ms=5, source_position="0/9")
    with pytest.raises(RuntimeError), store.run(RUN, TABLE):
        raise RuntimeError("replica gone")

    status = bootstrap_status(store, TABLE, TableState.BOOTSTRAPPING)

    assert status is not None
    assert status["phase"] == "waiting for the replica"
    assert status["last_run"]["outcome"] == "failed"
    assert status["last_run"]["error"] == "RuntimeError: replica gone"
