"""The state store: table lifecycles, bootstrap watermarks, applied offsets, runs and freshness."""

from cdc_lake.state.lifecycle import ALLOWED_TRANSITIONS, TableState
from cdc_lake.state.records import (
    BootstrapPartition,
    Freshness,
    Run,
    RunHandle,
    RunOutcome,
    SourceInfo,
    TableInfo,
    Watermark,
)
from cdc_lake.state.store import StateStore

__all__ = [
    "ALLOWED_TRANSITIONS",
    "BootstrapPartition",
    "Freshness",
    "Run",
    "RunHandle",
    "RunOutcome",
    "SourceInfo",
    "StateStore",
    "TableInfo",
    "TableState",
    "Watermark",
]
