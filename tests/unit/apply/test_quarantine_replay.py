"""``cdc-lake quarantine --replay``: which quarantined message may be replayed, and what it writes.

The refusals (one line naming table, partition and offset; nothing written) and the replay's plan, on
the fake Kafka log of ``support.change_model``: the message is decoded with the table's current
settings past the re-send mark, keeps its original ordering value (so a later change of its key
already in the lake wins Hudi's event-time merge), and is left out when the lake already applied a
later hard delete of its key (a delete leaves no ordering value to protect the key).
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest
from support.change_model import (
    INT_KEYS,
    PG_TOPIC,
    SCHEMAS,
    Change,
    Emitter,
    KeyDomain,
    Source,
    float_keys,
    hudi_merge,
)

from cdc_lake.apply.decoding import DecodedChange, DecodeSettings, decode_messages, summarize
from cdc_lake.apply.quarantine import ReplayRequest, plan_replay, replayable
from cdc_lake.apply.redelivery import advance
from cdc_lake.exceptions import QuarantineError
from cdc_lake.kafka.reader import RawMessage
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import QuarantinedMessage, TableInfo

WHEN = datetime(2026, 11, 25, 23, 0, tzinfo=UTC)
TABLE, PATH = "pg.acc.d", "/lake/acc/d"
ROW = QuarantinedMessage(
    id=1,
    table=TABLE,
    topic=PG_TOPIC,
    partition=0,
    offset=1,
    reason="bad",
    key=b"k",
    value=b"v",
    quarantined_at=WHEN,
    topic_id="id",
    lake_path=PATH,
)
LIVE = TableInfo(TABLE, "pg", 1, TableState.LIVE, PATH, None, WHEN, "quarantined")


def _check(
    row: QuarantinedMessage = ROW,
    info: TableInfo = LIVE,
    topic_id: str = "id",
    low: int = 0,
    rebootstrapping: bool = False,
) -> QuarantinedMessage:
    return replayable(ReplayRequest(TABLE, 0, 1), [row], info, topic_id, {0: (low, 9)}, rebootstrapping)


def test_a_quarantined_message_of_the_current_copy_and_topic_is_replayable() -> None:
    assert _check() == ROW


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"info": dataclasses.replace(LIVE, state=TableState.FAILED)}, "the table is FAILED"),
        ({"rebootstrapping": True}, "a re-bootstrap is copying"),
        ({"row": dataclasses.replace(ROW, offset=2)}, "no quarantined message"),
        ({"row": dataclasses.replace(ROW, replayed_at=WHEN, replayed_by="ops")}, "already replayed"),
        ({"topic_id": "other"}, "topic id id, the topic is now other"),
        (
            {"row": dataclasses.replace(ROW, lake_path="/lake/old")},
            "copy /lake/old, the table's is /lake/acc/d",
        ),
        ({"low": 5}, "gone from Kafka"),
    ],
)
def test_refusals_name_table_partition_offset_and_why(kwargs: dict[str, object], says: str) -> None:
    with pytest.raises(QuarantineError) as refused:
        _check(**kwargs)  # type: ignore[arg-type]

    text = str(refused.value)
    assert text.startswith(f"table {TABLE}: partition 0 offset 1: ") and says in text and "\n" not in text


def _log(
    *transactions: list[Change], keys: KeyDomain = INT_KEYS
) -> tuple[list[RawMessage], DecodeSettings]:
    """The partition's messages, and settings whose re-send mark covers all of them (all applied)."""
    source, emitter = Source(), Emitter("postgres", partitions=1, keys=keys)
    for changes in transactions:
        emitter.emit(changes, source.rows)
        source.commit(changes)
    log = [m.raw for m in emitter.log[0]]
    settings = DecodeSettings(PG_TOPIC, SCHEMAS, None, False)
    marks = advance({}, next(summarize(decode_messages(settings, log))).marks)
    return log, dataclasses.replace(settings, applied_positions=marks)


CREATE = [Change("c", 1, {"id": 1, "qty": 1, "note": "a"})]
QUARANTINED = [Change("u", 1, {"id": 1, "qty": 2, "note": "quarantined"})]
LATER = [Change("u", 1, {"id": 1, "qty": 3, "note": "later"})]
OTHER = [Change("c", 2, {"id": 2, "qty": 1, "note": "other key"})]


def test_the_replay_decodes_past_the_resend_mark_at_its_original_ordering_and_a_later_change_wins() -> None:
    log, settings = _log(CREATE, QUARANTINED, LATER, OTHER)
    (again,) = [d for d in decode_messages(dataclasses.replace(settings, applied_positions={}), log[1:2])]

    plan = plan_replay(settings, ReplayRequest(TABLE, 0, 1), log[1], log[2:])

    assert plan.changes == (again,) and plan.superseded_by is None
    (replayed,) = plan.changes
    assert isinstance(replayed, DecodedChange) and replayed.row["note"] == "quarantined"
    (later,) = [d for d in decode_messages(dataclasses.replace(settings, applied_positions={}), log[2:3])]
    assert isinstance(later, DecodedChange) and later.ordering > replayed.ordering
    stored = (later.row, later.ordering)
    assert hudi_merge(stored, (replayed.row, replayed.ordering)) == stored


def test_a_later_delete_of_the_key_already_applied_leaves_nothing_to_write() -> None:
    log, settings = _log(CREATE, QUARANTINED, [Change("d", 1, None)], OTHER)

    plan = plan_replay(settings, ReplayRequest(TABLE, 0, 1), log[1], log[2:])

    assert plan.changes == () and plan.superseded_by == 2


def test_a_message_that_still_does_not_decode_is_refused_with_its_cause() -> None:
    log, settings = _log(CREATE, QUARANTINED)
    cut = RawMessage(0, 1, log[1].key, (log[1].value or b"")[:-3])

    with pytest.raises(
        QuarantineError, match=r"^table pg\.acc\.d: partition 0 offset 1: still does not decode: "
    ):
        plan_replay(settings, ReplayRequest(TABLE, 0, 1), cut, log[2:])


_NAN, _ZERO, _NEGATIVE_ZERO = 1, 2, 3
"""Keys of :func:`float_keys` ("postgres"): NaN, ``0.0``, ``-0.0``."""


@pytest.mark.parametrize(
    ("quarantined", "deleted", "kept"), [(_NAN, _NAN, False), (_ZERO, _NEGATIVE_ZERO, True)]
)
def test_the_later_delete_is_matched_by_the_lakes_record_key(
    quarantined: int, deleted: int, kept: bool
) -> None:
    """Keys compared as Hudi's record key tells them apart: a NaN key's later delete is the quarantined
    change's key (a NaN equals no NaN in Python: the replay wrote the deleted row back); a later delete
    of ``-0.0`` is another key than ``0.0`` (equal in Python: the replay of ``0.0``'s change was dropped
    and the lake kept its older row)."""
    keys = float_keys("postgres")
    rows = {key: {"id": keys.values[key], "qty": 1, "note": "a"} for key in (quarantined, deleted)}
    create = [Change("c", key, row) for key, row in rows.items()]
    update = [Change("u", quarantined, {**rows[quarantined], "qty": 2})]
    log, settings = _log(create, update, [Change("d", deleted, None)], keys=keys)
    at = len(create)

    plan = plan_replay(settings, ReplayRequest(TABLE, 0, at), log[at], log[at + 1 :])

    assert (len(plan.changes), plan.superseded_by) == ((1, None) if kept else (0, at + 1))
