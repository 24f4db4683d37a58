"""What a lake commit records besides its rows: one typed record, the only owner of the stored keys.

Every commit the bootstrap or the applier writes carries, in its extra metadata, the Kafka checkpoint it
reached (topic, next offsets, newest source time, stream positions, topic id; :mod:`cdc_lake.lake.checkpoint`
reads it back), the quarantined offsets its range skipped (:mod:`cdc_lake.apply.skipped`), the columns its
schema policy compared and the character lengths it was written with (:mod:`cdc_lake.lake.schema_change`),
the layout its table keeps (:class:`~cdc_lake.lake.layout.TableLayout`, recorded by the format's write),
and for a bootstrap commit its attempt and plan partitions.  :class:`CommitMetadata` holds them typed;
:meth:`~CommitMetadata.to_dict` writes the strings the lake stores (an absent value writes no key) and
:meth:`~CommitMetadata.from_dict` reads them back.  The keys and the text of their values are part of
every existing table: changing one would make the tables already written unreadable.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cdc_lake.lake.layout import IndexType, TableLayout, TableType

TOPIC_KEY = "kafka.topic"
OFFSETS_KEY = "kafka.offsets"
SOURCE_TS_KEY = "source.newest_ts_ms"
POSITIONS_KEY = "kafka.stream_positions"
TOPIC_ID_KEY = "kafka.topic_id"
QUARANTINED_KEY = "quarantined"
"""The quarantined offsets the commit's range skipped, ``{"partition": [offsets]}``."""
COMPARED_KEY = "schema.compared_columns"
ATTEMPT_KEY = "bootstrap.attempt"
PARTITIONS_KEY = "bootstrap.partitions"
LENGTHS_KEY = "schema.char_lengths"
LAYOUT_KEY = "lake.layout"
"""The table's layout, ``{"table_type": ..., "index": ...}`` and, for the bucket index, ``"buckets"``."""

_T = TypeVar("_T")


def written_by_cdc_lake(stored: Mapping[str, str]) -> bool:
    """Whether a commit's stored metadata is cdc-lake's: an applier commit holds offsets, a bootstrap
    commit its attempt.  Another writer's commit (a Spark job writing the table) holds neither."""
    return OFFSETS_KEY in stored or ATTEMPT_KEY in stored


class MalformedCommitMetadata(ValueError):
    """A stored value that cannot be read (its text names the value)."""


@dataclass(frozen=True)
class CommitMetadata:
    """The cdc-lake metadata of one commit (every field empty: a commit cdc-lake wrote nothing into).

    ``offsets`` is None in a commit without a checkpoint; ``compared_columns`` None when the policy
    compared every column; ``bootstrap_attempt`` None in a commit no bootstrap wrote.
    """

    topic: str | None = None
    offsets: Mapping[int, int] | None = None
    newest_source_ts_ms: int | None = None
    positions: Mapping[int, str] = field(default_factory=dict)
    topic_id: str | None = None
    quarantined: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    compared_columns: frozenset[str] | None = None
    bootstrap_attempt: str | None = None
    bootstrap_partitions: frozenset[int] = frozenset()
    char_lengths: Mapping[str, int] = field(default_factory=dict)
    layout: TableLayout | None = None

    def to_dict(self) -> dict[str, str]:
        """The stored form: one string per key, the absent values left out."""
        stored: dict[str, str] = {}
        if self.topic is not None:
            stored[TOPIC_KEY] = self.topic
        if self.offsets is not None:
            stored[OFFSETS_KEY] = json.dumps({str(p): o for p, o in sorted(self.offsets.items())})
        if self.newest_source_ts_ms is not None:
            stored[SOURCE_TS_KEY] = str(self.newest_source_ts_ms)
        if self.positions:
            stored[POSITIONS_KEY] = json.dumps({str(p): m for p, m in sorted(self.positions.items())})
        if self.topic_id is not None:
            stored[TOPIC_ID_KEY] = self.topic_id
        if self.quarantined:
            skipped = {str(p): sorted(o) for p, o in sorted(self.quarantined.items())}
            stored[QUARANTINED_KEY] = json.dumps(skipped)
        if self.compared_columns is not None:
            stored[COMPARED_KEY] = json.dumps(sorted(self.compared_columns))
        if self.bootstrap_attempt is not None:
            stored[ATTEMPT_KEY] = self.bootstrap_attempt
            stored[PARTITIONS_KEY] = ",".join(str(index) for index in sorted(self.bootstrap_partitions))
        if self.char_lengths:
            stored[LENGTHS_KEY] = json.dumps(dict(sorted(self.char_lengths.items())))
        if self.layout is not None:
            layout: dict[str, str | int] = {
                "table_type": self.layout.table_type.value,
                "index": self.layout.index.value,
            }
            if self.layout.buckets is not None:
                layout["buckets"] = self.layout.buckets
            stored[LAYOUT_KEY] = json.dumps(layout)
        return stored

    @classmethod
    def from_dict(cls, stored: Mapping[str, str]) -> CommitMetadata:
        """The record ``stored`` holds (keys it lacks read as absent; keys it does not know are ignored).

        Raises MalformedCommitMetadata naming the value that cannot be read (the offsets, for any part of
        the checkpoint's offsets, time and positions)."""
        raw = stored.get(OFFSETS_KEY)
        try:
            offsets = None if raw is None else {int(p): int(o) for p, o in json.loads(raw).items()}
            newest = stored.get(SOURCE_TS_KEY)
            positions = {int(p): str(m) for p, m in json.loads(stored.get(POSITIONS_KEY, "{}")).items()}
        except (ValueError, TypeError, AttributeError) as exc:
            raise MalformedCommitMetadata(f"malformed offsets {raw!r}") from exc
        return cls(
            topic=stored.get(TOPIC_KEY),
            offsets=offsets,
            newest_source_ts_ms=None if newest is None else int(newest),
            positions=positions,
            topic_id=stored.get(TOPIC_ID_KEY),
            quarantined=_read(stored, QUARANTINED_KEY, {}, _quarantined),
            compared_columns=_read(stored, COMPARED_KEY, None, lambda v: frozenset(str(n) for n in v)),
            bootstrap_attempt=stored.get(ATTEMPT_KEY),
            bootstrap_partitions=frozenset(int(i) for i in stored.get(PARTITIONS_KEY, "").split(",") if i),
            char_lengths=_read(stored, LENGTHS_KEY, {}, lambda v: {str(n): int(c) for n, c in v.items()}),
            layout=_read(stored, LAYOUT_KEY, None, _layout),
        )


def _quarantined(value: Mapping[str, list[int]]) -> dict[int, tuple[int, ...]]:
    return {int(p): tuple(int(o) for o in offsets) for p, offsets in value.items()}


def _layout(value: Mapping[str, Any]) -> TableLayout:
    if not {"table_type", "index"} <= set(value):
        raise ValueError("a layout names its table_type and index")
    buckets = value.get("buckets")
    if buckets is not None and (isinstance(buckets, bool) or not isinstance(buckets, int) or buckets < 1):
        raise ValueError(f"a layout's buckets must be a positive whole number, not {buckets!r}")
    return TableLayout(TableType(value["table_type"]), IndexType(value["index"]), buckets)


def _read(stored: Mapping[str, str], key: str, absent: _T, parse: Callable[[Any], _T]) -> _T:
    raw = stored.get(key)
    if raw is None:
        return absent
    try:
        return parse(json.loads(raw))
    except (ValueError, TypeError, AttributeError) as exc:
        raise MalformedCommitMetadata(f"malformed {key} {raw!r}") from exc
