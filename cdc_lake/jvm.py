"""JVM artifacts the product needs, declared in one place and resolved through Maven.

Every jar that Spark jobs or the local stack load is named here as Maven
coordinates, but a source engine's and the lake format's: its Debezium connector plugin and JDBC
driver are declared by the engine (:attr:`~cdc_lake.sources.capabilities.EngineCapabilities.jvm_artifacts`)
and collected here from the registry, by engine name (:data:`DEBEZIUM_PLUGINS`,
:data:`JDBC_DRIVERS`), so a new engine needs no edit here.  The registry's package imports
no driver and nothing of this module.  Likewise the format's Spark packages come from its facts
(:meth:`~cdc_lake.lake.format.FormatFacts.spark_packages`), by ``lake.format`` name.
:func:`resolve` writes a throw-away POM listing one artifact set,
lets ``mvn dependency:copy-dependencies`` fetch the set with its transitive
dependencies from Maven Central, and caches the result under
``$CDC_LAKE_CACHE`` (default ``~/.cache/cdc-lake``).  A completed set is marked
with a manifest so later calls cost nothing.

Users on a cluster who ship their own jars set ``spark.jars`` in the config and
never reach this module for Spark.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final
from xml.sax.saxutils import escape

from cdc_lake.exceptions import JvmArtifactError
from cdc_lake.sources import ENGINES, EngineCapabilities

SPARK_VERSION_LINE = "3.5"
SCALA_BINARY_VERSION = "2.12"
HADOOP_VERSION = "3.3.4"  # the Hadoop client pyspark 3.5 ships with; hadoop-aws must match it
AWS_SDK_BUNDLE_VERSION = "1.12.262"  # what hadoop-aws 3.3.4 is built against
KAFKA_VERSION = "4.1.1"  # the Kafka that Debezium 3.5 is built against
DEBEZIUM_VERSION = "3.5.0.Final"
APICURIO_VERSION = "2.6.13.Final"  # the newest line whose converter resolves completely from Maven Central
LOG4J_VERSION = "2.24.3"
SLF4J_VERSION = "2.0.16"  # the API log4j-slf4j2-impl binds; an older one resolved beside it logs nothing
SPARK_KAFKA_CLIENTS_VERSION = "3.4.1"  # the kafka-clients spark-sql-kafka-0-10 3.5.x is built against
COMMONS_POOL2_VERSION = "2.11.1"  # likewise, for its consumer pool
JMX_EXPORTER_VERSION = "1.0.1"


@dataclass(frozen=True)
class MavenArtifact:
    """One Maven coordinate, ``group:artifact:version[:type[:classifier]]``."""

    group: str
    artifact: str
    version: str
    type: str = "jar"
    classifier: str | None = None
    exclusions: tuple[str, ...] = ()  # "group:artifact" pairs kept off the classpath

    @property
    def coordinate(self) -> str:
        parts = [self.group, self.artifact, self.version, self.type]
        if self.classifier:
            parts.append(self.classifier)
        return ":".join(parts)

    def pom_dependency(self) -> str:
        """This artifact as a ``<dependency>`` element."""
        excl = "".join(
            f"<exclusion><groupId>{escape(g)}</groupId><artifactId>{escape(a)}</artifactId></exclusion>"
            for g, a in (e.split(":", 1) for e in self.exclusions)
        )
        classifier = f"<classifier>{escape(self.classifier)}</classifier>" if self.classifier else ""
        return (
            "<dependency>"
            f"<groupId>{escape(self.group)}</groupId><artifactId>{escape(self.artifact)}</artifactId>"
            f"<version>{escape(self.version)}</version><type>{escape(self.type)}</type>{classifier}"
            f"<exclusions>{excl}</exclusions>"
            "</dependency>"
        )


@dataclass(frozen=True)
class ArtifactSet:
    """A named group of artifacts resolved together into one directory."""

    name: str
    artifacts: tuple[MavenArtifact, ...]
    transitive: bool = True
    # Artifacts the host already provides (e.g. Kafka inside a Connect plugin dir).
    provided_groups: tuple[str, ...] = field(default=())

    def digest(self) -> str:
        payload = json.dumps(
            [a.coordinate for a in self.artifacts] + [str(self.transitive), *self.provided_groups],
            sort_keys=True,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:12]


def _kafka_excluded() -> tuple[str, ...]:
    return (
        "org.apache.kafka:kafka-clients",
        "org.apache.kafka:connect-api",
        "org.apache.kafka:connect-runtime",
        "org.apache.kafka:connect-json",
        "org.apache.kafka:connect-transforms",
        "org.slf4j:slf4j-api",
    )


def _coordinate(coordinate: str) -> MavenArtifact:
    """``group:artifact:version`` as a jar artifact."""
    group, artifact, version = coordinate.split(":")
    return MavenArtifact(group, artifact, version)


def jdbc_driver(engine: EngineCapabilities) -> MavenArtifact:
    """The JDBC driver ``engine`` declares."""
    return _coordinate(engine.jvm_artifacts.jdbc_driver)


def debezium_plugin(engine: EngineCapabilities) -> ArtifactSet:
    """The Connect plugin directory of the Debezium connector ``engine`` declares, at
    :data:`DEBEZIUM_VERSION`, without the Kafka jars the worker provides."""
    return ArtifactSet(
        name=f"debezium-{engine.name}",
        artifacts=(
            MavenArtifact(
                "io.debezium",
                engine.jvm_artifacts.debezium_connector,
                DEBEZIUM_VERSION,
                exclusions=_kafka_excluded(),
            ),
        ),
    )


JDBC_DRIVERS: Final[Mapping[str, MavenArtifact]] = {name: jdbc_driver(caps) for name, caps in ENGINES.items()}
"""Each engine's JDBC driver (a self-contained jar), for the bootstrap's partitioned replica reads, in
the order Spark's classpath lists them (the registry's); the engine names the driver's class in its JDBC
access (:meth:`cdc_lake.sources.snapshot.SnapshotSource.jdbc_access`)."""


def spark_jars(spark_version: str, lake_format: str) -> ArtifactSet:
    """Jars a Spark job needs on top of pyspark: the lake format ``lake_format``'s (a ``lake.format``
    name), Avro, S3A, Kafka and JDBC support."""
    # Imported here: the lake contract's package reaches this module through the capture plan.
    from cdc_lake.lake.format import format_facts

    packages = format_facts(lake_format).spark_packages(SPARK_VERSION_LINE, SCALA_BINARY_VERSION)
    return ArtifactSet(
        name="spark",
        artifacts=(
            *map(_coordinate, packages),
            MavenArtifact("org.apache.spark", f"spark-avro_{SCALA_BINARY_VERSION}", spark_version),
            MavenArtifact("org.apache.hadoop", "hadoop-aws", HADOOP_VERSION),
            MavenArtifact("com.amazonaws", "aws-java-sdk-bundle", AWS_SDK_BUNDLE_VERSION),
            # Spark's Kafka source (one of the applier's two readers) and what it needs that pyspark lacks.
            MavenArtifact("org.apache.spark", f"spark-sql-kafka-0-10_{SCALA_BINARY_VERSION}", spark_version),
            MavenArtifact(
                "org.apache.spark", f"spark-token-provider-kafka-0-10_{SCALA_BINARY_VERSION}", spark_version
            ),
            MavenArtifact("org.apache.kafka", "kafka-clients", SPARK_KAFKA_CLIENTS_VERSION),
            MavenArtifact("org.apache.commons", "commons-pool2", COMMONS_POOL2_VERSION),
            *JDBC_DRIVERS.values(),
        ),
        # pyspark already ships Scala, SLF4J and the Hadoop client; pulling them again would shadow its own.
        transitive=False,
    )


SPARK_PACKAGES_EXCLUDES: tuple[str, ...] = (
    # Shipped by the Spark distribution, in the same versions.
    "org.slf4j:slf4j-api",
    "com.github.luben:zstd-jni",
    "org.xerial.snappy:snappy-java",
    "org.lz4:lz4-java",
    "org.apache.hadoop:hadoop-client-api",
    "org.apache.hadoop:hadoop-client-runtime",
    "commons-logging:commons-logging",
    "com.google.code.findbugs:jsr305",
    "org.tukaani:xz",
    "org.apache.hive:hive-storage-api",
    # Optional features cdc-lake does not use (S3A's OpenSSL channel, MySQL's X DevAPI, annotations).
    "org.wildfly.openssl:wildfly-openssl",
    "com.google.protobuf:protobuf-java",
    "org.checkerframework:checker-qual",
)
"""``group:artifact`` pairs that Spark's ``--packages`` (``spark.jars.packages``) would pull in
transitively from :func:`spark_jars`; as ``--exclude-packages`` (``spark.jars.excludes``) they
keep the resolved classpath equal to the non-transitive set :func:`resolve` writes."""


KAFKA_SERVER = ArtifactSet(
    name="kafka",
    artifacts=(
        MavenArtifact("org.apache.kafka", "kafka_2.13", KAFKA_VERSION),
        MavenArtifact("org.apache.kafka", "kafka-tools", KAFKA_VERSION),
        MavenArtifact("org.apache.kafka", "connect-runtime", KAFKA_VERSION),
        MavenArtifact("org.apache.logging.log4j", "log4j-slf4j2-impl", LOG4J_VERSION),
        MavenArtifact("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
        # Named, so that it wins over the 1.7 API a dependency asks for: with that one the worker's and
        # Debezium's logs went to SLF4J's no-operation logger.
        MavenArtifact("org.slf4j", "slf4j-api", SLF4J_VERSION),
    ),
)
"""Broker, admin tools and the Kafka Connect worker share one classpath."""

CONNECT_BASIC_AUTH = ArtifactSet(
    name="connect-basic-auth",
    artifacts=(MavenArtifact("org.apache.kafka", "connect-basic-auth-extension", KAFKA_VERSION),),
    transitive=False,
)
"""Kafka's ``BasicAuthSecurityRestExtension`` for a Connect worker's REST API (its JAX-RS and Connect
dependencies are on the worker's classpath already)."""

HIVE_METASTORE_S3 = ArtifactSet(
    name="hive-metastore-s3",
    artifacts=(
        MavenArtifact("org.apache.hadoop", "hadoop-aws", HADOOP_VERSION),
        MavenArtifact("com.amazonaws", "aws-java-sdk-bundle", AWS_SDK_BUNDLE_VERSION),
    ),
    transitive=False,
)
"""S3A for the local stack's Hive Metastore (pyspark's Hive 2.3 jars lack it): it checks the folder of every
table it registers, an ``s3a://`` lake's included."""


JMX_EXPORTER_AGENT = ArtifactSet(
    name="jmx-exporter",
    artifacts=(MavenArtifact("io.prometheus.jmx", "jmx_prometheus_javaagent", JMX_EXPORTER_VERSION),),
    transitive=False,
)
"""Prometheus' JMX exporter as a Java agent (one shaded jar): the Connect workers serve Debezium's
metrics with it, under the rules in ``cdc_lake/stack/resources/jmx-exporter-connect.yaml``."""

DEBEZIUM_PLUGINS: Final[Mapping[str, ArtifactSet]] = {
    name: debezium_plugin(caps) for name, caps in ENGINES.items()
}
"""One Connect plugin directory per Debezium connector (isolated classloaders)."""

APICURIO_CONVERTER = ArtifactSet(
    name="apicurio-converter",
    artifacts=(
        MavenArtifact(
            "io.apicurio", "apicurio-registry-utils-converter", APICURIO_VERSION, exclusions=_kafka_excluded()
        ),
    ),
)
"""The Avro converter for Connect; configured to write the Confluent wire format."""

APICURIO_REGISTRY_APP = MavenArtifact(
    "io.apicurio", "apicurio-registry-app", APICURIO_VERSION, type="tar.gz", classifier="all"
)
"""The schema registry server (a Quarkus app): the Confluent REST API under /apis/ccompat/v7,
and its own v2 API, which the converter uses."""

TRINO_VERSION = "476"  # needs Java 24 or newer (cdc_lake/stack/trino.py finds one)
TRINO_SERVER = MavenArtifact("io.trino", "trino-server", TRINO_VERSION, type="tar.gz")
"""Trino's server distribution, the opt-in SQL reader of the stack (its Hudi connector reads the lake)."""
TRINO_CLI = MavenArtifact("io.trino", "trino-cli", TRINO_VERSION, classifier="executable")
"""Trino's command-line client (one executable jar), which ``cdc-lake stack trino`` runs."""

KEYCLOAK_VERSION = "24.0.5"  # the last line running on Java 17 (Keycloak 26 needs Java 21)
KEYCLOAK_DIST = MavenArtifact("org.keycloak", "keycloak-quarkus-dist", KEYCLOAK_VERSION, type="zip")
"""The OpenID Connect server Apicurio checks HTTP basic credentials against (the secured registry)."""


_MAVEN_LOCK = threading.Lock()
"""One Maven run at a time in this process: concurrent runs could write the same file of the local
repository, and two callers resolving the same set would both download it (``stack up`` installs its
services from several threads)."""


def cache_root() -> Path:
    """Where resolved artifacts live; ``$CDC_LAKE_CACHE`` overrides the default."""
    return Path(os.environ.get("CDC_LAKE_CACHE", Path.home() / ".cache" / "cdc-lake"))


def _pom(artifact_set: ArtifactSet) -> str:
    deps = "".join(a.pom_dependency() for a in artifact_set.artifacts)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        f"<groupId>cdc-lake.resolve</groupId><artifactId>{escape(artifact_set.name)}</artifactId>"
        "<version>0</version><packaging>pom</packaging>"
        f"<dependencies>{deps}</dependencies></project>"
    )


