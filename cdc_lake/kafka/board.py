"""End offsets and ids of many topics, read in batches and shared by the tables' batch plans.

The ``run`` service polls every table on its schedule; planning a batch needs the topic's end offsets
and its id (to tell a re-created topic).  Read per table, 200 tables cost 200 metadata and offset
requests per poll.  The service instead asks the board to refresh every due table's topic at once
(:func:`cdc_lake.kafka.offsets.topic_states`: a few round trips whatever the number of topics, the ids
coming with the metadata) when they are more than ``max_age_seconds`` old, and each table's plan takes
its topic's state from the board while it is at most ``reuse_seconds`` old (a step's own work before it
plans, such as reading the checkpoint, may take a while on a busy driver); an older or missing entry is
read alone.

Stale offsets are safe: they are at most the real end, so a batch plans less, never past the end; the
next poll sees the rest.  A stale id only delays the detection of a re-created topic: a batch planned
from an entry read before the topic was deleted may read the new topic's messages (as any batch whose
topic is re-created between its plan and its read), and the next plan from a fresh read stops the
table, which must be re-bootstrapped either way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable

from cdc_lake.kafka.offsets import TopicState, topic_states
from cdc_lake.kafka.reader import KafkaReadSettings


class OffsetBoard:
    """The ids and (low, high) watermarks of topics, refreshed in batches; safe from many threads."""

    def __init__(
        self,
        kafka: KafkaReadSettings,
        max_age_seconds: float,
        reuse_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kafka = kafka
        self.max_age_seconds = max_age_seconds
        self.reuse_seconds = max(max_age_seconds, reuse_seconds or 0.0)
        self.clock = clock
        self.requests = 0
        """How many batched reads the board made (each covers any number of topics)."""
        self.served = 0
        """How many :meth:`state` calls were answered from an earlier read, with no Kafka request."""
        self._states: dict[str, tuple[float, TopicState]] = {}
        self._lock = threading.Lock()

    def _fresh(self, topic: str, now: float, max_age: float) -> TopicState | None:
        found = self._states.get(topic)
        if found is None or now - found[0] > max_age:
            return None
        return found[1]

    def refresh(self, topics: Iterable[str]) -> None:
        """Read the state of every topic in ``topics`` whose entry is stale, in one batch."""
        now = self.clock()
        with self._lock:
            stale = [
                topic for topic in dict.fromkeys(topics)
                if self._fresh(topic, now, self.max_age_seconds) is None
            ]
        if not stale:
            return
        states = topic_states(self.kafka.bootstrap_servers, stale, extra=self.kafka.consumer)
        with self._lock:
            self.requests += 1
            for topic, state in states.items():
                self._states[topic] = (now, state)

    def state(self, topic: str) -> TopicState:
        """``topic``'s id and watermarks, read now unless the board holds recent ones."""
        with self._lock:
            found = self._fresh(topic, self.clock(), self.reuse_seconds)
            if found is not None:
                self.served += 1
        if found is not None:
            return found
        self.refresh([topic])
        with self._lock:
            return self._states[topic][1]
