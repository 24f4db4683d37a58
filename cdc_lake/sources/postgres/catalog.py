"""The Postgres catalog reads every role of the engine shares: tables, publications, the rewrite log.

Each function takes an open connection (:data:`~cdc_lake.sources.postgres.connection.Conn`) and
reads one kind of fact the preflight checks judge (:mod:`cdc_lake.sources.postgres.checks`) and the
capture setup and operations act on.  :data:`HEARTBEAT_TABLE` is the table every connector's
heartbeat writes and every publication holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import sql

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.postgres.checks import PgHeartbeatFacts, PgRewriteLogFacts, PgTableFacts
from cdc_lake.sources.postgres.connection import Conn
from cdc_lake.sources.postgres.rewrites import LOG_FACTS_QUERY, REWRITE_LOG, REWRITE_TRIGGER

HEARTBEAT_TABLE = "cdc_lake.heartbeat"
"""Written by every connector's heartbeat query (one row per connector) and in every publication."""


TABLES_QUERY = """
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
             order by a.attnum),
       (select coalesce(json_agg(u.columns), '[]') from (
            select array(select a.attname::text from unnest(i.indkey) with ordinality as k(attnum, ord)
                         join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
                         where k.ord <= i.indnkeyatts order by k.ord) as columns
            from pg_index i
            where i.indrelid = c.oid and i.indisunique and i.indisvalid and i.indpred is null
              and i.indexprs is null
              and not exists (select 1 from unnest(i.indkey) with ordinality as k(attnum, ord)
                              join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
                              where k.ord <= i.indnkeyatts and not a.attnotnull)) u)
from pg_class c join pg_namespace n on n.oid = c.relnamespace
where (n.nspname, c.relname) in (select * from unnest(%s::text[], %s::text[]))
"""


def split_name(qualified: str) -> tuple[str, str]:
    """``schema.table`` as (schema, table)."""
    schema, _, table = qualified.partition(".")
    return schema, table


def ident(qualified: str) -> sql.Identifier:
    """``schema.table`` as a quoted SQL identifier."""
    return sql.Identifier(*split_name(qualified))


def one_row(row: tuple[Any, ...] | None) -> tuple[Any, ...]:
    """The row a catalog query always returns; an error when it returned none."""
    if row is None:
        raise SourceEngineError("a catalog query returned no row")
    return row


def table_facts(conn: Conn, names: Sequence[str]) -> dict[str, PgTableFacts]:
    """Each of the tables ``names`` as the checks judge it (a table that does not exist has no kind)."""
    schemas, tables = zip(*(split_name(name) for name in names), strict=True) if names else ((), ())
    found: dict[str, PgTableFacts] = {}
    for row in conn.execute(TABLES_QUERY, (list(schemas), list(tables))).fetchall():
        (name, kind, identity, unlogged, can_select, owned, columns, primary_key, toastable, index, arrays,
         unique_keys) = row
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
            unique_keys=tuple(tuple(key) for key in unique_keys),
            toastable_arrays=tuple((str(column), str(element)) for column, element in arrays),
        )
    return {name: found.get(name, PgTableFacts(name=name)) for name in names}


def publication_tables(conn: Conn, publication: str) -> set[str] | None:
    """The tables of ``publication`` as ``schema.table``; None when it does not exist."""
    if conn.execute("select 1 from pg_publication where pubname = %s", (publication,)).fetchone() is None:
        return None
    rows = conn.execute(
        "select schemaname::text || '.' || tablename::text from pg_publication_tables where pubname = %s",
        (publication,),
    ).fetchall()
    return {str(row[0]) for row in rows}


def rewrite_log_facts(conn: Conn) -> PgRewriteLogFacts:
    """Whether the rewrite log and its enabled trigger exist, and the user may read the log."""
    schema, name = split_name(REWRITE_LOG)
    table, trigger, readable = one_row(
        conn.execute(LOG_FACTS_QUERY, (REWRITE_TRIGGER, schema, name)).fetchone()
    )
    return PgRewriteLogFacts(table_exists=bool(table), trigger_enabled=bool(trigger), can_read=bool(readable))


def heartbeat_facts(conn: Conn) -> PgHeartbeatFacts:
    """The heartbeat table: whether it and its schema exist, and what the user may do there."""
    schema, table = split_name(HEARTBEAT_TABLE)
    row = one_row(
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
