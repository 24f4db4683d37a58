"""Apache Kafka in KRaft mode and a distributed Kafka Connect worker, both from Maven Central jars.

The broker has a plaintext listener (Connect, tests, the demo) and a SASL/SCRAM-SHA-512 over TLS
listener (``ports.kafka_secure``) with the certificate from the stack CA and the SCRAM user from the
stack credentials, so the secured path of every cdc-lake Kafka client runs against a real broker.
"""

from __future__ import annotations

import base64
import logging
import uuid
from pathlib import Path
from typing import Any

import requests
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._scram import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from cdc_lake import jvm
from cdc_lake.connect.render import connector_class
from cdc_lake.engines import ENGINE_NAMES
from cdc_lake.stack.java import classpath_argv, jmx_exporter_option
from cdc_lake.stack.process import run_checked
from cdc_lake.stack.service import HOST, Service, StackLayout
from cdc_lake.stack.tls import server_certificate

SCRAM_MECHANISM = "SCRAM-SHA-512"

DEBEZIUM_CONNECTOR_CLASSES = tuple(connector_class(engine) for engine in ENGINE_NAMES)
# librdkafka reports every refused connection while the broker boots; health polling expects those.
_QUIET_LOGGER = logging.getLogger("cdc_lake.stack.kafka.librdkafka")
_QUIET_LOGGER.setLevel(logging.CRITICAL)
CONNECT_INTERNAL_TOPICS = (
    "_cdc_lake_connect_configs",
    "_cdc_lake_connect_offsets",
    "_cdc_lake_connect_status",
)


def _write_properties(path: Path, values: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))


class KafkaBroker(Service):
    """A single combined broker+controller node (KRaft); no ZooKeeper."""

    name = "kafka"

    def address(self) -> str:
        return f"{HOST}:{self.layout.ports.kafka}"

    def install(self) -> None:
        jvm.resolve(jvm.KAFKA_SERVER)

    @property
    def config_file(self) -> Path:
        return self.layout.path("kafka", "server.properties")

    def secure_address(self) -> str:
        """The SASL_SSL listener."""
        return f"{HOST}:{self.layout.ports.kafka_secure}"

    def secure_client_settings(self) -> dict[str, str]:
        """librdkafka settings for the SASL_SSL listener (what ``kafka.consumer`` holds in a config)."""
        creds = self.layout.credentials
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": creds.kafka_user,
            "sasl.password": creds.kafka_password,
            "ssl.ca.location": str(self.layout.path("tls", "ca.crt")),
        }

    def secure_connector_client_settings(self) -> dict[str, str]:
        """Java client settings for the SASL_SSL listener (what ``kafka.connector_clients`` holds).

        The password stays on the Connect worker: ``${env:CDC_LAKE_KAFKA_PASSWORD}``.
        """
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{self.layout.credentials.kafka_user}" password="${{env:CDC_LAKE_KAFKA_PASSWORD}}";'
        )
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.jaas.config": jaas,
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.layout.path("tls", "ca.crt")),
        }

    def _keystore(self) -> Path:
        """A PEM keystore (private key, then certificate) for the TLS listener."""
        certificate = server_certificate(self.layout, "kafka", None)
        keystore = certificate.key.parent / "keystore.pem"
        if not keystore.exists():
            keystore.write_text(certificate.key.read_text() + certificate.certificate.read_text())
            keystore.chmod(0o600)
        return keystore

    def _properties(self) -> dict[str, str]:
        ports = self.layout.ports
        secure = "listener.name.sasl_ssl."
        return {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{HOST}:{ports.kafka_controller}",
            "listeners": (
                f"PLAINTEXT://{HOST}:{ports.kafka},CONTROLLER://{HOST}:{ports.kafka_controller},"
                f"SASL_SSL://{HOST}:{ports.kafka_secure}"
            ),
            "advertised.listeners": f"PLAINTEXT://{HOST}:{ports.kafka},SASL_SSL://{HOST}:{ports.kafka_secure}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL",
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            f"{secure}{SCRAM_MECHANISM.lower()}.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            f"{secure}ssl.keystore.type": "PEM",
            f"{secure}ssl.keystore.location": str(self._keystore()),
            "log.dirs": str(self.layout.path("kafka", "data")),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            "log.retention.hours": "168",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "log.cleaner.dedupe.buffer.size": "16777216",
        }

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        classpath = jvm.resolve(jvm.KAFKA_SERVER)
        _write_properties(self.config_file, self._properties())
        if not self.layout.path("kafka", "data", "meta.properties").exists():
            self.format_storage(base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("="))
        self.process.start(classpath_argv("512m", classpath, "kafka.Kafka", str(self.config_file)))

    def format_storage(self, cluster_id: str) -> None:
        """Format the KRaft log directory for ``cluster_id`` (the config file must be written)."""
        run_checked(
            classpath_argv(
                "256m",
                jvm.resolve(jvm.KAFKA_SERVER),
                "kafka.tools.StorageTool",
                "format",
                # One argument: a random id may start with "-", which would read as an option.
                f"--cluster-id={cluster_id}",
                "-c",
                str(self.config_file),
            ),
            "formatting Kafka KRaft storage",
        )

    def admin(self) -> AdminClient:
        """An admin client for this broker."""
        config: dict[str, Any] = {
            "bootstrap.servers": self.address(),
            "socket.timeout.ms": 3000,
            "logger": _QUIET_LOGGER,
        }
        return AdminClient(config)

    def healthy(self) -> bool:
        metadata = self.admin().list_topics(timeout=3)
        return len(metadata.brokers) == 1

    def after_healthy(self) -> None:
        """Create (or reset) the SCRAM user of the secured listener, through the plaintext one."""
        creds = self.layout.credentials
        upsert = UserScramCredentialUpsertion(
            creds.kafka_user,
            ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
            creds.kafka_password.encode(),
        )
        admin = self.admin()  # keep it alive until the futures resolve
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=30)


