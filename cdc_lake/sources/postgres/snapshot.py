"""The Postgres engine's snapshot reads: positions, the standby's replay, and the bootstrap's reads.

:class:`PostgresSnapshot` is the engine's part of :class:`~cdc_lake.sources.snapshot.SnapshotSource`:
the primary's WAL position, the standby's replay position and the wait past a position, the
standby's state, and what the bootstrap reads (JDBC access, a table's shape, key samples), each
read on the role the caller names.  A JDBC session that reads a standby for the bootstrap waits first,
in a ``DO`` block, until its own server has replayed the watermark's position
(:func:`session_wait_statement`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, ClassVar
from urllib.parse import quote as url_quote

from psycopg import sql

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.positions import LogPosition
from cdc_lake.sources.postgres.catalog import ident, one_row, split_name
from cdc_lake.sources.postgres.connection import POLL_SECONDS, PostgresBase
from cdc_lake.sources.postgres.positions import Lsn
from cdc_lake.sources.postgres.settings import PostgresConnection
from cdc_lake.sources.settings import engine_model
from cdc_lake.sources.snapshot import (
    SESSION_WAIT_FAILED,
    JdbcAccess,
    SessionWait,
    SourceColumn,
    TableShape,
)


class PostgresSnapshot(PostgresBase):
    """The Postgres engine's snapshot role: WAL positions, the standby, the bootstrap's reads."""

    position_type: ClassVar[type[LogPosition]] = Lsn
    row_comparisons = True

    def current_position(self) -> str:
        """The primary's current WAL write position (an LSN such as ``0/16B3748``)."""
        with self._connect() as conn:
            return str(one_row(conn.execute("select pg_current_wal_lsn()::text").fetchone())[0])

    def replica_position(self) -> str:
        """The last WAL position the replica has replayed."""
        with self._connect("replica") as conn:
            value = one_row(conn.execute(f"select {_REPLAYED}::text").fetchone())[0]
        if value is None:
            raise SourceEngineError(
                f"source {self.source.name}: the replica is not a standby (no replay LSN)"
            )
        return str(value)

    def wait_replica_past(self, position: str, timeout: float) -> str:
        """Poll the replica until its replay LSN is at or past ``position``."""
        deadline = time.monotonic() + timeout
        with self._connect("replica") as conn:
            while True:
                reached, replayed = one_row(
                    conn.execute(
                        f"select pg_wal_lsn_diff({_REPLAYED}, %s::pg_lsn) >= 0, {_REPLAYED}::text",
                        (position,),
                    ).fetchone()
                )
                if replayed is None:
                    raise SourceEngineError(
                        f"source {self.source.name}: the replica is not a standby (no replay LSN)"
                    )
                if reached:
                    return str(replayed)
                if time.monotonic() > deadline:
                    raise SourceEngineError(
                        f"source {self.source.name}: replica replayed {replayed}, not past {position}, "
                        f"after {timeout:.0f}s"
                    )
                time.sleep(POLL_SECONDS)

    def quote_identifier(self, name: str) -> str:
        """``name`` as a Postgres identifier in double quotes."""
        return '"' + name.replace('"', '""') + '"'

    def quote_table(self, qualified: str) -> str:
        """``schema.table`` as a quoted Postgres table reference."""
        schema, table = split_name(qualified)
        return f"{self.quote_identifier(schema)}.{self.quote_identifier(table)}"

    def jdbc_access(self, role: str, wait: SessionWait | None = None) -> JdbcAccess:
        """JDBC access to ``role`` with a read-only, UTC, ISO-formatted session; with ``wait``, each
        session then waits until its server has replayed ``wait.position``
        (:func:`session_wait_statement`)."""
        connection = self.connection(role)
        database = url_quote(connection.database or self.database, safe="")
        url = (
            f"jdbc:postgresql://{connection.host}:{connection.port}/{database}"
            "?ApplicationName=cdc-lake-bootstrap&connectTimeout=10&tcpKeepAlive=true&readOnly=true"
        )
        tls = engine_model(connection, PostgresConnection).tls_settings()
        properties = {"driver": "org.postgresql.Driver", "user": connection.user, **tls}
        if connection.password is not None:
            properties["password"] = connection.password.get_secret_value()
        session_init = (
            "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY; SET TimeZone = 'UTC'; "
            "SET DateStyle = 'ISO, YMD'; SET IntervalStyle = 'postgres'; "
            "SET standard_conforming_strings = on; SET extra_float_digits = 3"
        )
        if wait is not None:
            session_init = f"{session_init}; {session_wait_statement(wait)}"
        return JdbcAccess(url, properties, session_init)

    def table_shape(self, table: str, role: str) -> TableShape:
        """Columns (numeric precision and scale decoded from the type modifier), key and size of ``table``."""
        schema, name = split_name(table)
        with self._connect(role) as conn:
            found = conn.execute(
                "select c.oid, c.reltuples::bigint, pg_table_size(c.oid) from pg_class c "
                "join pg_namespace n on n.oid = c.relnamespace "
                "where n.nspname = %s and c.relname = %s and c.relkind in ('r', 'p')",
                (schema, name),
            ).fetchone()
            if found is None:
                raise SourceEngineError(
                    f"source {self.source.name}: table {table} does not exist on the {role}"
                )
            oid, reltuples, size = found
            columns = [
                SourceColumn(
                    name=str(column),
                    type_name=str(type_name),
                    declared=str(declared),
                    nullable=bool(nullable),
                    precision=None if precision is None else int(precision),
                    scale=None if scale is None else int(scale),
                    kind=_kind(kind, category),
                    element=None if element is None else str(element),
                    element_kind=None if element_kind is None else _kind(element_kind, None),
                )
                for (
                    column,
                    type_name,
                    declared,
                    nullable,
                    precision,
                    scale,
                    kind,
                    category,
                    element,
                    element_kind,
                ) in conn.execute(_COLUMNS_QUERY, (oid,)).fetchall()
            ]
            primary_key = tuple(
                str(row[0])
                for row in conn.execute(
                    "select a.attname::text from pg_index i "
                    "cross join lateral unnest(i.indkey) with ordinality as k(attnum, ord) "
                    "join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum "
                    "where i.indrelid = %s and i.indisprimary order by k.ord",
                    (oid,),
                ).fetchall()
            )
            rows = int(reltuples)
            if rows < _EXACT_COUNT_BELOW:
                counted = conn.execute(sql.SQL("select count(*) from {}").format(ident(table))).fetchone()
                rows = int(one_row(counted)[0])
        return TableShape(table, tuple(columns), primary_key, rows, int(size))

    def sample_key_literals(
        self, table: str, key: tuple[str, ...], sample_rows: int, estimated_rows: int, role: str
    ) -> list[tuple[str, ...]]:
        """A Bernoulli sample of the key, sorted, each value as ``'text'::type`` (exact for every type)."""
        columns = [sql.Identifier(name) for name in key]
        literals = sql.SQL(", ").join(
            sql.SQL("format('%L::%s', {}::text, pg_typeof({}))").format(c, c) for c in columns
        )
        percent = 100.0 * sample_rows / max(estimated_rows, 1)
        sample = (
            sql.SQL("")
            if percent >= 100
            else sql.SQL(" tablesample bernoulli ({}) repeatable (7)").format(sql.Literal(percent))
        )
        query = sql.SQL("select {} from {}{} order by {}").format(
            literals, ident(table), sample, sql.SQL(", ").join(columns)
        )
        with self._connect(role) as conn:
            return [tuple(str(v) for v in row) for row in conn.execute(query).fetchall()]

    def check_replica(self) -> str:
        """The standby's address and replay position; not in recovery or replay paused is an error."""
        replica = self.source.replica
        if replica is None:
            raise SourceEngineError(f"source {self.source.name}: no replica configured")
        address = f"{replica.host}:{replica.port}"
        with self._connect("replica") as conn:
            in_recovery, replayed, paused = one_row(
                conn.execute(
                    "select pg_is_in_recovery(), pg_last_wal_replay_lsn()::text, "
                    "case when pg_is_in_recovery() then pg_is_wal_replay_paused() else false end"
                ).fetchone()
            )
        if not in_recovery:
            raise SourceEngineError(
                f"source {self.source.name}: replica {address} is not a standby "
                "(pg_is_in_recovery() is false)"
            )
        if paused:
            raise SourceEngineError(f"source {self.source.name}: replica {address} has WAL replay paused")
        return f"standby {address} replayed {replayed}"

    def primary_clock_ms(self) -> int:
        """The primary's clock in epoch milliseconds."""
        with self._connect() as conn:
            row = one_row(
                conn.execute("select (extract(epoch from clock_timestamp()) * 1000)::bigint").fetchone()
            )
        return int(row[0])

    def replica_replay_time_ms(self) -> int | None:
        """Commit time of the last transaction the standby replayed (None before the first)."""
        with self._connect("replica") as conn:
            row = one_row(
                conn.execute(
                    "select (extract(epoch from pg_last_xact_replay_timestamp()) * 1000)::bigint"
                ).fetchone()
            )
        return None if row[0] is None else int(row[0])

    def replica_lag(self, position: str) -> str:
        """Bytes of WAL between the standby's replay position and ``position``, and its replay age."""
        with self._connect("replica") as conn:
            replayed, behind, age = one_row(
                conn.execute(
                    "select pg_last_wal_replay_lsn()::text, "
                    "pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_replay_lsn())::bigint, "
                    "extract(epoch from clock_timestamp() - pg_last_xact_replay_timestamp())::bigint",
                    (position,),
                ).fetchone()
            )
        age_text = "" if age is None else f"; last replayed commit {age}s ago"
        return f"replayed {replayed}, {max(0, int(behind or 0))} bytes of WAL behind {position}{age_text}"

    def streamed_through(self, offset: Mapping[str, Any]) -> str | None:
        """Nothing beyond the offset: the heartbeat table's writes move ``lsn_commit`` on an idle database."""
        return None


