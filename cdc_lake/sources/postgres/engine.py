"""The Postgres engine: pgoutput logical decoding through one publication and one slot per connector.

Onboarding creates the heartbeat table and each connector's publication (filtered to its
tables); the connector creates its own slot when it first starts.  Tables join an existing
publication only after the connector's include list has them (see :meth:`PostgresEngine.publish`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import Any, ClassVar
from urllib.parse import quote as url_quote

import psycopg
from psycopg import sql

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.base import (
    Capture,
    CaptureLag,
    Change,
    ConnectorEndpoints,
    PreflightOptions,
    ReplicaDelay,
    SourceEngine,
)
from cdc_lake.sources.capabilities import TableRewrite
from cdc_lake.sources.checks import CheckResult
from cdc_lake.sources.connector import ConnectorParams, heartbeat_table_ddl
from cdc_lake.sources.positions import LogPosition, Lsn
from cdc_lake.sources.postgres import CAPABILITIES
from cdc_lake.sources.postgres.checks import (
    PgHeartbeatFacts,
    PgPublicationFacts,
    PgReplicaFacts,
    PgRewriteLogFacts,
    PgSlotFacts,
    PgTableFacts,
    PostgresFacts,
    check_tls,
    evaluate,
    identity_gap,
)
from cdc_lake.sources.postgres.rewrites import (
    DEFAULT_REWRITES_QUERY,
    INSTALL,
    LOG_FACTS_QUERY,
    LOG_VERSION_QUERY,
    REWRITE_LOG,
    REWRITE_TRIGGER,
    TABLE_REWRITES_QUERY,
    TABLE_START_QUERY,
    computed_default,
    one_line,
    rewrite_stop,
)
from cdc_lake.sources.postgres.settings import PostgresConnection, PostgresSource
from cdc_lake.sources.settings import Connection, Source, Table, engine_model
from cdc_lake.sources.snapshot import JdbcAccess, SourceColumn, TableShape

_Conn = psycopg.Connection[tuple[Any, ...]]

HEARTBEAT_TABLE = "cdc_lake.heartbeat"
"""Written by every connector's heartbeat query (one row per connector) and in every publication."""

PUBLISHED = "insert, update, delete, truncate"
"""What every publication publishes: a ``TRUNCATE`` too, which the connector (``skipped.operations``
``none``) sends as an ``op='t'`` event that stops its table (docs/applier.md, "Truncate policy"); without
it a truncate would leave the lake's rows in place, LIVE."""

_SETTINGS = ("wal_level", "max_replication_slots", "max_wal_senders", "max_slot_wal_keep_size")
_CONNECT_TIMEOUT = 5
_POLL_SECONDS = 0.5
_SLOT_RELEASE_SECONDS = 30.0

_TABLES_QUERY = """
select n.nspname || '.' || c.relname, c.relkind::text, c.relreplident::text, c.relpersistence = 'u',
       has_table_privilege(c.oid, 'SELECT'), pg_has_role(c.relowner, 'USAGE'),
       array(select a.attname::text from pg_attribute a
             where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped order by a.attnum),
       array(select a.attname::text from pg_index i
             cross join lateral unnest(i.indkey) with ordinality as k(attnum, ord)
             join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
             where i.indrelid = c.oid and i.indisprimary order by k.ord),
       array(select a.attname::text from pg_attribute a
             where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped and a.attstorage <> 'p'
             order by a.attnum),
       array(select a.attname::text from pg_index i
             cross join lateral unnest(i.indkey) with ordinality as k(attnum, ord)
             join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
             where i.indrelid = c.oid and i.indisreplident order by k.ord),
       array(select array[a.attname::text, e.typname::text] from pg_attribute a
             join pg_type d on d.oid = a.atttypid
             join pg_type t on t.oid = case when d.typtype = 'd' then d.typbasetype else d.oid end
             join pg_type e on e.oid = t.typelem
             where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped and a.attstorage <> 'p'
               and t.typcategory = 'A'
             order by a.attnum)
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where (n.nspname, c.relname) in (select * from unnest(%s::text[], %s::text[]))
"""


def _split(qualified: str) -> tuple[str, str]:
    schema, _, table = qualified.partition(".")
    return schema, table


