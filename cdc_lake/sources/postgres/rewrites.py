"""Postgres table rewrites: the DDL that changes existing rows without a row event, logged by a trigger.

``ALTER TABLE ... ALTER COLUMN c TYPE t USING expr`` rewrites every row with ``expr`` (``USING c * 2``
on an ``int`` column keeps its type, so the writer schema does not change at all), ``SET UNLOGGED``
takes the table out of the WAL: logical decoding emits none of it, so the lake would keep the old
values (and miss every later change), LIVE.  Postgres announces each
rewrite to ``table_rewrite`` event triggers (before it runs, holding the table's ACCESS EXCLUSIVE
lock) with the table and a reason bit set.  Onboarding installs (as a superuser: event triggers need
one) a trigger that appends the table, the reason and the client's statement to
:data:`REWRITE_LOG`, in the DDL's own transaction: the row commits with the rewrite or not at all.

Why ids order one table's rewrites: the id is drawn while the rewrite holds the table's ACCESS
EXCLUSIVE lock, which it keeps until it commits, so a later rewrite of the same table draws a higher
id, after the earlier one committed (ids of different tables interleave; nothing here compares them).
A table's check therefore starts at one plus the highest id of its own committed rewrites when its
bootstrap began (those are the copy's) and reads its rows from there.

Which rewrites stop the table (:func:`rewrite_stop`): a persistence change (the table leaves or
enters the WAL), and every column-type rewrite except one the statement shows to be a plain
``ALTER TABLE`` whose every ``TYPE`` is a value-preserving target (:data:`_KEEPS_VALUES`: integer and
float widths, ``numeric``, ``text``, ``varchar``) with no ``USING``.  ``current_query()`` is the
client's top-level statement: DDL run inside a function (``SELECT migrate()``) shows no ``USING``,
and an assignment cast can change every value while the lake's type stays the same (``timestamp(0)``
rounds, ``jsonb`` reorders keys), so anything else stops: a false stop asks for a re-bootstrap, a
missed one leaves the lake wrong.  Of the allowed targets, a narrowing reaches the writer schema and
the schema-change rules stop it.  A default computed per row (``ADD COLUMN ... DEFAULT
gen_random_uuid()``, an identity or stored generated column) fills only the new column, which the
writer schema shows with its first change and the schema-change rules stop on ("added with a
default"; a frozen table ignores it, as it should); an access-method change keeps the values.

The trigger logs the table's OID too (a table renamed away, rewritten and renamed back in one
transaction is found by it) and the statement with its string literals blanked (``'...'``): the log is
readable by the capture user and a stop quotes it into the state store and the logs.  It is created
``ENABLE ALWAYS``, so sessions with ``session_replication_role = replica`` (pglogical, some migration
tools) fire it too.
"""

from __future__ import annotations

import re
from typing import Final

REWRITE_LOG: Final = "cdc_lake.table_rewrites"
"""Where the trigger logs every table rewrite of the source database."""

REWRITE_TRIGGER: Final = "cdc_lake_table_rewrite"
"""The ``table_rewrite`` event trigger's name."""

_PERSISTENCE, _COLUMN_TYPE = 1, 4
"""``pg_event_trigger_table_rewrite_reason()`` bits (``AT_REWRITE_*`` in Postgres' ``event_trigger.h``;
2 is a default computed per row, 8 an access-method change: neither stops)."""

_USING = re.compile(r"\busing\b", re.IGNORECASE)
_PLAIN_ALTER = re.compile(r"^\s*alter\s+table\b[^;]*;?\s*$", re.IGNORECASE | re.DOTALL)
_TYPE_TARGET = re.compile(
    r"\btype\s+(double\s+precision|character\s+varying|[a-z_][a-z0-9_.\"]*)", re.IGNORECASE
)
_KEEPS_VALUES: Final = frozenset({
    "smallint", "int2", "integer", "int", "int4", "bigint", "int8", "real", "float4", "double precision",
    "float8", "numeric", "decimal", "text", "varchar", "character varying",
})
"""Type-change targets whose assignment cast keeps every value of a narrower or equal source type (a
narrowing among them reaches the writer schema and stops there)."""
_STATEMENT_CHARS = 300
"""How much of a statement a stop quotes (the log keeps all of it)."""

_OWNED_BY_SUPERUSERS: Final = """do $guard$ begin
    if exists (select 1 from pg_namespace n join pg_roles r on r.oid = n.nspowner
               where n.nspname = 'cdc_lake' and not r.rolsuper)
       or exists (select 1 from pg_class c join pg_namespace n on n.oid = c.relnamespace
                  join pg_roles r on r.oid = c.relowner
                  where n.nspname = 'cdc_lake' and c.relname = 'table_rewrites' and not r.rolsuper) then
        raise exception 'schema cdc_lake or cdc_lake.table_rewrites is owned by a role that is no '
            'superuser: the rewrite log''s security definer function would write where that role '
            'decides; ALTER SCHEMA cdc_lake OWNER TO a superuser (and the table) first';
    end if;
end $guard$"""
"""The log's function runs as its owner, a superuser: the schema and table it writes must not be a
lesser role's (which could put a trigger of its own there), so installing stops when they are."""

