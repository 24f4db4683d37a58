"""The MySQL family's operations: binlog lag, the replica's delay, and what the applier asks of the source.

:class:`MySqlOperations` answers ``cdc-lake lag`` and the metrics (each connector's binlog position
against the binlogs kept; the replica's reported delay) and the applier's questions while a table
streams: column defaults, whether a replica computes a default itself; the MySQL family keeps no
table rewrite log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import ClassVar

from pymysql.cursors import DictCursor

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.base import Capture, CaptureLag, ReplicaDelay
from cdc_lake.sources.capabilities import TableRewrite
from cdc_lake.sources.mysql.connection import MySqlBase, status_field

_REPLICA_OWN_VALUE = re.compile(
    r"\b(uuid|uuid_short|rand|random_bytes|sysdate|user|current_user|session_user|system_user"
    r"|connection_id|version)\s*\(",
    re.IGNORECASE,
)
"""Functions whose value a replica computes itself when it runs a statement (MySQL's list of functions
unsafe for statement-based replication, those allowed in a default expression)."""


class MySqlOperations(MySqlBase):
    """The MySQL family's operations role: binlog lag, replica delay, column defaults."""

    no_default: ClassVar[frozenset[str]] = frozenset()
    """How ``information_schema.COLUMNS.COLUMN_DEFAULT`` spells "no default" besides SQL NULL."""

    def column_defaults(self, table: str, columns: Sequence[str], role: str) -> dict[str, str | None]:
        """``COLUMN_DEFAULT`` of ``information_schema.COLUMNS`` (MariaDB spells "no default" ``NULL``, a
        string default quoted, an expression such as ``uuid()`` bare); generated and auto-increment
        columns have their expression or ``auto_increment`` as their default."""
        database, _, name = table.partition(".")
        with self._connect(role) as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME, COLUMN_DEFAULT, EXTRA, GENERATION_EXPRESSION "
                "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (database, name),
            )
            rows = cur.fetchall()
        found: dict[str, str | None] = {}
        for column, default, extra, generated in rows:
            if str(column) not in columns:
                continue
            if generated:
                found[str(column)] = f"generated as ({generated})"
            elif "auto_increment" in str(extra or "").lower():
                found[str(column)] = "auto_increment"
            else:
                found[str(column)] = None if default is None or default in self.no_default else str(default)
        return found

    def rewrite_log_start(self, table: str) -> int | None:
        """None: MySQL and MariaDB log their DDL in the connector's schema history (read by
        :mod:`cdc_lake.apply.swaps`); an ``ALTER ... MODIFY`` changes the writer schema the schema-change
        rules judge."""
        return None

    def rewrite_log_version(self) -> tuple[int, int] | None:
        """None: no rewrite log (:meth:`rewrite_log_start`)."""
        return None

    def table_rewrites(self, table: str, start: int) -> list[TableRewrite]:
        """None logged (:meth:`rewrite_log_start`)."""
        return []

    def replica_evaluates(self, default: str) -> bool:
        """A function whose value statement-based replication does not carry: the replica runs an
        ``ALTER TABLE`` itself (a DDL always replicates as a statement), so ``uuid()`` or ``rand()`` give
        its rows values of its own; ``now()``/``CURRENT_TIMESTAMP`` take the statement's logged time."""
        return _REPLICA_OWN_VALUE.search(default) is not None

    def capture_lag(
        self, captures: Sequence[Capture], offsets: Mapping[str, Mapping[str, object]]
    ) -> list[CaptureLag]:
        """Each connector's binlog file and position (from its committed offset) against the binlogs kept.

        ``files_ahead_of_purge`` counts the retained files older than the one the connector needs:
        0 means the next purge (``binlog_expire_logs_seconds``, ``PURGE BINARY LOGS``) removes it.
        """
        with self._connect() as conn, conn.cursor() as cur:
            cur.execute("SHOW BINARY LOGS")
            files = [(str(row[0]), int(row[1])) for row in cur.fetchall()]
        names = [name for name, _ in files]
        primary = f"{files[-1][0]}:{files[-1][1]}" if files else None
        lags = []
        for capture in captures:
            offset = offsets.get(capture.connector) or {}
            needed, pos = offset.get("file"), offset.get("pos")
            if not isinstance(needed, str) or not isinstance(pos, int):
                lags.append(CaptureLag(capture.connector, "unknown", primary_position=primary))
                continue
            gtids = offset.get("gtids")
            position = f"{needed}:{pos}" + (f" ({gtids})" if gtids else "")
            if needed not in names:
                lags.append(
                    CaptureLag(capture.connector, "purged", position=position, primary_position=primary)
                )
                continue
            index = names.index(needed)
            retained = sum(size for _, size in files[index:]) - pos
            lags.append(
                CaptureLag(
                    capture.connector,
                    "retained",
                    retained_bytes=max(0, retained),
                    unconfirmed_bytes=max(0, retained),
                    files_ahead_of_purge=index,
                    position=position,
                    primary_position=primary,
                )
            )
        return lags

    def replica_delay(self) -> ReplicaDelay:
        """The delay the replica reports (``Seconds_Behind_Source``) and whether its SQL thread runs."""
        with self._connect("replica") as conn, conn.cursor(DictCursor) as cur:
            cur.execute(self.replica_status_query)
            status = cur.fetchone() or {}
        if not status:
            raise SourceEngineError(f"source {self.source.name}: the replica does not replicate (no status)")
        behind = status_field(status, "Seconds_Behind_Source", "Seconds_Behind_Master")
        running = str(status_field(status, "Replica_SQL_Running", "Slave_SQL_Running") or "").lower() == "yes"
        return ReplicaDelay(
            None, None if behind in (None, "") else float(str(behind)), running, self.replica_position()
        )
