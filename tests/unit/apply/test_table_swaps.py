"""Table swaps (gh-ost, pt-online-schema-change): the RENAME statements of a MySQL/MariaDB schema history.

The statement parsing of the MySQL family's hook, the history records that name a captured table, and
the offset each table has checked so far.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from pyspark.sql import SparkSession

from cdc_lake.apply.rewrites import RewriteSource
from cdc_lake.apply.runner import SCHEMA_CHANGE_RUN, ApplyRunner, applier_options
from cdc_lake.apply.swaps import SwapCheck
from cdc_lake.apply.table_applier import BatchResult
from cdc_lake.capture.history import HistoryReader, HistoryRename, renames_in
from cdc_lake.config import load_config
from cdc_lake.decode.registry import SchemaRegistry
from cdc_lake.exceptions import DecodeError
from cdc_lake.kafka.board import OffsetBoard
from cdc_lake.kafka.offsets import OffsetRange, TopicState
from cdc_lake.kafka.reader import KafkaReadSettings
from cdc_lake.lake.target import TableTarget, select_targets
from cdc_lake.sources import capabilities_for
from cdc_lake.sources.mysql.ddl import table_renames
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore, versioned_path

EXAMPLE = Path(__file__).resolve().parents[3] / "cdc-lake.example.yaml"
TABLE = "maria.app.products"
HISTORY = "cdc-lake.maria.schema-history"


@pytest.mark.parametrize(
    ("statement", "pairs"),
    [
        ("RENAME TABLE swaps TO _swaps_old, _swaps_new TO swaps",
         [("db.swaps", "db._swaps_old"), ("db._swaps_new", "db.swaps")]),
        ("rename table `swaps` to `_swaps_old`", [("db.swaps", "db._swaps_old")]),
        ("Rename Tables `shop`.`orders` TO `shop`.`_orders_del`, shop._orders_gho to shop.orders",
         [("shop.orders", "shop._orders_del"), ("shop._orders_gho", "shop.orders")]),
        ("rename /* gh-ost */ table `a` to `_a_del`, `_a_gho` to `a`",
         [("db.a", "db._a_del"), ("db._a_gho", "db.a")]),
        ("-- pt-osc\nRENAME TABLE `db`.`t` TO `db`.`_t_old`, # swap\n `db`.`_t_new` TO `db`.`t`",
         [("db.t", "db._t_old"), ("db._t_new", "db.t")]),
        ("RENAME TABLE IF EXISTS a WAIT 5 TO b, c NOWAIT TO d", [("db.a", "db.b"), ("db.c", "db.d")]),
        ("rename table `we``ird` to `x`", [("db.we`ird", "db.x")]),
        ("ALTER TABLE t RENAME TO t2", [("db.t", "db.t2")]),
        ("alter online table `s`.`t` add column c int, rename as `s`.`u`", [("s.t", "s.u")]),
    ],
)
def test_the_mysql_family_reads_the_pairs_of_a_rename(statement: str, pairs: list[tuple[str, str]]) -> None:
    assert [(r.old, r.new) for r in table_renames(statement, "db")] == pairs


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE t RENAME COLUMN a TO b",
        "alter table t rename index i to j, rename key k to l",
        "CREATE TABLE `rename` (id int)",
        "insert into t values ('RENAME TABLE a TO b')",
        "/* RENAME TABLE a TO b */ select 1",
        "DROP TEMPORARY TABLE a",
        "ALTER TABLE a RENAME CONSTRAINT c1 TO c2",
        "ALTER TABLE a DROP COLUMN partition_key",
        "CREATE TABLE a (id int)",
        "",
    ],
)
def test_other_statements_rename_no_table(statement: str) -> None:
    assert table_renames(statement, "db") == ()


def test_an_unqualified_name_without_a_default_database_stays_unqualified() -> None:
    [rename] = table_renames("rename table a to b", "")

    assert (rename.old, rename.new) == ("a", "b")


def test_only_the_mysql_family_reports_table_renames() -> None:
    assert capabilities_for("postgres").table_renames is None
    assert capabilities_for("mysql").table_renames is table_renames
    assert capabilities_for("mariadb").table_renames is table_renames


def _record(ddl: str, database: str = "db", position: int = 0) -> bytes:
    value = {"source": {"server": "s"}, "position": {"pos": position}, "databaseName": database, "ddl": ddl}
    return json.dumps(value).encode()


def test_history_records_yield_the_renames_with_their_offsets() -> None:
    records = [
        (3, _record("CREATE TABLE _swaps_new LIKE swaps")),
        (4, _record("ALTER TABLE _swaps_new ADD COLUMN note varchar(20)")),
        (5, _record("RENAME TABLE swaps TO _swaps_old,\n  _swaps_new TO swaps")),
        (6, None),
        (7, _record("rename table other to other2", database="elsewhere")),
    ]

    found = renames_in(records, table_renames)

    assert [r.offset for r in found] == [5, 7]
    assert found[0].statement == "RENAME TABLE swaps TO _swaps_old, _swaps_new TO swaps"
    assert found[0].touches("db.swaps") and found[0].touches("DB.Swaps")
    assert not found[0].touches("db.other") and found[1].touches("elsewhere.other2")


def test_a_table_renamed_away_is_touched_too() -> None:
    [rename] = renames_in([(9, _record("rename table a to a_archive"))], table_renames)

    assert isinstance(rename, HistoryRename)
    assert rename.touches("db.a") and rename.touches("db.a_archive")


class _History:
    """A schema-history topic held in memory: its records, the end offset a board reports, the reads."""

    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.read_ranges: list[tuple[int, int]] = []

    def add(self, ddl: str, database: str = "app", position: int = 0) -> int:
        self.records.append(_record(ddl, database, position))
        return len(self.records) - 1

    def read(self, wanted: OffsetRange) -> Iterable[tuple[int, bytes | None]]:
        self.read_ranges.append((wanted.start, wanted.end))
        return [(o, self.records[o]) for o in range(wanted.start, wanted.end)]


class _Board(OffsetBoard):
    def __init__(self, history: _History) -> None:
        super().__init__(KafkaReadSettings("unused:9092"), 1.0)
        self.history = history

    def state(self, topic: str) -> TopicState:
        assert topic == HISTORY
        return TopicState("id", {0: (0, len(self.history.records))})


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    with StateStore.open(f"sqlite:///{tmp_path}/state.db") as opened:
        opened.upsert_source("maria", "mariadb", ["cdc-lake.maria"])
        opened.upsert_table(TABLE, "maria", 1, "/lake/products")
        for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
            opened.transition(TABLE, state)
        yield opened


@pytest.fixture
def target() -> TableTarget:
    [found] = select_targets(load_config(EXAMPLE), (TABLE,))
    return dataclasses.replace(found, base_path="/lake/products")


def _watermark(store: StateStore, table: str, history_offset: int | None) -> None:
    store.save_watermark(
        table, topic="maria.app.products", offsets={0: 0}, ts_source_ms=None, source_position=None,
        history_offset=history_offset,
    )


def _check(store: StateStore, history: _History) -> SwapCheck:
    reader = HistoryReader(
        KafkaReadSettings("unused:9092"), _Board(history), history.read, lambda topic: len(history.records)
    )
    return SwapCheck(reader, store)


def test_a_mariadb_table_watches_its_connectors_history_and_postgres_none() -> None:
    config = load_config(EXAMPLE)

    found = {t.qualified_name: t for t in select_targets(config)}

    assert (found[TABLE].history_topic, found[TABLE].source_table) == (HISTORY, "app.products")
    assert found["pg.public.customers"].history_topic is None


def test_a_swap_before_the_bootstrap_stops_nothing_and_one_after_stops_the_table(
    store: StateStore, target: TableTarget
) -> None:
    history = _History()
    history.add("RENAME TABLE products TO _products_old, _products_new TO products")
    _watermark(store, TABLE, history_offset=1)
    check = _check(store, history)

    assert check.check(target) is None
    assert history.read_ranges == [], "the history did not move past the watermark: nothing read"
    history.add("create table _products_gho like products")
    swap = history.add(
        "rename /* gh-ost */ table `products` to `_products_del`, `_products_gho` to `products`"
    )

    diff = check.check(target)

    assert diff is not None and diff.history_offset == swap and diff.schema_id is None
    assert diff.summary() == (
        f"schema change (schema history offset {swap}): table 'app.products' swapped: rename /* gh-ost */ "
        "table `products` to `_products_del`, `_products_gho` to `products`; "
        f"re-bootstrap the table: cdc-lake rebootstrap {TABLE}"
    )
    assert not diff.needs_primary
    assert check.check(target) == diff, "stopped on the swap until re-bootstrapped"
    assert store.get_watermark(TABLE).history_offset == 1  # type: ignore[union-attr]


def test_the_checked_offset_moves_past_other_ddl_durably_and_each_range_is_read_once(
    store: StateStore, target: TableTarget
) -> None:
    history = _History()
    _watermark(store, TABLE, history_offset=0)
    store.upsert_table("maria.app.inventory", "maria", 1, "/lake/inventory")
    _watermark(store, "maria.app.inventory", history_offset=0)
    inventory = dataclasses.replace(
        target, qualified_name="maria.app.inventory", source_table="app.inventory"
    )
    history.add("alter table inventory add column note text")
    history.add("rename table other to other_old")
    check = _check(store, history)

    assert check.check(target) is None
    assert check.check(inventory) is None
    assert history.read_ranges == [(0, 2)], "one read serves every table of the connector"
    assert store.get_watermark(TABLE).history_offset == 2  # type: ignore[union-attr]
    assert check.check(target) is None and history.read_ranges == [(0, 2)]
    history.add("rename table inventory to inventory_old")

    restarted = _check(store, history)

    assert restarted.check(target) is None
    assert history.read_ranges[-1] == (2, 3), "a new process resumes from the recorded offset"
    assert restarted.check(inventory) is not None


def test_a_swap_recorded_one_pair_per_record_is_named_whole(store: StateStore, target: TableTarget) -> None:
    """As the stack's MariaDB connector records ``RENAME TABLE a TO b, c TO a``: a record per pair, at
    one position; a later rename of the table at another position is not part of this swap."""
    history = _History()
    _watermark(store, TABLE, history_offset=0)
    history.add("rename table products to _products_old", position=7)
    history.add("rename table _products_new to products", position=7)
    history.add("rename table products to products_2", position=9)

    diff = _check(store, history).check(target)

    assert diff is not None and diff.history_offset == 0
    assert "swapped: rename table products to _products_old; rename table _products_new to products; " in (
        diff.summary()
    )
    assert "products_2" not in diff.summary()


def test_a_table_bootstrapped_without_a_history_offset_starts_watching_at_the_end(
    store: StateStore, target: TableTarget
) -> None:
    history = _History()
    history.add("rename table products to p2, p3 to products")
    _watermark(store, TABLE, history_offset=None)

    assert _check(store, history).check(target) is None
    assert store.get_watermark(TABLE).history_offset == 1  # type: ignore[union-attr]


def test_a_rebootstrapped_table_does_not_stop_again_on_the_same_swap(
    store: StateStore, target: TableTarget
) -> None:
    history = _History()
    _watermark(store, TABLE, history_offset=0)
    history.add("RENAME TABLE products TO _products_old, _products_new TO products")
    check = _check(store, history)
    assert check.check(target) is not None
    store.transition(TABLE, TableState.SCHEMA_CHANGED, "swapped")
    started = store.start_rebootstrap(TABLE, "swap", lambda v: versioned_path("/lake/products", v))
    store.upsert_table(started.copy_name, "maria", 1, started.new_path)
    _watermark(store, started.copy_name, history_offset=len(history.records))
    copy = dataclasses.replace(target, qualified_name=started.copy_name, base_path=started.new_path)
    assert check.check(copy) is None, "the copy began after the swap"
    for state in (TableState.BOOTSTRAPPING, TableState.CATCHING_UP, TableState.LIVE):
        store.transition(started.copy_name, state)
    store.switch_rebootstrap(TABLE, started.version, dt.timedelta(hours=1))

    assert check.check(dataclasses.replace(target, base_path=started.new_path)) is None


def test_a_table_bootstrapped_again_at_its_path_does_not_stop_on_a_swap_before_its_copy(
    store: StateStore, target: TableTarget
) -> None:
    """An offboarded table onboarded and bootstrapped again while ``run`` keeps its memory of the table:
    the new watermark's offset wins over the remembered one when a swap is found."""
    history = _History()
    _watermark(store, TABLE, history_offset=0)
    check = _check(store, history)
    assert check.check(target) is None
    history.add("RENAME TABLE products TO _products_old, _products_new TO products")
    _watermark(store, TABLE, history_offset=len(history.records))

    assert check.check(target) is None
    history.add("rename table products to products_gone")
    assert check.check(target) is not None