class KafkaConnect(Service):
    """A distributed Connect worker; Debezium connectors and the Apicurio Avro converter are plugins.

    The worker's JVM runs the JMX exporter agent (:func:`cdc_lake.stack.java.jmx_exporter_option`):
    Debezium's streaming and snapshot metrics and Connect's states at ``metrics_url``.
    """

    name = "kafka-connect"
    files = "connect"
    """The worker's directory in the data dir."""

    def __init__(self, layout: StackLayout, broker: KafkaBroker) -> None:
        super().__init__(layout)
        self.broker = broker

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def address(self) -> str:
        return self.url

    @property
    def metrics_url(self) -> str:
        """The JMX exporter's endpoint."""
        return f"http://{HOST}:{self.metrics_port}/metrics"

    @property
    def metrics_port(self) -> int:
        """The JMX exporter's port."""
        return self.layout.ports.connect_metrics

    def install(self) -> None:
        for artifact_set in (
            jvm.KAFKA_SERVER,
            jvm.JMX_EXPORTER_AGENT,
            *jvm.DEBEZIUM_PLUGINS.values(),
            jvm.APICURIO_CONVERTER,
        ):
            jvm.resolve(artifact_set)

    def _plugin_path(self) -> Path:
        """One sub-directory per plugin, linked to its resolved jars (isolated classloaders)."""
        root = self.layout.path(self.files, "plugins")
        root.mkdir(parents=True, exist_ok=True)
        for plugin in (*jvm.DEBEZIUM_PLUGINS.values(), jvm.APICURIO_CONVERTER):
            link = root / plugin.name
            target = jvm.resolve(plugin)[0].parent
            if link.is_symlink() and link.resolve() != target:
                link.unlink()
            if not link.exists():
                link.symlink_to(target, target_is_directory=True)
        return root

    def _worker_properties(self) -> dict[str, str]:
        """The worker config: where it keeps its state, its REST listener, its plugins."""
        config_topics, offset_topic, status_topic = CONNECT_INTERNAL_TOPICS
        return {
            "bootstrap.servers": self.broker.address(),
            "group.id": "cdc-lake-connect",
            "config.storage.topic": config_topics,
            "offset.storage.topic": offset_topic,
            "status.storage.topic": status_topic,
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            "offset.flush.interval.ms": "1000",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "listeners": self.url,
            "rest.advertised.host.name": HOST,
            "rest.advertised.port": str(self.port),
            "plugin.path": str(self._plugin_path()),
            "plugin.discovery": "hybrid_warn",
            # Connector configs say ${env:VAR}; the worker resolves it, so no secret is stored in Kafka.
            "config.providers": "env",
            "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
            "connector.client.config.override.policy": "All",
            "scheduled.rebalance.max.delay.ms": "0",
        }

    @property
    def port(self) -> int:
        """The REST port."""
        return self.layout.ports.connect

    def _launch(self, classpath: list[Path], system_properties: tuple[str, ...] = ()) -> None:
        config_file = self.layout.path(self.files, "connect-distributed.properties")
        _write_properties(config_file, self._worker_properties())
        creds = self.layout.credentials
        self.process.start(
            classpath_argv(
                "768m",
                classpath,
                "org.apache.kafka.connect.cli.ConnectDistributed",
                str(config_file),
                jvm_options=(*system_properties, jmx_exporter_option(HOST, self.metrics_port)),
            ),
            env={
                "CDC_LAKE_DB_PASSWORD": creds.db_password,
                "CDC_LAKE_KAFKA_PASSWORD": creds.kafka_password,
                "CDC_LAKE_TRUSTSTORE_PASSWORD": creds.truststore_password,
            },
        )

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        self._launch(jvm.resolve(jvm.KAFKA_SERVER))

    def _auth(self) -> tuple[str, str] | None:
        return None

    def healthy(self) -> bool:
        response = requests.get(f"{self.url}/connector-plugins", timeout=3, auth=self._auth())
        response.raise_for_status()
        classes = {plugin["class"] for plugin in response.json()}
        return all(cls in classes for cls in DEBEZIUM_CONNECTOR_CLASSES)

    def detail(self) -> str:
        """Where the JMX exporter serves, or that it does not (a worker started before it was added)."""
        try:
            requests.get(self.metrics_url, timeout=3).raise_for_status()
        except requests.RequestException:
            return f"no metrics on {HOST}:{self.metrics_port}"
        return f"metrics {HOST}:{self.metrics_port}"


