"""The YAML config: typed settings for the lake, the state store, Kafka, Spark and every source.

``load_config`` reads a file, expands ``${VAR}`` / ``${VAR:-default}`` from the
environment, validates it against strict models (an unknown key is an error
naming its dotted path), and resolves relative paths against the file's
directory.  ``Config.default()`` gives the local stack's defaults without a file.
Secrets are :class:`pydantic.SecretStr`, so printing a config never shows them.

A source's model is its engine's (:mod:`cdc_lake.sources.settings`, ``sources/<engine>/settings.py``),
found in the engine registry by its ``engine``: this module imports the sources' models, and nothing
under :mod:`cdc_lake.sources` imports it.  ``Source``, ``Connection`` and
``Table`` are importable from here as from there.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from cdc_lake.exceptions import ConfigError, UnknownSourceError, UnknownTableError
from cdc_lake.redaction import is_secret_key
from cdc_lake.sources.settings import DEFAULT_HEARTBEAT_SECONDS as DEFAULT_HEARTBEAT_SECONDS
from cdc_lake.sources.settings import ConfigModel as _Model
from cdc_lake.sources.settings import Connection as Connection
from cdc_lake.sources.settings import FormatOptions, PassthroughValue, Secret
from cdc_lake.sources.settings import Source as Source
from cdc_lake.sources.settings import Table as Table

DEFAULT_CONFIG_NAME = "cdc-lake.yaml"
DEFAULT_STATE_DIR = ".cdc-lake"
_ENV_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_CONNECT_ENV_REFERENCE = re.compile(r"^env:[A-Za-z_][A-Za-z0-9_]*$")
_ENV_BODY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$", re.DOTALL)
_CONNECT_ENV_VALUE = re.compile(r"^\$\{env:[A-Za-z_][A-Za-z0-9_]*\}$")
# One ``name=value`` option of a JAAS line (``Module required a="x" b=y;``); quoted values may hold escapes.
_JAAS_OPTION = re.compile(r'([A-Za-z_][\w.-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;"]+)')


def _is_a_file(value: str) -> str:
    if not Path(value).expanduser().is_file():
        raise PydanticCustomError("no_file", "no file at {path}", {"path": value})
    return value


LocalFile = Annotated[str, AfterValidator(_is_a_file)]
"""A file cdc-lake reads itself (a CA bundle, a client certificate or key), used as written: it must
exist when the config loads."""


class S3Settings(_Model):
    """Object store credentials and endpoint for an ``s3a://`` lake."""

    endpoint: str | None = None
    region: str | None = None
    access_key: Secret | None = None
    secret_key: Secret | None = None
    path_style_access: bool = True


class CompactionSettings(_Model):
    """MERGE_ON_READ compaction (docs/hudi.md#table-services): planned after ``max_delta_commits`` delta
    commits or ``max_delta_seconds`` since the last compaction; executed inside the writer's commit
    (``inline``) or, with ``inline: false``, by ``cdc-lake run``'s table-service thread every
    ``check_seconds`` and by ``cdc-lake compact``.  ``max_staleness_seconds`` bounds how old the newest
    data a read-optimized reader (Trino) misses may get before ``CdcLakeCompactionBehind`` fires."""

    inline: bool = True
    max_delta_commits: int = Field(default=5, ge=1)
    max_delta_seconds: int | None = Field(default=None, ge=1)
    check_seconds: float = Field(default=10.0, gt=0)
    max_staleness_seconds: float = Field(default=300.0, gt=0)


def _default_format() -> str:
    from cdc_lake.lake.format import DEFAULT_FORMAT

    return DEFAULT_FORMAT


