"""The source engine contract is enforced when an engine is built: a method it forgets is a TypeError.

An engine subclasses :class:`~cdc_lake.sources.base.SourceEngine`; every method onboarding, the
bootstrap and the operations ask of it is abstract there, so an engine missing one cannot be
instantiated (it used to inherit a Protocol stub and answer None).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import pytest

from cdc_lake.config import Connection, Source
from cdc_lake.engines import ENGINE_NAMES
from cdc_lake.sources import capabilities_for, engine_for
from cdc_lake.sources.base import SourceEngine


def _unused(*_args: Any) -> NoReturn:
    raise AssertionError("not called")


CONTRACT: dict[str, Callable[..., Any] | property] = {
    name: _unused
    for name in (
        # onboarding
        "judge_primary",
        "planned_changes",
        "prepare",
        "publish",
        "release",
        "slot_exists",
        "engine_connector_params",
        # positions
        "current_position",
        "replica_position",
        "wait_replica_past",
        # the bootstrap's reads
        "quote_identifier",
        "quote_table",
        "jdbc_access",
        "table_shape",
        "sample_key_literals",
        "check_replica",
        "primary_clock_ms",
        "replica_replay_time_ms",
        "replica_lag",
        # the hand-off
        "streamed_through",
        # operations
        "capture_lag",
        "replica_delay",
        "column_defaults",
        "replica_evaluates",
        # table rewrites
        "rewrite_log_start",
        "rewrite_log_version",
        "table_rewrites",
    )
} | {"row_comparisons": property(_unused)}
"""Every method of the contract, each implemented by a stub."""

SOURCE = Source(name="s", engine="postgres", primary=Connection(port=5432, database="d", user="u"))


def test_an_engine_with_every_method_of_the_contract_is_built() -> None:
    engine_class = type("Complete", (SourceEngine,), dict(CONTRACT))

    assert engine_class(SOURCE).source is SOURCE


@pytest.mark.parametrize("missing", sorted(CONTRACT))
def test_an_engine_missing_one_method_of_the_contract_is_not_built(missing: str) -> None:
    methods = {name: method for name, method in CONTRACT.items() if name != missing}
    engine_class = type(f"Without_{missing}", (SourceEngine,), methods)

    with pytest.raises(TypeError, match=rf"abstract method '?{missing}'?"):
        engine_class(SOURCE)


def test_the_contract_is_every_abstract_method_of_the_engine_base() -> None:
    assert SourceEngine.__abstractmethods__ == frozenset(CONTRACT)


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_every_real_engine_is_built(engine: str) -> None:
    source = Source(
        name="s",
        engine=engine,
        primary=Connection(port=5432, database="d", user="u"),
        **({"server_id": 7} if "server_id" in capabilities_for(engine).settings else {}),
    )

    built = engine_for(source)

    assert isinstance(built, SourceEngine)
    assert type(built).__name__ == capabilities_for(engine).engine_class
