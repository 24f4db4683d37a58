"""Where a streamed Postgres change sits: its per-key order and its place in the connector's stream.

- Per key: the change's own LSN (``source.lsn``).  Per key, change LSNs increase: the row lock taken
  by a change is held until its transaction commits.  A logical slot does not follow a Postgres
  failover (before Postgres 17 failover slots), and the promoted server's LSNs continue from where it
  forked, below those of the transactions only the old primary had: a table goes on from it either
  copied again or *recaptured* (:mod:`cdc_lake.onboard.recapture`: the new capture's Kafka offsets
  start a fresh run of re-send marks, and a repair rewrites every key whose lake row sorts above the
  fork).  The ordering value is the LSN zero-padded to 40 digits (an LSN is an unsigned 64-bit
  number: 20 digits); an LSN is never 0, so no change encodes to the snapshot value.
- In the stream: ``source.sequence`` = ``[last commit LSN, change LSN]``.  Transactions are emitted in
  commit order and changes inside one in LSN order, so the pair grows with every event, although
  change LSNs alone go back when transactions interleave, but it does not grow *strictly*: every row
  of one heap page of a multi-row insert (``COPY``, ``INSERT … SELECT``: Postgres' ``heap_multi_insert``
  writes one WAL record per page) carries the same change LSN and sequence, and so do the delete and
  create Debezium emits for a primary-key update.  An event without a sequence has no stream position.
  Marks are ``pg:<40 digits>`` (the two LSNs, 20 digits each).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from cdc_lake.exceptions import DecodeError
from cdc_lake.sources.capabilities import ORDERING_WIDTH, PositionCodec, fixed_digits

_LSN_DIGITS: Final = 20
_MARK_DIGITS: Final = 2 * _LSN_DIGITS


class PostgresPositionCodec(PositionCodec):
    """Postgres positions: ordered by change LSN, placed in the stream by ``source.sequence``."""

    mark_kind: ClassVar[str] = "pg"
    orders_incremental_snapshots: ClassVar[bool] = False  # a chunk carries its close marker's LSN

    def ordering(self, source: Mapping[str, Any], kafka_offset: int) -> tuple[int, ...]:
        """``(lsn,)``: the change's own LSN."""
        lsn = source.get("lsn")
        if lsn is None:
            raise DecodeError("Postgres event has no source.lsn")
        if lsn == 0:
            raise DecodeError("Postgres LSN 0 is not a valid change position")
        fixed_digits("Postgres LSN", lsn, _LSN_DIGITS)
        return (lsn,)

    def ordering_value(self, parts: tuple[int, ...]) -> str:
        """The LSN, zero-padded to 40 digits."""
        (lsn,) = parts
        return f"{lsn:0{ORDERING_WIDTH}d}"

    def stream_key(self, source: Mapping[str, Any]) -> tuple[str, int] | None:
        """``("pg", <last commit LSN><change LSN>)`` from ``source.sequence``."""
        sequence = source.get("sequence")
        if not sequence:
            return None
        pair = _sequence(sequence)
        if pair is None:
            return None
        last_commit, lsn = pair
        digits = f"{last_commit:0{_LSN_DIGITS}d}{lsn:0{_LSN_DIGITS}d}"
        return (self.mark_kind, int(digits)) if len(digits) == _MARK_DIGITS and digits.isdigit() else None

    def write_mark(self, highest: Mapping[str, int]) -> str:
        """The one origin's number as 40 digits."""
        return f"{highest[self.mark_kind]:0{_MARK_DIGITS}d}"

    def read_mark(self, body: str) -> dict[str, int] | None:
        """40 digits."""
        if len(body) == _MARK_DIGITS and body.isdigit():
            return {self.mark_kind: int(body)}
        return None


def _sequence(sequence: str) -> tuple[int, int] | None:
    """``source.sequence``'s two LSNs; None when it does not hold two numbers.

    Debezium writes ``["<digits>","<digits>"]`` (``[null,"<digits>"]`` before the first commit), read
    here without the JSON parser; anything else is parsed as JSON, with the same result for that shape."""
    if sequence.startswith('["') and sequence.endswith('"]'):
        first, comma, second = sequence[2:-2].partition('","')
        if comma and first.isascii() and first.isdigit() and second.isascii() and second.isdigit():
            return int(first), int(second)
    try:
        parts = json.loads(sequence)
        return int(parts[0]), int(parts[1])
    except (ValueError, TypeError, IndexError):
        return None


CODEC: Final = PostgresPositionCodec()
