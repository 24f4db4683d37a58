"""A primary-key update's two halves are applied in one batch
(:func:`cdc_lake.apply.key_change.key_update_cuts`).

The rule: after the cuts, at every stream position the batch applies as many deletes as creates of
primary-key updates, except halves at the start of their partition's range, which are applied alone
(and returned) so that every partition moves on; cuts only ever move down, and only to a half.  The
property runs it on generated batches: pairs whose halves lie in one partition or two, copies sent
again, other messages between, any range starts and ends, any earlier cuts (bad messages).  Then the
decoder: only a Postgres change whose message carries Debezium's header is a half.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.change_model import MY_TOPIC, PG_TOPIC, SCHEMAS, Change, replay

from cdc_lake.apply.decoding import DecodedChange, DecodeSettings, decode_messages, summarize
from cdc_lake.apply.key_change import KeyUpdateHalf, key_update_cuts

_Stream = dict[int, list[KeyUpdateHalf | None]]
"""Per partition, its messages in offset order: a half, or None (any other message)."""


@st.composite
def _streams(draw: st.DrawFn) -> _Stream:
    """Messages in up to three partitions: each primary-key update's delete, then its create in the same
    partition or another one (later in the same one), some updates sent twice, other messages between."""
    partitions = draw(st.integers(1, 3))
    log: _Stream = {p: [] for p in range(partitions)}
    for number in range(draw(st.integers(0, 6))):
        for _ in range(draw(st.integers(0, 3))):
            log[draw(st.integers(0, partitions - 1))].append(None)
        old, new = draw(st.integers(0, partitions - 1)), draw(st.integers(0, partitions - 1))
        for _ in range(draw(st.integers(1, 2))):  # Debezium may send the update again after a restart
            log[old].append(KeyUpdateHalf(f"pg:{number}", "d", old, len(log[old])))
            log[old].append(None)  # the tombstone
            log[new].append(KeyUpdateHalf(f"pg:{number}", "c", new, len(log[new])))
    return log


@given(data=st.data(), log=_streams())
@settings(max_examples=500, deadline=None, derandomize=True)
def test_no_primary_key_update_is_applied_in_halves_but_at_a_range_start(
    data: st.DataObject, log: _Stream
) -> None:
    start = {p: data.draw(st.integers(0, len(messages)), label=f"start p{p}") for p, messages in log.items()}
    end = {p: data.draw(st.integers(start[p], len(log[p])), label=f"end p{p}") for p in log}
    earlier = {
        p: data.draw(st.integers(start[p], end[p]), label=f"bad p{p}")
        for p in log if data.draw(st.booleans(), label=f"bad message in p{p}")
    }
    halves = [h for p in log for h in log[p][start[p] : end[p]] if h is not None]

    cuts, alone = key_update_cuts(halves, start, earlier)

    stopping = bool(earlier)  # the batch stops at a bad message: nothing is applied alone
    stop = {p: min(end[p], cuts.get(p, end[p])) for p in log}
    for p in log:
        assert stop[p] <= min(end[p], earlier.get(p, end[p])), "a cut moved up"
        if stop[p] < min(end[p], earlier.get(p, end[p])):
            assert stop[p] > start[p] or stopping, "a partition held back from its range's start"
            assert log[p][stop[p]] is not None, "a cut lowered to a message that is not a half"
    applied = [h for h in halves if h.offset < stop[h.partition]]
    over: list[KeyUpdateHalf] = []
    for position in {h.position for h in applied}:
        deletes = [h for h in applied if h.position == position and h.op == "d"]
        creates = [h for h in applied if h.position == position and h.op == "c"]
        over += deletes[len(creates) :] + creates[len(deletes) :]
    assert sorted(alone) == sorted(over), "the halves applied alone are not the ones left over"
    assert all(h.offset == start[h.partition] for h in alone), "a half applied alone inside its range"
    assert not (stopping and alone), "a batch that stops anyway applied a half alone"


def test_a_batch_ending_between_a_delete_and_its_create_is_cut_back_to_the_delete() -> None:
    delete, create = KeyUpdateHalf("pg:1", "d", 0, 5), KeyUpdateHalf("pg:1", "c", 0, 7)
    assert key_update_cuts([delete], {0: 3}, {}) == ({0: 5}, [])
    assert key_update_cuts([delete, create], {0: 3}, {}) == ({}, [])
    # The next batch starts at the delete: if its create is still not there, the delete goes alone.
    assert key_update_cuts([delete], {0: 5}, {}) == ({}, [delete])


def test_a_cut_in_one_partition_holds_back_the_other_half_in_another() -> None:
    delete, create = KeyUpdateHalf("pg:1", "d", 0, 4), KeyUpdateHalf("pg:1", "c", 1, 9)
    # A bad message at offset 2 of partition 0 keeps the delete out: the create waits too.
    assert key_update_cuts([delete, create], {0: 0, 1: 0}, {0: 2}) == ({0: 2, 1: 9}, [])
    # At its range's start too: the batch stops at the bad message anyway, and the one after it is
    # resolved must still hold both halves.
    assert key_update_cuts([delete, create], {0: 0, 1: 9}, {0: 2}) == ({0: 2, 1: 9}, [])


def test_a_copy_sent_again_pairs_with_its_own() -> None:
    first = [KeyUpdateHalf("pg:1", "d", 0, 0), KeyUpdateHalf("pg:1", "c", 0, 2)]
    again = KeyUpdateHalf("pg:1", "d", 0, 3)
    assert key_update_cuts([*first, again], {0: 0}, {}) == ({0: 3}, [])


def _moved_row_messages(engine: str, headers: bool = True) -> list[DecodedChange]:
    """Row 1 inserted, then moved to key 2 with its TOASTed note unchanged, through the model's emitter
    (``headers``: its messages keep their headers)."""
    row = {"id": 1, "qty": 0, "note": "toasted"}
    moved = Change("c", 2, {**row, "id": 2}, moved_from=1, toast_unchanged=True)
    _, emitter, _ = replay(engine, [[Change("c", 1, row)], [moved]], partitions=1)
    topic = PG_TOPIC if engine == "postgres" else MY_TOPIC
    raw = [m.raw if headers else m.raw._replace(headers=()) for m in emitter.log[0]]
    records = decode_messages(DecodeSettings(topic, SCHEMAS, None, False), raw)
    return [r for r in records if isinstance(r, DecodedChange)]


@pytest.mark.parametrize(("engine", "halves"), [("postgres", ["d", "c"]), ("mariadb", [])])
def test_only_a_change_whose_engine_sends_placeholders_and_whose_message_has_the_header_is_a_half(
    engine: str, halves: list[str]
) -> None:
    changes = _moved_row_messages(engine)
    assert [c.op for c in changes] == ["c", "d", "c"]
    assert [c.op for c in changes if c.key_update] == halves
    summary = next(summarize(changes))
    assert [(h.op, h.offset) for h in summary.key_updates] == [
        (c.op, c.offset) for c in changes if c.key_update
    ]
    if halves:
        assert len({h.position for h in summary.key_updates}) == 1


def test_a_change_without_the_header_is_not_a_half() -> None:
    changes = _moved_row_messages("postgres", headers=False)
    assert [c.op for c in changes] == ["c", "d", "c"]
    assert not any(c.key_update for c in changes)
