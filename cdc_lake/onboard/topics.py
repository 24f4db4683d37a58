"""Creating each onboarded table's topic up front, with the partitions its connector declares, and
checking the ones that exist already.

Debezium creates a topic on a table's first change; creating it at onboarding instead means
the topic exists (bootstrap can save its end offsets) even for a table that has not changed
yet, and its partition count is fixed from the start (per-key order depends on it).  It is created
with ``cleanup.policy=delete`` whatever the broker's default (``log.cleanup.policy``).

A topic that exists is taken as it is, so :func:`check_topics` judges it before anything is created
(:mod:`cdc_lake.kafka.topic_rules`): a compacted topic is refused, and so are several partitions for a
table whose configured key is not its primary key (or that has none).  The applier checks both again
before every batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]  # re-exported from cimpl

from cdc_lake.capture.plan import table_topic
from cdc_lake.config import Config, Source, Table
from cdc_lake.exceptions import KafkaReadError, OnboardError, SourceEngineError
from cdc_lake.kafka.offsets import topic_states
from cdc_lake.kafka.topic_rules import (
    CLEANUP_POLICY,
    SAFE_POLICY,
    compaction_refusal,
    onboarding_way_out,
    partitioning_refusal,
)
from cdc_lake.onboard.preflight import kafka_admin
from cdc_lake.sources.base import SourceEngine
from cdc_lake.sources.checks import CheckResult

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
                NewTopic(
                    topic,
                    num_partitions=partitions,
                    replication_factor=replication_factor,
                    config={CLEANUP_POLICY: SAFE_POLICY},
                )
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


CHECK = "topics"


@dataclass(frozen=True)
class _Planned:
    """A planned table, its qualified name and its topic."""

    table: Table
    qualified: str
    topic: str


def check_topics(
    config: Config, source: Source, engine: SourceEngine, tables: Sequence[Table]
) -> CheckResult:
    """The planned tables' topics that exist already: none compacted, and several partitions only for a
    table keyed by its primary key (read from the primary only for such a topic)."""
    planned = [_Planned(t, t.qualified_name(source), table_topic(source, t)) for t in tables]
    try:
        states = topic_states(
            config.kafka.bootstrap_servers, [p.topic for p in planned], extra=config.kafka.consumer
        )
    except KafkaReadError as exc:
        return CheckResult.fail(CHECK, str(exc), "start Kafka or fix kafka.bootstrap_servers in the config")
    refusals: list[str] = []
    for entry in planned:
        state = states[entry.topic]
        if not state.marks:
            continue  # created by onboarding, with one partition and cleanup.policy=delete
        way_out = f"run cdc-lake onboard {source.name} again"
        compacted = compaction_refusal(entry.qualified, entry.topic, state.cleanup_policy, way_out)
        if compacted is not None:
            refusals.append(compacted)
        if len(state.marks) > 1 and entry.table.key:
            try:
                primary_key = engine.table_shape(entry.table.name, "primary").primary_key
            except SourceEngineError:
                continue  # a missing table or an unreachable primary fails its own check
            refused = partitioning_refusal(
                entry.qualified, entry.topic, len(state.marks), entry.table.key, primary_key,
                onboarding_way_out(source.name, entry.topic),
            )
            if refused is not None:
                refusals.append(refused)
    if refusals:
        return CheckResult.fail(CHECK, "; ".join(refusals), "the way out named after each topic")
    return CheckResult.ok(CHECK, f"{len(planned)} topic(s) exist with one partition or are created so")
