"""``cdc-lake onboard`` refusals every engine of the stack gives, each in one clear line, creating nothing.

Each test runs once per engine (the ``engine`` fixture, tests/support/engines.py) against a
database of that engine made for this module (``support.engines.pg_env`` / ``maria_env``); the engine's
own wording of a failure comes from its environment class.  Onboarding end to end, grants, positions and
what only one engine has (Postgres slots, publications, REPLICA IDENTITY; MariaDB server ids) are in
test_onboard_postgres.py and test_onboard_mariadb.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.common import assert_one_line_failure, cli_run, write_config_in
from support.engines import OnboardEnv, StackEngine, maria_env, pg_env

from cdc_lake.stack.manager import LocalStack

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def env(engine: StackEngine, local_stack: LocalStack) -> Iterator[OnboardEnv]:
    with (pg_env if engine.name == "postgres" else maria_env)(local_stack) as created:
        yield created


def test_table_without_primary_key(env: OnboardEnv, tmp_path: Path) -> None:
    source = f"onb_{env.engine.name[:2]}_{env.suffix}_nopk"
    tables = [{"name": env.name("orders")}, {"name": env.name("nopk")}]
    config = write_config_in(tmp_path, {source: env.source(tables)})

    result = cli_run(config, "onboard", source)

    assert_one_line_failure(result, f"primary keys: no primary key and no configured key: {env.name('nopk')}")
    assert "FAIL" in result.stdout
    env.assert_nothing_made(source)


def test_wrong_password(env: OnboardEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONB_WRONG_PASSWORD", "not-the-password")
    source = f"onb_{env.engine.name[:2]}_{env.suffix}_badpw"
    definition = env.source([{"name": env.name("orders")}])
    definition["primary"]["password"] = "${ONB_WRONG_PASSWORD}"
    config = write_config_in(tmp_path, {source: definition})

    result = cli_run(config, "onboard", source)

    assert_one_line_failure(result, *env.wrong_password)
    assert "not-the-password" not in result.output
    env.assert_nothing_made(source)


def test_table_missing_from_the_database(env: OnboardEnv, tmp_path: Path) -> None:
    source = f"onb_{env.engine.name[:2]}_{env.suffix}_missing"
    config = write_config_in(tmp_path, {source: env.source([{"name": env.name("ghost")}])})

    assert_one_line_failure(cli_run(config, "onboard", source), env.missing(env.name("ghost")))
    env.assert_nothing_made(source)


@pytest.mark.parametrize("replica_port", [1, None], ids=["unreachable", "the-primary"])
def test_replica_unreachable_or_not_a_replica(
    env: OnboardEnv, tmp_path: Path, replica_port: int | None
) -> None:
    source = f"onb_{env.engine.name[:2]}_{env.suffix}_replica{replica_port or 0}"
    definition = env.source([{"name": env.name("orders")}])
    definition["replica"]["port"] = replica_port or env.engine.primary_port(env.stack)
    config = write_config_in(tmp_path, {source: definition})

    detail = env.replica_unreachable if replica_port else env.not_a_replica
    assert_one_line_failure(cli_run(config, "onboard", source), detail)
    env.assert_nothing_made(source)
