"""Apicurio Registry (from Maven Central) serving the Confluent schema registry REST API."""

from __future__ import annotations

import tarfile
from pathlib import Path

import requests

from cdc_lake import jvm
from cdc_lake.exceptions import StackError
from cdc_lake.stack.java import runnable_jar_argv
from cdc_lake.stack.service import HOST, Service

CONFLUENT_API_PATH = "/apis/ccompat/v7"
NATIVE_API_PATH = "/apis/registry/v2"


def registry_runner_jar() -> Path:
    """The registry's runnable jar, unpacked once from the Maven Central distribution archive."""
    archive = jvm.fetch_archive(jvm.APICURIO_REGISTRY_APP)
    target = jvm.cache_root() / "apicurio" / jvm.APICURIO_VERSION
    runner = target / f"apicurio-registry-app-{jvm.APICURIO_VERSION}-runner.jar"
    if not runner.exists():
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(target, filter="data")
    if not runner.exists():
        raise StackError(f"{archive.name} holds no {runner.name}")
    return runner


class SchemaRegistry(Service):
    """Schemas persist in an H2 file database in the stack's data dir, so ids survive restarts."""

    name = "schema-registry"

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.layout.ports.registry}"

    @property
    def confluent_url(self) -> str:
        """The Confluent-compatible API root that decoders and tools use."""
        return self.base_url + CONFLUENT_API_PATH

    def address(self) -> str:
        return self.confluent_url

    def install(self) -> None:
        registry_runner_jar()

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        db = self.layout.path("registry", "registry")
        db.parent.mkdir(parents=True, exist_ok=True)
        self.process.start(
            runnable_jar_argv(
                "384m",
                registry_runner_jar(),
                f"-Dquarkus.http.host={HOST}",
                f"-Dquarkus.http.port={self.layout.ports.registry}",
            ),
            env={"REGISTRY_DATASOURCE_URL": f"jdbc:h2:file:{db};DB_CLOSE_ON_EXIT=FALSE"},
        )

    def healthy(self) -> bool:
        response = requests.get(f"{self.confluent_url}/subjects", timeout=3)
        return response.status_code == 200
