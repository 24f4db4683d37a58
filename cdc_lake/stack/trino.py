"""Trino (from Maven Central), an opt-in service: the SQL reader a data platform team queries the lake with.

One coordinator that also executes (``node-scheduler.include-coordinator``), on loopback, with one
catalog on the stack's Hive Metastore, named after Trino's connector for the lake format (its facts'
``trino_connector``; ``hudi``): the entries ``catalog.hive`` registers are the tables a user queries as
``hudi.<database>.<table>``.  Trino reads local lake paths through its Hadoop file
system (``fs.hadoop.enabled``; its native local file system failed every scan) and ``s3a://`` paths of
the stack's object store through its native S3 client, with the object store's keys taken from the
process environment (``${ENV:...}`` in the catalog file), never written to a file.

Trino 476 needs Java 24 or newer, which is not the stack's Java 17: :func:`trino_java` takes
``stack.trino.java_home`` or the newest JDK under ``/usr/lib/jvm`` that is new enough, and names the
setting in one line when there is none.  Of the 800 MB distribution's plugins only the connector's
(the plugin directory has its name) is kept, so the server loads one connector.
"""

from __future__ import annotations

import re
import shutil
import tarfile
from pathlib import Path

import requests

from cdc_lake import jvm
from cdc_lake.exceptions import StackError
from cdc_lake.lake.format import format_facts
from cdc_lake.stack.objectstore import ObjectStore
from cdc_lake.stack.service import HOST, Service, StackLayout

CONNECTOR = format_facts().trino_connector
"""Trino's connector for the tables of the stack's lake format (the default one), and its plugin."""
CATALOG = CONNECTOR
"""The Trino catalog that reads lake tables: ``<CATALOG>.<catalog.hive.database>.<table>``."""
JAVA_RELEASE_NEEDED = 24
_JVM_DIRS = Path("/usr/lib/jvm")
_HEAP = "1200m"


def trino_home() -> Path:
    """Trino's server, unpacked once (its libraries and the connector's plugin) from the Maven Central
    tarball."""
    home = jvm.cache_root() / "trino" / f"trino-server-{jvm.TRINO_VERSION}"
    if (home / "plugin" / CONNECTOR).is_dir() and (home / "lib").is_dir():
        return home
    archive = jvm.fetch_archive(jvm.TRINO_SERVER)
    unpacked = home.with_name(home.name + ".unpacking")
    shutil.rmtree(unpacked, ignore_errors=True)
    # Whole: the plugins share jars as hard links, which a partial extraction would leave dangling.
    with tarfile.open(archive, "r:gz") as tarball:
        tarball.extractall(unpacked, filter="data")
    server = unpacked / f"trino-server-{jvm.TRINO_VERSION}"
    if not (server / "plugin" / CONNECTOR).is_dir():
        raise StackError(f"{archive.name} holds no plugin/{CONNECTOR}")
    for plugin in (server / "plugin").iterdir():
        if plugin.name != CONNECTOR:
            shutil.rmtree(plugin)
    shutil.rmtree(home, ignore_errors=True)
    server.rename(home)
    shutil.rmtree(unpacked)
    return home


def java_release(java_home: Path) -> int | None:
    """The feature release of the JDK at ``java_home`` (25 for ``25.0.1``), from its ``release`` file."""
    try:
        text = (java_home / "release").read_text(encoding="utf-8")
    except OSError:
        return None
    found = re.search(r'^JAVA_VERSION="(?:1\.)?(\d+)', text, re.MULTILINE)
    return int(found.group(1)) if found else None


def trino_java(configured: Path | None) -> Path:
    """The ``java`` Trino runs on: ``stack.trino.java_home``, else the newest new-enough JDK found."""
    if configured is not None:
        release = java_release(configured)
        if release is None or release < JAVA_RELEASE_NEEDED:
            raise StackError(
                f"stack.trino.java_home {configured} is not a JDK {JAVA_RELEASE_NEEDED} or newer "
                f"(found {release or 'none'}); Trino {jvm.TRINO_VERSION} needs one"
            )
        return configured / "bin" / "java"
    found = sorted(
        ((java_release(home) or 0, home) for home in _JVM_DIRS.glob("*") if home.is_dir()), reverse=True
    )
    if not found or found[0][0] < JAVA_RELEASE_NEEDED:
        raise StackError(
            f"Trino {jvm.TRINO_VERSION} needs Java {JAVA_RELEASE_NEEDED} or newer and none is under "
            f"{_JVM_DIRS}: install one and set stack.trino.java_home"
        )
    return found[0][1] / "bin" / "java"


def _properties(values: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in values.items())


class Trino(Service):
    """A one-node Trino with the lake format's catalog on the stack's metastore and object store."""

    name = "trino"

    def __init__(self, layout: StackLayout, java_home: Path | None = None) -> None:
        super().__init__(layout)
        self.java_home = java_home

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.layout.ports.trino}"

    def address(self) -> str:
        return self.url

    def install(self) -> None:
        trino_java(self.java_home)
        trino_home()

    def _write_etc(self) -> Path:
        etc = self.layout.path("trino", "etc")
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        port = self.layout.ports.trino
        (etc / "config.properties").write_text(
            _properties(
                {
                    "coordinator": "true",
                    "node-scheduler.include-coordinator": "true",
                    "http-server.http.port": str(port),
                    "discovery.uri": self.url,
                    "query.max-memory": "512MB",
                    "query.max-memory-per-node": "512MB",
                }
            )
        )
        (etc / "catalog" / f"{CATALOG}.properties").write_text(
            _properties(
                {
                    "connector.name": CONNECTOR,
                    "hive.metastore.uri": f"thrift://{HOST}:{self.layout.ports.hive_metastore}",
                    "fs.hadoop.enabled": "true",
                    "fs.native-s3.enabled": "true",
                    "s3.endpoint": ObjectStore(self.layout).endpoint,
                    "s3.path-style-access": "true",
                    "s3.region": "us-east-1",
                    "s3.aws-access-key": "${ENV:CDC_LAKE_S3_ACCESS_KEY}",
                    "s3.aws-secret-key": "${ENV:CDC_LAKE_S3_SECRET_KEY}",
                }
            )
        )
        return etc

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        java = trino_java(self.java_home)
        home = trino_home()
        etc = self._write_etc()
        data = self.layout.path("trino", "data")
        data.mkdir(parents=True, exist_ok=True)
        creds = self.layout.credentials
        self.process.start(
            [
                str(java),
                f"-Xmx{_HEAP}",
                "-XX:+UseG1GC",
                "-XX:+ExitOnOutOfMemoryError",
                "-Djdk.attach.allowAttachSelf=true",
                "-cp",
                str(home / "lib" / "*"),
                "-Dnode.environment=cdc_lake",
                "-Dnode.id=cdc-lake-trino",
                f"-Dnode.bind-ip={HOST}",
                f"-Dnode.internal-address={HOST}",
                f"-Dnode.data-dir={data}",
                f"-Dconfig={etc / 'config.properties'}",
                f"-Dcatalog.config-dir={etc / 'catalog'}",
                f"-Dplugin.dir={home / 'plugin'}",
                "io.trino.server.TrinoServer",
            ],
            env={
                "CDC_LAKE_S3_ACCESS_KEY": creds.s3_access_key,
                "CDC_LAKE_S3_SECRET_KEY": creds.s3_secret_key,
            },
            cwd=home,
        )

    def healthy(self) -> bool:
        info = requests.get(f"{self.url}/v1/info", timeout=3)
        return info.status_code == 200 and info.json().get("starting") is False
