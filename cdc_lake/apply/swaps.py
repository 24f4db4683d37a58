"""Stopping a table whose source table was swapped (gh-ost, pt-online-schema-change) or renamed away.

An online schema-change tool copies a MySQL/MariaDB table into a new one, alters it and swaps it in
with ``RENAME TABLE t TO _t_old, _t_new TO t``.  No row event says so: the topic's next change events
are the new table's, while the lake holds the old table's rows (and the new one's columns may differ
with no new writer schema until a row changes).  The connector records the statement in its schema
history (:mod:`cdc_lake.capture.history`); before each batch, :class:`SwapCheck` looks there for a
statement that gives the table's name to another table or renames it away, and the runner stops the
table in SCHEMA_CHANGED naming the statement (the connector records each pair of a ``RENAME TABLE``
as a statement of its own, so every record of the first one's position that names the table is named,
joined by ``;``) and ``cdc-lake rebootstrap TABLE`` (a plain one: the swap's rows replicate as rows,
so the replica's new table is the primary's).

Each table remembers the first history offset it has not checked (the bootstrap watermark's
``history_offset``, saved as the history's end when the bootstrap began, so a swap before the copy is
the copy's and stops nothing; a re-bootstrap's copy brings its own, past the swap that stopped the
table).  A table whose watermark has none (bootstrapped before migration 0006) starts at the history's
end when first checked.  The offset moves, in the state store, only when the history's end moved past
it and nothing in between named the table; a table stopped on a swap stays at its offset, so it stops
again on every retry until it is re-bootstrapped.  The offset is kept in memory per table and base
path (a re-bootstrap's switch moves the path); when a remembered offset finds a swap, the watermark is
read again, as a table bootstrapped again at its path (offboarded, onboarded) starts later.

The same stop, "rows replaced", for a statement that replaces the table's rows in place with no row
event (``DROP TABLE``, ``CREATE OR REPLACE TABLE``, a partition dropped, truncated or exchanged:
:mod:`cdc_lake.sources.mysql.ddl`).  The check runs before each batch and again right before the
batch commits, with the history's end read from Kafka then: Debezium stores a history record (and waits
for Kafka's acknowledgement) before it emits any change that follows the statement, so no change made
after a swap commits.  A history topic the board does not know is logged once (swaps of its tables go
unseen: the connector is broken or misnamed); a checked offset past the topic's end (the table moved to
another connector with a tier change, or the topic was re-created) is logged once and the topic read
from its start, a stop on an old swap being the safe side.

Cost: a check whose history did not move reads the end offset from the offset board (the ``run``
service refreshes the history topics in its one batched read per loop; elsewhere the board's entry is
re-read at most every :data:`HISTORY_END_SECONDS`) and the table's offset from memory.  Records are
read only when the history moved, once per connector for all its tables; the check before a commit
reads the end offset from Kafka (a few milliseconds per committing batch).
"""

from __future__ import annotations

import logging

from cdc_lake.capture.history import HistoryReader, RenameParser
from cdc_lake.kafka.board import OffsetBoard
from cdc_lake.kafka.reader import KafkaReadSettings
from cdc_lake.lake.schema_change import SchemaDiff, table_swap
from cdc_lake.lake.target import TableTarget
from cdc_lake.sources import capabilities_for
from cdc_lake.state.store import StateStore

_LOG = logging.getLogger(__name__)

HISTORY_END_SECONDS = 1.0
"""How long a history topic's end offset is reused by every table's check, without a service's board."""


class SwapCheck:
    """Finds the schema-history statement that swapped a table since it was last checked."""

    def __init__(self, reader: HistoryReader, store: StateStore) -> None:
        self.reader = reader
        self.store = store
        self._warned: set[str] = set()
        self._checked: dict[tuple[str, str], int] = {}
        """The first unchecked history offset per (table, base path): a new copy reads the store again."""

    @classmethod
    def for_kafka(cls, kafka: KafkaReadSettings, board: OffsetBoard | None, store: StateStore) -> SwapCheck:
        """A check reading end offsets from ``board`` (else a board of its own) and records from Kafka."""
        ends = board if board is not None else OffsetBoard(kafka, HISTORY_END_SECONDS)
        return cls(HistoryReader(kafka, ends), store)

    def check(self, target: TableTarget, fresh: bool = False) -> SchemaDiff | None:
        """The swap of ``target`` in its history since the last check, None when there is none;
        ``fresh`` reads the history's end from Kafka now (before a batch's commit), else from the board."""
        parse = capabilities_for(target.engine).table_renames
        topic = target.history_topic
        if topic is None or parse is None:
            return None
        name = target.qualified_name
        key = (name, target.base_path)
        end = self.reader.end(topic, fresh)
        if end is None:
            self._warn(topic, f"schema history topic {topic} does not exist: swaps of its tables "
                       "(gh-ost, pt-online-schema-change) are not detected; check the connector")
            return None
        remembered = self._checked.get(key)
        start = self._recorded(name, end) if remembered is None else remembered
        if start > end and fresh:
            return None  # the check before the batch, which reads the board, deals with it
        if start > end:
            # Not this topic's offset: the table moved to another connector (a tier change) or the topic
            # was re-created.  Its whole history is read: a stop on an old swap is the safe side.
            self._warn(topic, f"{name}: checked offset {start} is past the end {end} of {topic}: "
                       "reading that history from its start")
            start = 0
        swap = self._swap(target, topic, start, end, parse)
        if swap is not None and remembered is not None:
            # A bootstrap begun since (offboarded and onboarded again at the same path) starts later.
            start = max(start, self._recorded(name, end))
            swap = self._swap(target, topic, start, end, parse)
        if swap is not None:
            self._checked[key] = start
            return swap
        if end > start:
            self.store.set_history_offset(name, end)
        self._checked[key] = max(start, end)
        return None

    def _warn(self, topic: str, message: str) -> None:
        """Log ``message`` once per topic and process."""
        if topic not in self._warned:
            self._warned.add(topic)
            _LOG.warning("%s", message)

    def _swap(
        self, target: TableTarget, topic: str, start: int, end: int, parse: RenameParser
    ) -> SchemaDiff | None:
        """The first statement in ``[start, end)`` renaming the table, with its position's other records
        naming it (the connector records each pair of a ``RENAME TABLE`` on its own)."""
        if end <= start:
            return None
        touching = [
            r for r in self.reader.renames(topic, start, end, parse) if r.touches(target.source_table)
        ]
        if not touching:
            return None
        first = touching[0]
        same = [r for r in touching if r.position == first.position]
        statements = "; ".join(r.statement for r in same)
        replaced = all(r.replaces for r in same)
        return table_swap(target.qualified_name, target.source_table, first.offset, statements, replaced)

    def _recorded(self, name: str, end: int) -> int:
        """Where the table's check starts: its watermark's offset, else ``end`` (recorded now)."""
        watermark = self.store.get_watermark(name)
        if watermark is not None and watermark.history_offset is not None:
            return watermark.history_offset
        self.store.set_history_offset(name, end)
        return end
