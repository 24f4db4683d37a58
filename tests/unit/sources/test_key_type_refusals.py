"""Key columns whose values the lake cannot tell apart as record keys are refused at onboarding.

A record key is the key's text (docs/type-mapping.md, Keys): a Postgres ``timetz`` reaches the lake as
the time in UTC, so ``04:45:30+02`` and ``02:45:30+00`` (two keys to Postgres, which compares zones too)
would be one record key, one row for two; an array has no record-key text both write paths agree on.
"""

from __future__ import annotations

import pytest

from cdc_lake.sources.column_types import key_refusals
from cdc_lake.sources.snapshot import SourceColumn, TableShape

_ID = SourceColumn("id", "int4", "integer", False)
_AT = SourceColumn("at", "timetz", "time with time zone", False)
_TAGS = SourceColumn("tags", "_int4", "integer[]", False, kind="array", element="int4")
SHAPE = TableShape("s.t", (_ID, _AT, _TAGS), ("id",), 0, 0)


@pytest.mark.parametrize(
    ("key", "column", "reason"),
    [
        (["id", "at"], "at", "two offsets of one UTC time of day"),
        (["tags"], "tags", "an array"),
    ],
)
def test_a_key_column_the_lake_cannot_tell_apart_is_refused_by_name(
    key: list[str], column: str, reason: str
) -> None:
    [refused] = key_refusals("postgres", SHAPE, key, {}, "s.t")

    assert refused.startswith(f"s.t.{column} (")
    assert reason in refused


def test_keys_of_exact_types_pass_and_other_columns_of_refused_types_are_no_keys() -> None:
    assert key_refusals("postgres", SHAPE, ["id"], {}, "s.t") == []
    maria = TableShape("d.t", (SourceColumn("t", "time", "time(6)", False),), ("t",), 0, 0)
    assert key_refusals("mariadb", maria, ["t"], {}, "d.t") == []
