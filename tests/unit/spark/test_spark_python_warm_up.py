"""``apply`` and ``run`` start a Python worker as soon as their session is up, beside the driver's work.

Issue 36 item 7: the first batch's decode job of an ``apply --once`` started the executors' Python worker
and imported cdc-lake's decoding in it (``pyspark.daemon``, then ``cdc_lake.apply.decoding``: about 2 s of
its ~3 s on a quiet machine) only once the driver had read the table's checkpoint, planned the batch and
checked the source.  Warmed on a thread of its own right after the session starts, the worker is ready
(and reused) when the batch needs it: measured with ``apply --once`` of 30 messages, 3 pairs at load 7-13,
49.6/72.2/57.6 s against 62.9/80.7/63.0 s.  A warm-up that fails is left to the job that needs the worker.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from support.spark_settings import Lake, Spark

from cdc_lake.cli.main import cli
from cdc_lake.spark import session


class _Rdd:
    def __init__(self, context: _Context, items: list[Any]) -> None:
        self.context = context
        self.items = items

    def foreach(self, function: Callable[[Any], object]) -> None:
        self.context.ran.append((threading.current_thread(), [function(item) for item in self.items]))
        if self.context.fail:
            raise RuntimeError("no worker")


class _Context:
    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.ran: list[tuple[threading.Thread, list[object]]] = []

    def parallelize(self, items: list[Any], slices: int) -> _Rdd:
        assert slices == 1
        return _Rdd(self, list(items))


class _Session:
    def __init__(self, fail: bool = False) -> None:
        self.sparkContext = _Context(fail)


def test_the_worker_imports_the_modules_on_a_thread_of_its_own() -> None:
    spark = _Session()
    session.warm_python_workers(spark, ("json", "cdc_lake.exceptions")).join(10)  # type: ignore[arg-type]
    ((thread, imported),) = spark.sparkContext.ran
    assert thread is not threading.current_thread() and thread.daemon
    assert imported == [None, None]
    assert {"json", "cdc_lake.exceptions"} <= set(sys.modules)


def test_a_failed_warm_up_raises_nothing() -> None:
    spark = _Session(fail=True)
    session.warm_python_workers(spark, ("json",)).join(10)  # type: ignore[arg-type]
    assert len(spark.sparkContext.ran) == 1


def test_hooks_run_when_the_session_starts_not_for_a_running_one(monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[object] = []
    monkeypatch.setattr(session, "_after_start", [])
    monkeypatch.setattr(session, "_session", None)
    session.after_start(started.append)
    assert started == []
    fake = _Session()
    monkeypatch.setattr(session, "submitted_conf", lambda: None)
    monkeypatch.setattr(session, "_launch_own_jvm", lambda settings, lake, short: {"spark.app.name": "t"})
    monkeypatch.setattr(session, "_alive", lambda running: True)

    class _Builder:
        def config(self, key: str, value: str) -> _Builder:
            return self

        def getOrCreate(self) -> Any:
            fake.sparkContext.setLogLevel = lambda level: None  # type: ignore[attr-defined]
            return fake

    class _SparkSession:
        builder = _Builder()

    monkeypatch.setattr(session, "SparkSession", _SparkSession)
    assert session.get_spark(Spark(), Lake()) is fake  # type: ignore[comparison-overlap]
    assert started == [fake]
    session.after_start(started.append)  # the session is up: for its next start only
    session.get_spark(Spark(), Lake())  # the running session: no hook again
    assert started == [fake]


@pytest.mark.parametrize("args", [["apply", "--once"], ["run"]])
def test_apply_and_run_warm_the_decoding_modules(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str]
) -> None:
    (tmp_path / "cdc-lake.yaml").write_text(f"state_store:\n  url: sqlite:///{tmp_path}/s.db\n")
    monkeypatch.setattr(session, "_after_start", [])
    monkeypatch.setattr("cdc_lake.cli.main._warming", [])
    monkeypatch.setattr("cdc_lake.apply.commands.apply_once_command", lambda *a, **k: [])
    monkeypatch.setattr("cdc_lake.apply.commands.run_command", lambda *a, **k: None)
    result = CliRunner().invoke(cli, ["--config", str(tmp_path / "cdc-lake.yaml"), *args])
    assert result.exit_code == 0, result.output
    warmed: list[tuple[object, tuple[str, ...]]] = []
    monkeypatch.setattr(
        session, "warm_python_workers", lambda spark, modules: warmed.append((spark, modules))
    )
    (hook,) = session._after_start
    hook("the session")  # type: ignore[arg-type]
    assert warmed == [("the session", ("cdc_lake.apply.decoding", "cdc_lake.kafka.reader"))]
