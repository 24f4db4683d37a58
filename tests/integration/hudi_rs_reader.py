"""The second, independent lake reader of the integration tests: the PyPI ``hudi`` package (hudi-rs).

It reads a table's latest snapshot (base files merged with MOR log files) without Spark or a JVM, so a
lake table the tests accept is one another engine reads too.  Only source columns come back, sorted by
``key``; Hudi's ``_hoodie_*`` metadata columns are dropped.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hudi import HudiTable


def hudi_rs_rows(base_path: str, key: str, options: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every row of the table at ``base_path`` as a dict of Python values, sorted by column ``key``."""
    batches = HudiTable(base_path, options or {}).read()
    if not batches:
        return []
    table = pa.Table.from_batches(batches)
    rows = [
        {name: value for name, value in row.items() if not name.startswith("_hoodie_")}
        for row in table.to_pylist()
    ]
    return sorted(rows, key=lambda row: row[key])
