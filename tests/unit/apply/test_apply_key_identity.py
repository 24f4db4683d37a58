"""Keys as the lake writes them: the driver's per-key merge compares keys by the lake format's key identity.

Hudi's record key is the key values' text: every NaN is ``NaN``, one key (a NaN equals no NaN in Python),
and ``0.0`` and ``-0.0`` are two keys (one in Python).  :func:`cdc_lake.apply.last_change.last_changes`
groups a batch's changes and pairs a moved row with its old key by
:meth:`cdc_lake.lake.format.FormatFacts.key_identity`; the Spark steps do the same by
:meth:`~cdc_lake.lake.format.FormatFacts.key_identity_column`
(``tests/integration/test_apply_model_spark.py``), and the property suite
(``tests/unit/apply/test_apply_model.py``) holds both to a model on generated float keys.
"""

from __future__ import annotations

import math
import struct
from typing import Any

from cdc_lake.apply.decoding import DecodedChange
from cdc_lake.apply.last_change import LastChange, last_changes
from cdc_lake.lake.format import format_facts


def _change(
    offset: int, op: str, row: dict[str, Any], position: str, unavailable: tuple[str, ...] = ()
) -> DecodedChange:
    """A Postgres change at ``offset`` of partition 0, ordered (and positioned) at ``position``."""
    return DecodedChange(0, offset, op, 2, 1, position.zfill(40), 0, row, unavailable, position)


def _nan() -> float:
    """A NaN of its own (the decoder makes a new float for every value)."""
    return float("nan")


def _picked(found: list[LastChange]) -> list[tuple[str, str, Any, tuple[str, ...], list[str]]]:
    """Per last change: its key's text, op, note, missing columns and lookup keys (as text)."""
    return [
        (repr(last.change.row["id"]), last.change.op, last.change.row["note"], last.missing,
         [repr(key[0]) for key in last.lookups])
        for last in found
    ]


def test_the_lake_format_takes_every_nan_as_one_key_and_negative_zero_as_another() -> None:
    same = format_facts().key_identity
    payload_nan = struct.unpack("<d", struct.pack("<Q", 0x7FF8_0000_0000_0001))[0]
    assert math.isnan(payload_nan)
    assert same((_nan(),)) == same((_nan(),)) == same((payload_nan,)) == same((-_nan(),))
    assert same((0.0,)) != same((-0.0,))
    assert same((1, "a", _nan())) == same((1, "a", _nan()))
    assert same((1, "a")) == (1, "a")
    assert same((1.5,)) == same((1.5,)) != same((1.5000000000000002,))


def test_a_nan_key_deleted_inserted_again_and_moved_in_one_batch_is_one_key() -> None:
    """Deleted, inserted again with a note, then moved to 2.0 (a Postgres primary-key update: a delete and
    a create carrying the placeholder at one position).  Before, each NaN was a key of its own: three
    last changes for one record key, and the moved row, not finding its old key's earlier changes, looked
    its note up in the stored row the batch had deleted."""
    changes = [
        _change(0, "d", {"id": _nan(), "qty": None, "note": None}, "1"),
        _change(1, "c", {"id": _nan(), "qty": 1, "note": "fresh"}, "2"),
        _change(2, "d", {"id": _nan(), "qty": None, "note": None}, "3"),
        _change(3, "c", {"id": 2.0, "qty": 1, "note": None}, "3", ("note",)),
    ]

    found = last_changes(changes, ("id",), ["note"])

    assert _picked(found) == [("nan", "d", None, (), ["nan"]), ("2.0", "c", "fresh", (), ["nan", "2.0"])]


def test_a_key_changed_from_zero_to_negative_zero_is_a_delete_and_a_create() -> None:
    """Debezium sends the update of key ``0.0`` to ``-0.0`` as a delete and a create at one position.
    Before, both were one key (Python's ``0.0 == -0.0``): only the create was kept, so the lake's row
    under ``0.0`` stayed, and the create looked its note up under ``0.0`` only."""
    changes = [
        _change(0, "d", {"id": 0.0, "qty": None, "note": None}, "1"),
        _change(1, "c", {"id": -0.0, "qty": 1, "note": None}, "1", ("note",)),
    ]

    found = last_changes(changes, ("id",), ["note"])

    delete, create = ("0.0", "d", None, (), ["0.0"]), ("-0.0", "c", None, ("note",), ["0.0", "-0.0"])
    assert _picked(found) == [delete, create]

