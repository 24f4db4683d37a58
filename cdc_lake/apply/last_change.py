"""The last change of each record key with its unavailable columns resolved, in plain Python.

This is the per-key merge's meaning, stated once: a batch decoded on the driver (at most
:data:`cdc_lake.apply.table_applier.DRIVER_BATCH` offsets) is merged here and enters Spark one row per
key, so no Window runs; a larger batch runs the same merge as Spark steps (:mod:`cdc_lake.apply.frame`:
``fill_moved`` then ``latest_changes``).  The property suite (``tests/unit/apply/test_apply_model.py``) runs
this function as the applier's decision path, and ``tests/integration/test_apply_model_spark.py`` holds
the Spark steps and the driver's frame equal to it on generated batches.

In source order (ordering value, Kafka partition, offset), each change leaves its key in a *state*:
every fill column either has a value, or comes from a stored row (the lake's, read later by
``frame.fill_from_lake``) found through the state's *lookups*: the record keys whose stored row may hold
the row's values, the first one the lake holds giving them (any stored row for the first key, a live one
for the others; null when the lake holds none, or lacks the column).  A key starts from its own stored
row.  A change takes its available columns from its row and each unavailable one (an unchanged TOAST
value; with soft deletes, what a delete's before image lacks) from the state it follows:

- an ordinary change follows its key's previous state (the key's earlier changes in the batch, then its
  stored row);
- a *moved* row follows its old key's state before the move: the old key's latest change whose ordering
  value is strictly below the move's (the move's own delete shares its position and is excluded), else
  the old key's stored row; it adds its own key to that state's lookups.  A moved row is an update that
  changed the configured key (``DecodedChange.moved_from``), or a create carrying unavailable columns (a
  Postgres primary-key update under REPLICA IDENTITY DEFAULT), paired with the delete at its stream
  position; unpaired (a half applied alone at the start of its partition's range: the applier
  otherwise cuts the batch back to the half, :func:`cdc_lake.apply.key_change.key_update_cuts`), its
  old key is unknown and the columns it lacks are null.

So a row moved along a chain of keys looks its unchanged values up under every key of the chain, oldest
first: in steady operation the lake holds the oldest one, while a bootstrap's snapshot may have read the
row under any later key of the chain (the catch-up replays the moves before it).

States follow each other in source order, with one exception: a row at the snapshot position (a
Postgres incremental snapshot's chunk row, ordered below every change so that it never beats a newer
one, ``cdc_lake.decode.ordering``) takes its place after the changes of its key that Kafka holds before it
in its partition.  Debezium emits a chunk row at the chunk's close marker: after every change of the key
committed before the chunk was read, before every change committed after.  Placed first, a chunk row
read after a primary-key update moved the row away (and another row took the key) gave the move the
new row's values.

Keys are one key when the lake writes them as one record key: they are compared by the lake format's
:meth:`~cdc_lake.lake.format.FormatFacts.key_identity`, not by Python's equality.  For Hudi's text record
key every NaN is one key (a NaN equals no NaN in Python) and ``-0.0`` is another key than ``0.0`` (equal
in Python): a key changed from ``0.0`` to ``-0.0`` is a delete of the one and a create of the other.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cdc_lake.apply.decoding import DecodedChange
from cdc_lake.decode.ordering import SNAPSHOT_ORDERING_VALUE
from cdc_lake.lake.format import DEFAULT_FORMAT, format_facts

Key = tuple[Any, ...]


@dataclass(frozen=True)
class LastChange:
    """A key's last change of the batch, its row resolved as far as the batch can.

    ``missing`` lists the fill columns to take from the stored row of the first of ``lookups`` the lake
    holds (the key's own; for a moved row its chain's keys, oldest first, then its own); their values in
    ``change.row`` are None until then.
    """

    change: DecodedChange
    missing: tuple[str, ...]
    lookups: tuple[Key, ...]


@dataclass(frozen=True)
class _State:
    values: Mapping[str, Any]
    """Fill columns whose value is known."""
    lookups: tuple[Key, ...]
    """The keys whose stored row gives the other fill columns: the first the lake holds."""


def change_order(change: DecodedChange) -> tuple[str, int, int]:
    """Source order of a key's changes: ordering value, then Kafka partition and offset."""
    return change.ordering, change.partition, change.offset


