"""``onboard --after-failover`` checks before it changes anything: a promoted primary, and every table
OFFBOARDED with a lake copy; a binlog engine is told its GTID position survives a failover."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc_lake.config import Connection, Source, Table
from cdc_lake.exceptions import SourceEngineError
from cdc_lake.onboard.recapture import RecapturePoint, check_recapture, record_recaptures
from cdc_lake.sources import engine_for
from cdc_lake.sources.base import SourceEngine
from cdc_lake.state import StateStore, TableState

SOURCE = Source(
    name="pg",
    engine="postgres",
    primary=Connection(port=5432, database="app", user="cdc"),
    tables=[Table(name="shop.a"), Table(name="shop.b")],
)
FORK = f"{0x5000028:040d}"


class Promoted:
    """The engine's one question here: the fork point (or the error saying why there is none)."""

    def __init__(self, error: str | None = None) -> None:
        self.error = error

    def fork_ordering(self) -> str:
        if self.error is not None:
            raise SourceEngineError(self.error)
        return FORK


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(f"sqlite:///{tmp_path}/state.db") as opened:
        opened.upsert_source("pg", "postgres", ["cdc-lake-pg"])
        for name in ("pg.shop.a", "pg.shop.b"):
            opened.upsert_table(name, "pg", 1, f"/lake/{name}")
            opened.save_watermark(name, topic=name, offsets={0: 5}, ts_source_ms=None, source_position=None)
            for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
                opened.transition(name, state)
        yield opened


def _check(store: StateStore, engine: object) -> tuple[bool, str]:
    result = check_recapture(store, SOURCE, engine, SOURCE.tables)  # type: ignore[arg-type]
    return result.failed, result.detail


def test_tables_still_captured_are_refused_naming_offboard(store: StateStore) -> None:
    store.transition("pg.shop.a", TableState.OFFBOARDED)

    failed, detail = _check(store, Promoted())

    assert failed
    assert detail == "pg.shop.b is LIVE, not OFFBOARDED (run cdc-lake offboard pg first)"


def test_a_table_without_a_lake_copy_is_refused(store: StateStore) -> None:
    store.upsert_table("pg.shop.c", "pg", 1, "/lake/pg.shop.c")
    source = Source(name="pg", engine="postgres", primary=SOURCE.primary, tables=[Table(name="shop.c")])

    result = check_recapture(store, source, Promoted(), source.tables)  # type: ignore[arg-type]

    assert result.failed and "pg.shop.c has no lake copy to keep" in result.detail


def test_a_primary_never_promoted_is_refused(store: StateStore) -> None:
    for name in ("pg.shop.a", "pg.shop.b"):
        store.transition(name, TableState.OFFBOARDED)

    failed, detail = _check(store, Promoted("source pg: the primary was never promoted (timeline 1)"))

    assert failed and "never promoted" in detail


def test_offboarded_copies_are_recaptured_catching_up_and_possibly_diverged(store: StateStore) -> None:
    for name in ("pg.shop.a", "pg.shop.b"):
        store.transition(name, TableState.OFFBOARDED)
    assert not _check(store, Promoted())[0]

    record_recaptures(store, {"pg.shop.a": RecapturePoint("pg.shop.a", {0: 9})}, FORK)

    info = store.require_table("pg.shop.a")
    recapture = store.recapture("pg.shop.a")
    assert info.state is TableState.CATCHING_UP
    assert "cdc-lake repair pg.shop.a" in (info.possibly_diverged or "")
    assert recapture is not None and (recapture.offsets, recapture.fork_ordering) == ({0: 9}, FORK)


def test_a_binlog_engine_keeps_its_position_over_a_failover() -> None:
    maria = Source(name="m", engine="mariadb", primary=Connection(port=3306, user="cdc"), server_id=7,
                   tables=[Table(name="app.t")])
    engine: SourceEngine = engine_for(maria)

    with pytest.raises(SourceEngineError, match="keeps the connector's position"):
        engine.fork_ordering()
