"""The onboarding check that every replicated column can be replicated exactly, by name.

It runs the one type mapping the bootstrap uses (:mod:`cdc_lake.sources.column_types`) over each planned
table's columns as the primary's catalog describes them, so a type the bootstrap would refuse, or one
whose Debezium encoding loses information, stops onboarding before anything is created, naming the table
and column with the ways out: leave the column out of the table's ``columns`` list, or, where a lossless
fallback exists, choose it in the table's ``column_types``.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdc_lake.config import Source, Table
from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.base import SourceEngine
from cdc_lake.sources.checks import CheckResult, name_list
from cdc_lake.sources.column_types import key_refusals, refusals, unknown_columns_problem
from cdc_lake.sources.snapshot import TableShape

CHECK = "column types"
KEY_CHECK = "column lists"
KEY_TYPES_CHECK = "key types"


def _selected(table: Table, shape: TableShape) -> list[str] | None:
    """The columns replicated: the frozen ``columns`` list with the key, else all (None)."""
    if not table.columns:
        return None
    return [*table.columns, *(table.key or shape.primary_key)]


def check_column_types(engine: SourceEngine, source: Source, tables: Sequence[Table]) -> list[CheckResult]:
    """Every selected column of ``tables`` maps to a lake type exactly, or the check fails naming them;
    so does a key column whose values the lake cannot tell apart as record keys.

    A frozen ``columns`` list must hold the key columns too: Debezium captures only the listed columns,
    so its events would carry no key (the bootstrap adds the key to what it reads, the connector cannot).
    """
    problems: list[str] = []
    keyless: list[str] = []
    bad_keys: list[str] = []
    checked = 0
    for table in tables:
        qualified = table.qualified_name(source)
        try:
            shape = engine.table_shape(table.name, "primary")
        except SourceEngineError:
            continue  # a missing table or an unreachable primary fails its own check
        checked += 1
        key = table.key or list(shape.primary_key)
        missing = [column for column in key if table.columns and column not in table.columns]
        if missing:
            keyless.append(f"{qualified} (add {', '.join(missing)})")
        unknown = unknown_columns_problem(shape, table.column_types, qualified)
        if unknown is not None:
            problems.append(unknown)
        found = refusals(
            source.engine,
            shape,
            _selected(table, shape),
            table.column_types,
            interval_handling=source.interval_mode(),
        )
        problems.extend(refusal.message(qualified) for refusal in found)
        bad_keys.extend(key_refusals(source.engine, shape, key, table.column_types, qualified))
    results = []
    if keyless:
        results.append(
            CheckResult.fail(
                KEY_CHECK,
                f"columns lists without the key columns: {name_list(keyless)}",
                "add the key columns to each table's columns list",
            )
        )
    if bad_keys:
        results.append(
            CheckResult.fail(
                KEY_TYPES_CHECK,
                "; ".join(bad_keys),
                "set the table's key to columns of other types (docs/type-mapping.md, Keys)",
            )
        )
    if problems:
        results.append(
            CheckResult.fail(
                CHECK,
                "; ".join(problems),
                "leave each column out of its table's columns list, or choose the fallback or source "
                "setting named (docs/type-mapping.md)",
            )
        )
    else:
        results.append(CheckResult.ok(CHECK, f"every column of {checked} table(s) replicates exactly"))
    return results
