"""Every DDL kind x ``schema_changes`` policy x table type x engine on the local stack: what the lake ends as.

docs/schema-changes.md ("DDL kind by policy") states per DDL kind and policy what the lake holds; this
driver observes it.  Each cell is one table.  Per engine and table type (``lake.table_type`` is one
setting of the config, so each table type is a pass of its own): one fresh source database, one table
per kind and policy (``id`` key, ``grp int``, ``val varchar(200)``, ``amount numeric(12,2)``, ``flag``,
``ROWS`` rows), one ``onboard``, one ``bootstrap --apply`` of every table; then every table's DDL, each
followed by a few writes (an insert, an update, and where the DDL added a column a value and an
explicit NULL in it); Debezium streams all of it, then every table is applied (``apply --once``'s
catch-up, repeated until a round applies nothing or the table stopped).  Each cell is then:

- ``exact``: the table is not stopped and equal to the source in every column (``freeze``: in the
  columns the lake has, which must all still be in the source), read with Spark+Hudi and with the second
  reader hudi-rs (``tests/support``: ``compare.assert_rows_equal``,
  ``second_reader.second_reader_rows``);
- ``stopped``: SCHEMA_CHANGED, with the one-line cause recorded (the change it names);
- ``DIVERGED``: not stopped and the lake differs from the source (or a column set differs): a bug, or
  one of the documented gaps; the driver exits 1 if any cell diverged;
- ``FAILED``: any other state or an error while applying; the driver exits 1 too.

Under ``rebootstrap`` a stop is followed by the re-bootstrap ``cdc-lake run`` starts by itself
(``AutoRebootstrap``: ``rebootstrap_tables`` with its reason), run here in the foreground after the
classification; the new copy is compared like any table (``stopped -> exact``).  ``--no-rebootstrap``
leaves those tables stopped.

Each cell's observed outcome is compared with the one the doc's table states (``EXPECTED``); a
difference is flagged ``MISMATCH`` in the markdown table and the JSON, and exits 1 as well.  Run it with
the stack up (the full matrix by default; each filter takes a comma-separated list)::

    .venv/bin/python benchmarks/schema_matrix_bench.py [--engines postgres,mariadb]
        [--table-types COPY_ON_WRITE,MERGE_ON_READ] [--policies evolve,freeze,rebootstrap]
        [--kinds add_nullable,...] [--no-rebootstrap] [--json OUT] [--markdown OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support.bootstrap import (  # noqa: E402
    SourceDb,
    mariadb_db,
    postgres_db,
    wait_for_schema,
    wait_streamed,
    write_db_config,
)
from support.common import cli_run, write_config  # noqa: E402
from support.compare import assert_rows_equal  # noqa: E402
from support.second_reader import s3_storage_options, second_reader_rows  # noqa: E402

from cdc_lake.apply.runner import ApplyRunner  # noqa: E402
from cdc_lake.config import Config, load_config  # noqa: E402
from cdc_lake.hudi.writer import read_table  # noqa: E402
from cdc_lake.lake.target import target_for  # noqa: E402
from cdc_lake.spark import get_spark  # noqa: E402
from cdc_lake.stack.manager import LocalStack  # noqa: E402
from cdc_lake.state.lifecycle import TableState  # noqa: E402
from cdc_lake.state.store import StateStore  # noqa: E402
from cdc_lake_bootstrap.progress import LineView  # noqa: E402
from cdc_lake_bootstrap.rebootstrap import rebootstrap_tables  # noqa: E402

ROWS = 50
ENGINES = ("postgres", "mariadb")
TABLE_TYPES = ("COPY_ON_WRITE", "MERGE_ON_READ")
POLICIES = ("evolve", "freeze", "rebootstrap")

# The table of each cell: ``{t}`` is the quoted table name in the engine's dialect.
CREATE = {
    "postgres": (
        "create table {t} (id bigint primary key, grp int not null, val varchar(200), "
        "amount numeric(12, 2), flag boolean)",
        "insert into {t} select g, g % 10, 'v' || g, g / 7.0, g % 2 = 0 from generate_series(1, {rows}) g",
    ),
    "mariadb": (
        "create table {t} (id bigint primary key, grp int not null, val varchar(200), "
        "amount decimal(12, 2), flag boolean)",
        "insert into {t} select seq, seq % 10, concat('v', seq), seq / 7, seq % 2 = 0 from seq_1_to_{rows}",
    ),
}
# Written after every DDL (valid whatever the DDL did to ``val`` or ``grp``).
WRITES = (
    "insert into {t} (id, grp, amount, flag{extra_column}) values ({id}, '1', 1.50, true{extra_value})",
    "update {t} set amount = amount + 1 where id <= 3",
)


@dataclass(frozen=True)
class Kind:
    """One DDL kind: its statements per engine, the writes that follow, and the doc's expected outcome."""

    ddl: dict[str, tuple[str, ...]]
    """Per engine; a kind runs on the engines it names only (``swap`` is MySQL-family DDL)."""
    then: dict[str, tuple[str, ...]]
    expected: dict[str, tuple[str, str, str]]
    """Per engine: the outcome under ``evolve``, ``freeze``, ``rebootstrap`` (docs/schema-changes.md)."""
    insert: tuple[str, str] = ("", "")
    """A column the inserts after the DDL must fill, and its value (``", req"``, ``", 3"``)."""


