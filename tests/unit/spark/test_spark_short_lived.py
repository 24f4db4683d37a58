"""A one-shot command with little to do starts a driver tuned for a short life.

Issue 36 item 7: on a cold driver HotSpot's C2 compiler spends seconds of the machine's two cores before
its code pays off.  ``apply --once`` with a backlog of at most ``SHORT_LIVED_BACKLOG`` messages starts the
driver with the C1 compiler alone and the serial collector (30 messages: 14.2-14.3 s -> 10.4-12.1 s); a
larger backlog keeps Spark's default JVM (200,000 changes: 12 and 53 % slower with them in two pairs).
The user's own JIT or collector options win, wherever they are given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.spark_settings import Lake, Spark

from cdc_lake.apply import commands
from cdc_lake.config import load_config
from cdc_lake.spark import session
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

C1 = "-XX:TieredStopAtLevel=1"
SERIAL = "-XX:+UseSerialGC"
DRIVER = "spark.driver.extraJavaOptions"


@pytest.fixture(autouse=True)
def _no_submit_opts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_SUBMIT_OPTS", raising=False)


@pytest.mark.parametrize(
    ("given", "added"),
    [
        ("", (C1, SERIAL)),
        ("-Dmine=1 -Xss4m", (C1, SERIAL)),
        ("-XX:TieredStopAtLevel=4", (SERIAL,)),
        ("-XX:-TieredCompilation", (SERIAL,)),
        ("-Xint", (SERIAL,)),
        ("-XX:+UseG1GC", (C1,)),
        ("-XX:+UseParallelGC -XX:+TieredCompilation", ()),
    ],
)
def test_the_users_own_jit_and_collector_options_win(given: str, added: tuple[str, ...]) -> None:
    assert session.short_lived_options(given) == added


def test_options_in_spark_submit_opts_count_as_the_users(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_SUBMIT_OPTS", "-XX:+UseZGC")
    assert session.short_lived_options("") == (C1,)


@pytest.mark.parametrize("life", list(session.DriverLife))
def test_the_driver_starts_with_them_only_for_small_work(
    monkeypatch: pytest.MonkeyPatch, life: session.DriverLife
) -> None:
    launched: list[dict[str, str]] = []
    monkeypatch.setattr(session, "_launch_gateway", lambda conf, verbose, cp: launched.append(dict(conf)))
    monkeypatch.setattr(session, "driver_jars", lambda settings, lake_format: [])
    settings = Spark(conf={DRIVER: "-Dmine=1"}, class_data_sharing=False)
    conf = session._launch_own_jvm(settings, Lake(), life)
    (launch,) = launched
    options = launch[DRIVER].split()
    assert options[0] == "-Dmine=1"
    assert (C1 in options and SERIAL in options) is (life is session.DriverLife.SMALL)
    assert C1 not in conf[DRIVER].split()  # the session's conf: what the user and cdc-lake's defaults set


CONFIG = """
state_store:
  url: sqlite:///{root}/state.db
lake:
  base_path: {root}/lake
sources:
  src:
    engine: postgres
    primary: {{host: 127.0.0.1, port: 15432, database: d, user: u, password: p}}
    tables:
      - name: public.t
"""


class _Started(Exception):
    pass


@pytest.mark.parametrize(
    ("backlog", "expected"),
    [
        (0, None),
        (1, session.DriverLife.SMALL),
        (commands.SHORT_LIVED_BACKLOG, session.DriverLife.SMALL),
        (commands.SHORT_LIVED_BACKLOG + 1, session.DriverLife.ONE_SHOT),
    ],
)
def test_apply_once_sizes_its_driver_by_the_backlog(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, backlog: int, expected: session.DriverLife | None
) -> None:
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(CONFIG.format(root=tmp_path))
    config = load_config(path)
    with StateStore.open(config.state_store.url) as store:
        store.upsert_source("src", "postgres")
        store.upsert_table("src.public.t", "src", 1, str(tmp_path / "lake"))
        for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
            store.transition("src.public.t", state)
        store.record_applied_offsets("src.public.t", {0: 70, 1: 30}, "20260101000000000")
    # The topic's end offsets now: partition 1 holds the whole backlog.
    monkeypatch.setattr(commands, "end_offsets", lambda *a, **k: {0: 70, 1: 30 + backlog})
    asked: list[dict[str, Any]] = []

    def get_spark(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs)
        raise _Started

    monkeypatch.setattr(commands, "get_spark", get_spark)
    if expected is None:
        (outcome,) = commands.apply_once_command(config, (), None, 1, lambda line: None)
        assert asked == [] and outcome.offsets == 0  # nothing new: no Spark at all
        return
    with pytest.raises(_Started):
        commands.apply_once_command(config, (), None, 1, lambda line: None)
    assert asked == [{"life": expected}]