def record_key(change: DecodedChange, key_fields: Sequence[str]) -> Key:
    """The change's record key."""
    return tuple(change.row[name] for name in key_fields)


def last_changes(
    changes: Iterable[DecodedChange],
    key_fields: Sequence[str],
    fill_columns: Sequence[str],
    lake_format: str = DEFAULT_FORMAT,
) -> list[LastChange]:
    """The last change of each key (in the order keys first change), its ``fill_columns`` resolved; keys
    compared as ``lake_format``'s record key tells them apart."""
    same: Callable[[Key], Hashable] = format_facts(lake_format).key_identity
    ordered = sorted(changes, key=change_order)
    deletes: dict[str, Key] = {}
    for change in ordered:
        if change.op == "d" and change.position is not None:
            deletes.setdefault(change.position, record_key(change, key_fields))
    unknown = _State(dict.fromkeys(fill_columns), ())
    history: dict[Hashable, list[tuple[str, _State]]] = {}
    last: dict[Hashable, tuple[DecodedChange, _State]] = {}
    for at, change in _state_ordered(ordered, key_fields, same):
        key = record_key(change, key_fields)
        identity = same(key)
        states = history.setdefault(identity, [])
        old = _old_key(change, deletes)
        if old is None:
            base = states[-1][1] if states else _State({}, (key,))
            values = dict(base.values)
            lookups = base.lookups
        else:
            states_before = history.get(same(old), []) if old else []
            earlier = [state for at, state in states_before if at < change.ordering]
            base = unknown if not old else earlier[-1] if earlier else _State({}, (old,))
            values = {}
            adds = bool(base.lookups) and all(same(lookup) != identity for lookup in base.lookups)
            lookups = (*base.lookups, key) if adds else base.lookups
        for name in fill_columns:
            if name not in change.unavailable:
                values[name] = change.row.get(name)
            elif name in base.values:
                values[name] = base.values[name]
        state = _State(values, lookups)
        states.append((at, state))
        if identity not in last or change_order(change) >= change_order(last[identity][0]):
            last[identity] = (change, state)
    return [_resolved(change, state, fill_columns) for change, state in last.values()]


def _state_ordered(
    ordered: Sequence[DecodedChange], key_fields: Sequence[str], same: Callable[[Key], Hashable]
) -> list[tuple[str, DecodedChange]]:
    """The changes in the order their states follow each other, each with its place's ordering value:
    its own, or for a row at the snapshot position the highest of the changes of its key before it in its
    partition (none: the snapshot position)."""
    highest: dict[tuple[Hashable, int], str] = {}
    placed: list[tuple[str, DecodedChange]] = []
    for change in sorted(ordered, key=lambda c: (c.partition, c.offset)):
        slot = same(record_key(change, key_fields)), change.partition
        if change.ordering == SNAPSHOT_ORDERING_VALUE:
            placed.append((highest.get(slot, change.ordering), change))
            continue
        placed.append((change.ordering, change))
        highest[slot] = max(highest.get(slot, change.ordering), change.ordering)
    return sorted(placed, key=lambda item: (item[0], item[1].partition, item[1].offset))


def _old_key(change: DecodedChange, deletes: Mapping[str, Key]) -> Key | None:
    """A moved row's old key (empty: unknown, the pairing delete is not in the batch); None otherwise."""
    if change.moved_from is not None:
        return change.moved_from
    if change.op != "c" or not change.unavailable:
        return None
    return deletes.get(change.position, ()) if change.position is not None else ()


def _resolved(change: DecodedChange, state: _State, fill_columns: Sequence[str]) -> LastChange:
    row = dict(change.row)
    missing = []
    for name in fill_columns:
        if name not in change.unavailable:
            continue
        if name in state.values:
            row[name] = state.values[name]
        else:
            row[name] = None
            missing.append(name)
    return LastChange(change._replace(row=row), tuple(missing), state.lookups)
