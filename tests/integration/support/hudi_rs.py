"""Reading a lake table with the second reader, the PyPI ``hudi`` package (hudi-rs), without Spark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hudi import HudiTableBuilder
from pyspark.sql.types import DataType, TimestampNTZType

from cdc_lake.config import S3Settings

DELETED = "_hoodie_is_deleted"


def hudi_rs_rows(
    base_path: str, columns: Sequence[str], storage_options: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The table's current rows (a snapshot read by hudi-rs), only ``columns``, deleted rows left out.

    An ``s3a://`` path (Spark's scheme) is read as ``s3://`` with ``storage_options`` (see
    :func:`s3_storage_options`).
    """
    if "://" not in base_path:
        uri = Path(base_path).as_uri()
    else:
        uri = "s3://" + base_path.removeprefix("s3a://") if base_path.startswith("s3a://") else base_path
    table = HudiTableBuilder.from_base_uri(uri).with_storage_options(dict(storage_options or {})).build()
    rows: list[dict[str, Any]] = []
    for batch in table.read():
        for row in batch.to_pylist():
            if not row.get(DELETED):
                rows.append({name: row[name] for name in columns})
    return rows


def hudi_rs_sorted_rows(
    base_path: str,
    columns: Sequence[str],
    types: Mapping[str, DataType],
    key: Sequence[str],
    storage_options: Mapping[str, str] | None = None,
) -> list[dict[str, Any]] | None:
    """:func:`hudi_rs_rows` sorted by ``key``, or None for a table hudi-rs cannot read.

    hudi-rs 0.5 cannot read a table with a ``timestamp_ntz`` column at all (it panics: see
    docs/type-mapping.md); ``types`` are the table's Spark types, so such a table is read by Spark only.
    """
    if any(isinstance(t, TimestampNTZType) for t in types.values()):
        return None
    rows = hudi_rs_rows(base_path, columns, storage_options)
    return sorted(rows, key=lambda r: tuple(r[k] for k in key))


def s3_storage_options(s3: S3Settings | None) -> dict[str, str]:
    """hudi-rs (object_store) options for the lake's S3-compatible store: endpoint, region, keys."""
    if s3 is None:
        return {}
    options = {"aws_region": s3.region or "us-east-1", "aws_allow_http": "true"}
    if s3.endpoint:
        options["aws_endpoint_url"] = s3.endpoint
    if s3.access_key is not None and s3.secret_key is not None:
        options["aws_access_key_id"] = s3.access_key.get_secret_value()
        options["aws_secret_access_key"] = s3.secret_key.get_secret_value()
    return options