class LakeSettings(_Model):
    """Where and how lake tables are written, and in which format."""

    format: str = Field(default_factory=_default_format)
    """The table format (a name :data:`cdc_lake.lake.format.FORMATS` knows) every table is written in."""
    base_path: str = f"{DEFAULT_STATE_DIR}/lake"
    table_type: Literal["COPY_ON_WRITE", "MERGE_ON_READ"] = "COPY_ON_WRITE"
    index: Literal["GLOBAL_BLOOM", "RECORD_INDEX", "GLOBAL_SIMPLE", "BLOOM", "SIMPLE", "BUCKET"] = (
        "GLOBAL_BLOOM"
    )
    soft_deletes: bool = False
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    s3: S3Settings | None = None
    # Hudi table version written (docs/hudi.md#table-version): 6 is read by Spark, hudi-rs and Trino 476.
    table_version: Literal[6, 8, 9] = 6
    format_options: FormatOptions = Field(default_factory=dict)
    """The format's options for every table; a table's own ``format_options`` win over these."""
    old_copy_keep_hours: float = Field(default=24.0, ge=0)
    """How long a re-bootstrapped table's previous base path is kept before
    ``cdc-lake rebootstrap --remove-old`` removes it (readers that resolved it before the switch)."""

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        from cdc_lake.lake.format import format_facts

        try:
            format_facts(value)
        except ConfigError as exc:
            # The error's location names the setting already.
            reason = str(exc).removeprefix("lake.format: ")
            raise PydanticCustomError("lake_format", "{reason}", {"reason": reason}) from None
        return value

    @model_validator(mode="after")
    def _compaction_needs_mor(self) -> LakeSettings:
        if "compaction" in self.model_fields_set and self.table_type != "MERGE_ON_READ":
            raise PydanticCustomError(
                "compaction_needs_mor", "compaction applies only to table_type MERGE_ON_READ"
            )
        return self

    def table_base_path(self, qualified_name: str) -> str:
        """The Hudi base path of a table named ``source.schema.table``: one directory level per part."""
        return "/".join([self.base_path.rstrip("/"), *qualified_name.split(".")])

    def holds(self, path: str) -> bool:
        """Whether ``path`` lies strictly below ``base_path``: same scheme and bucket, ``..`` resolved."""
        base, inner = urlsplit(self.base_path), urlsplit(path)
        if (base.scheme, base.netloc) != (inner.scheme, inner.netloc):
            return False
        root = posixpath.normpath(base.path or "/").rstrip("/")
        return posixpath.normpath(inner.path or "/").startswith(f"{root}/")


class StateStoreSettings(_Model):
    """The SQLAlchemy database holding lifecycle state, watermarks and applied offsets."""

    url: str = f"sqlite:///{DEFAULT_STATE_DIR}/state.db"

    @field_validator("url")
    @classmethod
    def _parses(cls, value: str) -> str:
        try:
            make_url(value)
        except ArgumentError:
            # The URL may hold a password: never echo it.
            raise PydanticCustomError("state_store_url", "not a SQLAlchemy database URL") from None
        return value


FIXED_CONSUMER_SETTINGS: Final = ("auto.offset.reset", "enable.auto.commit")
"""librdkafka settings cdc-lake sets itself on every consumer of a planned offset range."""


class KafkaSettings(_Model):
    """The Kafka cluster Debezium writes to; ``consumer`` is passed to librdkafka as is."""

    bootstrap_servers: str = "127.0.0.1:19092"
    consumer: dict[str, PassthroughValue] = Field(default_factory=dict)
    connector_clients: dict[str, PassthroughValue] = Field(default_factory=dict)
    """Java Kafka client settings for the connectors' own clients (MySQL/MariaDB schema history), e.g.
    ``security.protocol``, ``sasl.jaas.config``; ``${env:VAR}`` is resolved by the Connect workers."""

    @field_validator("connector_clients")
    @classmethod
    def _secrets_stay_on_the_workers(cls, value: dict[str, PassthroughValue]) -> dict[str, PassthroughValue]:
        # The settings are copied into connector configs, which Connect's REST API shows: a secret there
        # must be a ${env:VAR} the workers resolve (a ${VAR} of this file is already expanded here).
        for key, text in value.items():
            held = _stored_secret(key, text)
            if held is not None:
                raise PydanticCustomError(
                    "connector_client_secret",
                    "{held} must be Kafka Connect's ${env:VAR} (resolved by the Connect workers): a "
                    "literal or a ${VAR} of this file would be stored in the connector config, readable "
                    "through Connect's REST API",
                    {"held": held},
                )
        return value

    @field_validator("consumer")
    @classmethod
    def _keeps_offset_reset(cls, value: dict[str, PassthroughValue]) -> dict[str, PassthroughValue]:
        # Offset ranges are read exactly: a range start deleted by retention must fail, never jump.
        for fixed in FIXED_CONSUMER_SETTINGS:
            if fixed in value:
                raise PydanticCustomError(
                    "fixed_consumer_setting",
                    "{name} cannot be set: the applier reads exact offset ranges and fails when retention "
                    "deleted part of one",
                    {"name": fixed},
                )
        return value


