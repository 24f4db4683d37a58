"""A Hive Metastore for tests: Hive's own ``HiveMetaStore`` thrift server with an embedded Derby store.

pyspark ships Hive 2.3.9's metastore, its Derby and DataNucleus jars (``pyspark/jars``), so the
metastore runs from them with no download and no Docker: one small JVM on loopback, its Derby
database and warehouse directory under the stack's data dir (``hive-metastore/``).  Its tables
survive ``stack down``/``up``; deleting the data dir forgets them.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pyspark

from cdc_lake.stack.java import classpath_argv
from cdc_lake.stack.service import HOST, Service

MAIN_CLASS = "org.apache.hadoop.hive.metastore.HiveMetaStore"
_HEAP = "256m"
# Hive 2.3 and DataNucleus reflect into the JDK; Java 17 needs these packages opened (as Spark does).
_OPENS = tuple(
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in ("java.lang", "java.net", "java.nio", "java.util", "java.util.concurrent")
)


def pyspark_jars() -> Path:
    """The jars directory of the installed pyspark (Hive metastore, Derby, DataNucleus, Thrift)."""
    return Path(pyspark.__file__).parent / "jars"


def _site_xml(derby_dir: Path, warehouse: Path) -> str:
    properties = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={derby_dir};create=true",
        "hive.metastore.warehouse.dir": str(warehouse),
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        # Hive's default Log4j2 setup is asynchronous and needs the LMAX disruptor, not shipped.
        "hive.async.log.enabled": "false",
    }
    body = "".join(
        f"<property><name>{k}</name><value>{v}</value></property>\n" for k, v in properties.items()
    )
    return f"<configuration>\n{body}</configuration>\n"


class HiveMetastore(Service):
    """Hive's metastore thrift service on loopback (Derby-backed)."""

    name = "hive-metastore"

    @property
    def uri(self) -> str:
        return f"thrift://{HOST}:{self.layout.ports.hive_metastore}"

    def address(self) -> str:
        return self.uri

    def install(self) -> None:
        conf_dir = self.layout.path(self.name, "conf")
        conf_dir.mkdir(parents=True, exist_ok=True)
        site = _site_xml(self.layout.path(self.name, "derby"), self.layout.path(self.name, "warehouse"))
        (conf_dir / "hive-site.xml").write_text(site)

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        argv = classpath_argv(
            _HEAP,
            [self.layout.path(self.name, "conf"), pyspark_jars() / "*"],
            MAIN_CLASS,
            "-p",
            str(self.layout.ports.hive_metastore),
        )
        argv[1:1] = _OPENS
        self.process.start(argv, cwd=self.layout.path(self.name))

    def healthy(self) -> bool:
        with socket.create_connection((HOST, self.layout.ports.hive_metastore), timeout=3):
            return True
