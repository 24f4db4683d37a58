"""A Hive Metastore for tests: Hive's own ``HiveMetaStore`` thrift server with an embedded Derby store.

pyspark ships Hive 2.3.9's metastore, its Derby and DataNucleus jars (``pyspark/jars``), so the
metastore runs from them with no download and no Docker: one small JVM on loopback, its Derby
database and warehouse directory under the stack's data dir (``hive-metastore/``).  Its tables
survive ``stack down``/``up``; deleting the data dir forgets them.  The metastore checks the folder of
every table it registers, so it carries S3A (``jvm.HIVE_METASTORE_S3``) pointed at the stack's object
store, its keys in its environment only (never in ``hive-site.xml``): a lake on ``s3a://`` registers too.

Local-only: Hive 2.3's ``HiveMetaStore.main`` binds the wildcard address (its ``startMetaStore`` asks
``HiveAuthUtils.getServerSocket`` for no host, and 2.3 has no bind-host setting; Hive 3's standalone
metastore has ``metastore.thrift.bind.host``). The stack therefore starts a small launcher,
``resources/LoopbackHiveMetaStore.java``, that serves the same handler, processor, transport and
protocol on :data:`~cdc_lake.stack.service.HOST` only. A Java runtime has no compiler, so Janino
(in pyspark's jars) compiles it when the JVM loads it (``AbstractJavaSourceClassLoader``).
"""

from __future__ import annotations

import socket
from importlib import resources
from pathlib import Path

import pyspark

from cdc_lake import jvm
from cdc_lake.stack.java import classpath_argv
from cdc_lake.stack.objectstore import ObjectStore
from cdc_lake.stack.service import HOST, Service

SOURCE_LOADER = "org.codehaus.commons.compiler.AbstractJavaSourceClassLoader"
"""Janino's class loader that compiles ``-sourcepath``'s Java sources as it loads them, then runs
the named class's ``main``."""
LAUNCHER = "LoopbackHiveMetaStore"
_HEAP = "256m"
# Hive 2.3 and DataNucleus reflect into the JDK; Java 17 needs these packages opened (as Spark does).
_OPENS = tuple(
    f"--add-opens=java.base/{package}=ALL-UNNAMED"
    for package in ("java.lang", "java.net", "java.nio", "java.util", "java.util.concurrent")
)


def pyspark_jars() -> Path:
    """The jars directory of the installed pyspark (Hive metastore, Derby, DataNucleus, Thrift)."""
    return Path(pyspark.__file__).parent / "jars"


def _site_xml(derby_dir: Path, warehouse: Path, object_store: str) -> str:
    properties = {
        "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={derby_dir};create=true",
        "hive.metastore.warehouse.dir": str(warehouse),
        "datanucleus.schema.autoCreateAll": "true",
        "hive.metastore.schema.verification": "false",
        # Lake tables evolve: a dropped source column moves the entry's later columns, which Hive's
        # position check refuses (Hudi asks the same for its own Hive sync; docs/operations.md).
        "hive.metastore.disallow.incompatible.col.type.changes": "false",
        # Hive's default Log4j2 setup is asynchronous and needs the LMAX disruptor, not shipped.
        "hive.async.log.enabled": "false",
        # The stack's object store for s3a:// tables; the keys come from the process's environment.
        "fs.s3a.endpoint": object_store,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.aws.credentials.provider": "com.amazonaws.auth.EnvironmentVariableCredentialsProvider",
    }
    body = "".join(
        f"<property><name>{k}</name><value>{v}</value></property>\n" for k, v in properties.items()
    )
    return f"<configuration>\n{body}</configuration>\n"


def _argv(conf_dir: Path, port: int) -> list[str]:
    """The metastore's JVM: the launcher compiled from the shipped source, serving on ``HOST:port``."""
    sources = Path(str(resources.files("cdc_lake.stack").joinpath("resources")))
    argv = classpath_argv(
        _HEAP,
        [conf_dir, pyspark_jars() / "*", *jvm.resolve(jvm.HIVE_METASTORE_S3)],
        SOURCE_LOADER,
        "-sourcepath",
        str(sources),
        LAUNCHER,
        HOST,
        str(port),
    )
    argv[1:1] = _OPENS
    return argv


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
        jvm.resolve(jvm.HIVE_METASTORE_S3)
        site = _site_xml(
            self.layout.path(self.name, "derby"),
            self.layout.path(self.name, "warehouse"),
            ObjectStore(self.layout).endpoint,
        )
        (conf_dir / "hive-site.xml").write_text(site)

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        creds = self.layout.credentials
        self.process.start(
            _argv(self.layout.path(self.name, "conf"), self.layout.ports.hive_metastore),
            env={"AWS_ACCESS_KEY_ID": creds.s3_access_key, "AWS_SECRET_ACCESS_KEY": creds.s3_secret_key},
            cwd=self.layout.path(self.name),
        )

    def healthy(self) -> bool:
        with socket.create_connection((HOST, self.layout.ports.hive_metastore), timeout=3):
            return True
