"""The decoder against a real Confluent-API registry with HTTP basic auth switched on.

The stack's ``schema-registry-secure`` is Apicurio requiring authentication on every call (checked by
its Keycloak realm).  Schemas are registered through its Confluent API with the stack's registry
credentials, Debezium-shaped Avro changes framed with those ids go onto a topic, and
``cdc-lake apply --once`` decodes them with ``schema_registry.user``/``password`` (the password from
the environment) into a lake table read with Spark+Hudi and hudi-rs.  Missing or wrong credentials
fail the table in one line naming both settings, never show the password, commit nothing and keep
the offset, and the next run with the right password applies everything.  A bearer token from the
registry's OpenID Connect server (``schema_registry.bearer_token``) works the same way.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import requests
from click.testing import CliRunner
from pyspark.sql import SparkSession
from support.apply import SyntheticTopic, config_dict, lake_rows, record_catching_up
from support.common import write_and_load
from support.second_reader import second_reader_rows

from cdc_lake.cli.main import cli
from cdc_lake.hudi.timeline import latest_commit
from cdc_lake.stack.manager import LocalStack
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.store import StateStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(600)]

PASSWORD_ENV = "CDC_LAKE_REGISTRY_PASSWORD"
TOKEN_ENV = "CDC_LAKE_REGISTRY_TOKEN"


def _topic(stack: LocalStack) -> SyntheticTopic:
    creds = stack.layout.credentials
    topic = SyntheticTopic(
        stack,
        f"regauth_{uuid.uuid4().hex[:8]}",
        registry_url=stack.registry_secure.confluent_url,
        auth=(creds.registry_user, creds.registry_password),
    )
    topic.send(
        [
            (topic.key(1), topic.change("c", 1, "a", ratio=(12345, 2))),
            (topic.key(2), topic.change("c", 2, "b")),
            (topic.key(3), topic.change("c", 3, "c")),
            (topic.key(1), topic.change("u", 1, "a2", ratio=(-5, 2))),
            (topic.key(2), topic.change("d", 2)),
            (topic.key(2), None),
        ]
    )
    return topic


def _config(
    stack: LocalStack, topic: SyntheticTopic, tmp_path: Path, user: str | None, bearer: bool = False
) -> dict[str, Any]:
    data = config_dict(stack, [], str(tmp_path / "lake"), f"sqlite:///{tmp_path}/state.db", synthetic=[topic])
    registry: dict[str, Any] = {"url": stack.registry_secure.confluent_url}
    if user is not None:
        registry |= {"user": user, "password": f"${{{PASSWORD_ENV}}}"}
    if bearer:
        registry |= {"bearer_token": f"${{{TOKEN_ENV}}}"}
    return {**data, "schema_registry": registry}


def _access_token(stack: LocalStack) -> str:
    """A token for the registry user from the registry's OpenID Connect server (client credentials)."""
    creds = stack.layout.credentials
    response = requests.post(
        f"{stack.keycloak.realm_url}/protocol/openid-connect/token",
        data={"grant_type": "client_credentials"},
        auth=(creds.registry_user, creds.registry_password),
        timeout=30,
    )
    response.raise_for_status()
    token: str = response.json()["access_token"]
    return token


def _apply(config_path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--config", str(config_path), "apply", "--once"])
    return result.exit_code, result.output


def _shown(rows: list[dict[str, Any]]) -> list[tuple[int, str, Decimal | None]]:
    ordered = sorted(rows, key=lambda r: r["id"])
    return [(r["id"], r["name"], None if r["ratio"] is None else Decimal(r["ratio"])) for r in ordered]


def _assert_applied(spark: SparkSession, base_path: str) -> None:
    expected = [(1, "a2", Decimal("-0.05")), (3, "c", None)]
    assert _shown(lake_rows(spark, base_path)) == expected
    assert _shown(second_reader_rows(base_path, ["id", "name", "ratio"])) == expected


def test_the_decoder_applies_through_a_registry_requiring_basic_auth(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    creds = local_stack.layout.credentials
    topic = _topic(local_stack)
    monkeypatch.setenv(PASSWORD_ENV, creds.registry_password)
    config_path = tmp_path / "cdc-lake.yaml"
    config = write_and_load(config_path, _config(local_stack, topic, tmp_path, creds.registry_user))
    record_catching_up(config)
    table = f"{topic.prefix}.s.t"

    code, output = _apply(config_path)

    assert code == 0, output
    _assert_applied(spark, config.lake.table_base_path(table))
    with StateStore.open(config.state_store.url) as store:
        assert store.require_table(table).state is TableState.LIVE
    assert creds.registry_password not in output


@pytest.mark.parametrize("mistake", ["missing", "wrong"])
def test_refused_credentials_fail_in_one_line_lose_nothing_and_recover(
    spark: SparkSession,
    local_stack: LocalStack,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mistake: str,
) -> None:
    creds = local_stack.layout.credentials
    topic = _topic(local_stack)
    wrong = f"not-the-password-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv(PASSWORD_ENV, wrong)
    config_path = tmp_path / "cdc-lake.yaml"
    user = None if mistake == "missing" else creds.registry_user
    config = write_and_load(config_path, _config(local_stack, topic, tmp_path, user))
    record_catching_up(config)
    table = f"{topic.prefix}.s.t"

    code, output = _apply(config_path)

    assert code == 1
    failure = next(line for line in output.splitlines() if "HTTP 401" in line)
    assert f"topic '{topic.topic}' partition 0 offset 0" in failure
    assert "schema_registry.user" in failure and "schema_registry.password" in failure
    assert wrong not in output and creds.registry_password not in output
    assert latest_commit(spark, config.lake.table_base_path(table)) is None
    with StateStore.open(config.state_store.url) as store:
        state = store.require_table(table)
        assert state.state is TableState.FAILED and state.last_error is not None
        assert "schema_registry.password" in state.last_error and wrong not in state.last_error
        assert store.get_applied_offsets(table) == {}

    monkeypatch.setenv(PASSWORD_ENV, creds.registry_password)
    write_and_load(config_path, _config(local_stack, topic, tmp_path, creds.registry_user))
    code, output = _apply(config_path)

    assert code == 0, output
    _assert_applied(spark, config.lake.table_base_path(table))


def test_the_decoder_applies_with_a_bearer_token_and_a_stale_one_is_refused(
    spark: SparkSession, local_stack: LocalStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = _topic(local_stack)
    monkeypatch.setenv(TOKEN_ENV, "not.a.token")
    config_path = tmp_path / "cdc-lake.yaml"
    config = write_and_load(config_path, _config(local_stack, topic, tmp_path, None, bearer=True))
    record_catching_up(config)
    table = f"{topic.prefix}.s.t"

    code, output = _apply(config_path)

    assert code == 1 and "schema_registry.bearer_token" in output and "not.a.token" not in output
    assert latest_commit(spark, config.lake.table_base_path(table)) is None

    token = _access_token(local_stack)
    monkeypatch.setenv(TOKEN_ENV, token)
    code, output = _apply(config_path)

    assert code == 0, output
    _assert_applied(spark, config.lake.table_base_path(table))
    assert token not in output
