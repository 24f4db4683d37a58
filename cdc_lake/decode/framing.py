"""The Confluent wire format: one magic byte ``0``, a 4-byte big-endian schema id, then the Avro binary body.

Every error names the Kafka message (topic, partition, offset) so an operator can find it with any Kafka tool.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from fastavro import schemaless_reader

from cdc_lake.exceptions import DecodeError

MAGIC_BYTE = 0
HEADER_SIZE = 5
_HEADER = struct.Struct(">bI")


@dataclass(frozen=True)
class MessageRef:
    """Where a Kafka message lives: enough to find it again and to name it in errors."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"topic {self.topic!r} partition {self.partition} offset {self.offset}"


def parse_frame(data: bytes, ref: MessageRef, part: str = "value") -> tuple[int, bytes]:
    """Split a Confluent-framed message ``part`` ("key" or "value") into its schema id and Avro body.

    Raises DecodeError when the message is shorter than the 5-byte header or the magic byte is not 0.
    """
    if len(data) < HEADER_SIZE:
        raise DecodeError(
            f"{ref}: {part} is {len(data)} bytes, shorter than the {HEADER_SIZE}-byte Confluent header"
        )
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise DecodeError(
            f"{ref}: {part} starts with byte {data[0]:#04x}, not the Confluent magic byte 0x00 "
            "(not Confluent-framed Avro)"
        )
    return schema_id, bytes(data[HEADER_SIZE:])


def encode_frame(schema_id: int, body: bytes) -> bytes:
    """Prefix an Avro body with the Confluent header for ``schema_id``."""
    return _HEADER.pack(MAGIC_BYTE, schema_id) + body


def read_avro_body(body: bytes, writer_schema: Any, ref: MessageRef, schema_id: int, part: str) -> Any:
    """Decode one Avro datum written with ``writer_schema`` and check that it used every byte.

    Left-over bytes mean the registry's schema for ``schema_id`` does not describe the data, which
    would otherwise decode silently into wrong values.
    """
    stream = io.BytesIO(body)
    try:
        datum = schemaless_reader(stream, writer_schema, None)
    except (EOFError, ValueError, TypeError, IndexError, KeyError, OverflowError, UnicodeDecodeError) as exc:
        raise DecodeError(f"{ref}: {part} does not decode with schema id {schema_id}: {exc!r}") from exc
    left = len(body) - stream.tell()
    if left:
        raise DecodeError(
            f"{ref}: {part} has {left} bytes left after decoding with schema id {schema_id} "
            "(the schema does not match the data)"
        )
    return datum
