"""The second reader of lake tables: hudi-rs names the committed snapshot's files, pyarrow and fastavro
read their values, without Spark or Hudi's Java code.

hudi-rs (the PyPI ``hudi`` package) lists the latest file slice of every file group as of the last
completed instant, and the completed delta commits.  A base file is read with pyarrow's Parquet reader;
a MERGE_ON_READ log file is parsed here (Hudi log format version 1: blocks of magic, length, type,
header, content, footer) and its Avro data blocks decoded with fastavro, using the writer schema of the
block header; delete blocks (Avro ``HoodieDeleteRecordList``) and Parquet data blocks are read too.
Within a slice, records merge by ``_hoodie_record_key`` under event-time ordering (the table's ordering
field; a later record wins a tie, a delete without an ordering value always wins), as the table's merge
mode says.  Replaced or cleaned files are never read: only what hudi-rs names, and on a table of version 6
the log files a pending compaction's slice holds (:func:`_pending_compaction_logs`).

hudi-rs 0.5 cannot turn an Avro ``local-timestamp-*`` type (the lake's ``timestamp_ntz``) into Arrow:
it panics (``not yet implemented``) even when only listing file slices, because it converts the
table schema first.  So hudi-rs is always given a copy of the table's ``.hoodie`` directory in which
those logical types read as ``timestamp-*`` (the listing depends on no column type; the values are
read from the files themselves, with their own schemas).  A table on S3 is first copied to a local
directory.  Anything this reader does not understand (another log format version, a corrupt or HFile
block, a partial-update block) fails the read: it never returns fewer rows than it was given.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import urlparse

import fastavro
import pyarrow.parquet as pq
from hudi import HudiFileSlice, HudiTableBuilder
from pyarrow import fs

from cdc_lake.config import S3Settings

DELETED = "_hoodie_is_deleted"
RECORD_KEY = "_hoodie_record_key"
_MAGIC = b"#HUDI#"
_AVRO_DATA, _DELETE, _COMMAND, _PARQUET_DATA = 3, 1, 0, 5
_INSTANT_TIME, _TARGET_INSTANT_TIME, _SCHEMA, _COMMAND_TYPE, _IS_PARTIAL = 0, 1, 2, 3, 7
_ROLLBACK = "0"
_ORDERING_WRAPPERS = (
    ("Boolean", "boolean"),
    ("Int", "int"),
    ("Long", "long"),
    ("Float", "float"),
    ("Double", "double"),
    ("Bytes", "bytes"),
    ("String", "string"),
    ("Date", "int"),
    ("Decimal", {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15}),
    ("TimeMicros", {"type": "long", "logicalType": "time-micros"}),
    ("TimestampMicros", "long"),
)
_DELETE_RECORD = {
    "type": "record",
    "name": "HoodieDeleteRecord",
    "fields": [
        {"name": "recordKey", "type": ["null", "string"], "default": None},
        {"name": "partitionPath", "type": ["null", "string"], "default": None},
        {
            "name": "orderingVal",
            "type": [
                "null",
                *(
                    {
                        "type": "record",
                        "name": f"Ordering{name}Wrapper",
                        "fields": [{"name": "value", "type": kind}],
                    }
                    for name, kind in _ORDERING_WRAPPERS
                ),
            ],
            "default": None,
        },
    ],
}
_DELETE_RECORD_LIST = fastavro.parse_schema(
    {
        "type": "record",
        "name": "HoodieDeleteRecordList",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [{"name": "deleteRecordList", "type": {"type": "array", "items": _DELETE_RECORD}}],
    }
)
"""Hudi 1.x's ``HoodieDeleteRecordList`` (delete block version 3; ordering values in wrapper records)."""


