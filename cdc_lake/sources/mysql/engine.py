"""The MySQL and MariaDB engines: row-based binlog capture, positions as GTID sets.

The connector needs nothing created on the source; onboarding only checks it.  MariaDB is the
MySQL family with its own connector template, GTIDs that are always on, its own position
variables and ``MASTER_GTID_WAIT``; MySQL waits with ``WAIT_FOR_EXECUTED_GTID_SET``.

:class:`MySqlEngine` is its roles combined, each a class of its own module over the shared
connections (:mod:`~cdc_lake.sources.mysql.connection`): the preflight's facts (:mod:`.preflight`),
the capture setup and the connector's parameters (:mod:`.capture`), the snapshot reads and positions
the bootstrap asks for (:mod:`.snapshot`), and the lag and the applier's questions
(:mod:`.operations`).  :class:`MariaDbEngine` is the MySQL engine with MariaDB's facts, its wait
and its hand-off read (:meth:`MariaDbEngine.streamed_through`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from cdc_lake.sources.mysql import MARIADB, MYSQL
from cdc_lake.sources.mysql.capture import MySqlCapture
from cdc_lake.sources.mysql.operations import MySqlOperations
from cdc_lake.sources.mysql.positions import MariaDbGtidPosition
from cdc_lake.sources.mysql.preflight import MySqlPreflight
from cdc_lake.sources.mysql.snapshot import (
    MySqlSnapshot,
    mariadb_gtid_position,
    quote_string,
    wait_read_timeout,
    wait_seconds,
)
from cdc_lake.sources.positions import LogPosition

BINLOG_SCAN_EVENTS = 1000
"""How many binlog events after a connector's offset :meth:`MariaDbEngine.streamed_through` reads."""
_STANDALONE_GTID = re.compile(r"^GTID (\d+-\d+-\d+)(?:\s|$)")
_FILE_END = ("Rotate", "Stop")  # events that end a binlog file: the group before them is whole
# What a binlog file holds before its first group; any other event first means the listing starts
# inside a group, which then cannot be judged row-free.
_FILE_START = ("Format_desc", "Gtid_list", "Binlog_checkpoint", "Start_encryption")


class MySqlEngine(MySqlPreflight, MySqlCapture, MySqlSnapshot, MySqlOperations):
    """A MySQL source: binlog from the primary, bootstrap from a replica."""

    capabilities = MYSQL
    ca_setting = "ssl_ca"
    primary_tls_settings = "primary.ssl_ca and primary.ssl_verify_identity"
    primary_connection_fix = "check host, port, user and the password variable"


class MariaDbEngine(MySqlEngine):
    """A MariaDB source: GTIDs are always on; positions are ``gtid_binlog_pos`` / ``gtid_slave_pos``."""

    capabilities = MARIADB
    position_type: ClassVar[type[LogPosition]] = MariaDbGtidPosition
    # Spark picks its MySQL dialect (backtick quoting, MySQL types) only for jdbc:mysql: URLs, which the
    # MariaDB driver accepts with permitMysqlScheme.
    jdbc_driver = "org.mariadb.jdbc.Driver"
    jdbc_url_options = "permitMysqlScheme&connectTimeout=10000&tcpKeepAlive=true"
    read_only_variable = "tx_read_only"
    flavor = "mariadb"
    no_default: ClassVar[frozenset[str]] = frozenset({"NULL"})
    replica_status_query = "SHOW SLAVE STATUS"
    replica_hosts_query = "SHOW SLAVE HOSTS"
    position_query = "SELECT @@GLOBAL.gtid_binlog_pos"
    replica_position_query = "SELECT @@GLOBAL.gtid_slave_pos"
    applied_variable = "@@GLOBAL.gtid_slave_pos"

    def applied_within(self, position: str, timeout: float) -> str:
        """``MASTER_GTID_WAIT(position, timeout) = 0``: it answers 0 once this server's replication has
        applied ``position``, -1 after the timeout (NULL, not 0, on a bad argument).  A primary, whose
        ``gtid_slave_pos`` does not move, times out."""
        gtids = quote_string(mariadb_gtid_position(position))
        return f"MASTER_GTID_WAIT({gtids}, {wait_seconds(timeout)}) = 0"

    def wait_replica_past(self, position: str, timeout: float) -> str:
        """Block on the replica until it has applied ``position`` (``MASTER_GTID_WAIT``)."""
        query = "SELECT MASTER_GTID_WAIT(%s, %s)"
        result = self._scalar("replica", query, (position, timeout), read_timeout=wait_read_timeout(timeout))
        if result is None or int(result) != 0:
            self._timed_out(position, timeout)
        return self.replica_position()

    def streamed_through(self, offset: Mapping[str, Any]) -> str | None:
        """The GTID position at the offset's binlog ``file`` and ``pos``, with the row-free groups after it.

        Debezium adds a GTID to its offset's ``gtids`` only once the next event group starts, so after a
        group without rows (a DDL or a GRANT, in any database) its committed GTIDs stop short of the
        primary's for as long as the server stays idle.  The offset's ``file`` and ``pos`` are where the
        connector would restart (every change before them is streamed); ``BINLOG_GTID_POS`` gives the
        GTID position there, and the groups right after it that hold no row (:func:`row_free_gtids`)
        have nothing to stream.  None when the offset carries no GTIDs, when this primary does not know
        that binlog position, or when its GTID position there is not exactly the offset's own: after a
        failover the new primary may hold a binlog of the same name, further on at the same ``pos``, and
        right after a rotation the two differ too (the wait then ends with the next captured write).
        """
        file, pos = offset.get("file"), offset.get("pos")
        committed = MariaDbGtidPosition.from_connector_offset(offset)
        if not file or pos is None or committed is None:
            return None
        with self._connect("primary") as conn, conn.cursor() as cur:
            cur.execute("SELECT BINLOG_GTID_POS(%s, %s)", (str(file), int(pos)))
            row = cur.fetchone()
            if row is None or row[0] is None:
                return None
            there = str(row[0])
            if MariaDbGtidPosition.parse(there) != committed:
                return None
            cur.execute(
                "SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s", (str(file), int(pos), BINLOG_SCAN_EVENTS)
            )
            events = [(str(event[2]), str(event[5])) for event in cur.fetchall()]
        return ",".join([there, *row_free_gtids(events, len(events) < BINLOG_SCAN_EVENTS)])


def row_free_gtids(events: Sequence[tuple[str, str]], to_the_end: bool) -> list[str]:
    """The GTIDs of the leading event groups of ``events`` that hold no row change.

    ``events`` are ``SHOW BINLOG EVENTS`` rows (type, info) from the start of a group.  A group counts
    when its GTID event is standalone (``GTID d-s-n``: no BEGIN, so no transaction: DDL, GRANT) and
    every other event of it is a Query; the first other group (``BEGIN GTID``, a Table_map, rows, XA)
    ends the list, and so does any event but a file's opening ones before the first GTID (the listing
    would start inside a group).  The last group counts only once the file ends after it (Rotate,
    Stop) or when ``to_the_end`` says the listing reached the binlog's end, so none of its events is
    unseen.
    """
    found: list[str] = []
    group: str | None = None
    for event_type, info in events:
        if event_type == "Gtid":
            if group is not None:
                found.append(group)
            standalone = _STANDALONE_GTID.match(info)
            if standalone is None:
                return found
            group = standalone.group(1)
        elif event_type in _FILE_END:
            return found if group is None else [*found, group]
        elif event_type not in (_FILE_START if group is None else ("Query",)):
            return found
    return [*found, group] if group is not None and to_the_end else found
