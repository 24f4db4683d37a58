"""The Postgres position: an LSN (``X/Y``, two hexadecimal halves of a 64-bit number), totally ordered.

A connector's committed offset holds ``lsn_commit`` (the commit LSN of the last transaction
streamed; ``lsn`` before the first commit).  ``a.covers(b)`` is ``a >= b``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.positions import LogPosition

_LSN = re.compile(r"^([0-9A-Fa-f]+)/([0-9A-Fa-f]+)$")


@dataclass(frozen=True, order=True)
class Lsn(LogPosition):
    """A Postgres WAL position (log sequence number) as its 64-bit value."""

    value: int

    @classmethod
    def parse(cls, text: str) -> Lsn:
        """An LSN as Postgres prints it (``16/B374D848``)."""
        match = _LSN.match(text.strip())
        if match is None:
            raise SourceEngineError(f"{text!r} is not a Postgres LSN")
        return cls((int(match.group(1), 16) << 32) + int(match.group(2), 16))

    @classmethod
    def from_connector_offset(cls, offset: Mapping[str, Any]) -> Lsn | None:
        """The commit LSN of the last transaction the connector streamed (``lsn`` before any commit)."""
        committed = offset.get("lsn_commit", offset.get("lsn"))
        return None if committed is None else cls(int(committed))

    def covers(self, other: Lsn) -> bool:
        """``self >= other``: WAL positions are totally ordered."""
        return self >= other

    def __str__(self) -> str:
        return f"{self.value >> 32:X}/{self.value & 0xFFFFFFFF:X}"
