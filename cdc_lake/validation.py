"""What a validation of one table found: the result type ``cdc-lake validate`` computes and prints.

The comparison itself runs in :mod:`cdc_lake_bootstrap.validate` (Spark reads of the source and the lake); the
result lives here, in the core, so the command line can print it without importing the bootstrap stage
(``cdc_lake`` never imports ``bootstrap/``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
            "missing": self.missing,
            "extra": self.extra,
            "different": self.different,
            "duplicate": self.duplicate,
            "position": self.position,
            "caught_up": self.caught_up,
            "seconds": round(self.seconds, 3),
        }
