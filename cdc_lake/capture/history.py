"""A MySQL/MariaDB connector's schema history: the RENAME statements that may swap a captured table.

Debezium's MySQL and MariaDB connectors publish no schema-change events here
(``include.schema.changes`` is false), but each keeps its schema history in a Kafka topic of one
partition (``<connector>.schema-history``, :func:`cdc_lake.capture.plan.schema_history_topic`): one
JSON record per DDL statement, with the statement (``ddl``), its default schema (``databaseName``)
and its binlog position.  An online schema-change tool's swap (``RENAME TABLE t TO _t_old, _t_new TO
t``) is recorded as one record per pair (``rename table t to _t_old``, ``rename table _t_new to t``, at
one position: seen on the stack's MariaDB); :func:`renames_in` keeps the records whose statement
renames a table, read by the engine's hook
(:attr:`cdc_lake.sources.capabilities.EngineCapabilities.table_renames`).

:class:`HistoryReader` serves many tables of one process: a topic's end offset comes from an
:class:`~cdc_lake.kafka.board.OffsetBoard` (the ``run`` service refreshes the history topics in its one
batched read per loop, so a table whose history did not move costs no Kafka request), and the records
are read only when a table asks for offsets no earlier read covered, once for every table of the
connector.  Only the renames are kept, not the records.  The offsets each table has checked are the
caller's (:mod:`cdc_lake.apply.swaps`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from cdc_lake.exceptions import DecodeError
from cdc_lake.kafka.board import OffsetBoard
from cdc_lake.kafka.offsets import OffsetRange, end_offsets, read_ranges
from cdc_lake.kafka.reader import KafkaReadSettings
from cdc_lake.sources.capabilities import TableRename

RenameParser = Callable[[str, str], tuple[TableRename, ...]]
"""An engine's hook: the renames of a statement, given its default schema."""


@dataclass(frozen=True)
class HistoryRename:
    """A schema-history record whose statement renames tables: its offset, its statement on one line,
    the renames, and the binlog position it was recorded at (as JSON: the records of one statement
    share it)."""

    offset: int
    statement: str
    renames: tuple[TableRename, ...]
    position: str = ""

    def touches(self, table: str) -> bool:
        """Whether ``table`` (``schema.table``) is renamed away, another table takes its name, or its rows
        are replaced (names compared in any case: a false stop is better than a missed swap)."""
        return any(r.touches(table) for r in self.renames)

    @property
    def replaces(self) -> bool:
        """Whether the statement replaced rows in place rather than renaming."""
        return all(r.replaces for r in self.renames)


def renames_in(
    records: Iterable[tuple[int, bytes | None]], parse: RenameParser, topic: str = "schema history"
) -> list[HistoryRename]:
    """The records (offset, JSON value) of ``topic`` whose statement renames a table or replaces its rows,
    in offset order; a record that is not JSON raises :class:`~cdc_lake.exceptions.DecodeError`."""
    found = []
    for offset, value in records:
        if value is None:
            continue
        try:
            record = json.loads(value)
        except ValueError as exc:  # a record the connector did not write: name it, never crash ``run``
            raise DecodeError(
                f"{topic}: schema history record at offset {offset} is not JSON: {exc}"
            ) from None
        statement = str(record.get("ddl") or "")
        renames = parse(statement, str(record.get("databaseName") or ""))
        if renames:
            position = json.dumps(record.get("position"), sort_keys=True)
            found.append(HistoryRename(offset, " ".join(statement.split()), renames, position))
    return found


def history_end(kafka: KafkaReadSettings, topic: str) -> int:
    """The end offset of schema-history ``topic`` now (0 when it does not exist yet)."""
    return end_offsets(kafka.bootstrap_servers, topic, extra=kafka.consumer).get(0, 0)


@dataclass
class _Read:
    """What was read of one history topic: offsets ``[start, end)`` and their renames."""

    start: int
    end: int
    renames: list[HistoryRename]


class HistoryReader:
    """The renames of schema-history topics, read once per offset range for every table; thread-safe."""

    def __init__(
        self,
        kafka: KafkaReadSettings,
        board: OffsetBoard,
        read: Callable[[OffsetRange], Iterable[tuple[int, bytes | None]]] | None = None,
        end_now: Callable[[str], int] | None = None,
    ) -> None:
        self.kafka = kafka
        self.board = board
        self._read = read or self._consume
        self._end_now = end_now or (lambda topic: history_end(kafka, topic))
        self.reads = 0
        """How many ranges were read from Kafka (each once, whatever the number of tables)."""
        self._topics: dict[str, _Read] = {}
        self._lock = threading.Lock()

    def end(self, topic: str, fresh: bool = False) -> int | None:
        """The end offset of ``topic`` (its one partition), from the board, or read from Kafka now when
        ``fresh``; None when the board knows no such topic."""
        if fresh:
            return self._end_now(topic)
        state = self.board.state(topic)
        if state.topic_id is None:
            return None
        return state.marks.get(0, (0, 0))[1]

    def renames(self, topic: str, start: int, end: int, parse: RenameParser) -> list[HistoryRename]:
        """The renames of ``topic`` at offsets ``[start, end)``; only offsets not read before are read."""
        with self._lock:
            known = self._topics.get(topic)
            # A topic whose end went back was re-created: what was read of it is another topic's.
            if known is None or start < known.start or known.end < start or end < known.end:
                known = _Read(start, start, [])
                self._topics[topic] = known
            if known.end < end:
                wanted = OffsetRange(topic, 0, known.end, end)
                known.renames.extend(renames_in(self._read(wanted), parse, topic))
                known.end = end
                self.reads += 1
            return [r for r in known.renames if start <= r.offset < end]

    def _consume(self, wanted: OffsetRange) -> Iterable[tuple[int, bytes | None]]:
        """The range's records, read on this process (``read_ranges`` returns at the range's end; the
        executors' reader waits for a full batch, a second for a history's few records)."""
        messages = read_ranges(self.kafka.bootstrap_servers, [wanted], extra=self.kafka.consumer)
        return [(m.offset() or 0, _value(m.value())) for m in messages]


def _value(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value