# Below this many rows (by the statistics) a table is counted exactly when planning its bootstrap.
_EXACT_COUNT_BELOW = 100_000

SESSION_POLL_SECONDS = 0.1
"""How often a session's wait (:func:`session_wait_statement`) reads its server's replay position."""


_REPLAYED = "(case when pg_is_in_recovery() then pg_last_wal_replay_lsn() end)"
"""The server's replay position while it is a standby, else NULL.  ``pg_last_wal_replay_lsn()`` alone is
not NULL on a primary that went through crash recovery at its start: it stays at the last record that
recovery replayed (found on the stack's primary after an unclean stop: the session wait took it for a
standby and failed with "recovery is not in progress")."""


def session_wait_statement(wait: SessionWait) -> str:
    """A ``DO`` block that returns once this session's server has replayed ``wait.position``, else raises.

    It reads ``pg_last_wal_replay_lsn()`` every :data:`SESSION_POLL_SECONDS` (``pg_sleep``) for at most
    ``wait.timeout_seconds``, then raises, naming what the server replayed.  A server not in recovery
    (a primary) is refused at once, as the bootstrap refuses a "replica" that is not a standby, and so
    is a standby short of the position with replay paused (it would not get there).
    Every message starts with :data:`SESSION_WAIT_FAILED`.  The position is validated as an LSN and
    written back in its own form (hexadecimal digits and a slash), inside a quoted literal.
    """
    target = _literal(str(Lsn.parse(wait.position)))
    seconds = float(wait.timeout_seconds)
    if not seconds >= 0:
        raise SourceEngineError(f"a session wait of {wait.timeout_seconds!r} seconds")
    shown = f"{seconds:g}s"
    not_standby = _literal(
        f"{SESSION_WAIT_FAILED} this server is not a standby (no replay position): not a replica to read"
    )
    paused = _literal(f"{SESSION_WAIT_FAILED} this standby replayed %, and its WAL replay is paused")
    late = _literal(f"{SESSION_WAIT_FAILED} this standby replayed % in {shown}")
    return (
        "DO $cdc_lake_wait$ DECLARE "
        f"deadline timestamptz := clock_timestamp() + {seconds!r} * interval '1 second'; "
        "replayed pg_lsn; "
        "BEGIN LOOP "
        f"replayed := {_REPLAYED}; "
        f"IF replayed IS NULL THEN RAISE EXCEPTION {not_standby}; END IF; "
        f"EXIT WHEN replayed >= {target}::pg_lsn; "
        f"IF pg_is_wal_replay_paused() THEN RAISE EXCEPTION {paused}, replayed; END IF; "
        f"IF clock_timestamp() >= deadline THEN RAISE EXCEPTION {late}, replayed; END IF; "
        f"PERFORM pg_sleep({SESSION_POLL_SECONDS!r}); "
        "END LOOP; END $cdc_lake_wait$"
    )


