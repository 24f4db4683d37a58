"""Updates that move a row to another record key, and changes whose row image cannot name its key.

The lake's record key is the table's configured ``key`` when it has one.  Debezium keys its messages
by the primary key, so when the configured key is not the primary key, a change of the configured key
columns arrives as a plain update (``op='u'``).  Upserting its after image alone would leave the row
under the old key in the lake for ever.  Wherever the update's before image carries every configured
key column (Postgres REPLICA IDENTITY FULL, or USING INDEX on the key, which preflight requires for such
tables; MySQL/MariaDB with ``binlog_row_image=FULL``, which preflight requires of every source) and
they differ from the after image's, :func:`old_key_delete` gives the delete of the old key: the same
message, source position and Kafka offset, ``op='d'``, the before image as its row.

Both records then take the ordinary path.  Last change per key (:mod:`cdc_lake.apply.frame`) judges
the delete among the old key's other changes of the batch by source position, so an earlier change of
the old key loses to it and a later one (the old key inserted again) wins over it; against the stored
row, Hudi's ordering field (the update's position, above any stored one) lets it win.  With the message
key as record key (no configured key) nothing is added: Debezium itself sends a delete and an insert
when a primary key changes.

An update whose before image lacks the configured key's old value (no before image at all, or one
holding only the primary key) cannot say whether the key changed: Postgres sends that once the table's
replica identity was set back to DEFAULT after onboarding, MySQL/MariaDB under a
``binlog_row_image`` other than FULL.  Upserting it would leave the row under its old key for ever if the
key did change, so it is a bad message (:func:`unlogged_old_key_reason`) naming the fix: REPLICA IDENTITY
FULL (``binlog_row_image=FULL``), then a re-bootstrap, since earlier such updates may already have left
rows behind.  The rule holds for every update, not only after a check of the source: an identity set to
DEFAULT and back to FULL between two batches still stops the table at the update made in between.  The
one source set-up where such an update is normal, REPLICA IDENTITY USING INDEX over exactly the key
(pgoutput logs the old key only when it changes), is asked of the source before each batch
(:meth:`cdc_lake.sources.base.SourceEngine.update_may_omit_old_key`); an identity switched from DEFAULT
to such an index between an update and its batch is not seen (docs/applier.md).

A change whose row image lacks a key column (null, or absent from the image) is a bad message whose
reason :func:`missing_key_reason` words: for a delete it is the before image that lacks it, which on
Postgres means the table's replica identity does not carry the configured key.  A change whose key the
lake format's record key cannot tell apart from another key (Hudi's composite keys,
:meth:`cdc_lake.lake.format.FormatFacts.key_problem`) is a bad message too, worded by the format
(:func:`ambiguous_key_reason`).

A primary-key update's two messages (the delete of the old key, then the create of the new one, each
marked by a Debezium header, :data:`KEY_UPDATE_HEADERS`) are applied in one batch where the create can
lack values the old row held (Postgres: an unchanged TOASTed value is a placeholder there, which the
old row's stored values fill, :mod:`cdc_lake.apply.last_change`): a create whose delete an earlier batch
applied finds neither, and the value was written null.  :func:`key_update_cuts` lowers the batch's cut
in a partition to a half whose other half the batch lacks, so the next batch, which starts there, holds
both.  A half that is the first message of its partition's range is applied all the same (but in a batch
that stops at a bad message anyway), so that every partition moves on (its other half never came, was
quarantined, or lies beyond the end the batch read of another partition): a documented limit
(docs/applier.md, "Postgres TOAST").  On one partition (the default) that takes an
``apply.batch_max_events`` below 3 (delete, tombstone, create), or two batches in a row planned between
Kafka's receiving the delete and the create (a catch-up reads its end offsets again after such a hold,
:meth:`cdc_lake.apply.runner.ApplyRunner.catch_up`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from cdc_lake.decode.envelope import ChangeEvent
from cdc_lake.decode.types import UNAVAILABLE
from cdc_lake.exceptions import SourceEngineError
from cdc_lake.lake.format import format_facts
from cdc_lake.sources import capabilities_for_connector

_UPDATE = "u"
_DELETE = "d"
_CREATE = "c"

KEY_UPDATE_HEADERS = frozenset({"__debezium.newkey", "__debezium.oldkey"})
"""Debezium's headers on a primary-key update's messages: ``__debezium.newkey`` on the delete of the old
key, ``__debezium.oldkey`` on the create of the new one."""


class KeyUpdateHalf(NamedTuple):
    """One message of a primary-key update in a batch: its stream position, shared by both halves
    (``DecodedChange.position``), its op (``d`` or ``c``) and where it is."""

    position: str
    op: str
    partition: int
    offset: int


def is_key_update_half(event: ChangeEvent, headers: Collection[str]) -> bool:
    """Whether ``event`` is a half of a primary-key update (its message's ``headers`` name Debezium's
    header) whose create may lack values of the old row: its engine sends unavailable-value placeholders."""
    if not headers or event.op not in (_DELETE, _CREATE) or event.is_snapshot:
        return False
    if KEY_UPDATE_HEADERS.isdisjoint(headers):
        return False
    try:
        return capabilities_for_connector(event.source.connector).unavailable_placeholders
    except SourceEngineError:
        return False


def key_update_cuts(
    halves: Iterable[KeyUpdateHalf], start: Mapping[int, int], cuts: Mapping[int, int]
) -> tuple[dict[int, int], list[KeyUpdateHalf]]:
    """The batch's ``cuts`` (first offset not to apply, per partition; absent: the batch's end) lowered so
    that no primary-key update has one half applied and the other not, and the halves applied alone.

    At one stream position the batch's deletes and creates (before the cuts), each in (partition, offset)
    order, pair up one to one (a copy Debezium sent again after a restart pairs with its own); each half
    left over lowers its partition's cut to its offset, unless it is at its partition's ``start`` (the
    range's first offset) and the batch does not stop at a bad message (no ``cuts`` given): that one is
    applied alone, and returned.  A batch that stops anyway holds it back too, so that the batch after
    the stop is resolved still holds both halves.  Lowering one cut can leave a half of another
    partition over, so this repeats until no cut moves.
    """
    stopping = bool(cuts)
    lowered = dict(cuts)
    pending = sorted(halves, key=lambda h: (h.partition, h.offset))
    while True:
        by_position: dict[str, tuple[list[KeyUpdateHalf], list[KeyUpdateHalf]]] = {}
        for half in pending:
            if half.offset < lowered.get(half.partition, half.offset + 1):
                deletes, creates = by_position.setdefault(half.position, ([], []))
                (deletes if half.op == _DELETE else creates).append(half)
        alone: list[KeyUpdateHalf] = []
        moved = False
        for deletes, creates in by_position.values():
            for half in deletes[len(creates):] + creates[len(deletes):]:
                if half.offset <= start.get(half.partition, 0) and not stopping:
                    alone.append(half)
                elif half.offset < lowered.get(half.partition, half.offset + 1):
                    lowered[half.partition] = half.offset
                    moved = True
        if not moved:
            return lowered, alone


def old_key_delete(event: ChangeEvent, key_fields: Sequence[str] | None) -> ChangeEvent | None:
    """The delete of the old record key when ``event`` is an update that changed the configured key."""
    if not key_fields or event.op != _UPDATE or event.before is None or event.after is None:
        return None
    old = [event.before.get(name) for name in key_fields]
    if any(value is None or value is UNAVAILABLE for value in old):
        return None  # the before image cannot tell: nothing to delete that can be named
    if old == [event.after.get(name) for name in key_fields]:
        return None
    return dataclasses.replace(event, op=_DELETE, after=None)


def unlogged_old_key_reason(event: ChangeEvent, key_fields: Sequence[str] | None) -> str | None:
    """The one-line reason when ``event`` is an update without the old value of the configured key (which
    is not the message key), or None: table, key, and the fix."""
    if not key_fields or event.op != _UPDATE or (event.key and set(event.key) == set(key_fields)):
        return None
    before = event.before or {}
    missing = [name for name in key_fields if before.get(name) is None or before[name] is UNAVAILABLE]
    if not missing:
        return None
    table = _table(event)
    return (
        f"table {table}: update without the old value of key column(s) {', '.join(missing)} "
        f"(key {', '.join(key_fields)}): the source no longer logs the old key, so a changed key would "
        f"leave its old row in the lake; on Postgres run ALTER TABLE {table} REPLICA IDENTITY FULL "
        "(MySQL/MariaDB: binlog_row_image=FULL), then re-bootstrap the table (cdc-lake rebootstrap)"
    )


def missing_key_reason(event: ChangeEvent, column: str, key_fields: Sequence[str]) -> str:
    """The one-line reason for a change whose row image lacks key ``column``: table, key and the way out."""
    table = _table(event)
    key = ", ".join(key_fields)
    if event.op != _DELETE:
        return f"table {table}: key column {column!r} (key {key}) is missing or null in the row image"
    return (
        f"table {table}: delete's before image lacks key column {column!r} (key {key}): the source does "
        "not log the old key; on Postgres run ALTER TABLE … REPLICA IDENTITY FULL, then re-bootstrap the "
        "table (cdc-lake rebootstrap)"
    )


def ambiguous_key_reason(
    event: ChangeEvent, row: Mapping[str, Any], key_fields: Sequence[str], lake_format: str
) -> str | None:
    """The one-line reason when ``row``'s key could share the record key of ``lake_format`` with another
    key, or None."""
    return format_facts(lake_format).key_problem(_table(event), row, key_fields)


def _table(event: ChangeEvent) -> str:
    """The source table of ``event``, ``schema.table`` (Postgres) or ``db.table`` (MySQL/MariaDB)."""
    source = event.source
    first, table = source.schema or source.db, source.table
    return f"{first}.{table}" if first and table else first or table or ""
