"""Launching the JVM services of the local stack with small heaps (two cores, many services).

A JVM whose MBeans matter (the Connect workers: Debezium's metrics) also runs Prometheus' JMX
exporter as a Java agent on a loopback port, with rules shipped in ``resources/``.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from cdc_lake import jvm
from cdc_lake.exceptions import StackError

_COMMON_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")


def java_binary() -> str:
    """The `java` launcher; Kafka 4 and Debezium 3 need Java 17 or newer."""
    found = shutil.which("java")
    if not found:
        raise StackError("java is not on PATH; install OpenJDK 17 (apt-get install openjdk-17-jre-headless)")
    return found


def _log4j_config() -> str:
    return str(resources.files("cdc_lake.stack").joinpath("resources/log4j2.properties"))


def jmx_exporter_rules() -> Path:
    """The JMX exporter's rules for a Connect worker (Debezium's and Connect's beans), as shipped."""
    return Path(str(resources.files("cdc_lake.stack").joinpath("resources/jmx-exporter-connect.yaml")))


def jmx_exporter_option(host: str, port: int) -> str:
    """The ``-javaagent`` option serving the worker's metrics at ``http://host:port/metrics``."""
    agent = jvm.resolve(jvm.JMX_EXPORTER_AGENT)[0]
    return f"-javaagent:{agent}={host}:{port}:{jmx_exporter_rules()}"


def classpath_argv(
    heap: str, classpath: list[Path], main_class: str, *args: str, jvm_options: Sequence[str] = ()
) -> list[str]:
    """argv running `main_class` from `classpath` with a fixed heap, our Log4j2 settings and
    ``jvm_options`` (system properties, agents)."""
    return [
        java_binary(),
        f"-Xms{heap}",
        f"-Xmx{heap}",
        *_COMMON_FLAGS,
        f"-Dlog4j2.configurationFile={_log4j_config()}",
        *jvm_options,
        "-cp",
        ":".join(str(p) for p in classpath),
        main_class,
        *args,
    ]


def runnable_jar_argv(heap: str, jar: Path, *system_properties: str) -> list[str]:
    """argv running an executable jar with a fixed heap."""
    return [java_binary(), f"-Xms{heap}", f"-Xmx{heap}", *_COMMON_FLAGS, *system_properties, "-jar", str(jar)]
