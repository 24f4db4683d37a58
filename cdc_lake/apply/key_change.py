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

A change whose row image lacks a key column (null, or absent from the image) is a bad message whose
reason :func:`missing_key_reason` words: for a delete it is the before image that lacks it, which on
Postgres means the table's replica identity does not carry the configured key.  A change whose
composite key Hudi's record key cannot tell apart from another key (:mod:`cdc_lake.hudi.keys`) is a bad
message too, worded by :func:`ambiguous_key_reason`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from cdc_lake.decode.envelope import ChangeEvent
from cdc_lake.decode.types import UNAVAILABLE
from cdc_lake.hudi import keys

_UPDATE = "u"
_DELETE = "d"


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


def ambiguous_key_reason(event: ChangeEvent, row: Mapping[str, Any], key_fields: Sequence[str]) -> str | None:
    """The one-line reason when ``row``'s key could share its Hudi record key with another key, or None."""
    column = keys.ambiguous_key_column(row, key_fields)
    return None if column is None else keys.ambiguous_key_reason(_table(event), column, key_fields)


def _table(event: ChangeEvent) -> str:
    """The source table of ``event``, ``schema.table`` (Postgres) or ``db.table`` (MySQL/MariaDB)."""
    source = event.source
    return ".".join(part for part in (source.schema or source.db, source.table) if part)
