"""The applied offsets of each lake table copy, committed to a Kafka consumer group for Kafka's own lag tools.

The applier reads exact offset ranges with ``assign()`` and keeps its offsets in the Hudi commits (the
truth) and the state store (a copy), so ``kafka-consumer-groups``, Burrow or kafka_exporter would see
nothing.  After each Hudi commit the applier also commits that commit's offsets to the consumer group
:func:`~cdc_lake.kafka.groups.group_id` names (in its own module, free of Kafka clients).  They are
informational only: nothing in cdc-lake ever reads them back, and a
commit that fails never fails the batch; it logs one warning per failure streak (naming table, topic
and group) and one line when commits succeed again.

The group is per table *copy*: ``cdc-lake.<table>.<digest>``, the digest taken from the copy's base path.
The bootstrap commits the watermark's offsets when it hands a copy to the applier, so the group exists
(and shows the catch-up) from then on.  A re-bootstrap writes its copy to a new path (``<base>__vN``), so
the old and new copies commit to different groups, and the copy keeps its group when it takes over the
table (its path stays); the old copy's group is deleted at the switch (:func:`delete_group`; again with
the old path, should that have failed), so no group shows a stale lag.  ``<table>`` is the Hudi table
name (``source.schema.table``; the copy catches up as the same Hudi table as its original).

How: one ``AdminClient`` per Kafka settings, shared by every table of the process, sends the offsets as a
standalone consumer's ``OffsetCommit`` (``alter_consumer_group_offsets``: no group membership, no
``subscribe()`` or ``assign()``).  Each commit waits at most :data:`COMMIT_TIMEOUT_SECONDS`, including
the coordinator lookup; a ``Consumer.commit(asynchronous=False)`` would hold broker connections and
threads per table, and librdkafka's synchronous commit waits for its reply without a deadline.  After a
failure a group's commits pause for :data:`RETRY_SECONDS`, so a broken coordinator costs a table at most
one timeout per pause, not one per batch.  ACLs: the applier's principal needs READ on the groups
(prefix ``cdc-lake.``) besides READ on the topics (docs/security.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any, Final, Protocol

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from cdc_lake.kafka.groups import group_id
from cdc_lake.kafka.reader import KafkaReadSettings
from cdc_lake.kafka.unreachable import rdkafka_logger

_LOG = logging.getLogger(__name__)

COMMIT_TIMEOUT_SECONDS: Final = 5.0
"""The longest one commit may take, coordinator lookup included."""
RETRY_SECONDS: Final = 60.0
"""How long a group's commits pause after one failed."""


class OffsetAdmin(Protocol):
    """The part of ``confluent_kafka.admin.AdminClient`` a :class:`GroupOffsets` uses."""

    def alter_consumer_group_offsets(
        self, alter_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions], **kwargs: Any
    ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
        """Commit offsets for one group; a future per group id."""
        ...

    def delete_consumer_groups(self, group_ids: list[str], **kwargs: Any) -> dict[str, Future[None]]:
        """Delete groups; a future per group id."""
        ...


