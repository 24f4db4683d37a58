"""``cdc-lake connectors status|pause|resume|restart``: a source's onboarded connectors in Kafka Connect."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from cdc_lake.config import Config
from cdc_lake.connect.client import MISSING, KafkaConnectClient
from cdc_lake.connect.restart import restart_at_transaction_start
from cdc_lake.exceptions import UnknownSourceError
from cdc_lake.sources import capabilities_for
from cdc_lake.state import StateStore

_STOP_SECONDS = 60.0


def connector_names(config: Config, source: str | None) -> dict[str, list[str]]:
    """Connector names per onboarded source (only ``source`` if given), as the state store records them."""
    names = [config.source(source).name] if source is not None else list(config.sources)
    found: dict[str, list[str]] = {}
    with StateStore.open_existing(config.state_store.url) as store:
        for name in names:
            recorded = store.get_source(name)
            if recorded is not None:
                found[name] = list(recorded.connector_names)
    if source is not None and not found.get(source):
        raise UnknownSourceError(
            f"source {source} has no onboarded connectors (run cdc-lake onboard {source})"
        )
    return found


def statuses(config: Config, source: str | None) -> list[dict[str, Any]]:
    """Connector and task states of the onboarded connectors, with the trace of failed ones."""
    rows: list[dict[str, Any]] = []
    onboarded = connector_names(config, source)
    with KafkaConnectClient.for_settings(config.kafka_connect) as connect:
        registered = set(connect.list_connectors())
        for source_name, names in onboarded.items():
            for name in names:
                if name not in registered:
                    rows.append(
                        {"source": source_name, "name": name, "state": MISSING, "worker": None, "tasks": []}
                    )
                    continue
                status = connect.status(name)
                rows.append(
                    {
                        "source": source_name,
                        "name": name,
                        "state": status.state,
                        "worker": status.worker_id,
                        "trace": status.trace,
                        "tasks": [
                            {
                                "id": task.id,
                                "state": task.state,
                                "worker": task.worker_id,
                                "trace": task.trace,
                            }
                            for task in status.tasks
                        ],
                    }
                )
    return rows


Action = Literal["pause", "resume", "restart"]


def control(config: Config, source: str, action: Action) -> list[str]:
    """Pause, resume or restart every connector of ``source``; returns their names.

    A restart stops the connector and starts it again at the start of its transaction
    (:mod:`cdc_lake.connect.restart`), failed tasks or not.
    """
    names: Sequence[str] = connector_names(config, source)[source]
    keys = capabilities_for(config.source(source).engine).transaction_progress_offset_keys
    with KafkaConnectClient.for_settings(config.kafka_connect) as connect:
        for name in names:
            if action == "pause":
                connect.pause(name)
            elif action == "resume":
                connect.resume(name)
            else:
                restart_at_transaction_start(connect, name, keys, _STOP_SECONDS)
    return list(names)