def _run_maven(args: list[str], cwd: Path, what: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JvmArtifactError(
            f"cannot resolve {what}: Maven ('mvn') is not on PATH; install it (apt-get install maven)"
        )
    proc = subprocess.run([mvn, "-B", "-q", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
        raise JvmArtifactError(f"Maven could not resolve {what}:\n{tail}")


def resolve(artifact_set: ArtifactSet) -> list[Path]:
    """Resolve an artifact set to local jar paths, downloading through Maven once."""
    with _MAVEN_LOCK:
        return _resolve(artifact_set)


def _resolve(artifact_set: ArtifactSet) -> list[Path]:
    target = cache_root() / "jars" / f"{artifact_set.name}-{artifact_set.digest()}"
    manifest = target / "manifest.json"
    if manifest.exists():
        return [target / name for name in json.loads(manifest.read_text())["jars"]]
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="cdc-lake-mvn-") as work:
        Path(work, "pom.xml").write_text(_pom(artifact_set))
        args = [
            "dependency:copy-dependencies",
            f"-DoutputDirectory={target}",
            "-DincludeScope=runtime",
            f"-DexcludeTransitive={'false' if artifact_set.transitive else 'true'}",
        ]
        _run_maven(args, Path(work), f"artifact set '{artifact_set.name}'")
    jars = sorted(p.name for p in target.glob("*.jar"))
    if not jars:
        raise JvmArtifactError(f"Maven resolved no jars for artifact set '{artifact_set.name}' into {target}")
    manifest.write_text(
        json.dumps({"jars": jars, "coordinates": [a.coordinate for a in artifact_set.artifacts]})
    )
    return [target / name for name in jars]


def fetch_archive(artifact: MavenArtifact) -> Path:
    """Download one non-jar artifact (e.g. a ``tar.gz`` distribution) and return its cached path."""
    with _MAVEN_LOCK:
        return _fetch_archive(artifact)


def _fetch_archive(artifact: MavenArtifact) -> Path:
    target = cache_root() / "archives"
    target.mkdir(parents=True, exist_ok=True)
    suffix = f"-{artifact.classifier}" if artifact.classifier else ""
    path = target / f"{artifact.artifact}-{artifact.version}{suffix}.{artifact.type}"
    if path.exists():
        return path
    with tempfile.TemporaryDirectory(prefix="cdc-lake-mvn-") as work:
        _run_maven(
            [
                "dependency:copy",
                f"-Dartifact={artifact.coordinate}",
                f"-DoutputDirectory={work}",
                "-Dmdep.useBaseVersion=true",
            ],
            Path(work),
            artifact.coordinate,
        )
        produced = [p for p in Path(work).iterdir() if p.name.endswith(artifact.type)]
        if not produced:
            raise JvmArtifactError(f"Maven produced no file for {artifact.coordinate}")
        partial = path.with_suffix(path.suffix + ".part")
        shutil.move(str(produced[0]), partial)
        partial.rename(path)
    return path
