"""The topic rules the applier's exactness needs (issue 34 review 3 and 4), as ``onboard`` and every
batch word them: compacted topics, and several partitions for a table not keyed by its message key."""

from __future__ import annotations

import pytest

from cdc_lake.kafka.topic_rules import (
    applier_way_out,
    compaction_refusal,
    is_compacted,
    onboarding_way_out,
    partitioning_refusal,
)

TABLE = "pg.public.items"
TOPIC = "pg.public.items"


@pytest.mark.parametrize(
    ("policy", "compacted"),
    [("delete", False), (None, False), ("compact", True), ("compact,delete", True), ("delete,compact", True)],
)
def test_compaction_is_any_policy_naming_compact(policy: str | None, compacted: bool) -> None:
    assert is_compacted(policy) is compacted
    assert (compaction_refusal(TABLE, TOPIC, policy, "run it") is not None) is compacted


@pytest.mark.parametrize(
    ("key", "message_key", "partitions"),
    [(None, ("id",), 3), (("id",), ("id",), 3), (("b", "a"), ("a", "b"), 2), (("code",), ("id",), 1)],
)
def test_a_key_that_follows_the_partitioning_is_accepted(
    key: tuple[str, ...] | None, message_key: tuple[str, ...], partitions: int
) -> None:
    assert partitioning_refusal(TABLE, TOPIC, partitions, key, message_key, applier_way_out(TABLE)) is None


def test_a_key_other_than_the_primary_key_is_refused_naming_table_topic_partitions_and_key() -> None:
    refusal = partitioning_refusal(TABLE, TOPIC, 3, ("code",), ("id",), applier_way_out(TABLE))

    assert refusal is not None and "\n" not in refusal
    assert f"table {TABLE}: topic {TOPIC!r} has 3 partitions and the table is keyed on code" in refusal
    assert "by its primary key id" in refusal
    assert f"cdc-lake offboard {TABLE}" in refusal and f"cdc-lake rebootstrap {TABLE}" in refusal


def test_a_table_without_a_primary_key_is_refused_and_offered_only_a_topic_with_one_partition() -> None:
    refusal = partitioning_refusal(TABLE, TOPIC, 2, ("code",), (), onboarding_way_out("pg", TOPIC))

    assert refusal is not None
    assert "round-robin (no primary key)" in refusal
    assert f"kafka-topics --delete --topic {TOPIC}" in refusal and "cdc-lake onboard pg" in refusal
    assert "key setting" not in refusal, "a table without a primary key cannot be keyed by it"
