"""The Confluent wire format."""

from __future__ import annotations

import pytest

from cdc_lake.decode.framing import MessageRef, encode_frame, parse_frame, read_avro_body
from cdc_lake.exceptions import DecodeError

REF = MessageRef("t", 1, 2)


def test_round_trip_of_header() -> None:
    data = encode_frame(0x01020304, b"body")
    assert data[:5] == b"\x00\x01\x02\x03\x04"
    assert parse_frame(data, REF) == (0x01020304, b"body")
    assert parse_frame(encode_frame(2**32 - 1, b""), REF) == (2**32 - 1, b"")


def test_wrong_magic_byte() -> None:
    with pytest.raises(DecodeError, match=r"^topic 't' partition 1 offset 2: value starts with byte 0x7b"):
        parse_frame(b'{"json": true}', REF)


@pytest.mark.parametrize("data", [b"", b"\x00", b"\x00\x00\x00\x01"])
def test_short_message(data: bytes) -> None:
    with pytest.raises(
        DecodeError, match=f"key is {len(data)} bytes, shorter than the 5-byte Confluent header"
    ):
        parse_frame(data, REF, "key")


def test_truncated_body() -> None:
    with pytest.raises(DecodeError, match="value does not decode with schema id 9"):
        read_avro_body(
            b"", {"type": "record", "name": "r", "fields": [{"name": "a", "type": "long"}]}, REF, 9, "value"
        )