def _ident(qualified: str) -> sql.Identifier:
    return sql.Identifier(*_split(qualified))


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


class PostgresEngine(SourceEngine):
    """A Postgres source: primary for CDC, streaming standby for bootstrap."""

    capabilities = CAPABILITIES
    ca_setting = "sslrootcert"
    primary_tls_settings = "primary.sslmode and primary.sslrootcert"
    primary_connection_fix = "check host, port, database, user and the password variable"
    position_type: ClassVar[type[LogPosition]] = Lsn

    def __init__(self, source: Source) -> None:
        super().__init__(source)
        self.settings = engine_model(source, PostgresSource)
        """The source as its engine's model: its slot, publication, interval and TLS settings."""
        self.database = source.primary.database or ""

    # Connections

    def address(self, connection: Connection) -> str:
        """Where ``connection`` points: host, port and database."""
        return f"{connection.host}:{connection.port}/{connection.database or self.database}"

    def _connect(self, role: str = "primary") -> AbstractContextManager[_Conn]:
        return self.opened(role, self._open, psycopg.Error, _first_line)

    def _open(self, connection: Connection) -> _Conn:
        password = connection.password.get_secret_value() if connection.password is not None else None
        libpq: dict[str, Any] = {
            "host": connection.host,
            "port": connection.port,
            "dbname": connection.database or self.database,
            "user": connection.user,
            "password": password,
            "connect_timeout": _CONNECT_TIMEOUT,
            "application_name": "cdc-lake",
            **engine_model(connection, PostgresConnection).tls_settings(),
        }
        return psycopg.connect(autocommit=True, **libpq)

    # Preflight

    def judge_primary(
        self, captures: Sequence[Capture], options: PreflightOptions
    ) -> tuple[str, list[CheckResult]]:
        """The Postgres checks, judged on the facts read from the primary and the replica."""
        facts = self.read_facts(captures)
        connected = f"{self.address(self.source.primary)} as {facts.user}"
        return connected, [check_tls(self.source), *evaluate(facts, captures, options)]

    def read_facts(self, captures: Sequence[Capture]) -> PostgresFacts:
        """Everything the checks judge, read from the primary and the replica."""
        tables = [table for capture in captures for table in capture.tables]
        slot_names = [c.slot_name for c in captures if c.slot_name]
        publication_names = [c.publication_name for c in captures if c.publication_name]
        with self._connect() as conn:
            settings: dict[Any, Any] = dict(
                conn.execute(
                    "select name, setting from pg_settings where name = any(%s)", (list(_SETTINGS),)
                ).fetchall()
            )
            user, superuser, replication, create_db = _one(
                conn.execute(
                    "select current_user::text, r.rolsuper, r.rolreplication or "
                    "(case when exists (select 1 from pg_roles where rolname = 'rds_replication') "
                    "then pg_has_role('rds_replication', 'MEMBER') else false end), "
                    "has_database_privilege(current_database(), 'CREATE') "
                    "from pg_roles r where r.rolname = current_user"
                ).fetchone()
            )
            slots_used = _one(conn.execute("select count(*) from pg_replication_slots").fetchone())[0]
            senders_used = _one(
                conn.execute(
                    "select count(*) from pg_stat_activity where backend_type = 'walsender'"
                ).fetchone()
            )[0]
            primary_lsn = str(_one(conn.execute("select pg_current_wal_lsn()::text").fetchone())[0])
            facts = PostgresFacts(
                database=self.database,
                user=str(user),
                settings={str(k): str(v) for k, v in settings.items()},
                slots_used=int(str(slots_used)),
                wal_senders_used=int(str(senders_used)),
                superuser=bool(superuser),
                replication_role=bool(replication),
                can_create_in_database=bool(create_db),
                heartbeat=self._heartbeat_facts(conn),
                rewrite_log=_rewrite_log_facts(conn),
                tables=_table_facts(conn, [table.name for table in tables]),
                replica=PgReplicaFacts(configured=False),
                slots=_slot_facts(conn, slot_names),
                publications=_publication_facts(conn, publication_names),
            )
        return replace(facts, replica=self._replica_facts(primary_lsn))

    def _heartbeat_facts(self, conn: _Conn) -> PgHeartbeatFacts:
        schema, table = _split(HEARTBEAT_TABLE)
        row = _one(
            conn.execute(
                "select n.oid is not null, coalesce(has_schema_privilege(n.oid, 'CREATE'), false), "
                "c.oid is not null, coalesce(has_table_privilege(c.oid, 'INSERT') "
                "and has_table_privilege(c.oid, 'UPDATE'), false) "
                "from (select 1) one left join pg_namespace n on n.nspname = %s "
                "left join pg_class c on c.relnamespace = n.oid and c.relname = %s",
                (schema, table),
            ).fetchone()
        )
        return PgHeartbeatFacts(
            name=HEARTBEAT_TABLE,
            schema_exists=bool(row[0]),
            can_create_in_schema=bool(row[1]),
            exists=bool(row[2]),
            can_write=bool(row[3]),
        )

    def _replica_facts(self, primary_lsn: str) -> PgReplicaFacts:
        replica = self.source.replica
        if replica is None:
            return PgReplicaFacts(configured=False)
        address = f"{replica.host}:{replica.port}"
        try:
            with self._connect("replica") as conn:
                in_recovery, receive_lsn, replay_lsn, paused, lag = _one(
                    conn.execute(
                        "select pg_is_in_recovery(), pg_last_wal_receive_lsn()::text, "
                        "pg_last_wal_replay_lsn()::text, "
                        "case when pg_is_in_recovery() then pg_is_wal_replay_paused() else false end, "
                        "pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_replay_lsn())::bigint",
                        (primary_lsn,),
                    ).fetchone()
                )
        except SourceEngineError as exc:
            return PgReplicaFacts(configured=True, address=address, error=str(exc).split(": ", 2)[-1])
        return PgReplicaFacts(
            configured=True,
            address=address,
            in_recovery=bool(in_recovery),
            receive_lsn=None if receive_lsn is None else str(receive_lsn),
            replay_lsn=None if replay_lsn is None else str(replay_lsn),
            replay_paused=bool(paused),
            lag_bytes=None if lag is None else max(0, int(str(lag))),
        )

    # Database objects

    def planned_changes(self, capture: Capture, options: PreflightOptions) -> list[str]:
        """The heartbeat table, REPLICA IDENTITY, and publication statements this capture would need."""
        with self._connect() as conn:
            changes = []
            if not self._heartbeat_facts(conn).exists:
                changes.append(f"create heartbeat table {HEARTBEAT_TABLE}")
            if _installs_rewrite_log(conn):
                changes.append(f"create the table rewrite log {REWRITE_LOG} and its event trigger")
            if options.replica_identity_full:
                changes += [
                    f"ALTER TABLE {name} REPLICA IDENTITY FULL"
                    for name in _needs_full_identity(conn, capture.tables)
                ]
            publication = capture.publication_name or ""
            current = _publication_tables(conn, publication)
            if current is None:
                listed = ", ".join([HEARTBEAT_TABLE, *capture.table_names])
                changes.append(f"CREATE PUBLICATION {publication} FOR TABLE {listed}")
            else:
                changes += _publication_diff_text(publication, current, capture)
                if not _publishes_truncates(conn, publication):
                    changes.append(f"ALTER PUBLICATION {publication} SET (publish = '{PUBLISHED}')")
        return changes

    def prepare(self, capture: Capture, options: PreflightOptions) -> list[Change]:
        """Create the heartbeat table, set REPLICA IDENTITY FULL if asked, and create the publication."""
        changes: list[Change] = []
        publication = capture.publication_name or ""
        with self._connect() as conn:
            if not self._heartbeat_facts(conn).exists:
                schema, _ = _split(HEARTBEAT_TABLE)
                conn.execute(sql.SQL("create schema if not exists {}").format(sql.Identifier(schema)))
                conn.execute(sql.SQL(heartbeat_table_ddl(HEARTBEAT_TABLE)))  # type: ignore[arg-type]
                changes.append(Change(f"created heartbeat table {HEARTBEAT_TABLE}"))
            if _installs_rewrite_log(conn):
                with conn.transaction():
                    for statement in INSTALL:
                        conn.execute(statement)  # type: ignore[arg-type]
                changes.append(Change(f"created the table rewrite log {REWRITE_LOG} and its event trigger"))
            if options.replica_identity_full:
                for name in _needs_full_identity(conn, capture.tables):
                    conn.execute(sql.SQL("alter table {} replica identity full").format(_ident(name)))
                    changes.append(Change(f"set REPLICA IDENTITY FULL on {name}"))
            if _publication_tables(conn, publication) is None:
                listed = sql.SQL(", ").join(_ident(t) for t in [HEARTBEAT_TABLE, *capture.table_names])
                conn.execute(
                    sql.SQL("create publication {} for table {} with (publish = {})").format(
                        sql.Identifier(publication), listed, sql.Literal(PUBLISHED)
                    )
                )
                changes.append(
                    Change(
                        f"created publication {publication} ({len(capture.tables)} tables)",
                        undo=lambda: self._drop_publication(publication),
                    )
                )
        return changes

    def publish(self, capture: Capture) -> list[Change]:
        """Add the capture's missing tables to its publication and drop those it no longer captures."""
        publication = capture.publication_name or ""
        changes: list[Change] = []
        with self._connect() as conn:
            current = _publication_tables(conn, publication)
            if current is None:
                raise SourceEngineError(
                    f"source {self.source.name}: publication {publication} disappeared during onboarding"
                )
            wanted = {HEARTBEAT_TABLE, *capture.table_names}
            added = sorted(wanted - current)
            dropped = sorted(current - wanted)
            if added:
                self._alter_publication(conn, publication, "add", added)
                changes.append(
                    Change(
                        f"added {', '.join(added)} to publication {publication}",
                        undo=lambda: self._alter_publication_now(publication, "drop", added),
                    )
                )
            if dropped:
                self._alter_publication(conn, publication, "drop", dropped)
                changes.append(
                    Change(
                        f"dropped {', '.join(dropped)} from publication {publication}",
                        undo=lambda: self._alter_publication_now(publication, "add", dropped),
                    )
                )
            if not _publishes_truncates(conn, publication):
                conn.execute(
                    sql.SQL("alter publication {} set (publish = {})").format(
                        sql.Identifier(publication), sql.Literal(PUBLISHED)
                    )
                )
                changes.append(Change(f"publication {publication} publishes truncates"))
        return changes

    def _alter_publication(self, conn: _Conn, publication: str, verb: str, tables: list[str]) -> None:
        statement = (
            "alter publication {} add table {}" if verb == "add" else "alter publication {} drop table {}"
        )
        conn.execute(
            sql.SQL(statement).format(  # type: ignore[arg-type]
                sql.Identifier(publication), sql.SQL(", ").join(_ident(t) for t in tables)
            )
        )

    def _alter_publication_now(self, publication: str, verb: str, tables: list[str]) -> str:
        with self._connect() as conn:
            self._alter_publication(conn, publication, verb, tables)
        done = "added {} to" if verb == "add" else "dropped {} from"
        return f"{done.format(', '.join(tables))} publication {publication}"

    def _drop_publication(self, publication: str) -> str:
        with self._connect() as conn:
            conn.execute(sql.SQL("drop publication if exists {}").format(sql.Identifier(publication)))
        return f"dropped publication {publication}"

    def release(
        self, slot_name: str | None, publication_name: str | None, drop_slot: bool
    ) -> tuple[list[str], list[str]]:
        """Drop the slot (waiting for its walsender to exit) and the publication, or keep both.

        A kept slot keeps its publication too: decoding the slot's retained WAL later needs the
        publication as it was then, so a re-created one could not serve it.  Returns what was
        done and warnings (a kept slot holds WAL until it is dropped).
        """
        done: list[str] = []
        warnings: list[str] = []
        slot_present = bool(slot_name) and self.slot_exists(slot_name or "")
        if slot_present and not drop_slot:
            also = f" and publication {publication_name}" if publication_name else ""
            warnings.append(
                f"replication slot {slot_name}{also} kept: the slot holds WAL on the primary until dropped, "
                f"and onboard resumes from it (offboard with --drop-slot, "
                f"or SELECT pg_drop_replication_slot('{slot_name}'))"
            )
            return done, warnings
        if slot_present:
            done.append(self._drop_slot(slot_name or ""))
        if publication_name:
            with self._connect() as conn:
                exists = _publication_tables(conn, publication_name) is not None
            if exists:
                done.append(self._drop_publication(publication_name))
        return done, warnings

    def _drop_slot(self, slot_name: str) -> str:
        deadline = time.monotonic() + _SLOT_RELEASE_SECONDS
        with self._connect() as conn:
            while True:
                row = conn.execute(
                    "select active from pg_replication_slots where slot_name = %s", (slot_name,)
                ).fetchone()
                if row is None:
                    return f"replication slot {slot_name} was already gone"
                if not row[0]:
                    conn.execute("select pg_drop_replication_slot(%s)", (slot_name,))
                    return f"dropped replication slot {slot_name}"
                if time.monotonic() > deadline:
                    raise SourceEngineError(
                        f"source {self.source.name}: replication slot {slot_name} still in use after "
                        f"{_SLOT_RELEASE_SECONDS:.0f}s; stop its client and drop it"
                    )
                time.sleep(_POLL_SECONDS)

    def slot_exists(self, slot_name: str) -> bool:
        """Whether a replication slot called ``slot_name`` exists on the primary."""
        with self._connect() as conn:
            row = conn.execute(
                "select 1 from pg_replication_slots where slot_name = %s", (slot_name,)
            ).fetchone()
        return row is not None

    def engine_connector_params(
        self, shared: ConnectorParams, capture: Capture, endpoints: ConnectorEndpoints
    ) -> ConnectorParams:
        """The Postgres connector's database, slot, publication, heartbeat table, TLS and intervals."""
        primary = self.settings.primary
        return replace(
            shared,
            database=self.database,
            interval_handling=self.settings.interval_handling,
            slot_name=capture.slot_name,
            publication_name=capture.publication_name,
            heartbeat_table=HEARTBEAT_TABLE,
            database_settings={f"database.{key}": value for key, value in primary.tls_settings().items()},
        )

    # Positions

    def current_position(self) -> str:
        """The primary's current WAL write position (an LSN such as ``0/16B3748``)."""
        with self._connect() as conn:
            return str(_one(conn.execute("select pg_current_wal_lsn()::text").fetchone())[0])

    def replica_position(self) -> str:
        """The last WAL position the replica has replayed."""
        with self._connect("replica") as conn:
            value = _one(conn.execute("select pg_last_wal_replay_lsn()::text").fetchone())[0]
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
                reached, replayed = _one(
                    conn.execute(
                        "select pg_wal_lsn_diff(pg_last_wal_replay_lsn(), %s::pg_lsn) >= 0, "
                        "pg_last_wal_replay_lsn()::text",
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
                time.sleep(_POLL_SECONDS)

    # Bootstrap reads (see cdc_lake.sources.snapshot)

    row_comparisons = True

    def quote_identifier(self, name: str) -> str:
        """``name`` as a Postgres identifier in double quotes."""
        return '"' + name.replace('"', '""') + '"'

    def quote_table(self, qualified: str) -> str:
        """``schema.table`` as a quoted Postgres table reference."""
        schema, table = _split(qualified)
        return f"{self.quote_identifier(schema)}.{self.quote_identifier(table)}"

    def jdbc_access(self, role: str) -> JdbcAccess:
        """JDBC access to ``role`` with a read-only, UTC, ISO-formatted session."""
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
        return JdbcAccess(url, properties, session_init)

    def table_shape(self, table: str, role: str) -> TableShape:
        """Columns (numeric precision and scale decoded from the type modifier), key and size of ``table``."""
        schema, name = _split(table)
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
                counted = conn.execute(sql.SQL("select count(*) from {}").format(_ident(table))).fetchone()
                rows = int(_one(counted)[0])
        return TableShape(table, tuple(columns), primary_key, rows, int(size))

    def column_defaults(self, table: str, columns: Sequence[str], role: str) -> dict[str, str | None]:
        """The default expression of ``pg_attrdef`` (a generated column's too), ``generated as identity``
        for an identity column, the value ``pg_attribute.attmissingval`` keeps for the rows that
        predate a column added with a default since dropped, or, for a volatile default since dropped
        (no ``attmissingval``), the statement the rewrite log kept (:func:`computed_default`)."""
        schema, name = _split(table)
        with self._connect(role) as conn:
            rows = conn.execute(_DEFAULTS_QUERY, (schema, name, list(columns))).fetchall()
            logged = _rewrite_log_facts(conn).installed
            computed = [
                (int(log_id), str(statement))
                for log_id, statement in (
                    conn.execute(DEFAULT_REWRITES_QUERY, {"schema": schema, "table": name}).fetchall()
                    if logged
                    else []
                )
            ]
        found: dict[str, str | None] = {}
        for column, default, identity, generated, missing in rows:
            if default is not None:
                found[str(column)] = f"generated as ({default})" if generated else str(default)
            elif identity:
                found[str(column)] = "generated as identity"
            elif missing is not None:
                found[str(column)] = f"{missing} (kept for the existing rows)"
            else:
                found[str(column)] = computed_default(str(column), computed)
        return found

    def rewrite_log_start(self, table: str) -> int | None:
        """One past the newest logged rewrite of ``table`` on the primary; None when the log is missing."""
        schema, name = _split(table)
        with self._connect() as conn:
            if not _rewrite_log_facts(conn).installed:
                return None
            start = conn.execute(TABLE_START_QUERY, {"schema": schema, "table": name}).fetchone()
            return int(str(_one(start)[0]))

    def rewrite_log_version(self) -> tuple[int, int] | None:
        """The primary's rewrite log as (newest id, rows) (read on the primary: a rewrite that committed
        before a change a batch holds is visible there); None when the log or its trigger is missing."""
        with self._connect() as conn:
            if not _rewrite_log_facts(conn).installed:
                return None
            newest, rows = _one(conn.execute(LOG_VERSION_QUERY).fetchone())
            return int(str(newest)), int(str(rows))

    def table_rewrites(self, table: str, start: int) -> list[TableRewrite]:
        """The primary's logged rewrites of ``table`` from id ``start``, judged by :func:`rewrite_stop`."""
        schema, name = _split(table)
        with self._connect() as conn:
            rows = conn.execute(
                TABLE_REWRITES_QUERY, {"schema": schema, "table": name, "start": start}
            ).fetchall()
        return [
            TableRewrite(int(log_id), one_line(str(statement)), rewrite_stop(int(reason), str(statement)))
            for log_id, reason, statement in rows
        ]

    def update_may_omit_old_key(self, table: str, key: Sequence[str]) -> bool:
        """True when ``table``'s replica identity is USING INDEX over exactly ``key`` on the primary now:
        pgoutput then logs the old key only when it changes.  FULL logs every old row; DEFAULT (or an
        index over other columns) with a configured key other than the primary key never logs it, which
        onboarding refuses and an update without it stops the table."""
        with self._connect() as conn:
            facts = _table_facts(conn, [table])[table]
        return facts.replica_identity == "i" and set(facts.identity_index) == set(key)

    def replica_evaluates(self, default: str) -> bool:
        """Never: a streaming replica replays the primary's WAL, the rows the primary wrote included."""
        return False

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
            literals, _ident(table), sample, sql.SQL(", ").join(columns)
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
            in_recovery, replayed, paused = _one(
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
            row = _one(
                conn.execute("select (extract(epoch from clock_timestamp()) * 1000)::bigint").fetchone()
            )
        return int(row[0])

    def replica_replay_time_ms(self) -> int | None:
        """Commit time of the last transaction the standby replayed (None before the first)."""
        with self._connect("replica") as conn:
            row = _one(
                conn.execute(
                    "select (extract(epoch from pg_last_xact_replay_timestamp()) * 1000)::bigint"
                ).fetchone()
            )
        return None if row[0] is None else int(row[0])

    def replica_lag(self, position: str) -> str:
        """Bytes of WAL between the standby's replay position and ``position``, and its replay age."""
        with self._connect("replica") as conn:
            replayed, behind, age = _one(
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

    # Lag (cdc-lake lag, metrics)

    def capture_lag(
        self, captures: Sequence[Capture], offsets: Mapping[str, Mapping[str, object]]
    ) -> list[CaptureLag]:
        """Each capture's slot: WAL it retains and has not confirmed, ``active``, ``wal_status``."""
        slots = [capture.slot_name for capture in captures if capture.slot_name]
        with self._connect() as conn:
            rows = conn.execute(_SLOT_LAG_QUERY, (slots,)).fetchall()
            primary = str(_one(conn.execute("select pg_current_wal_lsn()::text").fetchone())[0])
        found = {str(row[0]): row for row in rows}
        lags = []
        for capture in captures:
            row = found.get(capture.slot_name or "")
            if row is None:
                lags.append(
                    CaptureLag(capture.connector, "missing", slot=capture.slot_name, primary_position=primary)
                )
                continue
            _, active, wal_status, safe, retained, unconfirmed, confirmed = row
            lags.append(
                CaptureLag(
                    capture.connector,
                    str(wal_status or "lost"),
                    retained_bytes=None if retained is None else max(0, int(retained)),
                    unconfirmed_bytes=None if unconfirmed is None else max(0, int(unconfirmed)),
                    slot=capture.slot_name,
                    active=bool(active),
                    safe_bytes=None if safe is None else int(safe),
                    position=None if confirmed is None else str(confirmed),
                    primary_position=primary,
                )
            )
        return lags

    def replica_delay(self) -> ReplicaDelay:
        """WAL bytes between the primary's position and the standby's replay, and the replay's age.

        The age counts only while the standby has received WAL it has not replayed: an idle primary
        is not a lagging replica.
        """
        primary = self.current_position()
        with self._connect("replica") as conn:
            replayed, behind, pending, age, paused = _one(
                conn.execute(
                    "select pg_last_wal_replay_lsn()::text, "
                    "pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_replay_lsn())::bigint, "
                    "pg_last_wal_receive_lsn() is distinct from pg_last_wal_replay_lsn(), "
                    "extract(epoch from clock_timestamp() - pg_last_xact_replay_timestamp())::float8, "
                    "case when pg_is_in_recovery() then pg_is_wal_replay_paused() else false end",
                    (primary,),
                ).fetchone()
            )
        if replayed is None:
            raise SourceEngineError(
                f"source {self.source.name}: the replica is not a standby (no replay LSN)"
            )
        bytes_behind = max(0, int(behind or 0))
        seconds = float(age) if (pending or bytes_behind) and age is not None else 0.0
        return ReplicaDelay(bytes_behind, max(0.0, seconds), not paused, str(replayed))


_SLOT_LAG_QUERY = """
select slot_name::text, active, wal_status, safe_wal_size,
       pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint,
       pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint,
       confirmed_flush_lsn::text
from pg_replication_slots where slot_name = any(%s)
"""


# Below this many rows (by the statistics) a table is counted exactly when planning its bootstrap.
_EXACT_COUNT_BELOW = 100_000


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


_DEFAULTS_QUERY = """
select a.attname::text, pg_get_expr(d.adbin, d.adrelid), nullif(a.attidentity::text, ''),
       nullif(a.attgenerated::text, ''), case when a.atthasmissing then a.attmissingval::text end
from pg_attribute a
join pg_class c on c.oid = a.attrelid
join pg_namespace n on n.oid = c.relnamespace
left join pg_attrdef d on d.adrelid = a.attrelid and d.adnum = a.attnum
where n.nspname = %s and c.relname = %s and a.attname = any(%s) and a.attnum > 0 and not a.attisdropped
"""


def _one(row: tuple[Any, ...] | None) -> tuple[Any, ...]:
    if row is None:
        raise SourceEngineError("a catalog query returned no row")
    return row


def _table_facts(conn: _Conn, names: Sequence[str]) -> dict[str, PgTableFacts]:
    schemas, tables = zip(*(_split(name) for name in names), strict=True) if names else ((), ())
    found: dict[str, PgTableFacts] = {}
    for row in conn.execute(_TABLES_QUERY, (list(schemas), list(tables))).fetchall():
        name, kind, identity, unlogged, can_select, owned, columns, primary_key, toastable, index, arrays = (
            row
        )
        found[str(name)] = PgTableFacts(
            name=str(name),
            kind=str(kind),
            unlogged=bool(unlogged),
            replica_identity=str(identity),
            can_select=bool(can_select),
            owned=bool(owned),
            columns=tuple(columns),
            primary_key=tuple(primary_key),
            toastable=tuple(toastable),
            identity_index=tuple(index),
            toastable_arrays=tuple((str(column), str(element)) for column, element in arrays),
        )
    return {name: found.get(name, PgTableFacts(name=name)) for name in names}


def _needs_full_identity(conn: _Conn, tables: Sequence[Table]) -> list[str]:
    """Tables whose identity leaves an update or delete without the configured key, or TOAST values out."""
    facts = _table_facts(conn, [table.name for table in tables])
    keys = {table.name: tuple(table.key or ()) for table in tables}
    return [
        name
        for name, table in facts.items()
        if table.kind is not None and identity_gap(table, keys[name]) is not None
    ]


def _slot_facts(conn: _Conn, names: Sequence[str]) -> dict[str, PgSlotFacts]:
    rows = conn.execute(
        "select slot_name::text, slot_type, plugin::text, database::text, active "
        "from pg_replication_slots where slot_name = any(%s)",
        (list(names),),
    ).fetchall()
    return {
        str(name): PgSlotFacts(
            name=str(name),
            slot_type=str(slot_type),
            plugin=None if plugin is None else str(plugin),
            database=None if database is None else str(database),
            active=bool(active),
        )
        for name, slot_type, plugin, database, active in rows
    }


def _publication_facts(conn: _Conn, names: Sequence[str]) -> dict[str, PgPublicationFacts]:
    rows = conn.execute(
        "select pubname::text, puballtables, pubinsert, pubupdate, pubdelete, pg_has_role(pubowner, 'USAGE') "
        "from pg_publication where pubname = any(%s)",
        (list(names),),
    ).fetchall()
    facts = {}
    for name, all_tables, inserts, updates, deletes, owned in rows:
        publishes = tuple(
            verb for verb, on in (("insert", inserts), ("update", updates), ("delete", deletes)) if on
        )
        facts[str(name)] = PgPublicationFacts(
            name=str(name),
            all_tables=bool(all_tables),
            publishes=publishes,
            tables=frozenset(_publication_tables(conn, str(name)) or ()),
            owned=bool(owned),
        )
    return facts


def _publishes_truncates(conn: _Conn, publication: str) -> bool:
    """Whether ``publication`` publishes truncates (publications created before it did do not)."""
    row = conn.execute("select pubtruncate from pg_publication where pubname = %s", (publication,)).fetchone()
    return row is not None and bool(row[0])


def _publication_tables(conn: _Conn, publication: str) -> set[str] | None:
    """The tables of ``publication`` as ``schema.table``; None when it does not exist."""
    if conn.execute("select 1 from pg_publication where pubname = %s", (publication,)).fetchone() is None:
        return None
    rows = conn.execute(
        "select schemaname::text || '.' || tablename::text from pg_publication_tables where pubname = %s",
        (publication,),
    ).fetchall()
    return {str(row[0]) for row in rows}


def _publication_diff_text(publication: str, current: set[str], capture: Capture) -> list[str]:
    wanted = {HEARTBEAT_TABLE, *capture.table_names}
    changes = []
    added = sorted(wanted - current)
    dropped = sorted(current - wanted)
    if added:
        changes.append(
            f"ALTER PUBLICATION {publication} ADD TABLE {', '.join(added)} (after the connector streams)"
        )
    if dropped:
        changes.append(f"ALTER PUBLICATION {publication} DROP TABLE {', '.join(dropped)}")
    return changes


def _rewrite_log_facts(conn: _Conn) -> PgRewriteLogFacts:
    """Whether the rewrite log and its enabled trigger exist, and the user may read the log."""
    schema, name = _split(REWRITE_LOG)
    table, trigger, readable = _one(conn.execute(LOG_FACTS_QUERY, (REWRITE_TRIGGER, schema, name)).fetchone())
    return PgRewriteLogFacts(table_exists=bool(table), trigger_enabled=bool(trigger), can_read=bool(readable))


def _installs_rewrite_log(conn: _Conn) -> bool:
    """Whether onboarding creates the rewrite log here: it or its trigger is missing and the user is a
    superuser (event triggers need one; otherwise the preflight warned)."""
    facts = _rewrite_log_facts(conn)
    if facts.table_exists and facts.trigger_enabled:
        return False
    superuser = conn.execute("select rolsuper from pg_roles where rolname = current_user").fetchone()
    return bool(_one(superuser)[0])