class SecureKafkaConnect(KafkaConnect):
    """The secured mode's Connect worker: REST behind basic auth, Kafka clients over SASL_SSL.

    Kafka's ``BasicAuthSecurityRestExtension`` checks every REST request against the JAAS
    ``PropertyFileLoginModule`` (a users file written from the stack credentials, private to its
    owner); the worker's own clients and its connectors' producers, consumers and admin clients
    reach the broker's SASL_SSL listener, with the password resolved from the worker's environment.
    Its group and internal topics are its own, so it runs beside the plaintext worker.
    """

    name = "kafka-connect-secure"
    files = "connect-secure"

    @property
    def port(self) -> int:
        return self.layout.ports.connect_secure

    @property
    def metrics_port(self) -> int:
        return self.layout.ports.connect_secure_metrics

    def install(self) -> None:
        super().install()
        jvm.resolve(jvm.CONNECT_BASIC_AUTH)

    def _auth(self) -> tuple[str, str]:
        creds = self.layout.credentials
        return creds.connect_user, creds.connect_password

    def _worker_properties(self) -> dict[str, str]:
        properties = {
            **super()._worker_properties(),
            "bootstrap.servers": self.broker.secure_address(),
            "group.id": "cdc-lake-connect-secure",
            "config.storage.topic": "_cdc_lake_connect_secure_configs",
            "offset.storage.topic": "_cdc_lake_connect_secure_offsets",
            "status.storage.topic": "_cdc_lake_connect_secure_status",
            "rest.extension.classes": (
                "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
            ),
        }
        for prefix in ("", "producer.", "consumer.", "admin."):
            for key, value in self.broker.secure_connector_client_settings().items():
                properties[prefix + key] = value
        return properties

    def _jaas_file(self) -> Path:
        """The JAAS login config naming the users file (both rewritten from the credentials)."""
        base = self.layout.path(self.files)
        base.mkdir(parents=True, exist_ok=True)
        base.chmod(0o700)
        users, jaas = base / "rest-users.properties", base / "rest-jaas.conf"
        creds = self.layout.credentials
        users.touch(mode=0o600)
        users.write_text(f"{creds.connect_user}: {creds.connect_password}\n")
        jaas.write_text(
            "KafkaConnect {\n"
            "  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required\n"
            f'  file="{users}";\n'
            "};\n"
        )
        return jaas

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        self._launch(
            [*jvm.resolve(jvm.KAFKA_SERVER), *jvm.resolve(jvm.CONNECT_BASIC_AUTH)],
            (f"-Djava.security.auth.login.config={self._jaas_file()}",),
        )