def _stored_secret(key: str, value: str) -> str | None:
    """Where Java client setting ``key`` holds a secret other than a ``${env:VAR}`` (None: nowhere).

    A credential-named setting must be exactly ``${env:VAR}``; a JAAS line (``sasl.jaas.config``)
    may hold anything but its credential-named options (``password``, ``clientSecret``, …).
    """
    if not is_secret_key(key):
        return None
    if key.lower().endswith("jaas.config"):
        for option, raw in _JAAS_OPTION.findall(value):
            if is_secret_key(option) and not _CONNECT_ENV_VALUE.match(raw.strip('"')):
                return f"{key}: {option}"
        return None
    return None if _CONNECT_ENV_VALUE.match(value.strip()) else key


class SchemaRegistrySettings(_Model):
    """The Confluent-compatible schema registry that holds the Avro schemas.

    ``url`` is its Confluent API (Confluent, Karapace, Apicurio's ``/apis/ccompat/v7``); ``user`` and
    ``password`` authenticate the decoder.  ``converter`` is the Avro converter the connectors use:
    ``apicurio`` (the local stack's, talking to Apicurio's native API on the same server) or
    ``confluent`` (``io.confluent.connect.avro.AvroConverter`` against ``url``).
    ``connect_credentials_env`` names the environment variable ON THE CONNECT WORKERS that holds
    the converter's credentials (``user:password``, or a token when ``connect_credentials_kind``
    is ``bearer``): connector configs carry only ``${env:VAR}``.
    ``ca_cert``: the CA bundle that verifies an ``https://`` registry (default: the system's);
    ``client_cert`` and ``client_key`` (PEM, both or neither): mutual TLS.  They are cdc-lake's own
    (driver and executors); the converter's TLS is configured on the Connect workers.
    """

    url: str = "http://127.0.0.1:18081/apis/ccompat/v7"
    user: str | None = None
    password: Secret | None = None
    bearer_token: Secret | None = None
    ca_cert: LocalFile | None = None
    client_cert: LocalFile | None = None
    client_key: LocalFile | None = None
    converter: Literal["apicurio", "confluent"] = "apicurio"
    connect_credentials_env: str | None = None
    connect_credentials_kind: Literal["user_info", "bearer"] = "user_info"

    def basic_auth(self) -> tuple[str, str] | None:
        """(user, password) for HTTP basic authentication, when a user is configured."""
        if self.user is None:
            return None
        return self.user, self.password.get_secret_value() if self.password is not None else ""

    def auth_headers(self) -> dict[str, str]:
        """The ``Authorization: Bearer`` header, when a token is configured."""
        if self.bearer_token is None:
            return {}
        return {"Authorization": f"Bearer {self.bearer_token.get_secret_value()}"}

    def client_certificate(self) -> tuple[str, str] | None:
        """(certificate, key) for mutual TLS, when configured."""
        if self.client_cert is None or self.client_key is None:
            return None
        return self.client_cert, self.client_key

    @model_validator(mode="after")
    def _client_certificate_needs_its_key(self) -> SchemaRegistrySettings:
        pair = {"client_cert": self.client_cert, "client_key": self.client_key}
        for given, missing in (("client_cert", "client_key"), ("client_key", "client_cert")):
            if pair[given] is not None and pair[missing] is None:
                raise PydanticCustomError(
                    "registry_tls",
                    "{given} is set but {missing} is not (mutual TLS needs both)",
                    {"given": given, "missing": missing},
                )
        return self

    @model_validator(mode="after")
    def _one_way_to_authenticate(self) -> SchemaRegistrySettings:
        if self.bearer_token is not None and self.user is not None:
            raise PydanticCustomError("registry_auth", "set either user/password or bearer_token, not both")
        return self

    @model_validator(mode="after")
    def _credentials_need_confluent(self) -> SchemaRegistrySettings:
        if self.connect_credentials_env is not None and self.converter != "confluent":
            raise PydanticCustomError(
                "registry_auth",
                "connect_credentials_env needs converter: confluent "
                "(the Apicurio converter is rendered without auth)",
            )
        return self


