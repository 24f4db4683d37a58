"""What a table's topic must be for the applier to be exact: never compacted, and one partition unless
the table is keyed by its message key (the primary key).

Both rules are checked by ``onboard`` on a topic that already exists (one it creates gets one partition
and ``cleanup.policy=delete``, :mod:`cdc_lake.onboard.topics`) and again before every batch
(:class:`cdc_lake.apply.table_applier.TableApplier`), since a topic's config can change after
onboarding; a refusal is one line naming the table, the topic, the setting and the way out.

**Compaction is refused, tombstones are not turned into deletes.**  With ``cleanup.policy=compact``
(or ``compact,delete``) the log cleaner keeps only the newest message per Kafka key, so a deleted row's
delete event can be removed behind its tombstone: the tombstone is then the only sign of the delete,
and the applier, which ignores tombstones (they only follow deletes), would leave the row in the lake.
Applying a tombstone as a delete of its key is not exact: a tombstone carries no source position, so it
has no ordering value a later change of the key, a Debezium re-send or the bootstrap's snapshot rows
could be ordered against (the hand-off, docs/bootstrap.md: snapshot rows must lose to every replayed
change, and a re-sent suffix is skipped by position); it carries only the message key, which is not the
record key of a table keyed on other columns, so the row to delete cannot be named; and compaction also
removes the *updates* before a key's last message, which a configured key's moves (an update deleting
its old record key, :mod:`cdc_lake.apply.key_change`) need.  So a compacted topic stops the table.

**Several partitions need the message key.**  Debezium routes a change to a partition by hashing its
message key (the primary key), and Kafka orders messages only within a partition.  A table keyed by its
primary key keeps each row's changes in one partition, in order.  A table whose configured ``key`` is
not the primary key has one record key's changes in several partitions (a row moving to a key another
row left, a key reused by another row), and a table without a primary key has null message keys, spread
round-robin: MySQL/MariaDB order changes by their Kafka offset within a partition, which says nothing
across partitions, and on every engine batches are cut per partition, so a key's later change can be
applied in an earlier batch than its earlier one (a hard delete leaves nothing in Hudi to order a late
upsert against).  So that combination is refused; with one partition every change of the topic is in
one total order.
"""

from __future__ import annotations

from collections.abc import Sequence

CLEANUP_POLICY = "cleanup.policy"
"""The topic setting that says whether the log cleaner deletes old segments, compacts them, or both."""
SAFE_POLICY = "delete"
"""The cleanup policy the applier needs, and the one ``onboard`` creates topics with."""


def is_compacted(cleanup_policy: str | None) -> bool:
    """Whether ``cleanup_policy`` (``delete``, ``compact`` or ``compact,delete``) compacts the log."""
    return cleanup_policy is not None and "compact" in {p.strip() for p in cleanup_policy.split(",")}


def compaction_refusal(table: str, topic: str, cleanup_policy: str | None, way_out: str) -> str | None:
    """The one-line refusal of ``table``'s compacted ``topic``, or None when it is not compacted."""
    if not is_compacted(cleanup_policy):
        return None
    return (
        f"table {table}: topic {topic!r} has {CLEANUP_POLICY}={cleanup_policy}: compaction can remove a "
        "deleted row's delete event behind its tombstone, which cannot be ordered, so the row would stay "
        f"in the lake; set {CLEANUP_POLICY}={SAFE_POLICY} (kafka-configs --alter --entity-type topics "
        f"--entity-name {topic} --add-config {CLEANUP_POLICY}={SAFE_POLICY}), then {way_out}"
    )


def partitioning_refusal(
    table: str,
    topic: str,
    partitions: int,
    key: Sequence[str] | None,
    message_key: Sequence[str],
    way_out: Sequence[str],
) -> str | None:
    """The one-line refusal of a ``topic`` with several partitions for a ``table`` whose configured
    ``key`` is not its ``message_key`` (the primary key; empty: the table has none), or None.

    ``way_out`` is (a topic with one partition, keying the table by its primary key): the second is
    offered only to a table that has one."""
    if partitions <= 1 or not key or (message_key and set(key) == set(message_key)):
        return None
    routed = (
        f"by its primary key {', '.join(message_key)}" if message_key else "round-robin (no primary key)"
    )
    fixes = way_out[:1] if not message_key else way_out
    return (
        f"table {table}: topic {topic!r} has {partitions} partitions and the table is keyed on "
        f"{', '.join(key)}, but Debezium routes its changes {routed}, so changes of one key land in "
        f"different partitions and would be applied out of order; {'; or '.join(fixes)}"
    )


def onboarding_way_out(source: str, topic: str) -> tuple[str, str]:
    """What to do when onboarding refuses an existing topic's partitions (:func:`partitioning_refusal`)."""
    return (
        f"delete topic {topic!r} (kafka-topics --delete --topic {topic}) and run cdc-lake onboard {source} "
        "again, which creates it with 1 partition",
        "drop the table's key setting to key it by its primary key",
    )


def applier_way_out(table: str) -> tuple[str, str]:
    """What to do when the applier refuses a topic's partitions before a batch."""
    return (
        f"run cdc-lake offboard {table}, delete the topic, then cdc-lake onboard (it creates the topic with "
        f"1 partition) and cdc-lake bootstrap {table}",
        f"drop the table's key setting and run cdc-lake rebootstrap {table}",
    )
