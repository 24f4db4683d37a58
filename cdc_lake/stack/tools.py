"""The command-line tools a user runs against the local stack, pointed at it: Kafka's and Trino's.

Kafka's shell scripts are not part of the stack, but their classes are in the broker's jars
(``kafka-tools``): :data:`KAFKA_TOOLS` maps the script names users know (``kafka-consumer-groups.sh``
is ``consumer-groups``) to those classes, run with the stack's broker as ``--bootstrap-server``.
Trino's client is its executable jar from Maven Central, run on Trino's Java against the stack's Trino
with the ``hudi`` catalog chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from cdc_lake import jvm
from cdc_lake.exceptions import StackError
from cdc_lake.stack.java import classpath_argv
from cdc_lake.stack.service import HOST, StackLayout
from cdc_lake.stack.trino import CATALOG, trino_java

KAFKA_TOOLS = {
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "topics": "org.apache.kafka.tools.TopicCommand",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
}
"""Kafka's tools by the name of their script (``kafka-<name>.sh``), to the class that script runs."""


def kafka_tool_argv(layout: StackLayout, tool: str, args: Sequence[str]) -> list[str]:
    """argv running Kafka's ``tool`` with ``args`` against the stack's broker."""
    main_class = KAFKA_TOOLS.get(tool)
    if main_class is None:
        raise StackError(f"no Kafka tool {tool!r}; choose from {', '.join(KAFKA_TOOLS)}")
    classpath = jvm.resolve(jvm.KAFKA_SERVER)
    bootstrap = ("--bootstrap-server", f"{HOST}:{layout.ports.kafka}")
    quiet = resources.files("cdc_lake.stack").joinpath("resources/log4j2-tools.properties")
    # The last -Dlog4j2.configurationFile wins: the tool's answer alone on stdout, warnings on stderr.
    return classpath_argv(
        "256m", classpath, main_class, *bootstrap, *args, jvm_options=(f"-Dlog4j2.configurationFile={quiet}",)
    )


def trino_cli_argv(layout: StackLayout, java_home: Path | None, args: Sequence[str]) -> list[str]:
    """argv running Trino's client with ``args`` against the stack's Trino, catalog ``hudi``."""
    java = trino_java(java_home)
    jar = jvm.fetch_archive(jvm.TRINO_CLI)
    server = f"http://{HOST}:{layout.ports.trino}"
    return [
        str(java),
        "--enable-native-access=ALL-UNNAMED",
        "-jar",
        str(jar),
        "--server",
        server,
        "--catalog",
        CATALOG,
        *args,
    ]
