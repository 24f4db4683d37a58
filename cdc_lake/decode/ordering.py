"""The source position of a change event, and its encoding as a Hudi ordering field.

A :class:`SourcePosition` is a tuple of non-negative integers compared as numbers:

- Postgres: ``(lsn,)``, the change's own LSN (``source.lsn``).  Per key, change LSNs increase: the row
  lock taken by a change is held until its transaction commits.
- MySQL / MariaDB: ``(file_number, pos, row)`` where ``file_number`` is the numeric suffix of the binlog
  file (``mysql-bin.000123`` -> 123), ``pos`` the position of the row event in that file and ``row`` the
  row's index inside the event.  Never compare binlog file names or positions as strings: ``"9" > "10"``
  (Hudi's own MySQL payload once lost data that way).  Positions are comparable within one server's
  binlog sequence only; after a failover to another server the numbering restarts.
- Snapshot rows (Debezium ``op='r'`` events, and rows written by the bootstrap) have the empty tuple,
  which sorts below every streamed position: any replayed change wins over a snapshot image.

:meth:`SourcePosition.ordering_value` encodes a position as a fixed-width, 40-character string of
decimal digits, so string order equals numeric order and the column can be a Hudi ordering field
(``hoodie.table.ordering.fields``) of type string:

============  =====================================================================
engine        digits
============  =====================================================================
Postgres      LSN, zero-padded to 40 digits (an LSN is an unsigned 64-bit number: 20 digits)
MySQL         file number (10 digits) + pos (20 digits) + row (10 digits)
snapshot      40 zeros (:data:`SNAPSHOT_ORDERING_VALUE`); no streamed position encodes to it,
              since a Postgres LSN is never 0 and a binlog event never starts at position 0
============  =====================================================================

A 64-bit integer cannot hold a binlog position safely (file number, a position past 4 GiB in a large
transaction, and a row index need more than 63 bits), and Spark decimals stop at 38 digits; a string
of digits has neither limit and compares correctly as long as every value has the same width.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from cdc_lake.exceptions import DecodeError

ORDERING_WIDTH: Final = 40
#: Ordering value of every snapshot and bootstrap row: lower than any streamed change.
SNAPSHOT_ORDERING_VALUE: Final = "0" * ORDERING_WIDTH

_LSN_DIGITS: Final = 20
_FILE_DIGITS: Final = 10
_POS_DIGITS: Final = 20
_ROW_DIGITS: Final = 10
_BINLOG_SUFFIX: Final = re.compile(r"\.(\d+)$")


def _check(name: str, value: int, digits: int) -> int:
    if not 0 <= value < 10**digits:
        raise DecodeError(f"{name} {value} is outside 0..{10**digits - 1}")
    return value


def binlog_file_number(file_name: str) -> int:
    """The sequence number of a MySQL/MariaDB binlog file: ``mysql-bin.000123`` -> 123."""
    match = _BINLOG_SUFFIX.search(file_name)
    if match is None:
        raise DecodeError(f"binlog file name {file_name!r} does not end in a numeric extension")
    return _check("binlog file number", int(match.group(1)), _FILE_DIGITS)


@dataclass(frozen=True, order=True)
class SourcePosition:
    """A totally ordered position in one source's change stream; see the module docstring."""

    parts: tuple[int, ...] = ()

    @classmethod
    def snapshot(cls) -> SourcePosition:
        """The position of snapshot and bootstrap rows, below every streamed change."""
        return cls(())

    @classmethod
    def postgres(cls, lsn: int) -> SourcePosition:
        """Position of a streamed Postgres change at ``lsn``."""
        if lsn == 0:
            raise DecodeError("Postgres LSN 0 is not a valid change position")
        return cls((_check("Postgres LSN", lsn, _LSN_DIGITS),))

    @classmethod
    def binlog(cls, file_name: str, pos: int, row: int) -> SourcePosition:
        """Position of a streamed MySQL/MariaDB row: binlog file, event position, row in the event."""
        if pos == 0:
            raise DecodeError(f"binlog position 0 in {file_name!r} is not a valid event position")
        return cls(
            (
                binlog_file_number(file_name),
                _check("binlog position", pos, _POS_DIGITS),
                _check("binlog row", row, _ROW_DIGITS),
            )
        )

    @property
    def is_snapshot(self) -> bool:
        """True for the snapshot position."""
        return not self.parts

    def ordering_value(self) -> str:
        """The 40-digit string encoding of this position (see the module docstring)."""
        if not self.parts:
            return SNAPSHOT_ORDERING_VALUE
        if len(self.parts) == 1:
            return f"{self.parts[0]:0{ORDERING_WIDTH}d}"
        file_number, pos, row = self.parts
        return f"{file_number:0{_FILE_DIGITS}d}{pos:0{_POS_DIGITS}d}{row:0{_ROW_DIGITS}d}"
