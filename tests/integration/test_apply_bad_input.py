"""Bad input stops only its own table, exactly at the bad message, and names it.

Two tables apply together through ``cdc-lake apply --once``: a good one, and one whose topic holds a bad
message between good ones.  The bad table commits the changes before the bad message, keeps its offset
there (a second run stops at the same message), and becomes FAILED with the topic, partition, offset
and reason; the good table is applied and LIVE; the command exits 1 naming the failed table.  A registry
outage fails every table the same way until the registry is back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyspark.sql import SparkSession
from support.apply import SyntheticTopic, config_dict, lake_rows, record_catching_up, synthetic_config
from support.common import write_and_load

from cdc_lake.cli.main import cli
from cdc_lake.config import Config
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.lake.commit_metadata import OFFSETS_KEY
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(900)]

BAD_OFFSET = 3
BadMessage = Callable[[SyntheticTopic], tuple[bytes | None, bytes | None]]
CASES: dict[str, tuple[BadMessage, str]] = {
    "undecodable": (lambda t: (t.key(9), t.change("c", 9)[:-3]), "does not decode with schema id"),
    "not-framed": (lambda t: (t.key(9), b'{"json": "not avro"}'), "not the Confluent magic byte"),
    "unknown-schema-id": (
        lambda t: (t.key(9), b"\x00\x7f\xff\xff\x01" + t.change("c", 9)[5:]),
        "is not registered",
    ),
    "missing-key": (lambda t: (None, t.change("c", 9)), "message has no key"),
    "value-does-not-fit": (
        lambda t: (t.key(9), t.change("c", 9, ratio=(1, 20))),
        "more than 18 fractional digits",
    ),
}


def _apply(config_path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--config", str(config_path), "apply", "--once", "--parallel", "2"])
    return result.exit_code, result.output


def _offsets(spark: SparkSession, config: Config, table: str) -> dict[str, int]:
    commit = latest_commit(spark, config.lake.table_base_path(table))
    assert commit is not None
    loaded: dict[str, int] = json.loads(commit.metadata[OFFSETS_KEY])
    return loaded


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_bad_message_stops_its_table_there_and_the_other_table_goes_on(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path, case: str
) -> None:
    run = uuid.uuid4().hex[:8]
    good, bad = SyntheticTopic(local_stack, f"good_{run}"), SyntheticTopic(local_stack, f"bad_{run}")
    good.send(
        [
            (good.key(1), good.change("c", 1, "a")),
            (good.key(2), good.change("c", 2, "b")),
            (good.key(1), good.change("u", 1, "a2")),
            (good.key(2), good.change("d", 2)),
            (good.key(2), None),
        ]
    )
    make_bad, reason = CASES[case]
    bad.send(
        [(bad.key(k), bad.change("c", k, f"v{k}")) for k in (1, 2, 3)]
        + [make_bad(bad)]
        + [(bad.key(4), bad.change("c", 4, "after"))]
    )
    config_path, config = synthetic_config(local_stack, tmp_path, [good, bad])
    good_table, bad_table = f"good_{run}.s.t", f"bad_{run}.s.t"

    code, output = _apply(config_path)

    where = f"topic '{bad.topic}' partition 0 offset {BAD_OFFSET}"
    assert code == 1
    assert f"error: 1 of 2 tables failed: {bad_table}: {where}: " in output and reason in output
    assert [r["id"] for r in lake_rows(spark, config.lake.table_base_path(bad_table))] == [1, 2, 3]
    assert _offsets(spark, config, bad_table) == {"0": BAD_OFFSET}
    assert [(r["id"], r["name"]) for r in lake_rows(spark, config.lake.table_base_path(good_table))] == [
        (1, "a2")
    ]
    with StateStore.open(config.state_store.url) as store:
        failed = store.require_table(bad_table)
        assert failed.state is TableState.FAILED and failed.last_error is not None
        assert failed.last_error.startswith(where) and reason in failed.last_error
        assert store.get_applied_offsets(bad_table) == {0: BAD_OFFSET}
        assert store.require_table(good_table).state is TableState.LIVE

    code, output = _apply(config_path)

    assert code == 1 and where in output
    assert _offsets(spark, config, bad_table) == {"0": BAD_OFFSET}


def test_a_registry_outage_fails_tables_without_advancing_and_they_recover(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path
) -> None:
    run = uuid.uuid4().hex[:8]
    topic = SyntheticTopic(local_stack, f"outage_{run}")
    topic.send([(topic.key(k), topic.change("c", k, f"v{k}")) for k in (1, 2)])
    table = f"outage_{run}.s.t"
    good_registry = config_dict(
        local_stack, [], str(tmp_path / "lake"), f"sqlite:///{tmp_path}/state.db", synthetic=[topic]
    )
    down = {**good_registry, "schema_registry": {"url": "http://127.0.0.1:9/apis/ccompat/v7"}}
    config_path = tmp_path / "cdc-lake.yaml"
    config = write_and_load(config_path, down)
    record_catching_up(config)

    code, output = _apply(config_path)

    assert code == 1
    assert f"topic '{topic.topic}' partition 0 offset 0" in output and "unreachable" in output
    assert latest_commit(spark, config.lake.table_base_path(table)) is None
    with StateStore.open(config.state_store.url) as store:
        assert store.require_table(table).state is TableState.FAILED

    write_and_load(config_path, good_registry)
    code, output = _apply(config_path)

    assert code == 0, output
    assert [r["id"] for r in lake_rows(spark, config.lake.table_base_path(table))] == [1, 2]
    with StateStore.open(config.state_store.url) as store:
        assert store.require_table(table).state is TableState.LIVE