class KafkaConnectSettings(_Model):
    """The Kafka Connect REST endpoint running Debezium.

    ``user``/``password``: HTTP basic authentication (Connect's ``BasicAuthSecurityRestExtension``).
    ``ca_cert``: the CA bundle that verifies an ``https://`` endpoint (default: the system's).
    """

    url: str = "http://127.0.0.1:18083"
    user: str | None = None
    password: Secret | None = None
    ca_cert: LocalFile | None = None

    @model_validator(mode="after")
    def _password_needs_user(self) -> KafkaConnectSettings:
        if self.password is not None and self.user is None:
            raise PydanticCustomError("connect_auth", "password is set but user is not")
        return self


SPARK_MASTER_URL: Final = re.compile(
    r"yarn|local(\[(\*|\d+)(,\d+)?\])?|k8s://(https?://)?[^\s/:]+(:\d+)?/?"
    r"|spark://[^\s/:,]+:\d+(,[^\s/:,]+:\d+)*|mesos://\S+"
)
"""The master URLs Spark 3.5 accepts: YARN, Kubernetes (an API server), standalone (with standby
masters), Mesos, or in-process."""


class SparkSettings(_Model):
    """The Spark session; an empty ``jars`` list means resolve the lake format's jars (and the rest) through
    Maven."""

    master: str = "local[2]"
    app_name: str = "cdc-lake"
    driver_memory: str = "1g"
    jars: list[str] = Field(default_factory=list)
    conf: dict[str, PassthroughValue] = Field(default_factory=dict)

    @field_validator("master")
    @classmethod
    def _is_a_master_url(cls, value: str) -> str:
        if not SPARK_MASTER_URL.fullmatch(value):
            raise PydanticCustomError(
                "spark_master",
                "'{value}' is not a Spark master URL; use yarn, k8s://https://HOST:PORT, "
                "spark://HOST:PORT or local[N] (docs/deploy.md)",
                {"value": value},
            )
        return value


def _default_intervals() -> dict[int, int]:
    return {0: 0, 1: 900, 2: 3600}


class ApplySettings(_Model):
    """The incremental applier: batch size and how often each tier runs."""

    batch_max_events: int = Field(default=500_000, ge=1)
    default_interval_seconds: dict[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]] = Field(
        default_factory=_default_intervals
    )
    dead_letter_topic: str | None = None

    @field_validator("default_interval_seconds", mode="before")
    @classmethod
    def _over_defaults(cls, value: object) -> object:
        """Tiers the user does not mention keep their default interval."""
        if isinstance(value, Mapping):
            return {**_default_intervals(), **value}
        return value

    def interval_for(self, tier: int) -> int:
        """Seconds between apply runs for ``tier``: its own setting, else the nearest lower tier's."""
        lower = [t for t in self.default_interval_seconds if t <= tier]
        if not lower:
            raise ConfigError(f"apply.default_interval_seconds: no interval for tier {tier} or below")
        return self.default_interval_seconds[max(lower)]


class BootstrapSettings(_Model):
    """The snapshot from the read replica and its hand-off to the applier."""

    replica_delay_seconds: int = Field(default=60, ge=0)
    replica_wait_timeout_seconds: int = Field(default=1800, ge=1)
    handoff_timeout_seconds: int = Field(default=1800, ge=1)
    allow_primary_reads: bool = False
    fetch_size: int = Field(default=10_000, ge=1)
    max_partitions: int = Field(default=64, ge=1)


class TierThresholds(_Model):
    """Alert thresholds for the tables (and their connectors' slots) of one tier."""

    freshness_max_seconds: int = Field(ge=1)
    kafka_lag_max_messages: int = Field(default=1_000_000, ge=0)
    wal_retained_max_bytes: int = Field(default=10 * 1024**3, ge=0)