INSTALL: Final = (
    "create schema if not exists cdc_lake",
    _OWNED_BY_SUPERUSERS,
    f"""create table if not exists {REWRITE_LOG} (
    id bigserial primary key,
    relid oid not null,
    schema_name text not null,
    table_name text not null,
    reason integer not null,
    statement text not null,
    recorded_at timestamptz not null default now()
)""",
    f"create index if not exists table_rewrites_by_table on {REWRITE_LOG} (schema_name, table_name, id)",
    f"""create or replace function cdc_lake.record_table_rewrite() returns event_trigger
language plpgsql security definer set search_path = pg_catalog, pg_temp as $fn$
begin
    insert into {REWRITE_LOG} (relid, schema_name, table_name, reason, statement)
    select c.oid, n.nspname, c.relname, pg_event_trigger_table_rewrite_reason(),
           regexp_replace(coalesce(current_query(), ''), '''([^'']|'''')*''', '''...''', 'g')
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.oid = pg_event_trigger_table_rewrite_oid();
end
$fn$""",
    f"drop event trigger if exists {REWRITE_TRIGGER}",
    f"create event trigger {REWRITE_TRIGGER} on table_rewrite "
    "execute function cdc_lake.record_table_rewrite()",
    f"alter event trigger {REWRITE_TRIGGER} enable always",
)
"""What onboarding runs on the primary (as a superuser) when the log or its trigger is missing; the
same statements, in order, are what a DBA runs by hand (docs/schema-changes.md)."""

LOG_FACTS_QUERY: Final = (
    "select c.oid is not null, exists (select 1 from pg_event_trigger "
    "where evtname = %s and evtevent = 'table_rewrite' and evtenabled = 'A'), "
    "coalesce(has_schema_privilege(n.oid, 'USAGE') and has_table_privilege(c.oid, 'SELECT'), false) "
    "from (select 1) one left join pg_namespace n on n.nspname = %s "
    "left join pg_class c on c.relnamespace = n.oid and c.relname = %s"
)
"""Whether the log table exists, its trigger is enabled, and the user may read the log (catalog joins
by OID: a name lookup would fail for a user without USAGE on the schema)."""

LOG_VERSION_QUERY: Final = f"select coalesce(max(id), 0), count(*) from {REWRITE_LOG}"

_OF_TABLE: Final = (
    "((schema_name = %(schema)s and table_name = %(table)s) or relid = (select c.oid from pg_class c "
    "join pg_namespace n on n.oid = c.relnamespace where n.nspname = %(schema)s and c.relname = %(table)s))"
)
"""A table's rows of the log: by its name at rewrite time, or by its OID now."""

TABLE_START_QUERY: Final = f"select coalesce(max(id), 0) + 1 from {REWRITE_LOG} where {_OF_TABLE}"

DEFAULT_REWRITES_QUERY: Final = (
    f"select id, statement from {REWRITE_LOG} where {_OF_TABLE} and reason & 2 <> 0 order by id"
)
"""A table's rewrites that computed a default per row."""

TABLE_REWRITES_QUERY: Final = (
    f"select id, reason, statement from {REWRITE_LOG} where {_OF_TABLE} and id >= %(start)s order by id"
)


def rewrite_stop(reason: int, statement: str) -> str | None:
    """Why a rewrite with ``reason`` bits made by ``statement`` changed values no row event shows
    (the stop's text), or None when it kept them."""
    causes = []
    if reason & _PERSISTENCE:
        causes.append("its persistence changed (an UNLOGGED table is not logically decoded)")
    if reason & _COLUMN_TYPE and not _keeps_values(statement):
        causes.append(
            "a column's values were rewritten by a USING expression"
            if _USING.search(statement)
            else "a column's type was changed by a statement that does not show the values are kept"
        )
    if not causes:
        return None
    return f"{' and '.join(causes)}: {one_line(statement)}"


def _keeps_values(statement: str) -> bool:
    """Whether ``statement`` is one plain ``ALTER TABLE`` without ``USING`` whose every ``TYPE`` target
    keeps the values (:data:`_KEEPS_VALUES`)."""
    if not _PLAIN_ALTER.match(statement) or _USING.search(statement):
        return False
    targets = [" ".join(t.lower().replace('"', "").split()) for t in _TYPE_TARGET.findall(statement)]
    return bool(targets) and all(t.rpartition(".")[2] in _KEEPS_VALUES for t in targets)


def computed_default(column: str, rewrites: list[tuple[int, str]]) -> str | None:
    """How ``column`` got a default computed for every existing row, from a table's logged rewrites that
    computed one (``(id, statement)``): the first statement adding the column; None when none did.

    The applier asks the catalog for the default of a column a writer schema adds; a volatile default
    dropped since (``ADD COLUMN tag uuid DEFAULT gen_random_uuid(); ALTER ... DROP DEFAULT``) leaves none
    in the catalog and no ``attmissingval`` (a stable default such as ``now()`` is evaluated once and
    kept there), while every row that predates the DDL holds a value of its own."""
    adds = re.compile(
        rf'\badd\s+(?:column\s+)?(?:if\s+not\s+exists\s+)?(?:"{re.escape(column)}"|{re.escape(column)}\b)',
        re.IGNORECASE,
    )
    for log_id, statement in rewrites:
        if adds.search(statement):
            return f"computed for every row by {one_line(statement)} (table rewrite log id {log_id})"
    return None


def one_line(statement: str) -> str:
    """``statement`` on one line, whitespace collapsed, cut at :data:`_STATEMENT_CHARS` characters."""
    line = " ".join(statement.split())
    return line if len(line) <= _STATEMENT_CHARS else line[: _STATEMENT_CHARS - 3] + "..."