def _literal(text: str) -> str:
    """``text`` as a standard SQL string literal (quotes doubled; the session has standard strings).

    Also refused: a dollar sign (the statement sits in a dollar-quoted body) and a question mark (a
    JDBC driver would take it for a parameter)."""
    if any(c in text for c in "$?\\"):
        raise SourceEngineError(f"{text!r} cannot be written into a session statement")
    return "'" + text.replace("'", "''") + "'"


def _kind(typtype: object, category: object) -> str:
    """``SourceColumn.kind`` of a ``pg_type.typtype`` (and ``typcategory``, 'A' for arrays)."""
    if str(typtype) == "b":
        return "array" if category == "A" else "base"
    return {"e": "enum", "r": "range"}.get(str(typtype), "other")


_COLUMNS_QUERY = """
select a.attname::text, t.typname::text, format_type(t.oid, m.typmod), not a.attnotnull,
       case when t.typname = 'numeric' and m.typmod >= 4 then ((m.typmod - 4) >> 16) & 65535 end,
       case when t.typname = 'numeric' and m.typmod >= 4
            then (((m.typmod - 4) & 2047) # 1024) - 1024 end,
       t.typtype::text, t.typcategory::text, e.typname::text, e.typtype::text
from pg_attribute a
join pg_type d on d.oid = a.atttypid
cross join lateral (
    select case when d.typtype = 'd' then d.typbasetype else d.oid end as oid,
           case when d.typtype = 'd' then d.typtypmod else a.atttypmod end as typmod
) m
join pg_type t on t.oid = m.oid
left join pg_type e on e.oid = t.typelem and t.typcategory = 'A'
where a.attrelid = %s and a.attnum > 0 and not a.attisdropped
order by a.attnum
"""
