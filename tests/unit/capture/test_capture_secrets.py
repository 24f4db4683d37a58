"""The password variable handed to Kafka Connect comes from the config file's ${VAR} reference."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.configs import config_file

from cdc_lake.capture.secrets import password_env
from cdc_lake.exceptions import ConfigError


@pytest.mark.parametrize("value", ["${PG_PW}", "'${PG_PW:-local}'", '"${PG_PW:-}"'])
def test_variable_reference_names_the_variable(tmp_path: Path, value: str) -> None:
    assert password_env(config_file(tmp_path, value), "pg") == "PG_PW"


def test_literal_password_is_refused_without_echoing_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        password_env(config_file(tmp_path, "hunter2secret"), "pg")

    assert "sources.pg.primary.password must be exactly ${VAR}" in str(raised.value)
    assert "hunter2secret" not in str(raised.value)


def test_embedded_reference_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be exactly"):
        password_env(config_file(tmp_path, "pre${PG_PW}"), "pg")


def test_missing_password_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"sources\.pg\.primary\.password is not set"):
        password_env(config_file(tmp_path, None), "pg")