_MARIADB = cast(RewriteSource, SimpleNamespace(capabilities=capabilities_for("mariadb")))
"""A source that logs no rewrites (the MySQL family's DDL is in its schema history)."""


class _NoRegistry(SchemaRegistry):
    def __init__(self) -> None:
        pass


def test_the_runner_stops_a_swapped_table_in_schema_changed_before_any_batch(
    store: StateStore, target: TableTarget, tmp_path: Path
) -> None:
    history = _History()
    _watermark(store, TABLE, history_offset=0)
    statement = (
        "RENAME TABLE `app`.`products` TO `app`.`_products_old`, `app`.`_products_new` TO `app`.`products`"
    )
    history.add(statement)
    options = applier_options(load_config(EXAMPLE))
    runner = ApplyRunner(
        cast(SparkSession, None), store, options, _NoRegistry(), f"sqlite:///{tmp_path}/state.db",
        lambda name: ("maria", _MARIADB),
    )
    runner.swaps = _check(store, history)
    stopped: list[str] = []
    runner.on_schema_change = lambda name, diff: stopped.append(diff.summary())

    outcome = runner.step(target)

    info = store.require_table(TABLE)
    assert info.state is TableState.SCHEMA_CHANGED
    assert outcome.error == info.last_error == stopped[0]
    assert info.last_error is not None and statement in info.last_error
    assert info.last_error.endswith(f"re-bootstrap the table: cdc-lake rebootstrap {TABLE}")
    [run] = [r for r in store.list_runs(TABLE) if r.command == SCHEMA_CHANGE_RUN]
    assert run.detail["history_offset"] == 0
    assert run.detail["report"][0].startswith("BREAKS   table 'app.products' swapped: RENAME TABLE")
    assert all(len(line) <= 80 for line in run.detail["report"])
    assert not runner._appliers, "no batch was planned"
    assert runner.step(target).error == outcome.error
    assert len([r for r in store.list_runs(TABLE) if r.command == SCHEMA_CHANGE_RUN]) == 1