def _both(*statements: str) -> dict[str, tuple[str, ...]]:
    return {"postgres": statements, "mariadb": statements}


def _same(evolve: str, freeze: str, rebootstrap: str) -> dict[str, tuple[str, str, str]]:
    return {"postgres": (evolve, freeze, rebootstrap), "mariadb": (evolve, freeze, rebootstrap)}


STOPS = _same("stopped", "stopped", "stopped -> exact")
ADDED_VALUES = "update {t} set {c} = {v} where id = 4", "update {t} set {c} = null where id = 5"
KINDS: dict[str, Kind] = {
    "add_nullable": Kind(
        {
            "postgres": ("alter table {t} add column note text",),
            "mariadb": ("alter table {t} add column note text",),
        },
        _both(*(s.format(t="{t}", c="note", v="'n'") for s in ADDED_VALUES)),
        _same("exact", "exact", "exact"),
    ),
    "add_const_default": Kind(
        _both("alter table {t} add column region varchar(8) not null default 'eu'"),
        _both("update {t} set region = 'us' where id = 4"),
        _same("stopped", "exact", "stopped -> exact"),
    ),
    "add_now_default": Kind(
        {
            "postgres": ("alter table {t} add column seen timestamptz default now()",),
            "mariadb": ("alter table {t} add column seen datetime(6) null default current_timestamp(6)",),
        },
        _both("update {t} set seen = null where id = 5"),
        _same("stopped", "exact", "stopped -> exact"),
    ),
    "add_uuid_default": Kind(
        {
            "postgres": ("alter table {t} add column tag uuid default gen_random_uuid()",),
            "mariadb": ("alter table {t} add column tag varchar(36) default (uuid())",),
        },
        _both("update {t} set tag = null where id = 5"),
        # MariaDB's expression default reaches the schema without a default: the source's catalog shows it.
        # The replica runs the DDL itself and draws UUIDs of its own, so the stop names a re-bootstrap from
        # the primary (docs/schema-changes.md, "Defaults"), which the re-bootstrap below follows.
        _same("stopped", "exact", "stopped -> exact"),
    ),
    "drop": Kind(_both("alter table {t} drop column val"), _both(), STOPS),
    "rename": Kind(
        {
            "postgres": ('alter table {t} rename column "val" to "label"',),
            "mariadb": ("alter table {t} rename column `val` to `label`",),
        },
        _both("update {t} set label = 'renamed' where id = 4"),
        STOPS,
    ),
    "widen": Kind(
        {
            "postgres": ("alter table {t} alter column grp type bigint",),
            "mariadb": ("alter table {t} modify grp bigint not null",),
        },
        _both("update {t} set grp = 5000000000 where id = 4"),
        _same("exact", "exact", "exact"),
    ),
    "narrow_varchar": Kind(
        {
            "postgres": ("alter table {t} alter column val type varchar(20)",),
            "mariadb": ("alter table {t} modify val varchar(20)",),
        },
        _both(),
        STOPS,
    ),
    "incompatible": Kind(
        {
            "postgres": ("alter table {t} alter column grp type text",),
            "mariadb": ("alter table {t} modify grp varchar(20) not null",),
        },
        _both("update {t} set grp = 'x' where id = 4"),
        STOPS,
    ),
    "add_not_null": Kind(
        {
            # Postgres refuses NOT NULL without a default on a non-empty table: add it with one, drop it.
            "postgres": (
                "alter table {t} add column req int not null default 0",
                "alter table {t} alter column req drop default",
            ),
            "mariadb": ("alter table {t} add column req int not null",),
        },
        _both("update {t} set req = 7 where id = 4"),
        _same("stopped", "exact", "stopped -> exact"),
        (", req", ", 3"),
    ),
    "drop_readd": Kind(
        _both("alter table {t} drop column val"),
        _both(
            "insert into {t} (id, grp, amount, flag) values ({id2}, 2, 2.50, false)",
            "alter table {t} add column val varchar(200)",
            "update {t} set val = 'back' where id = 4",
        ),
        STOPS,
    ),
    "rewrite_using": Kind(
        # Every row rewritten, the type kept: no writer schema shows it (the source's rewrite log does).
        {"postgres": ("alter table {t} alter column amount type numeric(12, 2) using amount * 2",)},
        {"postgres": ()},
        STOPS,
    ),
    "swap": Kind(
        # gh-ost / pt-online-schema-change: a copy altered and filled, swapped in by one RENAME TABLE.
        {
            "mariadb": (
                "create table `{name}_new` like {t}",
                "alter table `{name}_new` add column note varchar(20)",
                "insert into `{name}_new` select s.*, 'copied' from {t} s",
                "rename table {t} to `{name}_old`, `{name}_new` to {t}",
            )
        },
        {"mariadb": ()},
        STOPS,
    ),
    "truncate": Kind(
        # Not DDL, but rows removed without row events: the table stops FAILED before the truncate.
        _both("truncate table {t}"),
        _both(),
        _same("FAILED", "FAILED", "FAILED"),
    ),
    "pk_change": Kind(
        {
            "postgres": ('alter table {t} drop constraint "{name}_pkey", add primary key (id, grp)',),
            "mariadb": ("alter table {t} drop primary key, add primary key (id, grp)",),
        },
        _both(),
        STOPS,
    ),
}


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _quoted(engine: str, name: str) -> str:
    return f'public."{name}"' if engine == "postgres" else f"`{name}`"


