"""Check results, the one-line preflight error, and the connector-name check against a fake Connect."""

from __future__ import annotations

import pytest

from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.exceptions import PreflightError
from cdc_lake.onboard.preflight import (
    check_connector_names,
    raise_for_failures,
    registry_base_url,
    shown_url,
)
from cdc_lake.sources.checks import CheckResult, Outcome, name_list

OURS = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "database.hostname": "db",
    "database.port": "5432",
    "database.dbname": "app",
    "topic.prefix": "pg",
    "slot.name": "cdc_lake_pg",
    "table.include.list": "shop\\.orders",
}


class FakeConnect(KafkaConnectClient):
    """Answers list and config requests from a dict instead of HTTP."""

    def __init__(self, registered: dict[str, dict[str, str]]) -> None:
        super().__init__("http://connect:8083")
        self.registered = registered

    def list_connectors(self) -> list[str]:
        return list(self.registered)

    def get_config(self, name: str) -> dict[str, str]:
        return dict(self.registered[name])


def test_failures_raise_one_line_naming_each_failed_check() -> None:
    results = [
        CheckResult.ok("wal_level", "logical"),
        CheckResult.fail("primary keys", "no primary key and no configured key: shop.a", "add one"),
        CheckResult.warn("replica identity", "TOAST", "set FULL"),
        CheckResult.fail("replica", "h:1 unreachable: refused", "start it"),
    ]

    with pytest.raises(PreflightError) as raised:
        raise_for_failures("pg", results)

    assert str(raised.value) == (
        "source pg: 2 preflight check(s) failed: primary keys: no primary key and no configured key: shop.a "
        "(fix: add one); replica: h:1 unreachable: refused (fix: start it)"
    )


def test_warnings_do_not_stop_onboarding() -> None:
    raise_for_failures("pg", [CheckResult.warn("replica identity", "TOAST", "set FULL")])


def test_check_json() -> None:
    assert CheckResult.fail("kafka", "down", "start it").to_json() == {
        "check": "kafka",
        "outcome": "fail",
        "detail": "down",
        "fix": "start it",
    }
    assert CheckResult.ok("kafka", "up").outcome is Outcome.PASS


def test_name_list_shows_the_first_five() -> None:
    assert name_list(["a", "b"]) == "a, b"
    assert name_list([str(i) for i in range(8)]) == "0, 1, 2, 3, 4 and 3 more"


def test_urls_lose_their_credentials_in_messages() -> None:
    assert shown_url("http://user:pw@registry:8081/apis/ccompat/v7") == "http://registry:8081/apis/ccompat/v7"
    assert registry_base_url("https://registry:8081/apis/ccompat/v7") == "https://registry:8081"


def test_free_names_pass() -> None:
    result, registered = check_connector_names(FakeConnect({}), {"cdc-lake.pg": OURS})

    assert not result.failed
    assert result.detail == "0 already ours, 1 new"
    assert registered == {}


def test_our_registered_connector_is_reused_even_with_other_tables() -> None:
    current = {**OURS, "table.include.list": "shop\\.a"}

    result, registered = check_connector_names(FakeConnect({"cdc-lake.pg": current}), {"cdc-lake.pg": OURS})

    assert not result.failed
    assert registered == {"cdc-lake.pg": current}


def test_a_connector_of_another_source_under_our_name_fails() -> None:
    other = {**OURS, "database.dbname": "billing"}

    result, registered = check_connector_names(FakeConnect({"cdc-lake.pg": other}), {"cdc-lake.pg": OURS})

    assert result.failed
    assert (
        result.detail
        == "registered in Kafka Connect for another source: cdc-lake.pg (database.dbname=billing)"
    )
    assert registered == {}
