"""The Postgres engine's operations: lag, the replica's delay, and what the applier asks of the source.

:class:`PostgresOperations` answers ``cdc-lake lag`` and the metrics (each connector's slot: the WAL
it retains, its ``wal_status``; the standby's delay) and the applier's questions while a table
streams: column defaults, the table rewrite log, whether an update may omit its old key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import psycopg

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.base import Capture, CaptureLag, ReplicaDelay
from cdc_lake.sources.capabilities import TableRewrite
from cdc_lake.sources.postgres.catalog import one_row, rewrite_log_facts, split_name, table_facts
from cdc_lake.sources.postgres.codec import CODEC
from cdc_lake.sources.postgres.connection import PostgresBase
from cdc_lake.sources.postgres.positions import Lsn
from cdc_lake.sources.postgres.rewrites import (
    DEFAULT_REWRITES_QUERY,
    LOG_VERSION_QUERY,
    TABLE_REWRITES_QUERY,
    TABLE_START_QUERY,
    computed_default,
    one_line,
    rewrite_stop,
)


class PostgresOperations(PostgresBase):
    """The Postgres engine's operations role: slot lag, standby delay, defaults and rewrites."""

    def column_defaults(self, table: str, columns: Sequence[str], role: str) -> dict[str, str | None]:
        """The default expression of ``pg_attrdef`` (a generated column's too), ``generated as identity``
        for an identity column, the value ``pg_attribute.attmissingval`` keeps for the rows that
        predate a column added with a default since dropped, or, for a volatile default since dropped
        (no ``attmissingval``), the statement the rewrite log kept (:func:`computed_default`)."""
        schema, name = split_name(table)
        with self._connect(role) as conn:
            rows = conn.execute(_DEFAULTS_QUERY, (schema, name, list(columns))).fetchall()
            logged = rewrite_log_facts(conn).installed
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
        schema, name = split_name(table)
        with self._connect() as conn:
            if not rewrite_log_facts(conn).installed:
                return None
            start = conn.execute(TABLE_START_QUERY, {"schema": schema, "table": name}).fetchone()
            return int(str(one_row(start)[0]))

    def rewrite_log_version(self) -> tuple[int, int] | None:
        """The primary's rewrite log as (newest id, rows) (read on the primary: a rewrite that committed
        before a change a batch holds is visible there); None when the log or its trigger is missing."""
        with self._connect() as conn:
            if not rewrite_log_facts(conn).installed:
                return None
            newest, rows = one_row(conn.execute(LOG_VERSION_QUERY).fetchone())
            return int(str(newest)), int(str(rows))

    def table_rewrites(self, table: str, start: int) -> list[TableRewrite]:
        """The primary's logged rewrites of ``table`` from id ``start``, judged by :func:`rewrite_stop`."""
        schema, name = split_name(table)
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
            facts = table_facts(conn, [table])[table]
        return facts.replica_identity == "i" and set(facts.identity_index) == set(key)

    def replica_evaluates(self, default: str) -> bool:
        """Never: a streaming replica replays the primary's WAL, the rows the primary wrote included."""
        return False

    def capture_lag(
        self, captures: Sequence[Capture], offsets: Mapping[str, Mapping[str, object]]
    ) -> list[CaptureLag]:
        """Each capture's slot: WAL it retains and has not confirmed, ``active``, ``wal_status``."""
        slots = [capture.ids.slot for capture in captures if capture.ids.slot]
        with self._connect() as conn:
            rows = conn.execute(_SLOT_LAG_QUERY, (slots,)).fetchall()
            primary = str(one_row(conn.execute("select pg_current_wal_lsn()::text").fetchone())[0])
        found = {str(row[0]): row for row in rows}
        lags = []
        for capture in captures:
            row = found.get(capture.ids.slot or "")
            if row is None:
                lags.append(
                    CaptureLag(capture.connector, "missing", slot=capture.ids.slot, primary_position=primary)
                )
                continue
            _, active, wal_status, safe, retained, unconfirmed, confirmed = row
            lags.append(
                CaptureLag(
                    capture.connector,
                    str(wal_status or "lost"),
                    retained_bytes=None if retained is None else max(0, int(retained)),
                    unconfirmed_bytes=None if unconfirmed is None else max(0, int(unconfirmed)),
                    slot=capture.ids.slot,
                    active=bool(active),
                    safe_bytes=None if safe is None else int(safe),
                    position=None if confirmed is None else str(confirmed),
                    primary_position=primary,
                )
            )
        return lags

    def fork_ordering(self) -> str:
        """The switch point of the primary's timeline, from its history file (``pg_wal/<TLI>.history``,
        read with ``pg_read_file``: a superuser, or a role granted ``pg_read_server_files``), as the
        ordering value of an LSN.  Its last line is the fork of the current timeline: every WAL record
        this server wrote since is above it, and the old primary's records it never received were written
        above it too."""
        where = f"source {self.source.name}: the primary"
        with self._connect() as conn:
            if one_row(conn.execute("select pg_is_in_recovery()").fetchone())[0]:
                raise SourceEngineError(f"{where} is a standby, not a promoted primary")
            timeline = str(one_row(conn.execute(_TIMELINE_QUERY).fetchone())[0])
            if int(timeline, 16) <= 1:
                raise SourceEngineError(
                    f"{where} was never promoted (timeline 1): there is no failover to recapture after"
                )
            path = f"pg_wal/{timeline}.history"
            try:
                history = str(one_row(conn.execute("select pg_read_file(%s)", (path,)).fetchone())[0])
            except psycopg.Error as exc:
                raise SourceEngineError(
                    f"{where} would not show its timeline history {path} ({one_line(str(exc))}): grant "
                    "pg_read_server_files to the source's user, or connect as a superuser"
                ) from None
        forks = [line.split() for line in history.splitlines() if line.strip() and not line.startswith("#")]
        if not forks or len(forks[-1]) < 2:
            raise SourceEngineError(f"{where}: its timeline history pg_wal/{timeline}.history names no fork")
        return CODEC.ordering_value((Lsn.parse(forks[-1][1]).value,))

    def replica_delay(self) -> ReplicaDelay:
        """WAL bytes between the primary's position and the standby's replay, and the replay's age.

        The age counts only while the standby has received WAL it has not replayed: an idle primary
        is not a lagging replica.
        """
        primary = self.current_position()
        with self._connect("replica") as conn:
            replayed, behind, pending, age, paused = one_row(
                conn.execute(
                    "select (case when pg_is_in_recovery() then pg_last_wal_replay_lsn() end)::text, "
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


_TIMELINE_QUERY = "select substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)"
"""The current timeline id as the 8 hexadecimal digits of WAL file and history file names."""

_SLOT_LAG_QUERY = """
select slot_name::text, active, wal_status, safe_wal_size,
       pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint,
       pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint,
       confirmed_flush_lsn::text
from pg_replication_slots where slot_name = any(%s)
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
