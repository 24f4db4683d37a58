"""The Postgres engine's preflight: the primary's and replica's facts, read once and judged.

:class:`PostgresPreflight` reads everything :func:`~cdc_lake.sources.postgres.checks.evaluate`
judges (settings, the user's roles, the captured tables, slots, publications, the heartbeat table,
the rewrite log, the standby's replay) and changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.base import Capture, PreflightOptions
from cdc_lake.sources.checks import CheckResult
from cdc_lake.sources.postgres.catalog import (
    heartbeat_facts,
    one_row,
    publication_tables,
    rewrite_log_facts,
    table_facts,
)
from cdc_lake.sources.postgres.checks import (
    PgPublicationFacts,
    PgReplicaFacts,
    PgSlotFacts,
    PostgresFacts,
    check_tls,
    evaluate,
)
from cdc_lake.sources.postgres.connection import Conn, PostgresBase

_SETTINGS = ("wal_level", "max_replication_slots", "max_wal_senders", "max_slot_wal_keep_size")


class PostgresPreflight(PostgresBase):
    """The Postgres engine's preflight role: read the facts, judge them with the checks."""

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
        slot_names = [c.ids.slot for c in captures if c.ids.slot]
        publication_names = [c.ids.publication for c in captures if c.ids.publication]
        with self._connect() as conn:
            settings: dict[Any, Any] = dict(
                conn.execute(
                    "select name, setting from pg_settings where name = any(%s)", (list(_SETTINGS),)
                ).fetchall()
            )
            user, superuser, replication, create_db = one_row(
                conn.execute(
                    "select current_user::text, r.rolsuper, r.rolreplication or "
                    "(case when exists (select 1 from pg_roles where rolname = 'rds_replication') "
                    "then pg_has_role('rds_replication', 'MEMBER') else false end), "
                    "has_database_privilege(current_database(), 'CREATE') "
                    "from pg_roles r where r.rolname = current_user"
                ).fetchone()
            )
            slots_used = one_row(conn.execute("select count(*) from pg_replication_slots").fetchone())[0]
            senders_used = one_row(
                conn.execute(
                    "select count(*) from pg_stat_activity where backend_type = 'walsender'"
                ).fetchone()
            )[0]
            primary_lsn = str(one_row(conn.execute("select pg_current_wal_lsn()::text").fetchone())[0])
            facts = PostgresFacts(
                database=self.database,
                user=str(user),
                settings={str(k): str(v) for k, v in settings.items()},
                slots_used=int(str(slots_used)),
                wal_senders_used=int(str(senders_used)),
                superuser=bool(superuser),
                replication_role=bool(replication),
                can_create_in_database=bool(create_db),
                heartbeat=heartbeat_facts(conn),
                rewrite_log=rewrite_log_facts(conn),
                tables=table_facts(conn, [table.name for table in tables]),
                replica=PgReplicaFacts(configured=False),
                slots=_slot_facts(conn, slot_names),
                publications=_publication_facts(conn, publication_names),
            )
        return replace(facts, replica=self._replica_facts(primary_lsn))

    def _replica_facts(self, primary_lsn: str) -> PgReplicaFacts:
        replica = self.source.replica
        if replica is None:
            return PgReplicaFacts(configured=False)
        address = f"{replica.host}:{replica.port}"
        try:
            with self._connect("replica") as conn:
                in_recovery, receive_lsn, replay_lsn, paused, lag = one_row(
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


def _slot_facts(conn: Conn, names: Sequence[str]) -> dict[str, PgSlotFacts]:
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


def _publication_facts(conn: Conn, names: Sequence[str]) -> dict[str, PgPublicationFacts]:
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
            tables=frozenset(publication_tables(conn, str(name)) or ()),
            owned=bool(owned),
        )
    return facts