@contextmanager
def _database(engine: str, stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(stack) if engine == "postgres" else mariadb_db(stack) as db:
        yield db


def _cli(config_path: Path, *args: str) -> None:
    result = cli_run(config_path, *args)
    if result.exit_code != 0:
        raise SystemExit(
            f"cdc-lake {' '.join(args)}: exit {result.exit_code}: {result.stderr or result.output}"
        )


def _apply_until_idle(config: Config, tables: Sequence[str], rounds: int = 6) -> dict[str, str | None]:
    """``apply --once``'s catch-up of every table, repeated until a round applies nothing; the last
    error of each table (None: none)."""
    spark = get_spark(config.spark, config.lake)
    errors: dict[str, str | None] = {}
    with StateStore.open(config.state_store.url) as store:
        runner = ApplyRunner.for_config(spark, store, config)
        pending = list(tables)
        for _ in range(rounds):
            busy = []
            for table in pending:
                source, entry = config.table(table)
                outcome = runner.catch_up(target_for(config, source, entry))
                errors[table] = outcome.error
                if outcome.offsets and outcome.error is None:
                    busy.append(table)
            if not busy:
                break
            pending = busy
    return errors


def _compare(config: Config, db: SourceDb, name: str, base_path: str, policy: str) -> str | None:
    """Why the lake at ``base_path`` differs from the source table ``name`` (None: it does not)."""
    spark = get_spark(config.spark, config.lake)
    source = db.rows(name, ("id",))
    frame = read_table(spark, base_path)
    types = {f.name: f.dataType for f in frame.schema.fields}
    lake_columns = [c for c in types if not c.startswith("_cdc_") and c != "_hoodie_is_deleted"]
    source_columns = set(source[0]) if source else set()
    if policy == "freeze" and not set(lake_columns) <= source_columns:
        return f"lake columns {sorted(set(lake_columns) - source_columns)} are no longer in the source"
    if policy != "freeze" and set(lake_columns) != source_columns:
        return f"columns differ: source {sorted(source_columns)}, lake {sorted(lake_columns)}"
    qualified = db.qualified(name)
    compared: dict[str, Any] = {"columns": lake_columns, "naive_utc_columns": lake_columns}
    try:
        lake = [r.asDict(recursive=True) for r in frame.select(*lake_columns).collect()]
        assert_rows_equal(qualified, source, lake, types, ("id",), **compared)
        second = second_reader_rows(base_path, lake_columns, s3_storage_options(config.lake.s3))
        assert_rows_equal(qualified, source, second, types, ("id",), reader="hudi-rs", **compared)
    except AssertionError as exc:
        return str(exc).splitlines()[0]
    return None


def _classify(
    config: Config, db: SourceDb, name: str, policy: str, error: str | None, base_path: str | None = None
) -> dict[str, Any]:
    table = db.qualified(name)
    with StateStore.open(config.state_store.url) as store:
        info = store.require_table(table)
        path = base_path or store.current_copy(table).path
    if info.state is TableState.SCHEMA_CHANGED:
        return {"outcome": "stopped", "state": info.state.value, "message": info.last_error}
    if info.state not in (TableState.LIVE, TableState.CATCHING_UP) or error is not None:
        return {"outcome": "FAILED", "state": info.state.value, "message": error or info.last_error}
    differs = _compare(config, db, name, path, policy)
    return {
        "outcome": "exact" if differs is None else "DIVERGED",
        "state": info.state.value,
        "message": differs,
    }


def run_pass(
    stack: LocalStack,
    engine: str,
    table_type: str,
    kinds: Sequence[str],
    policies: Sequence[str],
    rebootstrap: bool,
    parallel: int,
) -> list[dict[str, Any]]:
    """One engine and table type: every kind x policy cell; one result per cell."""
    ran = [kind for kind in kinds if engine in KINDS[kind].ddl]
    cells = [(kind, policy, f"{kind}_{policy[:2]}") for kind in ran for policy in policies]
    started = time.monotonic()
    with _database(engine, stack) as db, TemporaryDirectory(prefix="schema-matrix-") as scratch:
        for _, _, name in cells:
            db.execute(*(s.format(t=_quoted(engine, name), rows=ROWS) for s in CREATE[engine]))
        entries = [{"name": name, "schema_changes": policy} for _, policy, name in cells]
        config_path = write_db_config(Path(scratch), db, entries, str(Path(scratch) / "lake"))
        data = yaml.safe_load(config_path.read_text())
        write_config(config_path, {**data, "lake": {**data["lake"], "table_type": table_type}})
        config = load_config(config_path)
        tables = [db.qualified(name) for _, _, name in cells]
        _log(f"{engine} {table_type}: onboarding and bootstrapping {len(cells)} tables")
        _cli(config_path, "onboard", db.source)
        db.execute(*(WRITES[1].format(t=_quoted(engine, name)) for _, _, name in cells))
        for table in tables:
            wait_for_schema(config, table)
        _cli(config_path, "bootstrap", *tables, "--apply", "--parallel", str(parallel))
        bootstrapped = time.monotonic()
        _log(f"{engine} {table_type}: DDLs and writes")
        refused: dict[str, str] = {}
        for number, (kind, _, name) in enumerate(cells):
            spec = KINDS[kind]
            values = {"t": _quoted(engine, name), "name": name, "id": 1000 + number, "id2": 2000 + number}
            values.update(extra_column=spec.insert[0], extra_value=spec.insert[1])
            try:
                db.execute(*(s.format(**values) for s in spec.ddl[engine]))
                db.execute(*(s.format(**values) for s in (*WRITES, *spec.then[engine])))
            except Exception as exc:  # the cell is FAILED, the others go on
                refused[db.qualified(name)] = f"the source refused a statement: {exc}".splitlines()[0]
                _log(f"{name}: {refused[db.qualified(name)]}")
        wait_streamed(config, tables[0])
        _log(f"{engine} {table_type}: applying")
        errors = {**_apply_until_idle(config, tables), **refused}
        applied = time.monotonic()
        results = []
        for kind, policy, name in cells:
            cell: dict[str, Any] = {
                "engine": engine,
                "table_type": table_type,
                "kind": kind,
                "policy": policy,
            }
            cell.update(_classify(config, db, name, policy, errors.get(db.qualified(name))))
            results.append(cell)
        stopped = [c for c in results if c["policy"] == "rebootstrap" and c["outcome"] == "stopped"]
        if rebootstrap and stopped:
            names = [f"{c['kind']}_re" for c in stopped]
            _log(f"{engine} {table_type}: re-bootstrapping {len(names)} stopped tables")
            for cell, name in zip(stopped, names, strict=True):
                after: dict[str, Any] = {"outcome": "FAILED", "message": "no re-bootstrap result"}
                reason = f"automatic (schema_changes: rebootstrap): {cell['message']}"
                try:
                    # The way out the stop names: `--from-primary` when only the primary's rows are exact.
                    from_primary = "--from-primary" in cell["message"]
                    for done in rebootstrap_tables(
                        config, [db.qualified(name)], reason, LineView(_log), ApplyRunner.for_config,
                        from_primary=from_primary,
                    ):
                        after = _classify(config, db, name, "rebootstrap", None, done.path)
                except Exception as exc:  # recorded as the cell's outcome
                    after = {"outcome": "FAILED", "message": f"{type(exc).__name__}: {exc}"}
                cell["outcome"] = f"stopped -> {after['outcome']}"
                cell["after_rebootstrap"] = after
        for cell in results:
            want = KINDS[cell["kind"]].expected[engine][POLICIES.index(cell["policy"])]
            cell["expected"] = want if rebootstrap else want.replace("stopped -> exact", "stopped")
            cell["matches"] = cell["outcome"] == cell["expected"]
        _log(
            f"{engine} {table_type}: bootstrap {bootstrapped - started:.0f}s, "
            f"apply {applied - bootstrapped:.0f}s, total {time.monotonic() - started:.0f}s"
        )
    return results


def markdown(results: Sequence[dict[str, Any]]) -> str:
    """One table per engine and table type: a row per kind, a column per policy."""
    lines: list[str] = []
    for engine in dict.fromkeys(r["engine"] for r in results):
        for table_type in dict.fromkeys(r["table_type"] for r in results if r["engine"] == engine):
            cells = [r for r in results if r["engine"] == engine and r["table_type"] == table_type]
            policies = list(dict.fromkeys(r["policy"] for r in cells))
            lines += [
                f"**{engine}, {table_type}**",
                "",
                "| DDL | " + " | ".join(f"`{p}`" for p in policies) + " |",
            ]
            lines.append("|---" * (len(policies) + 1) + "|")
            for kind in dict.fromkeys(r["kind"] for r in cells):
                row = []
                for policy in policies:
                    [cell] = [r for r in cells if r["kind"] == kind and r["policy"] == policy]
                    text = cell["outcome"] + (
                        "" if cell["matches"] else f" **MISMATCH** (doc: {cell['expected']})"
                    )
                    row.append(text)
                lines.append(f"| {kind} | " + " | ".join(row) + " |")
            lines.append("")
    return "\n".join(lines)


def _listed(value: str, allowed: Sequence[str]) -> list[str]:
    chosen = [v.strip() for v in value.split(",") if v.strip()]
    unknown = sorted(set(chosen) - set(allowed))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {unknown}: choose from {', '.join(allowed)}")
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--engines", type=lambda v: _listed(v, ENGINES), default=list(ENGINES))
    parser.add_argument("--table-types", type=lambda v: _listed(v, TABLE_TYPES), default=list(TABLE_TYPES))
    parser.add_argument("--policies", type=lambda v: _listed(v, POLICIES), default=list(POLICIES))
    parser.add_argument("--kinds", type=lambda v: _listed(v, list(KINDS)), default=list(KINDS))
    parser.add_argument(
        "--no-rebootstrap", action="store_true", help="leave stopped rebootstrap tables stopped"
    )
    parser.add_argument("--parallel", type=int, default=4, help="the bootstrap's --parallel")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    stack = LocalStack(Config.default(Path.cwd()).stack)
    results: list[dict[str, Any]] = []
    for engine in args.engines:
        for table_type in args.table_types:
            results += run_pass(
                stack, engine, table_type, args.kinds, args.policies, not args.no_rebootstrap, args.parallel
            )
    table = markdown(results)
    print(table)
    for cell in results:
        if cell["message"] or not cell["matches"]:
            print(
                f"{cell['engine']} {cell['table_type']} {cell['kind']} {cell['policy']}: "
                f"{cell['outcome']}: {cell['message']}"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))
    if args.markdown:
        args.markdown.write_text(table + "\n")
    diverged = [
        c for c in results if "DIVERGED" in c["outcome"] or "FAILED" in c["outcome"] or not c["matches"]
    ]
    return 1 if diverged else 0


if __name__ == "__main__":
    sys.exit(main())
