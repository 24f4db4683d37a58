"""The stack's opt-in Trino: the Java it runs on, its files, and how it joins the stack.

Trino 476 refuses a Java older than 24 at start with a stack trace; the stack finds a new-enough JDK
itself or names the setting in one line before anything starts.  The catalog file names the object
store's keys by environment variable only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_lake.config import StackPorts, StackSettings, TrinoStackSettings
from cdc_lake.exceptions import StackError
from cdc_lake.stack import trino as trino_module
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.service import StackLayout
from cdc_lake.stack.trino import Trino, java_release, trino_java


def _jdk(root: Path, name: str, version: str) -> Path:
    home = root / name
    (home / "bin").mkdir(parents=True)
    (home / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\n')
    return home


def test_java_release_reads_the_feature_release(tmp_path: Path) -> None:
    assert java_release(_jdk(tmp_path, "a", "25.0.3")) == 25
    assert java_release(_jdk(tmp_path, "b", "1.8.0_402")) == 8
    assert java_release(tmp_path / "missing") is None


def test_the_newest_new_enough_jdk_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _jdk(tmp_path, "java-17-openjdk-amd64", "17.0.13")
    newest = _jdk(tmp_path, "temurin-25-jdk-amd64", "25.0.3")
    _jdk(tmp_path, "temurin-24-jdk-amd64", "24.0.1")
    monkeypatch.setattr(trino_module, "_JVM_DIRS", tmp_path)

    assert trino_java(None) == newest / "bin" / "java"


def test_no_new_enough_jdk_is_one_line_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _jdk(tmp_path, "java-17-openjdk-amd64", "17.0.13")
    monkeypatch.setattr(trino_module, "_JVM_DIRS", tmp_path)

    with pytest.raises(StackError) as raised:
        trino_java(None)

    message = str(raised.value)
    assert "\n" not in message and "Java 24" in message and "stack.trino.java_home" in message


def test_a_configured_jdk_that_is_too_old_is_refused_by_name(tmp_path: Path) -> None:
    old = _jdk(tmp_path, "java-17", "17.0.13")

    with pytest.raises(
        StackError, match=r"stack.trino.java_home .*java-17 is not a JDK 24 or newer \(found 17\)"
    ):
        trino_java(old)
    assert trino_java(_jdk(tmp_path, "jdk-25", "25")) == tmp_path / "jdk-25" / "bin" / "java"


def test_the_catalog_file_names_the_object_store_keys_by_environment_only(tmp_path: Path) -> None:
    layout = StackLayout(data_dir=tmp_path, ports=StackPorts(trino=18123, hive_metastore=19999))
    service = Trino(layout)

    etc = service._write_etc()

    catalog = (etc / "catalog" / "hudi.properties").read_text()
    assert "hive.metastore.uri=thrift://127.0.0.1:19999\n" in catalog
    assert "s3.aws-secret-key=${ENV:CDC_LAKE_S3_SECRET_KEY}\n" in catalog
    assert layout.credentials.s3_secret_key not in catalog
    assert "http-server.http.port=18123\n" in (etc / "config.properties").read_text()


def test_trino_joins_the_stack_only_when_asked_for(tmp_path: Path) -> None:
    def names(stack: LocalStack) -> list[str]:
        return [service.name for service in stack.services]

    settings = StackSettings(data_dir=tmp_path)
    assert "trino" not in names(LocalStack(settings))
    assert names(LocalStack(settings, ("trino",)))[-1] == "trino"
    enabled = StackSettings(data_dir=tmp_path, trino=TrinoStackSettings(enabled=True))
    assert "trino" in names(LocalStack(enabled))
    with pytest.raises(StackError, match="no optional service presto; choose from trino"):
        LocalStack(settings, ("presto",))
