"""The hand-off's position comparisons and waits, with Kafka Connect's answers faked."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import requests

from bootstrap import handoff
from bootstrap.handoff import (
    HandoffWait,
    SnapshotPoint,
    mariadb_gtids,
    mysql_gtids,
    offset_passed,
    parse_lsn,
    wait_until_streamed,
)
from cdc_lake.exceptions import BootstrapError

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


def test_lsns_parse_as_numbers() -> None:
    assert parse_lsn("0/16B3748") == 0x16B3748
    assert parse_lsn("1/0") == 1 << 32
    with pytest.raises(BootstrapError, match="not a Postgres LSN"):
        parse_lsn("0-1-5")


def test_postgres_offsets_compare_commit_lsns() -> None:
    assert offset_passed("postgres", {"lsn_commit": 0x200, "lsn": 0x100}, "0/200")
    assert not offset_passed("postgres", {"lsn_commit": 0x1FF, "lsn": 0x300}, "0/200")
    assert offset_passed("postgres", {"lsn": 0x300}, "0/200")
    assert not offset_passed("postgres", {}, "0/200")


def test_mariadb_gtids_compare_per_domain_as_numbers() -> None:
    assert mariadb_gtids("0-1-345,1-2-10") == {0: 345, 1: 10}
    assert offset_passed("mariadb", {"gtids": "0-1-1000"}, "0-1-999")
    assert offset_passed("mariadb", {"gtids": "0-1-345,1-2-10"}, "0-1-345")
    assert not offset_passed("mariadb", {"gtids": "0-1-99"}, "0-1-100")
    assert not offset_passed("mariadb", {"gtids": "0-1-500"}, "0-1-400,1-3-1")
    assert not offset_passed("mariadb", {}, "0-1-1")


def test_mysql_gtid_sets_compare_by_containment() -> None:
    assert mysql_gtids(f"{UUID}:1-5:7") == {UUID: [(1, 5), (7, 7)]}
    assert offset_passed("mysql", {"gtids": f"{UUID}:1-100"}, f"{UUID}:1-57")
    assert not offset_passed("mysql", {"gtids": f"{UUID}:1-50"}, f"{UUID}:1-57")
    assert not offset_passed("mysql", {"gtids": f"{UUID}:1-100"}, f"{UUID}:1-57,aaaa:1")


def _wait(timeout: float = 5.0) -> HandoffWait:
    return HandoffWait("http://connect", "postgres", "shop", delay_seconds=3, timeout_seconds=timeout)


def test_waits_for_every_capturing_connector(monkeypatch: pytest.MonkeyPatch) -> None:
    polls: list[str] = []
    answers = {"a": [[{"lsn_commit": 0x10}], [{"lsn_commit": 0x20}]], "b": [[{"lsn_commit": 0x30}]] * 2}

    def offsets(url: str, connector: str) -> list[Mapping[str, Any]]:
        polls.append(connector)
        return answers[connector].pop(0)

    monkeypatch.setattr(handoff, "capturing_connectors", lambda url, prefix, table: ["a", "b"])
    monkeypatch.setattr(handoff, "committed_offsets", offsets)

    how = wait_until_streamed("src.s.t", "s.t", SnapshotPoint("0/20", 0), _wait(), lambda: 0, lambda s: None)

    assert polls == ["a", "b", "a"]
    assert "committed offsets past the snapshot point 0/20" in how


def test_offsets_that_never_pass_fail_with_what_was_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handoff, "capturing_connectors", lambda url, prefix, table: ["a"])
    monkeypatch.setattr(handoff, "committed_offsets", lambda url, connector: [{"lsn_commit": 1}])

    with pytest.raises(BootstrapError, match=r"did not stream past the snapshot point 0/20 within 0s \(a: "):
        wait_until_streamed("src.s.t", "s.t", SnapshotPoint("0/20", 0), _wait(0), lambda: 0, lambda s: None)


def test_without_a_connector_the_time_rule_stands_in(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(url: str, prefix: str, table: str) -> list[str]:
        raise requests.ConnectionError("refused")

    monkeypatch.setattr(handoff, "capturing_connectors", unreachable)
    now = [1_000]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += int(seconds * 1000)

    how = wait_until_streamed("src.s.t", "s.t", SnapshotPoint("0/20", 1_000), _wait(), lambda: now[0], sleep)

    assert now[0] >= 4_000
    assert "Kafka Connect unreachable" in how and "+ 3s" in how


def test_connectors_are_found_by_prefix_and_include_list(monkeypatch: pytest.MonkeyPatch) -> None:
    class Answer:
        def raise_for_status(self) -> None:
            return None

        def json(self) -> dict[str, Any]:
            configs = {
                "mine": ("shop", r"s\.other,s\.t"),
                "prefix": ("other", r"s\.t"),
                "table": ("shop", r"s\.tt"),
            }
            return {
                name: {"info": {"config": {"topic.prefix": prefix, "table.include.list": tables}}}
                for name, (prefix, tables) in configs.items()
            }

    monkeypatch.setattr(handoff.requests, "get", lambda *args, **kwargs: Answer())

    assert handoff.capturing_connectors("http://connect", "shop", "s.t") == ["mine"]