class GroupOffsets:
    """Commits applied offsets to the table copies' consumer groups; safe from many threads."""

    def __init__(
        self,
        make_admin: Callable[[], OffsetAdmin],
        timeout: float = COMMIT_TIMEOUT_SECONDS,
        retry_seconds: float = RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.make_admin = make_admin
        self._admin: OffsetAdmin | None = None
        self.timeout = timeout
        self.retry_seconds = retry_seconds
        self.clock = clock
        self._paused_until: dict[str, float] = {}
        """Groups in a failure streak, and when their next commit may be tried."""
        self._named: set[str] = set()
        """Groups whose name was logged (once per process, at their first commit)."""
        self._lock = threading.Lock()

    def commit(self, table: str, base_path: str, topic: str, offsets: Mapping[int, int]) -> bool:
        """Commit ``offsets`` (partition: next offset to read) of ``topic`` for the copy at ``base_path``.

        True when the group holds them now; False when the commit failed or was skipped during a
        failure streak's pause.  Never raises.
        """
        group = group_id(table, base_path)
        with self._lock:
            paused_until = self._paused_until.get(group)
        if paused_until is not None and self.clock() < paused_until:
            return False
        try:
            self._send(group, topic, offsets)
        except Exception as exc:  # informational: no failure here may fail the batch
            with self._lock:
                first = group not in self._paused_until
                self._paused_until[group] = self.clock() + self.retry_seconds
            if first:
                _LOG.warning(
                    "table %s: cannot commit the applied offsets of topic %r to consumer group %r (%s); "
                    "Kafka's lag tools show the group behind until this recovers, the applier goes on "
                    "(retrying every %.0fs)",
                    table, topic, group, str(exc) or type(exc).__name__, self.retry_seconds,
                )
            return False
        with self._lock:
            recovered = self._paused_until.pop(group, None) is not None
            named = group in self._named
            self._named.add(group)
        if recovered:
            _LOG.warning("table %s: consumer group %r holds the applied offsets again", table, group)
        elif not named:
            _LOG.info("table %s: applied offsets of topic %r go to consumer group %r", table, topic, group)
        return True

    def delete(self, table: str, base_path: str) -> bool:
        """Delete the group of the copy at ``base_path`` (gone already counts); never raises."""
        group = group_id(table, base_path)
        try:
            futures = self._client().delete_consumer_groups([group], request_timeout=self.timeout)
            futures[group].result(timeout=self.timeout * 1.5)
        except Exception as exc:  # informational, like the commits
            if "GROUP_ID_NOT_FOUND" not in str(exc):
                _LOG.warning("table %s: cannot delete consumer group %r (%s)", table, group, exc)
                return False
        _LOG.info("table %s: consumer group %r of the removed copy deleted", table, group)
        return True

    def _client(self) -> OffsetAdmin:
        """The shared admin client, made on first use."""
        with self._lock:
            if self._admin is None:
                self._admin = self.make_admin()
            return self._admin

    def _send(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        admin = self._client()
        partitions = [
            TopicPartition(topic, partition, offset) for partition, offset in sorted(offsets.items())
        ]
        futures = admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, partitions)], request_timeout=self.timeout
        )
        # The client's own deadline fires first; this one guards against an answer that never comes.
        result = futures[group].result(timeout=self.timeout * 1.5)
        for partition in result.topic_partitions or []:
            if partition.error is not None:
                raise RuntimeError(f"partition {partition.partition}: {partition.error}")


_SHARED: dict[tuple[str, tuple[tuple[str, str], ...]], GroupOffsets] = {}
_SHARED_LOCK = threading.Lock()


def group_offsets(settings: KafkaReadSettings) -> GroupOffsets:
    """The process's one :class:`GroupOffsets` for ``settings``'s cluster and client settings."""
    key = (settings.bootstrap_servers, tuple(sorted(settings.consumer.items())))
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is None:
            found = _SHARED[key] = GroupOffsets(lambda: _admin(settings))
        return found


def _admin(settings: KafkaReadSettings) -> AdminClient:
    conf: dict[str, Any] = {
        **settings.consumer, "bootstrap.servers": settings.bootstrap_servers, "logger": rdkafka_logger()
    }
    return AdminClient(conf)


def commit_group_offsets(
    settings: KafkaReadSettings, table: str, base_path: str, topic: str, offsets: Mapping[int, int]
) -> bool:
    """After a Hudi commit: commit its offsets to the table copy's consumer group (never raises)."""
    return group_offsets(settings).commit(table, base_path, topic, offsets)



def delete_group(settings: KafkaReadSettings, table: str, base_path: str) -> bool:
    """Once a copy's path is removed: delete its consumer group (never raises)."""
    return group_offsets(settings).delete(table, base_path)