@pytest.mark.parametrize(
    ("statement", "replaced"),
    [
        ("DROP TABLE products", ["db.products"]),
        ("drop table if exists `shop`.`orders`, b", ["shop.orders", "db.b"]),
        ("CREATE OR REPLACE TABLE products AS SELECT * FROM products_staging", ["db.products"]),
        ("ALTER TABLE products DROP PARTITION p2019", ["db.products"]),
        ("alter table products truncate partition p2019, p2020", ["db.products"]),
        ("ALTER TABLE products EXCHANGE PARTITION p2024 WITH TABLE products_2024",
         ["db.products", "db.products_2024"]),
        ("ALTER TABLE products CONVERT PARTITION p2019 TO TABLE products_2019",
         ["db.products", "db.products_2019"]),
        ("alter table products convert table products_2025 to partition p2025 values less than (2026)",
         ["db.products"]),
        ("ALTER TABLE products IMPORT TABLESPACE", ["db.products"]),
        ("ALTER TABLE products DISCARD PARTITION p1 TABLESPACE", ["db.products"]),
    ],
)
def test_statements_that_replace_rows_in_place_are_read(statement: str, replaced: list[str]) -> None:
    found = table_renames(statement, "db")
    assert [r.old for r in found] == replaced
    assert all(r.replaces and r.old == r.new for r in found)