def _default_tiers() -> dict[int, TierThresholds]:
    return {
        0: TierThresholds(
            freshness_max_seconds=300, kafka_lag_max_messages=100_000, wal_retained_max_bytes=2 * 1024**3
        ),
        1: TierThresholds(freshness_max_seconds=3600),
        2: TierThresholds(freshness_max_seconds=4 * 3600),
    }


RUNBOOK_BASE_URL: Final = re.compile(r"^https?://\S+$")
"""What ``monitoring.runbook_base_url`` (and ``alerts render --runbook-base-url``) must look like."""


class MonitoringSettings(_Model):
    """``cdc-lake lag`` thresholds, the metrics endpoint and the generated Prometheus alert rules.

    ``tiers`` maps a tier to its thresholds; a tier not listed uses the nearest lower tier's.
    """

    metrics_port: int = Field(default=9464, ge=0, le=65535)
    metrics_host: str = "0.0.0.0"
    refresh_seconds: int = Field(default=30, ge=1)
    replica_lag_max_seconds: int = Field(default=600, ge=0)
    replica_lag_max_bytes: int = Field(default=1024**3, ge=0)
    binlog_min_files_ahead: int = Field(default=1, ge=0)
    applier_silent_max_seconds: int = Field(default=300, ge=1)
    debezium_behind_max_seconds: int = Field(default=120, ge=1)
    """CdcLakeDebeziumStreamingBehind: a streaming connector reads changes this much after their commit
    (Debezium's MilliSecondsBehindSource, from the Connect workers' JMX exporter)."""
    alert_for_seconds: int = Field(default=300, ge=0)
    runbook_base_url: str | None = Field(default=None, pattern=RUNBOOK_BASE_URL.pattern)
    """Where docs/runbooks is published (http/https): the rules' ``runbook_url`` is ``<this>/<page>.md``.
    No default (the project has no canonical address): ``cdc-lake alerts render`` requires it."""
    tiers: dict[Annotated[int, Field(ge=0)], TierThresholds] = Field(default_factory=_default_tiers)

    @field_validator("tiers", mode="before")
    @classmethod
    def _over_default_tiers(cls, value: object) -> object:
        """Tiers the user does not mention keep their default thresholds."""
        if isinstance(value, Mapping):
            return {**_default_tiers(), **value}
        return value

    def thresholds_for(self, tier: int) -> TierThresholds:
        """The thresholds of ``tier``: its own, else the nearest lower tier's."""
        lower = [t for t in self.tiers if t <= tier]
        if not lower:
            raise ConfigError(f"monitoring.tiers: no thresholds for tier {tier} or below")
        return self.tiers[max(lower)]


class StackPorts(_Model):
    """Host ports of the local stack's services."""

    postgres_primary: int = Field(default=15432, ge=1, le=65535)
    postgres_replica: int = Field(default=15433, ge=1, le=65535)
    mariadb_primary: int = Field(default=13306, ge=1, le=65535)
    mariadb_replica: int = Field(default=13307, ge=1, le=65535)
    kafka: int = Field(default=19092, ge=1, le=65535)
    kafka_controller: int = Field(default=19093, ge=1, le=65535)
    kafka_secure: int = Field(default=19094, ge=1, le=65535)
    """The broker's SASL/SCRAM-over-TLS listener (user ``cdc-lake``, the stack CA)."""
    connect: int = Field(default=18083, ge=1, le=65535)
    connect_secure: int = Field(default=18084, ge=1, le=65535)
    """The secured Connect worker (REST basic auth; its Kafka clients on ``kafka_secure``)."""
    connect_metrics: int = Field(default=18085, ge=1, le=65535)
    """The JMX exporter agent of the Connect worker: Debezium's metrics at ``/metrics``."""
    connect_secure_metrics: int = Field(default=18086, ge=1, le=65535)
    """The same for the secured Connect worker."""
    registry: int = Field(default=18081, ge=1, le=65535)
    registry_secure: int = Field(default=18082, ge=1, le=65535)
    """The secured registry: Apicurio's Confluent API behind HTTP basic auth (checked by ``keycloak``)."""
    keycloak: int = Field(default=18180, ge=1, le=65535)
    """The OpenID Connect server of the secured registry."""
    object_store: int = Field(default=17070, ge=1, le=65535)
    glue: int = Field(default=17080, ge=1, le=65535)
    hive_metastore: int = Field(default=19083, ge=1, le=65535)
    spark_master: int = Field(default=17077, ge=1, le=65535)
    spark_master_ui: int = Field(default=18090, ge=1, le=65535)
    spark_worker_ui: int = Field(default=18091, ge=1, le=65535)
    trino: int = Field(default=18095, ge=1, le=65535)


