"""Kafka's and Trino's command-line tools, pointed at the stack: which class, which server, which catalog."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_lake import jvm
from cdc_lake.config import StackPorts
from cdc_lake.exceptions import StackError
from cdc_lake.stack import tools
from cdc_lake.stack.service import StackLayout


@pytest.fixture
def layout(tmp_path: Path) -> StackLayout:
    return StackLayout(data_dir=tmp_path, ports=StackPorts(kafka=19999, trino=18123))


def test_a_kafka_tool_runs_its_class_against_the_stacks_broker(
    layout: StackLayout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jvm, "resolve", lambda artifact_set: [Path("/jars/kafka-tools.jar")])

    argv = tools.kafka_tool_argv(layout, "consumer-groups", ["--describe", "--group", "g"])

    main = argv.index("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand")
    assert argv[main + 1 :] == ["--bootstrap-server", "127.0.0.1:19999", "--describe", "--group", "g"]
    assert argv[argv.index("-cp") + 1] == "/jars/kafka-tools.jar"
    # The quiet settings come last, so they win over the services' INFO-to-stdout ones.
    logs = [a for a in argv if a.startswith("-Dlog4j2.configurationFile=")]
    assert logs[-1].endswith("log4j2-tools.properties") and argv.index(logs[-1]) < main


def test_an_unknown_kafka_tool_is_one_line_listing_the_tools(layout: StackLayout) -> None:
    with pytest.raises(StackError, match=r"^no Kafka tool 'groups'; choose from consumer-groups, topics, "):
        tools.kafka_tool_argv(layout, "groups", [])


def test_the_trino_client_runs_on_trinos_java_against_the_stacks_trino(
    layout: StackLayout, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools, "trino_java", lambda home: Path("/jdk25/bin/java"))
    monkeypatch.setattr(jvm, "fetch_archive", lambda artifact: Path(f"/cache/{artifact.artifact}.jar"))

    argv = tools.trino_cli_argv(layout, None, ["--execute", "select 1"])

    assert argv[0] == "/jdk25/bin/java"
    assert argv[argv.index("-jar") + 1] == "/cache/trino-cli.jar"
    assert argv[-6:] == ["--server", "http://127.0.0.1:18123", "--catalog", "hudi", "--execute", "select 1"]