def second_reader_rows(
    base_path: str, columns: Sequence[str], storage_options: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The table's current rows, only ``columns``, deleted rows left out (see the module docstring).

    An ``s3a://`` path (Spark's scheme) is read with ``storage_options`` (see :func:`s3_storage_options`).
    A column of the table's schema that an older file lacks reads as None; one the table does not have
    fails the read.
    """
    with tempfile.TemporaryDirectory(prefix="second-reader-") as scratch:
        root = _local_table(base_path, storage_options or {}, Path(scratch) / "table")
        table = _hudi_rs_view_of_a_changing_table(root, Path(scratch))
        known = {f["name"] for f in json.loads(table.get_schema_in_avro_str())["fields"]}
        unknown = sorted(set(columns) - known - {DELETED})
        assert not unknown, f"{base_path}: the table has no columns {unknown}"
        options = table.hudi_options()
        ordering = options.get("hoodie.table.ordering.fields") or options.get("hoodie.table.precombine.field")
        assert ordering, f"{base_path}: no ordering field in hoodie.properties"
        committed = {i.timestamp for i in table.get_timeline().get_completed_deltacommits()}
        pending = _pending_compactions(root)
        rows: list[dict[str, Any]] = []
        for file_slice in table.get_file_slices():
            logs = file_slice.log_files_relative_paths() + _pending_compaction_logs(root, file_slice, pending)
            merged = _read_slice(root, file_slice, logs, ordering, committed)
            rows += [{c: row.get(c) for c in columns} for row in merged if not row.get(DELETED)]
        return rows


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


def _local_table(base_path: str, storage_options: Mapping[str, str], scratch: Path) -> Path:
    """The table's directory on this machine: itself, or a copy of an ``s3a://``/``s3://`` table."""
    if base_path.startswith("file:"):
        return Path(urlparse(base_path).path)
    if "://" not in base_path:
        return Path(base_path)
    scheme, bucket_path = base_path.split("://", 1)
    assert scheme in ("s3", "s3a"), f"{base_path}: the second reader reads local and S3 tables"
    endpoint = storage_options.get("aws_endpoint_url", "")
    s3 = fs.S3FileSystem(
        access_key=storage_options.get("aws_access_key_id"),
        secret_key=storage_options.get("aws_secret_access_key"),
        region=storage_options.get("aws_region", "us-east-1"),
        endpoint_override=endpoint.split("://", 1)[-1] or None,
        scheme="http" if endpoint.startswith("http://") else "https",
    )
    scratch.mkdir(parents=True)
    local = fs.LocalFileSystem()
    fs.copy_files(bucket_path, str(scratch), source_filesystem=s3, destination_filesystem=local)
    return scratch


def _hudi_rs_view_of_a_changing_table(root: Path, scratch: Path, attempts: int = 5) -> Any:
    """:func:`_hudi_rs_view`, built again when a timeline file vanished while it was copied (a writer
    archiving or replacing instants under a concurrent reader); the last attempt's error is raised."""
    for attempt in range(1, attempts):
        try:
            return _hudi_rs_view(root, scratch / f"view-{attempt}")
        except FileNotFoundError:
            time.sleep(0.1)
    return _hudi_rs_view(root, scratch / f"view-{attempts}")


def _hudi_rs_view(root: Path, view: Path) -> Any:
    """hudi-rs over a copy of ``root/.hoodie`` whose ``local-timestamp-*`` types read as ``timestamp-*``
    (the metadata table, data files and partitions linked, not copied)."""
    source = root / ".hoodie"
    for directory, _, files in os.walk(source):
        relative = Path(directory).relative_to(source)
        if relative.parts[:1] == ("metadata",):
            continue
        (view / ".hoodie" / relative).mkdir(parents=True, exist_ok=True)
        for name in files:
            if name.endswith(".crc"):  # Hadoop's local checksums: no reader needs them
                continue
            _copy_without_local_timestamps(Path(directory) / name, view / ".hoodie" / relative / name)
    if (source / "metadata").exists():
        os.symlink((source / "metadata").resolve(), view / ".hoodie" / "metadata")
    for entry in root.iterdir():  # the data files and partitions, for a listing without the metadata table
        if entry.name != ".hoodie":
            os.symlink(entry.resolve(), view / entry.name)
    return HudiTableBuilder.from_base_uri(str(view)).build()


def _without_local_timestamps(text: str) -> str:
    return text.replace("local-timestamp-micros", "timestamp-micros").replace(
        "local-timestamp-millis", "timestamp-millis"
    )


def _copy_without_local_timestamps(source: Path, target: Path) -> None:
    data = source.read_bytes()
    if b"local-timestamp-" not in data:
        shutil.copyfile(source, target)
    elif data[:4] == b"Obj\x01":  # an Avro container: timeline v2 commit metadata
        reader = fastavro.reader(io.BytesIO(data))
        records = [_patched(record) for record in reader]
        with target.open("wb") as out:
            fastavro.writer(out, reader.writer_schema, records, codec=reader.codec)
    else:  # JSON commit metadata (timeline v1) or hoodie.properties
        target.write_text(_without_local_timestamps(data.decode()))


def _patched(value: Any) -> Any:
    if isinstance(value, str):
        return _without_local_timestamps(value)
    if isinstance(value, dict):
        return {k: _patched(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_patched(v) for v in value]
    return value


@dataclass
class _Version:
    """One record version of a key: its ordering value (None: a delete that always wins) and row."""

    ordering: Any
    row: dict[str, Any] | None


def _merge(versions: dict[str, _Version], key: str, incoming: _Version) -> None:
    """Event-time ordering: ``incoming`` (later in the slice) wins unless the current value is larger."""
    current = versions.get(key)
    if current is None or current.ordering is None or incoming.ordering is None:
        versions[key] = incoming
        return
    if current.ordering <= incoming.ordering:
        versions[key] = incoming


def _pending_compactions(root: Path) -> list[str]:
    """The instants of the compaction plans not completed, on a table of version 6 (whose timeline is
    ``.hoodie`` itself).  On later versions (``.hoodie/timeline``, logs named after their delta commit
    and sliced by completion time) this reader does not know which logs a pending plan's slice holds, so
    a read while a plan is pending fails instead of returning what hudi-rs alone lists."""
    hoodie = root / ".hoodie"
    timeline = hoodie / "timeline"
    if timeline.is_dir():
        completed = {path.name.split("_", 1)[0] for path in timeline.glob("*_*.commit")}
        planned = [path.name.split(".", 1)[0] for path in timeline.glob("*.compaction.requested")]
        pending = [i for i in planned if i not in completed]
        assert not pending, f"{root}: this reader cannot read a version 8+ table mid-compaction {pending}"
        return []
    planned = {path.name.split(".", 1)[0] for path in hoodie.glob("*.compaction.requested")}
    return sorted(instant for instant in planned if not (hoodie / f"{instant}.commit").exists())


def _pending_compaction_logs(root: Path, file_slice: HudiFileSlice, pending: list[str]) -> list[str]:
    """The log files a pending compaction's slice of ``file_slice``'s file group holds, in order.

    On a table of version 6 a log written after a compaction plan is named after the plan's instant:
    the new slice, whose base file the plan has not written yet.  Hudi merges that slice's logs with the
    slice before it; hudi-rs 0.5 lists the slice before alone, so a read while a plan was pending
    missed every change since the plan (deleted rows read as present: found when ``run``'s table-service
    thread planned by time, 2026-12-05)."""
    folder = root / file_slice.partition_path if file_slice.partition_path else root
    found = []
    for instant in (i for i in pending if i > file_slice.creation_instant_time):
        for path in folder.glob(f".{file_slice.file_id}_{instant}.log.*"):
            if not path.name.endswith(".crc"):
                version, token = path.name.split(".log.", 1)[1].split("_", 1)
                found.append(((instant, int(version), token), str(path.relative_to(root))))
    return [name for _, name in sorted(found)]


def _read_slice(
    root: Path, file_slice: HudiFileSlice, logs: list[str], ordering: str, committed: set[str]
) -> list[dict[str, Any]]:
    """The merged rows of one file slice (base file, then ``logs`` in order)."""
    versions: dict[str, _Version] = {}
    if file_slice.base_file_name:
        for row in pq.read_table(root / file_slice.base_file_relative_path()).to_pylist():
            _merge(versions, row[RECORD_KEY], _Version(row[ordering], row))
    for log_file in logs:
        with (root / log_file).open("rb") as stream:
            for key, version in _log_records(stream, ordering, committed, log_file):
                _merge(versions, key, version)
    return [v.row for v in versions.values() if v.row is not None]


@dataclass
class _Block:
    kind: int
    header: dict[int, str]
    content: bytes


def _log_records(
    stream: BinaryIO, ordering: str, committed: set[str], where: str
) -> Iterator[tuple[str, _Version]]:
    """Every record and delete of the log file's committed blocks, in order (rolled-back blocks left out)."""
    blocks: list[_Block] = []
    for block in _blocks(stream, where):
        if block.kind == _COMMAND:
            command = block.header.get(_COMMAND_TYPE)
            assert command == _ROLLBACK, f"{where}: unknown command block type {command}"
            target = block.header[_TARGET_INSTANT_TIME]
            blocks = [b for b in blocks if b.header[_INSTANT_TIME] != target]
        elif block.header[_INSTANT_TIME] in committed:
            blocks.append(block)
    for block in blocks:
        assert block.header.get(_IS_PARTIAL, "false") == "false", f"{where}: partial-update block"
        if block.kind == _AVRO_DATA:
            for row in _avro_rows(block, where):
                yield row[RECORD_KEY], _Version(row[ordering], row)
        elif block.kind == _PARQUET_DATA:
            for row in pq.read_table(io.BytesIO(block.content)).to_pylist():
                yield row[RECORD_KEY], _Version(row[ordering], row)
        elif block.kind == _DELETE:
            for key, value in _deletes(block, where):
                yield key, _Version(value, None)
        else:
            raise AssertionError(f"{where}: unsupported log block type {block.kind}")


def _blocks(stream: BinaryIO, where: str) -> Iterator[_Block]:
    """The blocks of a log file in format version 1."""
    while magic := stream.read(len(_MAGIC)):
        assert magic == _MAGIC, f"{where}: no log block magic at byte {stream.tell() - len(magic)}"
        (length,) = struct.unpack(">q", stream.read(8))
        end = stream.tell() + length
        version, kind = struct.unpack(">ii", stream.read(8))
        assert version == 1, f"{where}: log format version {version}"
        header = _block_metadata(stream)
        (content_length,) = struct.unpack(">q", stream.read(8))
        content = stream.read(content_length)
        stream.seek(end)
        yield _Block(kind, header, content)


def _block_metadata(stream: BinaryIO) -> dict[int, str]:
    (entries,) = struct.unpack(">i", stream.read(4))
    metadata = {}
    for _ in range(entries):
        key, size = struct.unpack(">ii", stream.read(8))
        metadata[key] = stream.read(size).decode()
    return metadata


def _avro_rows(block: _Block, where: str) -> Iterator[dict[str, Any]]:
    content = io.BytesIO(block.content)
    version, count = struct.unpack(">ii", content.read(8))
    assert version == 3, f"{where}: Avro data block version {version}"
    schema = fastavro.parse_schema(json.loads(block.header[_SCHEMA]))
    for _ in range(count):
        (size,) = struct.unpack(">i", content.read(4))
        record = fastavro.schemaless_reader(io.BytesIO(content.read(size)), schema, None)
        assert isinstance(record, dict)
        yield record


def _deletes(block: _Block, where: str) -> Iterator[tuple[str, Any]]:
    content = io.BytesIO(block.content)
    version, size = struct.unpack(">ii", content.read(8))
    assert version == 3, f"{where}: delete block version {version}"
    deletes = fastavro.schemaless_reader(io.BytesIO(content.read(size)), _DELETE_RECORD_LIST, None)
    assert isinstance(deletes, dict)
    for delete in deletes["deleteRecordList"]:
        wrapped = delete["orderingVal"]
        yield delete["recordKey"], None if wrapped is None else wrapped["value"]
