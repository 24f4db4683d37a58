"""The type torture tests' machinery: a column matrix, a table built from it, a writer, a value comparison.

A :class:`TortureColumn` is one column of the matrix in ``docs/type-mapping.md``: its DDL type, sample
values as SQL literals (extremes, NULL, NULL array elements), the SQL that reads the source value for the
comparison, and how that source value becomes the lake value (:attr:`TortureColumn.expect`).  Each
representation change the docs name (a time as microseconds of the day, a ``timetz`` in UTC, ``bit(n)`` as
its text, ...) is one such function here, so a difference that is not one of them fails the test.

The comparison reads the lake with Spark+Hudi, with the second reader
(``support.second_reader``) and with Trino through the Hive catalog entry (``support.trino_reader``), and
compares every value of every row with the source's, NaN equal to NaN.
"""

from __future__ import annotations

import datetime as dt
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from pyspark.sql import Column, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, StructField, TimestampType

from cdc_lake.config import Config
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.hudi.writer import read_table
from support.bootstrap import SourceDb, apply_until_live, onboard, write_db_config
from support.common import cli_run, load
from support.onboard import of_source
from support.second_reader import second_reader_rows
from support.trino_reader import mark_read_by_trino, trino_rows


def same(value: Any) -> Any:
    """The source value is the lake value."""
    return value


def text_of_decimal(value: Any) -> Any:
    """A decimal's exact text, scale kept (the ``string`` fallback)."""
    return None if value is None else format(value, "f")