class GlueSettings(_Model):
    """An AWS Glue Data Catalog database the lake tables are registered in (credentials: boto3's chain)."""

    database: str
    region: str = "us-east-1"
    endpoint_url: str | None = None
    """A Glue-compatible endpoint (the local stack's ``http://127.0.0.1:17080``); AWS when unset."""


class HiveMetastoreSettings(_Model):
    """A Hive Metastore database the lake tables are registered in (through Spark's JVM)."""

    uri: str
    """The metastore's thrift URI, e.g. the local stack's ``thrift://127.0.0.1:19083``."""
    database: str


class CatalogSettings(_Model):
    """Where tables are registered after publish, schema changes and re-bootstrap switches."""

    glue: GlueSettings | None = None
    hive: HiveMetastoreSettings | None = None


class TrinoStackSettings(_Model):
    """The stack's opt-in Trino (``cdc-lake stack up --with trino`` starts it too)."""

    enabled: bool = False
    java_home: Path | None = None
    """A JDK 24 or newer for Trino; unset: the newest one under /usr/lib/jvm."""


class StackSettings(_Model):
    """The local stack: where its data lives and which ports it listens on."""

    data_dir: Path = Path(DEFAULT_STATE_DIR) / "stack"
    ports: StackPorts = Field(default_factory=StackPorts)
    trino: TrinoStackSettings = Field(default_factory=lambda: TrinoStackSettings())


