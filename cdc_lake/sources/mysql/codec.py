"""Where a streamed MySQL/MariaDB change sits: its per-key order and its place in the connector's stream.

- Per key: the Kafka offset of the event in its partition.  Debezium routes every event of a key to
  one partition (by the message key), in the order the binlog holds them, and offsets in a partition
  only grow.  Binlog coordinates do not qualify: ``(file number, position)`` belongs to one server,
  and after a failover to a replica (which GTID mode supports) the new server's binlog numbers can be
  lower than the old one's, so its changes would lose to the stored rows.  Offsets keep growing across
  the failover, since the connector keeps writing to the same topic.  This holds while the topic's
  partition count does not change and the topic is not re-created (both need a re-bootstrap anyway).
  A re-sent event (Debezium is at-least-once) gets a new, higher offset; it is recognised by its
  stream position and skipped instead.  The ordering value is ``1`` then the offset zero-padded to 39
  digits: the leading ``1`` puts it above every value written by earlier versions of cdc-lake, which
  encoded binlog coordinates as file number (10 digits, so a leading ``0``) + position + row: rows
  stored that way lose to the next change of their key instead of winning over it.
- In the stream: the event's GTID, split into its *source* and sequence number.  MariaDB ``D-S-N``
  gives source ``D`` (the replication domain) and ``N``: a domain's sequence numbers grow across its
  servers (a promoted replica continues from the highest number of the domain; ``gtid_strict_mode``
  refuses anything else).  MySQL ``uuid:N`` (or ``uuid:tag:N``) gives source ``uuid`` (or
  ``uuid:tag``) and ``N``; numbers of one source follow binlog order on every server that holds them
  (``replica_preserve_commit_order``), so they keep their order when the connector is repointed at a
  promoted replica, unlike binlog file numbers and positions, which belong to one server.  Every event
  of one transaction shares its GTID; an event without one (a source not in GTID mode, which
  onboarding's preflight refuses) has no stream position.  Marks are ``gtid:<source>=<n>,...``, the
  highest number per source.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final

from cdc_lake.sources.capabilities import ORDERING_WIDTH, PositionCodec, fixed_digits

_OFFSET_DIGITS: Final = ORDERING_WIDTH - 1
_BINLOG_EPOCH: Final = 1
"""First digit of binlog ordering values (see the module docstring)."""


class BinlogPositionCodec(PositionCodec):
    """MySQL-family positions: ordered by Kafka offset, placed in the stream by ``source.gtid``."""

    mark_kind: ClassVar[str] = "gtid"
    orders_incremental_snapshots: ClassVar[bool] = True  # the ordering is the Kafka offset

    def ordering(self, source: Mapping[str, Any], kafka_offset: int) -> tuple[int, ...]:
        """``(1, kafka_offset)``."""
        fixed_digits("Kafka offset", kafka_offset, _OFFSET_DIGITS)
        return (_BINLOG_EPOCH, kafka_offset)

    def ordering_value(self, parts: tuple[int, ...]) -> str:
        """The epoch digit, then the offset zero-padded to 39 digits."""
        epoch, offset = parts
        return f"{epoch}{offset:0{_OFFSET_DIGITS}d}"

    def stream_key(self, source: Mapping[str, Any]) -> tuple[str, int] | None:
        """The GTID's source and sequence number (:func:`gtid_source`)."""
        return gtid_source(source.get("gtid"))

    def write_mark(self, highest: Mapping[str, int]) -> str:
        """``<source>=<n>`` per source, sorted."""
        return ",".join(f"{origin}={highest[origin]}" for origin in sorted(highest))

    def read_mark(self, body: str) -> dict[str, int] | None:
        """``<source>=<n>,...``; None for anything else (marks of old versions among them)."""
        if not body:
            return None
        entries: dict[str, int] = {}
        for item in body.split(","):
            origin, _, number = item.rpartition("=")
            if not origin or not number.isdigit():
                return None
            entries[origin] = int(number)
        return entries


def gtid_source(gtid: str | None) -> tuple[str, int] | None:
    """A GTID's source and sequence number, or None for a missing or unrecognised GTID.

    MariaDB ``0-1-42`` -> ``("0", 42)``; MySQL ``uuid:42`` -> ``("uuid", 42)``.
    """
    if not gtid:
        return None
    if ":" in gtid:
        origin, _, number = gtid.strip().rpartition(":")
    else:  # MariaDB: numbers grow across the domain's servers; the domain alone is the source
        domain, _, rest = gtid.strip().partition("-")
        origin, number = domain, rest.rpartition("-")[2] if rest.count("-") == 1 else ""
    if not origin or not number.isdigit() or "," in origin or "=" in origin:
        return None
    return origin, int(number)


CODEC: Final = BinlogPositionCodec()