@pytest.mark.parametrize(
    "ddl",
    [
        ["DROP TABLE products", "CREATE TABLE products (id int primary key, note text)"],
        ["CREATE OR REPLACE TABLE products AS SELECT * FROM products_staging"],
        ["ALTER TABLE products EXCHANGE PARTITION p2024 WITH TABLE products_2024"],
        ["ALTER TABLE products DROP PARTITION p2019"],
        ["ALTER TABLE products TRUNCATE PARTITION p2019"],
    ],
)
def test_statements_that_replace_rows_without_row_events_stop_the_table(
    store: StateStore, target: TableTarget, ddl: list[str]
) -> None:
    """Found in review: the rows change with no row event, as in a swap (the lake would keep the dropped
    table's or partition's rows LIVE)."""
    history = _History()
    _watermark(store, TABLE, history_offset=0)
    for statement in ddl:
        history.add(statement)

    diff = _check(store, history).check(target)

    assert diff is not None
    expected = "schema change (schema history offset 0): table 'app.products' rows replaced: "
    assert diff.summary().startswith(expected), diff.summary()


def test_a_rename_to_another_database_is_a_swap_of_the_table(store: StateStore, target: TableTarget) -> None:
    """Found in review: Debezium records ``USE app; RENAME TABLE products TO archive.products_2024`` under
    the new table's database ('archive'): the bare old name is matched on its table part."""
    history = _History()
    _watermark(store, TABLE, history_offset=0)
    history.add("RENAME TABLE products TO archive.products_2024", database="archive")

    assert _check(store, history).check(target) is not None


