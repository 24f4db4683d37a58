"""librdkafka's logs with connection errors collapsed: one "Kafka unreachable since …, retrying" per interval.

While a broker restarts, librdkafka logs every refused connection attempt (over a thousand lines in
two minutes); the clients retry by themselves and the applier recovers.  :class:`UnreachableFilter`
lets the first connection error of an outage through as ``Kafka unreachable since <time>, retrying``
and then one such line per ``interval`` with the count of messages it swallowed; other librdkafka
messages pass unchanged.  An outage ends when no connection error was seen for an interval.
Every cdc-lake Kafka client logs through :func:`rdkafka_logger`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

CONNECTION_ERRORS = (
    "Connection refused",
    "Connect to ",
    "Broker transport failure",
    "brokers are down",
    "Disconnected",
    "Receive failed",
    "Connection reset",
    "Failed to resolve",
    "timed out",
)
"""Fragments of librdkafka messages that mean the broker is not reachable."""

INTERVAL_SECONDS = 60.0
LOGGER_NAME = "cdc_lake.kafka.librdkafka"


class UnreachableFilter(logging.Filter):
    """Lets one connection-error line per interval through, rewritten; passes every other record."""

    def __init__(
        self,
        interval: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.interval = interval
        self.clock = clock
        self.wall_clock = wall_clock
        self._lock = threading.Lock()
        self._since: str | None = None
        self._last_seen = 0.0
        self._last_emitted = 0.0
        self._swallowed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        """True to log ``record`` (rewritten when it is the interval's connection error)."""
        message = record.getMessage()
        if not any(fragment in message for fragment in CONNECTION_ERRORS):
            return True
        with self._lock:
            now = self.clock()
            if self._since is None or now - self._last_seen > self.interval:
                self._since = time.strftime("%H:%M:%S", time.localtime(self.wall_clock()))
                self._last_emitted, self._swallowed = now, 0
                self._last_seen = now
                record.msg, record.args = f"Kafka unreachable since {self._since}, retrying ({message})", None
                return True
            self._last_seen = now
            if now - self._last_emitted < self.interval:
                self._swallowed += 1
                return False
            swallowed, self._swallowed, self._last_emitted = self._swallowed, 0, now
            count = swallowed + 1
            record.msg = f"Kafka unreachable since {self._since}, retrying ({count} connection errors)"
            record.args = None
            return True


def rdkafka_logger() -> logging.Logger:
    """The logger every cdc-lake librdkafka client is given, with the collapsing filter installed once."""
    logger = logging.getLogger(LOGGER_NAME)
    if not any(isinstance(f, UnreachableFilter) for f in logger.filters):
        logger.addFilter(UnreachableFilter())
    return logger
