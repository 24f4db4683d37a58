"""``benchmarks/layouts.py``: each named layout is what a tier-0 table gets under it, whatever the
product's tier-0 default (``lake.tier_layouts``): before the tier-0 default, ``default`` meant
COPY_ON_WRITE for the benchmarks' tier-0 tables; since, without ``tier_layouts: {}``, it silently meant
MERGE_ON_READ + BUCKET."""

from __future__ import annotations

import pytest
from layouts import LAYOUTS

from cdc_lake.config import Config, Source, Table
from cdc_lake.lake.layout import IndexType, TableType
from cdc_lake.lake.target import target_for


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_a_named_layout_is_the_one_a_tier0_table_gets(name: str) -> None:
    lake = LAYOUTS[name]
    tables = [{"name": "public.t", "tier": 0}]
    primary = {"database": "app", "port": 5432, "user": "cdc"}
    source = {"engine": "postgres", "primary": primary, "tables": tables}
    config = Config.model_validate({"lake": lake, "sources": {"pg": source}})
    (pg,) = config.sources.values()
    assert isinstance(pg, Source)
    (table,) = pg.tables
    assert isinstance(table, Table)

    target = target_for(config, pg, table)

    assert (target.table_type, target.index) == (TableType(lake["table_type"]), IndexType(lake["index"]))
    compaction = lake.get("compaction", {})
    assert target.compaction.inline is compaction.get("inline", True)
    assert target.compaction.max_delta_seconds == compaction.get("max_delta_seconds")
    assert target.compaction.plan_io_mb == compaction.get("plan_io_mb")
    assert target.compaction.executor == compaction.get("executor", "run")
