"""docker-compose.yml stays in step with the local stack: same services, same loopback ports."""

from __future__ import annotations

from pathlib import Path

import yaml

from cdc_lake.config import StackSettings
from cdc_lake.stack.manager import LocalStack

COMPOSE = Path(__file__).resolve().parents[3] / "docker-compose.yml"
# Compose runs real MySQL 8 where the local stack runs MariaDB (no MySQL server package here).
COMPOSE_NAME = {"mariadb-primary": "mysql-primary", "mariadb-replica": "mysql-replica"}


def _host_ports(service: dict[str, object]) -> set[int]:
    ports = service.get("ports", [])
    assert isinstance(ports, list)
    return {int(str(mapping).split(":")[1]) for mapping in ports}


def test_compose_has_every_stack_service_on_the_same_port(tmp_path: Path) -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    stack = LocalStack(StackSettings(data_dir=tmp_path), ("trino",))
    expected = {
        "object-store": stack.layout.ports.object_store,
        "postgres-primary": stack.layout.ports.postgres_primary,
        "postgres-replica": stack.layout.ports.postgres_replica,
        "mariadb-primary": stack.layout.ports.mariadb_primary,
        "mariadb-replica": stack.layout.ports.mariadb_replica,
        "kafka": stack.layout.ports.kafka,
        "schema-registry": stack.layout.ports.registry,
        "keycloak": stack.layout.ports.keycloak,
        "schema-registry-secure": stack.layout.ports.registry_secure,
        "kafka-connect": stack.layout.ports.connect,
        "kafka-connect-secure": stack.layout.ports.connect_secure,
        "glue-catalog": stack.layout.ports.glue,
        "hive-metastore": stack.layout.ports.hive_metastore,
        "spark-master": stack.layout.ports.spark_master,
        "spark-worker": stack.layout.ports.spark_worker_ui,
        "trino": stack.layout.ports.trino,
    }
    assert set(expected) == {service.name for service in stack.services}
    for name, port in expected.items():
        service = compose["services"][COMPOSE_NAME.get(name, name)]
        assert port in _host_ports(service), f"{name}: compose does not publish {port}"
    for service in compose["services"].values():
        for mapping in service.get("ports", []):
            assert str(mapping).startswith("127.0.0.1:"), f"{mapping}: services listen on loopback only"
