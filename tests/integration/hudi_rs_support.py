"""Reading a lake table with the second reader, the PyPI ``hudi`` package (hudi-rs), without Spark."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hudi import HudiTableBuilder

DELETED = "_hoodie_is_deleted"


def hudi_rs_rows(base_path: str, columns: Sequence[str]) -> list[dict[str, Any]]:
    """The table's current rows (a snapshot read by hudi-rs), only ``columns``, deleted rows left out."""
    uri = Path(base_path).as_uri() if "://" not in base_path else base_path
    table = HudiTableBuilder.from_base_uri(uri).build()
    rows: list[dict[str, Any]] = []
    for batch in table.read():
        for row in batch.to_pylist():
            if not row.get(DELETED):
                rows.append({name: row[name] for name in columns})
    return rows