class _Topics(OffsetBoard):
    """A board over several in-memory histories (a missing one: no id, no partitions, as Kafka says)."""

    def __init__(self, histories: dict[str, _History]) -> None:
        super().__init__(KafkaReadSettings("unused:9092"), 1.0)
        self.histories = histories

    def state(self, topic: str) -> TopicState:
        history = self.histories.get(topic)
        if history is None:
            return TopicState(None, {})
        return TopicState("id-" + topic, {0: (0, len(history.records))})


def test_a_missing_history_topic_is_logged_once(
    store: StateStore, target: TableTarget, caplog: pytest.LogCaptureFixture
) -> None:
    """Found in review: a history topic Kafka does not have read as an empty history, silently."""
    _watermark(store, TABLE, history_offset=0)
    check = SwapCheck(HistoryReader(KafkaReadSettings("unused:9092"), _Topics({})), store)

    with caplog.at_level(logging.WARNING, logger="cdc_lake.apply.swaps"):
        assert check.check(target) is None
        assert check.check(target) is None

    [warning] = caplog.records
    assert f"schema history topic {HISTORY} does not exist" in warning.getMessage()


def test_a_table_moved_to_tier_0_checks_its_new_connectors_history(
    store: StateStore, target: TableTarget
) -> None:
    """Found in review: after a tier change the watermark's offset (50) counts the shared connector's
    history while the table now reads the tier-0 connector's (3 records, the third a gh-ost swap)."""
    shared, tier0 = _History(), _History()
    for n in range(50):
        shared.add(f"alter table other{n} add column c int")
    _watermark(store, TABLE, history_offset=50)
    tier0.add("create table _products_gho like products")
    tier0.add("alter table _products_gho add column n int")
    tier0.add(
        "rename /* gh-ost */ table `app`.`products` to `app`.`_products_del`, "
        "`app`.`_products_gho` to `app`.`products`"
    )
    moved = dataclasses.replace(target, history_topic="cdc-lake.maria.tier0.app-products.schema-history")
    board = _Topics({HISTORY: shared, "cdc-lake.maria.tier0.app-products.schema-history": tier0})
    check = SwapCheck(HistoryReader(KafkaReadSettings("unused:9092"), board, tier0.read), store)

    assert check.check(moved) is not None


def test_a_malformed_history_record_is_named_not_raised_raw() -> None:
    with pytest.raises(DecodeError, match=r"^h: schema history record at offset 4 is not JSON"):
        renames_in([(4, b"\xff not json")], table_renames, "h")


class _SwapDuringBatch:
    """An applier whose batch's changes follow a swap recorded after the runner's check before it."""

    def __init__(self, history: _History) -> None:
        self.history = history
        self.committed = False

    def apply_batch(self, limit: object, before_commit: Callable[[], None]) -> BatchResult:
        self.history.add("RENAME TABLE products TO _products_old, _products_new TO products")
        before_commit()
        self.committed = True
        return BatchResult(TABLE, "maria.app.products", {0: 0}, {0: 5}, {0: 5}, changes=5)

    def forget(self) -> None:
        pass


def test_a_batch_whose_changes_follow_a_swap_does_not_commit(
    store: StateStore, target: TableTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found in review: the swap was checked before the batch only (one batch late)."""
    history = _History()
    _watermark(store, TABLE, history_offset=0)
    options = applier_options(load_config(EXAMPLE))
    spark = SimpleNamespace(sparkContext=SimpleNamespace(setJobGroup=lambda *args, **kwargs: None))
    runner = ApplyRunner(
        cast(SparkSession, spark), store, options, _NoRegistry(), f"sqlite:///{tmp_path}/state.db",
        lambda name: ("maria", _MARIADB),
    )
    runner.swaps = _check(store, history)
    applier = _SwapDuringBatch(history)
    monkeypatch.setattr(runner, "applier", lambda t: applier)

    outcome = runner.step(target)

    assert not applier.committed
    info = store.require_table(TABLE)
    assert info.state is TableState.SCHEMA_CHANGED and outcome.error == info.last_error
    assert info.last_error is not None
    assert "swapped: RENAME TABLE products TO _products_old" in info.last_error
