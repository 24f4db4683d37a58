"""Per-column lake representations a table's ``column_types`` may choose (``docs/type-mapping.md``).

A column whose default mapping is not exact is refused at onboarding; where a lossless alternative
exists, the table's config picks it per column: ``string`` stores the value's exact text, and
``decimal(p,s)`` stores a Postgres unconstrained ``numeric`` as DECIMAL(p,s), failing loudly on a value
it cannot hold.  This module only parses the choice (the config validates with it); what each choice
means for the bootstrap and the decoder is :mod:`cdc_lake.sources.column_types` and
:mod:`cdc_lake.decode.types`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

STRING: Final = "string"
"""The ``column_types`` value choosing a column's exact text representation."""

MAX_PRECISION: Final = 38
"""Spark's (and so the lake's) widest decimal."""

VARIABLE_SCALE_DECIMAL_SCALE: Final = 18
"""Scale of the DECIMAL(38, s) that holds a Postgres unconstrained ``numeric`` by default (Debezium's
VariableScaleDecimal): 20 integer digits and 18 fractional digits; values needing more of either fail."""

_DECIMAL_SPEC = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")


@dataclass(frozen=True)
class ColumnType:
    """A representation chosen in config: the exact text, or DECIMAL(precision, scale)."""

    spec: str
    precision: int | None = None
    scale: int | None = None

    @property
    def is_string(self) -> bool:
        """Whether the column is stored as its exact text."""
        return self.precision is None


def parse_column_type(spec: str) -> ColumnType:
    """``string`` or ``decimal(p,s)`` (1 <= p <= 38, 0 <= s <= p); raises ValueError otherwise."""
    text = spec.strip().lower()
    if text == STRING:
        return ColumnType(STRING)
    match = _DECIMAL_SPEC.match(text)
    if match is None:
        raise ValueError(f"{spec!r} is not 'string' or 'decimal(p,s)'")
    precision, scale = int(match.group(1)), int(match.group(2))
    if not 1 <= precision <= MAX_PRECISION or scale > precision:
        raise ValueError(f"{spec!r} needs 1 <= p <= {MAX_PRECISION} and 0 <= s <= p")
    return ColumnType(f"decimal({precision},{scale})", precision, scale)
