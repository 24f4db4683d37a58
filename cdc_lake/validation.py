"""What a validation of one table found: the result type ``cdc-lake validate`` computes and prints.

The comparison itself runs in :mod:`cdc_lake_bootstrap.validate` (Spark reads of the source and the lake); the
result lives here, in the core, so the command line can print it without importing the bootstrap stage
(``cdc_lake`` never imports ``bootstrap/``).
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any


def json_key(key: dict[str, Any]) -> dict[str, Any]:
    """A key's values as JSON holds them and ``cdc-lake repair --keys`` reads them back (cast to the lake's
    key types by Spark): timestamps and dates as ISO text, decimals as text, binary as hex, a float that
    JSON has no number for (NaN, infinities) as Spark's text for it."""
    return {name: _json_value(value) for name, value in key.items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, dt.date):  # datetime too
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


@dataclass
class ValidateResult:
    """What one table's validation found."""

    table: str
    source_rows: int = 0
    lake_rows: int = 0
    ranges: int = 0
    differing_ranges: int = 0
    levels: int = 0
    compared_rows: int = 0
    missing: list[dict[str, Any]] = field(default_factory=list)
    extra: list[dict[str, Any]] = field(default_factory=list)
    different: list[dict[str, Any]] = field(default_factory=list)
    duplicate: list[dict[str, Any]] = field(default_factory=list)
    """Keys the lake holds more than once, each with its ``lake_rows``."""
    missing_count: int = 0
    extra_count: int = 0
    different_count: int = 0
    duplicate_count: int = 0
    position: str | None = None
    caught_up: bool = True
    seconds: float = 0.0

    @property
    def matches(self) -> bool:
        """True when the source and the lake hold the same rows."""
        differences = (self.missing_count, self.extra_count, self.different_count, self.duplicate_count)
        return not any(differences) and (
            self.source_rows == self.lake_rows
        )

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict."""
        return {
            "table": self.table,
            "matches": self.matches,
            "source_rows": self.source_rows,
            "lake_rows": self.lake_rows,
            "ranges": self.ranges,
            "differing_ranges": self.differing_ranges,
            "levels": self.levels,
            "compared_rows": self.compared_rows,
            "missing_count": self.missing_count,
            "extra_count": self.extra_count,
            "different_count": self.different_count,
            "duplicate_count": self.duplicate_count,
            "missing": [json_key(k) for k in self.missing],
            "extra": [json_key(k) for k in self.extra],
            "different": [json_key(k) for k in self.different],
            "duplicate": [json_key(k) for k in self.duplicate],
            "position": self.position,
            "caught_up": self.caught_up,
            "seconds": round(self.seconds, 3),
        }
