"""Creating each onboarded table's topic up front, with the partitions its connector declares.

Debezium creates a topic on a table's first change; creating it at onboarding instead means
the topic exists (bootstrap can save its end offsets) even for a table that has not changed
yet, and its partition count is fixed from the start (per-key order depends on it).
"""

from __future__ import annotations

from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # re-exported from cimpl

from cdc_lake.config import Config
from cdc_lake.exceptions import OnboardError
from cdc_lake.onboard.preflight import kafka_admin

_TIMEOUT = 30.0


def ensure_topics(
    config: Config, topics: Sequence[str], partitions: int, replication_factor: int
) -> list[str]:
    """Create the ``topics`` that do not exist yet; returns the ones created."""
    admin = kafka_admin(config)
    try:
        existing = set(admin.list_topics(timeout=_TIMEOUT).topics)
        missing = [topic for topic in topics if topic not in existing]
        if not missing:
            return []
        futures = admin.create_topics(
            [
                NewTopic(topic, num_partitions=partitions, replication_factor=replication_factor)
                for topic in missing
            ],
            request_timeout=_TIMEOUT,
        )
        created = []
        for topic, future in futures.items():
            try:
                future.result(timeout=_TIMEOUT)
                created.append(topic)
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if not (isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                    raise
        return sorted(created)
    except KafkaException as exc:
        raise OnboardError(f"cannot create topics {', '.join(topics)}: {exc}") from None