def trimmed_text_of_decimal(value: Any) -> Any:
    """A decimal's exact text without trailing fractional zeros (an unconstrained numeric's fallback)."""
    if value is None:
        return None
    text = format(value, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def micros_of_time_text(value: Any) -> Any:
    """``HH:MM:SS[.ffffff]`` (Postgres ``time``, ``24:00:00`` included) as microseconds of the day."""
    if value is None:
        return None
    hours, minutes, seconds = value.split(":")
    whole, _, fraction = seconds.partition(".")
    return ((int(hours) * 60 + int(minutes)) * 60 + int(whole)) * 1_000_000 + int(fraction.ljust(6, "0"))


def each(convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``convert`` applied to every element of an array (NULL elements kept)."""
    return lambda value: None if value is None else [None if v is None else convert(v) for v in value]


@dataclass(frozen=True)
class TortureColumn:
    """One column of the matrix: DDL type, sample SQL literals, source read SQL and lake expectation."""

    name: str
    ddl: str
    samples: tuple[str, ...]
    read: str | None = None
    expect: Callable[[Any], Any] = same
    column_type: str | None = None

    def source_sql(self, quote: Callable[[str], str]) -> str:
        """The select expression for the comparison's source value."""
        return (self.read or "{c}").format(c=quote(self.name)) + " AS " + quote(self.name)


@dataclass(frozen=True)
class RefusedColumn:
    """A column the docs list as refused at onboarding, and a sample value for it."""

    name: str
    ddl: str
    sample: str


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _spark_column(field: StructField) -> Column:
    """A lake column for collecting: instants as epoch microseconds (PySpark turns year 1 into an error)."""
    column = F.col(field.name)

    def micros(value: Column) -> Column:
        return F.when(value.isNotNull(), F.struct(F.lit("µs"), F.unix_micros(value)))

    if isinstance(field.dataType, TimestampType):
        return micros(column).alias(field.name)
    if isinstance(field.dataType, ArrayType) and isinstance(field.dataType.elementType, TimestampType):
        return F.transform(column, micros).alias(field.name)
    return column


def comparable(value: Any) -> Any:
    """A source or lake value in one shape: bytes, aware UTC datetimes, NaN as a marker, lists recursed."""
    if isinstance(value, Row):
        return tuple(value)
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "µs":
        return value
    if isinstance(value, list | tuple):
        return [comparable(v) for v in value]
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dt.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return ("µs", (aware - _EPOCH) // dt.timedelta(microseconds=1))
    if isinstance(value, Decimal):
        return value.normalize() if value.is_finite() else str(value)
    return value


@dataclass
class TortureTable:
    """A source table built from the matrix: ``rows`` rows, row ``i`` taking sample ``i + k`` of column k."""

    db: SourceDb
    name: str
    columns: Sequence[TortureColumn]
    refused: Sequence[RefusedColumn] = ()
    big_text: bool = True

    @property
    def extra(self) -> tuple[str, ...]:
        """The columns besides the matrix's: the large text, when the table has it."""
        return ("big",) if self.big_text else ()

    def quote(self, name: str) -> str:
        """An identifier quoted for the engine."""
        if self.db.engine == "postgres":
            return '"' + name.replace('"', '""') + '"'
        return "`" + name.replace("`", "``") + "`"

    @property
    def qualified_sql(self) -> str:
        """The table's name in SQL."""
        return f"public.{self.quote(self.name)}" if self.db.engine == "postgres" else self.quote(self.name)

    def ddl(self) -> str:
        """CREATE TABLE with the key, every column, the refused ones and the TOAST/large text column."""
        parts = ["id bigint primary key"]
        parts += [f"{self.quote(c.name)} {c.ddl}" for c in self.columns]
        parts += [f"{self.quote(c.name)} {c.ddl}" for c in self.refused]
        if self.big_text:
            parts.append("big " + ("text" if self.db.engine == "postgres" else "mediumtext"))
        return f"create table {self.qualified_sql} ({', '.join(parts)})"

    def big(self, key: int, version: int) -> str | None:
        """A large text (TOASTed out of line on Postgres) for most rows, NULL for some."""
        if key % 4 == 0:
            return None
        return "".join(f"{key:06d}-{version}-{i:04d}-toasted|" for i in range(300))

    def insert(self, key: int, shift: int = 0, version: int = 0) -> tuple[str, tuple[Any, ...]]:
        """INSERT of row ``key``: column k takes sample ``key + k + shift``; the refused ones their sample."""
        names = ["id", *(c.name for c in self.columns), *(c.name for c in self.refused)]
        values = [str(key)]
        values += [c.samples[(key + k + shift) % len(c.samples)] for k, c in enumerate(self.columns)]
        values += [c.sample for c in self.refused]
        params: tuple[Any, ...] = ()
        if self.big_text:
            names.append("big")
            values.append("%s")
            params = (self.big(key, version),)
        columns = ", ".join(self.quote(n) for n in names)
        return f"insert into {self.qualified_sql} ({columns}) values ({', '.join(values)})", params

    def update(self, key: int, rng: random.Random) -> tuple[str, tuple[Any, ...]]:
        """UPDATE of two to four random columns of row ``key`` to random samples (``big`` left unchanged)."""
        chosen = rng.sample(list(self.columns), rng.randint(2, min(4, len(self.columns))))
        sets = ", ".join(f"{self.quote(c.name)} = {rng.choice(c.samples)}" for c in chosen)
        return f"update {self.qualified_sql} set {sets} where id = {key}", ()

    def create(self, rows: int) -> None:
        """Create the table and insert rows ``1..rows``."""
        statements = [self.ddl()]
        if self.db.engine == "postgres" and self.big_text:
            statements.append(f"alter table {self.qualified_sql} alter column big set storage external")
        self.db.execute(*statements)
        self.execute([self.insert(key) for key in range(1, rows + 1)])

    def execute(self, statements: Sequence[tuple[str, tuple[Any, ...]]]) -> None:
        """Run parameterized statements on the primary in one transaction."""
        if self.db.engine == "postgres":
            with self.db.connect_pg() as conn:
                for statement, params in statements:
                    conn.execute(statement, params or None)  # type: ignore[arg-type]
            return
        conn = self.db.connect_maria()
        try:
            with conn.cursor() as cur:
                for statement, params in statements:
                    cur.execute(statement, params or None)
            conn.commit()
        finally:
            conn.close()

    def source_rows(self) -> dict[int, dict[str, Any]]:
        """Every source row by key, each column as the lake should hold it."""
        select = ", ".join(["id", *(c.source_sql(self.quote) for c in self.columns), *self.extra])
        query = f"select {select} from {self.qualified_sql}"
        if self.db.engine == "postgres":
            with self.db.connect_pg() as conn:
                cur = conn.execute(query)  # type: ignore[arg-type]
                names = [d.name for d in cur.description or ()]
                rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        else:
            conn = self.db.connect_maria()
            try:
                with conn.cursor() as cur:
                    cur.execute(query)
                    names = [d[0] for d in cur.description or ()]
                    rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
            finally:
                conn.close()
        expected = {}
        for row in rows:
            converted = {name: row[name] for name in ("id", *self.extra)}
            converted.update({c.name: c.expect(row[c.name]) for c in self.columns})
            expected[int(row["id"])] = converted
        return expected


@dataclass
class TortureWriter:
    """Updates, deletes, deletes-and-re-inserts of the same key and inserts on the table, in a thread."""

    table: TortureTable
    keys: int
    max_transactions: int = 400
    seed: int = 3
    transactions: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    error: BaseException | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TortureWriter:
        """Start writing in a background thread."""
        self._thread = threading.Thread(target=self._run, name="torture-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop after the running transaction; re-raise what the thread raised."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=120)
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        rng = random.Random(self.seed)
        next_key = self.keys + 1000
        present = set(range(1, self.keys + 1))
        try:
            while not self._stop.is_set() and self.transactions < self.max_transactions:
                op = rng.choice(["update", "update", "update", "delete", "reinsert", "insert"])
                self.ops[op] = self.ops.get(op, 0) + 1
                key = rng.choice(sorted(present))
                table = self.table.qualified_sql
                if op == "update":
                    statements = [self.table.update(key, rng)]
                elif op == "delete":
                    statements = [(f"delete from {table} where id = {key}", ())]
                    present.discard(key)
                elif op == "reinsert":
                    statements = [
                        (f"delete from {table} where id = {key}", ()),
                        self.table.insert(key, shift=rng.randint(1, 5), version=rng.randint(1, 9)),
                    ]
                    present.add(key)
                else:
                    next_key += 1
                    statements = [self.table.insert(next_key, shift=rng.randint(0, 5))]
                    present.add(next_key)
                if not present:
                    present.add(key)
                    statements.append(self.table.insert(key))
                self.table.execute(statements)
                self.transactions += 1
                time.sleep(0.005)
        except BaseException as exc:  # surfaced by stop()
            self.error = exc


def _differences(
    reader: str,
    expected: dict[int, dict[str, Any]],
    actual: dict[int, dict[str, Any]],
    columns: Sequence[str],
) -> list[str]:
    found = []
    if set(expected) != set(actual):
        missing = sorted(set(expected) - set(actual))[:5]
        extra = sorted(set(actual) - set(expected))[:5]
        found.append(f"{reader}: keys missing {missing}, extra {extra}")
    for key in sorted(set(expected) & set(actual)):
        for column in columns:
            want, got = comparable(expected[key][column]), comparable(actual[key][column])
            if want != got:
                found.append(f"{reader}: key {key} column {column}: lake {got!r} != source {want!r}")
    return found


def lake_differences(
    spark: SparkSession, base_path: str, table: TortureTable, config: Config | None = None
) -> tuple[int, list[str]]:
    """Rows compared and every difference between source and lake, through Spark+Hudi and the second
    reader, and through Trino when ``config`` registers the table in ``catalog.hive``; every reader's
    rows are counted per key first (a reader indexed by key would hide a duplicate)."""
    expected = table.source_rows()
    names = ["id", *(c.name for c in table.columns), *table.extra]
    frame = read_table(spark, base_path).select(*names)
    frame = frame.select(*(_spark_column(f) for f in frame.schema.fields))
    readers = {
        "spark": [r.asDict() for r in frame.collect()],
        "second reader": second_reader_rows(base_path, names),
    }
    if config is not None and config.catalog.hive is not None:
        readers["trino"] = trino_rows(table.db.stack, config, table.db.qualified(table.name), names)
        mark_read_by_trino(base_path)
    found = []
    for reader, rows in readers.items():
        keys = Counter(int(r["id"]) for r in rows)
        found += [f"{reader}: {n} rows for key {k}" for k, n in sorted(keys.items()) if n > 1]
        found += _differences(reader, expected, {int(r["id"]): r for r in rows}, names)
    return len(expected), found


def failed_task_trace(db: SourceDb, timeout: float = 180.0) -> str:
    """The trace of the first FAILED task of ``db``'s connectors, once one has failed."""
    deadline = time.monotonic() + timeout
    with KafkaConnectClient(db.stack.connect.url) as connect:
        while True:
            for name in filter(of_source(db.source), connect.list_connectors()):
                for task in connect.status(name).tasks:
                    if task.state == "FAILED" and task.trace:
                        return task.trace
            assert time.monotonic() < deadline, f"no task of the connectors of {db.source} failed"
            time.sleep(2)


def bootstrap_under_changes_and_compare(
    spark: SparkSession,
    tmp_path: Path,
    torture: TortureTable,
    rows: int,
    ntz: TortureTable,
) -> tuple[Config, str]:
    """Onboard ``torture`` (created with ``rows`` rows; its refused columns left out, its fallbacks
    chosen) and ``ntz``, bootstrap both while a writer changes ``torture``, apply them until live, and
    compare every value of both (``ntz``: a wall-clock timestamp, lake ``timestamp_ntz``) through
    Spark+Hudi and the second reader.

    Returns the config and ``ntz``'s base path.
    """
    db = torture.db
    columns = ["id", *(c.name for c in torture.columns), "big"]
    column_types = {c.name: c.column_type for c in torture.columns if c.column_type}
    entries: list[dict[str, Any]] = [
        {"name": torture.name, "columns": columns, "column_types": column_types},
        {"name": ntz.name},
    ]
    hive = {"uri": db.stack.hive_metastore.uri, "database": f"lake_{db.engine}"}
    config_path = write_db_config(
        tmp_path / "ok", db, entries, str(tmp_path / "lake"), catalog={"hive": hive}
    )
    onboard(config_path, db.source)
    config = load(config_path)

    writer = TortureWriter(torture, rows, max_transactions=300).start()
    time.sleep(1)
    result = cli_run(config_path, "bootstrap", db.qualified(torture.name), db.qualified(ntz.name))
    writer.stop()
    assert result.exit_code == 0, result.stderr or result.output
    assert writer.transactions >= 50 and min(writer.ops.values()) >= 5, writer.ops
    for table in (torture, ntz):
        apply_until_live(spark, config, db.qualified(table.name))

    base = config.lake.table_base_path(db.qualified(torture.name))
    compared, differences = lake_differences(spark, base, torture, config)
    assert compared >= rows // 2
    assert differences == [], "\n".join(differences)

    ntz_base = config.lake.table_base_path(db.qualified(ntz.name))
    compared, differences = lake_differences(spark, ntz_base, ntz, config)
    assert compared == 6 and differences == [], "\n".join(differences)
    return config, ntz_base
