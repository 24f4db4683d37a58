"""The record key and the columns a bootstrap reads."""

from __future__ import annotations

import pytest

from cdc_lake.config import Table
from cdc_lake.exceptions import BootstrapError
from cdc_lake.sources.snapshot import SourceColumn, TableShape
from cdc_lake_bootstrap.keys import record_key, selected_columns

SHAPE = TableShape(
    "s.t",
    (
        SourceColumn("id", "int4", "integer", False),
        SourceColumn("code", "text", "text", False),
        SourceColumn("note", "text", "text", True),
        SourceColumn("big", "text", "text", True),
    ),
    ("id",),
    10,
    100,
)


def test_primary_key_unless_the_config_names_one() -> None:
    assert record_key("src.s.t", Table(name="s.t"), SHAPE) == ("id",)
    assert record_key("src.s.t", Table(name="s.t", key=["code"]), SHAPE) == ("code",)


def test_no_usable_key_is_refused() -> None:
    keyless = TableShape("s.t", SHAPE.columns, (), 10, 100)

    with pytest.raises(BootstrapError, match=r"table src\.s\.t has no primary key: set key"):
        record_key("src.s.t", Table(name="s.t"), keyless)
    with pytest.raises(BootstrapError, match="key column note is nullable"):
        record_key("src.s.t", Table(name="s.t", key=["note"]), SHAPE)
    with pytest.raises(BootstrapError, match="key column nope does not exist"):
        record_key("src.s.t", Table(name="s.t", key=["nope"]), SHAPE)


def test_frozen_columns_keep_the_key_and_table_order() -> None:
    assert selected_columns("src.s.t", Table(name="s.t"), SHAPE, ("id",)) == ["id", "code", "note", "big"]
    frozen = Table(name="s.t", columns=["note", "code"])
    assert selected_columns("src.s.t", frozen, SHAPE, ("id",)) == ["id", "code", "note"]
    with pytest.raises(BootstrapError, match=r"columns \['gone'\]"):
        selected_columns("src.s.t", Table(name="s.t", columns=["gone"]), SHAPE, ("id",))