class Config(_Model):
    """The whole config file; every section has local-stack defaults."""

    lake: LakeSettings = Field(default_factory=LakeSettings)
    state_store: StateStoreSettings = Field(default_factory=StateStoreSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    schema_registry: SchemaRegistrySettings = Field(default_factory=SchemaRegistrySettings)
    kafka_connect: KafkaConnectSettings = Field(default_factory=KafkaConnectSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    apply: ApplySettings = Field(default_factory=ApplySettings)
    bootstrap: BootstrapSettings = Field(default_factory=BootstrapSettings)
    monitoring: MonitoringSettings = Field(default_factory=MonitoringSettings)
    stack: StackSettings = Field(default_factory=StackSettings)
    catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    sources: dict[str, Source] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _name_sources(cls, data: object) -> object:
        """Give each source its key as ``name`` (a ``name`` key that disagrees is left to fail below)."""
        if isinstance(data, Mapping) and isinstance(data.get("sources"), Mapping):
            named = {
                key: {"name": key, **value} if isinstance(value, Mapping) else value
                for key, value in data["sources"].items()
            }
            return {**data, "sources": named}
        return data

    @model_validator(mode="after")
    def _names_match_keys(self) -> Config:
        for key, source in self.sources.items():
            if source.name != key:
                raise PydanticCustomError(
                    "source_name", "sources.{key}.name must equal its key {key}", {"key": key}
                )
        return self

    @field_validator("sources")
    @classmethod
    def _one_topic_prefix_per_source(cls, value: dict[str, Source]) -> dict[str, Source]:
        # Debezium names every topic (tables, heartbeats, schema history) after the prefix: two sources
        # sharing one would write their changes into the same topics.
        owners: dict[str, str] = {}
        for name, source in value.items():
            prefix = source.topic_prefix or name
            if prefix in owners:
                raise PydanticCustomError(
                    "topic_prefix",
                    "{first} and {second} both use topic prefix '{prefix}', so their changes would share "
                    "topics; set sources.{second}.topic_prefix to a prefix of its own",
                    {"first": owners[prefix], "second": name, "prefix": prefix},
                )
            owners[prefix] = name
        return value

    @model_validator(mode="after")
    def _partitioned_tables_need_a_global_index(self) -> Config:
        # A per-partition index looks a key up only in the partition its incoming row names: a delete whose
        # image lacks the partition value (Postgres REPLICA IDENTITY DEFAULT) or an update that changes it
        # would miss the stored row, which would stay.
        from cdc_lake.lake.layout import IndexType

        if IndexType(self.lake.index).is_global:
            return self
        for source, table in self.iter_tables():
            if table.partition_by:
                raise PydanticCustomError(
                    "per_partition_index",
                    "lake.index {index} is per partition and cannot serve table {table}, which has "
                    "partition_by: a delete without the partition value or an update that changes it "
                    "would miss the stored row; use a global index: GLOBAL_BLOOM, GLOBAL_SIMPLE or "
                    "RECORD_INDEX",
                    {"index": self.lake.index, "table": table.qualified_name(source)},
                )
        return self

    @model_validator(mode="after")
    def _format_options_pass_through(self) -> Config:
        # Which options pass through is the format's answer, so the lake's and every table's are checked
        # here, where lake.format is known; each error names the setting, as a field's would.
        from cdc_lake.lake.format import format_facts

        facts = format_facts(self.lake.format)
        located: list[tuple[tuple[str | int, ...], dict[str, str]]] = [
            (("lake", "format_options"), self.lake.format_options)
        ]
        for key, source in self.sources.items():
            located += [
                (("sources", key, "tables", index, "format_options"), table.format_options)
                for index, table in enumerate(source.tables)
            ]
        errors = []
        for loc, options in located:
            problem = next(filter(None, map(facts.option_problem, options)), None)
            if problem is not None:
                error = PydanticCustomError("format_option", "{problem}", {"problem": problem})
                errors.append(InitErrorDetails(type=error, loc=loc, input=options))
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    @classmethod
    def default(cls, base_dir: Path | None = None) -> Config:
        """Local-stack defaults with no sources; relative paths resolve against ``base_dir`` (cwd)."""
        return _resolve_paths(cls(), base_dir or Path.cwd())

    def source(self, name: str) -> Source:
        """The source called ``name``."""
        try:
            return self.sources[name]
        except KeyError:
            known = ", ".join(sorted(self.sources)) or "none"
            raise UnknownSourceError(f"source {name} is not in the config (configured: {known})") from None

    def table(self, qualified: str) -> tuple[Source, Table]:
        """The source and table for ``source.schema.table``."""
        parts = qualified.split(".")
        if len(parts) != 3 or not all(parts):
            raise UnknownTableError(f"table {qualified}: expected source.schema.table")
        source = self.source(parts[0])
        return source, source.table(f"{parts[1]}.{parts[2]}")

    def iter_tables(self) -> Iterator[tuple[Source, Table]]:
        """Every configured table with its source, in config order."""
        for source in self.sources.values():
            for table in source.tables:
                yield source, table

    def secret_values(self) -> set[str]:
        """Every secret in this config, for the log redaction filter."""
        found: set[str] = set()
        _collect_secrets(self, found)
        password = make_url(self.state_store.url).password
        if password:
            found.add(str(password))
        found.discard("")
        return found


def _collect_secrets(value: object, found: set[str]) -> None:
    if isinstance(value, SecretStr):
        found.add(value.get_secret_value())
    elif isinstance(value, BaseModel):
        for field_name in type(value).model_fields:
            _collect_secrets(getattr(value, field_name), found)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, str) and is_secret_key(str(key)):
                found.add(item)
            else:
                _collect_secrets(item, found)
    elif isinstance(value, list):
        for item in value:
            _collect_secrets(item, found)


def find_config(path: str | Path | None) -> Path | None:
    """The config file to use: ``path`` (which must exist), else ``./cdc-lake.yaml`` if present, else None."""
    if path is not None:
        explicit = Path(path)
        if not explicit.is_file():
            raise ConfigError(f"{explicit}: config file not found")
        return explicit
    default = Path.cwd() / DEFAULT_CONFIG_NAME
    return default if default.is_file() else None


def resolve_config(path: str | Path | None, allow_default: bool = False) -> Config:
    """Load the config a command asked for; without a file, local defaults only if ``allow_default``."""
    found = find_config(path)
    if found is not None:
        return load_config(found)
    if allow_default:
        return Config.default()
    raise ConfigError(f"{DEFAULT_CONFIG_NAME}: config file not found in {Path.cwd()}; pass --config PATH")


def load_config(path: Path) -> Config:
    """Read, expand, validate and path-resolve the config file at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    try:
        raw = yaml.load(text, Loader=_StrictLoader)  # _StrictLoader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: invalid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {type(exc).__name__}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    expanded = _expand_env(raw, (), path)
    try:
        config = Config.model_validate(expanded)
    except ValidationError as exc:
        raise ConfigError(_describe_validation_error(path, exc)) from None
    return _resolve_paths(config, path.resolve().parent)


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that rejects a key given twice in one mapping instead of keeping the last."""


def _construct_unique_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in mapping:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def _expand_env(value: object, loc: tuple[str | int, ...], path: Path) -> object:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in every string value (keys are left alone)."""
    if isinstance(value, str):
        return _ENV_REFERENCE.sub(lambda match: _env_value(match.group(1), loc, path), value)
    if isinstance(value, dict):
        return {key: _expand_env(item, (*loc, str(key)), path) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand_env(item, (*loc, index), path) for index, item in enumerate(value)]
    return value


def _env_value(body: str, loc: tuple[str | int, ...], path: Path) -> str:
    if _CONNECT_ENV_REFERENCE.match(body):
        # ${env:VAR} is Kafka Connect's EnvVarConfigProvider syntax: the Connect worker resolves it from
        # its own environment, so a connector setting can name a secret without holding it.
        return f"${{{body}}}"
    parsed = _ENV_BODY.match(body)
    if parsed is None:
        raise ConfigError(
            f"{path}: {_dotted(loc)}: malformed reference ${{{body}}}; use ${{VAR}} or ${{VAR:-default}}"
        )
    name, default = parsed.group(1), parsed.group(2)
    value = os.environ.get(name)
    if default is not None and not value:
        return default
    if value is None:
        raise ConfigError(f"{path}: {_dotted(loc)}: environment variable {name} is not set")
    return value


def _dotted(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "<top level>"


def _describe_validation_error(path: Path, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        loc = tuple(part for part in error["loc"] if isinstance(part, str | int))
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        elif error["type"] == "missing":
            message = "required key is missing"
        else:
            message = error["msg"]
        problems.append(f"{_dotted(loc)}: {message}")
    return f"{path}: " + "; ".join(problems)


def _resolve_paths(config: Config, base_dir: Path) -> Config:
    """Make every relative local path in ``config`` absolute against ``base_dir``."""
    return config.model_copy(
        update={
            "lake": config.lake.model_copy(
                update={"base_path": _resolve_location(config.lake.base_path, base_dir)}
            ),
            "state_store": config.state_store.model_copy(
                update={"url": _resolve_sqlite_url(config.state_store.url, base_dir)}
            ),
            "spark": config.spark.model_copy(
                update={"jars": [_resolve_location(jar, base_dir) for jar in config.spark.jars]}
            ),
            "stack": config.stack.model_copy(
                update={"data_dir": _resolve_path(config.stack.data_dir, base_dir)}
            ),
        }
    )


def _resolve_path(path: Path, base_dir: Path) -> Path:
    path = path.expanduser()
    return path if path.is_absolute() else (base_dir / path).resolve()


def _resolve_location(location: str, base_dir: Path) -> str:
    """A local path becomes absolute; a URI (``s3a://…``, ``file:/…``) is kept as written."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", location):
        return location
    return str(_resolve_path(Path(location), base_dir))


def _resolve_sqlite_url(url: str, base_dir: Path) -> str:
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return url
    if database.startswith("file:"):
        return url
    resolved = _resolve_path(Path(database), base_dir)
    return parsed.set(database=str(resolved)).render_as_string(hide_password=False)
