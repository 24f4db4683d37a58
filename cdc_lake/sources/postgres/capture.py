"""The Postgres engine's capture setup: the objects each connector needs, and its connector parameters.

:class:`PostgresCapture` creates the heartbeat table, the table rewrite log and each connector's
publication (filtered to its tables) before the connector is registered; the connector creates its
own slot when it first starts.  Tables join an existing publication only after the connector's
include list has them (:meth:`PostgresCapture.publish`).  Offboarding drops a slot (and its
publication) or keeps both to resume from.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from psycopg import sql

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.base import Capture, Change, ConnectorEndpoints, PreflightOptions
from cdc_lake.sources.connector import ConnectorParams, heartbeat_table_ddl
from cdc_lake.sources.postgres.catalog import (
    HEARTBEAT_TABLE,
    heartbeat_facts,
    ident,
    one_row,
    publication_tables,
    rewrite_log_facts,
    split_name,
    table_facts,
)
from cdc_lake.sources.postgres.checks import identity_gap
from cdc_lake.sources.postgres.connection import POLL_SECONDS, Conn, PostgresBase
from cdc_lake.sources.postgres.rewrites import INSTALL, REWRITE_LOG
from cdc_lake.sources.postgres.settings import PostgresCaptureIds
from cdc_lake.sources.settings import Table

PUBLISHED = "insert, update, delete, truncate"
"""What every publication publishes: a ``TRUNCATE`` too, which the connector (``skipped.operations``
``none``) sends as an ``op='t'`` event that stops its table (docs/applier.md, "Truncate policy"); without
it a truncate would leave the lake's rows in place, LIVE."""

_SLOT_RELEASE_SECONDS = 30.0


class PostgresCapture(PostgresBase):
    """The Postgres engine's capture setup role: heartbeat table, rewrite log, publications, slots."""

    def planned_changes(self, capture: Capture, options: PreflightOptions) -> list[str]:
        """The heartbeat table, REPLICA IDENTITY, and publication statements this capture would need."""
        with self._connect() as conn:
            changes = []
            if not heartbeat_facts(conn).exists:
                changes.append(f"create heartbeat table {HEARTBEAT_TABLE}")
            if _installs_rewrite_log(conn):
                changes.append(f"create the table rewrite log {REWRITE_LOG} and its event trigger")
            if options.replica_identity_full:
                changes += [
                    f"ALTER TABLE {name} REPLICA IDENTITY FULL"
                    for name in _needs_full_identity(conn, capture.tables)
                ]
            publication = capture.ids.publication or ""
            current = publication_tables(conn, publication)
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
        publication = capture.ids.publication or ""
        with self._connect() as conn:
            if not heartbeat_facts(conn).exists:
                schema, _ = split_name(HEARTBEAT_TABLE)
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
                    conn.execute(sql.SQL("alter table {} replica identity full").format(ident(name)))
                    changes.append(Change(f"set REPLICA IDENTITY FULL on {name}"))
            if publication_tables(conn, publication) is None:
                listed = sql.SQL(", ").join(ident(t) for t in [HEARTBEAT_TABLE, *capture.table_names])
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
        publication = capture.ids.publication or ""
        changes: list[Change] = []
        with self._connect() as conn:
            current = publication_tables(conn, publication)
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

    def _alter_publication(self, conn: Conn, publication: str, verb: str, tables: list[str]) -> None:
        statement = (
            "alter publication {} add table {}" if verb == "add" else "alter publication {} drop table {}"
        )
        conn.execute(
            sql.SQL(statement).format(  # type: ignore[arg-type]
                sql.Identifier(publication), sql.SQL(", ").join(ident(t) for t in tables)
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
                exists = publication_tables(conn, publication_name) is not None
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
                time.sleep(POLL_SECONDS)

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
            engine_values=PostgresCaptureIds.of(capture.ids).template_values(),
            heartbeat_table=HEARTBEAT_TABLE,
            database_settings={f"database.{key}": value for key, value in primary.tls_settings().items()},
        )


def _needs_full_identity(conn: Conn, tables: Sequence[Table]) -> list[str]:
    """Tables whose identity leaves an update or delete without the configured key, or TOAST values out."""
    facts = table_facts(conn, [table.name for table in tables])
    keys = {table.name: tuple(table.key or ()) for table in tables}
    return [
        name
        for name, table in facts.items()
        if table.kind is not None and identity_gap(table, keys[name]) is not None
    ]


def _publishes_truncates(conn: Conn, publication: str) -> bool:
    """Whether ``publication`` publishes truncates (publications created before it did do not)."""
    row = conn.execute("select pubtruncate from pg_publication where pubname = %s", (publication,)).fetchone()
    return row is not None and bool(row[0])


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


def _installs_rewrite_log(conn: Conn) -> bool:
    """Whether onboarding creates the rewrite log here: it or its trigger is missing and the user is a
    superuser (event triggers need one; otherwise the preflight warned)."""
    facts = rewrite_log_facts(conn)
    if facts.table_exists and facts.trigger_enabled:
        return False
    superuser = conn.execute("select rolsuper from pg_roles where rolname = current_user").fetchone()
    return bool(one_row(superuser)[0])
