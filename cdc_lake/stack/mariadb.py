"""MariaDB from Debian: a ROW-binlog, full-image, GTID primary and a replica following it by GTID.

Both serve TLS with a certificate from the stack CA (``cdc_lake.stack.tls``); the application user
may connect either way, the secured mode's user (``credentials.tls_db_user``) only over TLS.

Both servers log replicated transactions (``log-slave-updates``) with ``gtid-strict-mode``, each in its
own GTID domain (``gtid-domain-id`` = ``server-id``, see docs/applier.md "Failover"), so either can
be promoted and the other made to follow it by GTID (:meth:`_MariaDbServer.promote`,
:meth:`_MariaDbServer.follow`): what a failover test needs, and how it puts the stack back.

Least privilege: the application users (``cdc``, and the secured mode's ``cdc_tls``) hold
:data:`APPLICATION_PRIVILEGES` and nothing else: no FILE (server-side file reads and writes), no
GRANT OPTION, no SUPER or replication administration. Administration (replication set-up, failover,
binlog purges, users) goes through ``root`` over the Unix socket (:meth:`_MariaDbServer.root_connection`),
which only the OS root reaches (``unix_socket`` authentication).
"""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Any

import pymysql

from cdc_lake.exceptions import StackError
from cdc_lake.stack.process import run_checked
from cdc_lake.stack.service import DEMO_DATABASE, HOST, Service, StackLayout
from cdc_lake.stack.system import ensure_debian_packages, which_or_none
from cdc_lake.stack.tls import server_certificate

SERVER_BINARY_DIRS = ("/usr/sbin", "/usr/bin")


CAPTURE_PRIVILEGES = (
    "SELECT",
    "RELOAD",
    "SHOW DATABASES",
    "REPLICATION SLAVE",
    "BINLOG MONITOR",
    "LOCK TABLES",
    "SLAVE MONITOR",
)
"""What Debezium's MySQL/MariaDB connector needs (its documented SELECT, RELOAD, SHOW DATABASES,
REPLICATION SLAVE, REPLICATION CLIENT, which MariaDB 10.5+ names BINLOG MONITOR; LOCK TABLES for a
snapshot without the global read lock), and what cdc-lake's preflight, bootstrap and lag read:
``SHOW SLAVE STATUS`` on the replica needs SLAVE MONITOR since MariaDB 10.5.9. REPLICATION SLAVE
also lets the replica follow the primary as this user. Spelled as the server reports them."""

WRITE_PRIVILEGES = (
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "DROP",
    "ALTER",
    "INDEX",
    "REFERENCES",
    "CREATE TEMPORARY TABLES",
    "CREATE VIEW",
    "SHOW VIEW",
)
"""What the demo and the tests do as the application, as any application's own user would: create
databases and tables, change their rows and shape."""

APPLICATION_PRIVILEGES = (*CAPTURE_PRIVILEGES, *WRITE_PRIVILEGES)


def _grant_only(cur: pymysql.cursors.Cursor, account: str) -> None:
    """Leave ``account`` (``'user'@'host'``) holding exactly :data:`APPLICATION_PRIVILEGES` on ``*.*``,
    without GRANT OPTION.

    A stack made before held ALL PRIVILEGES (``cdc`` WITH GRANT OPTION): the extras are revoked
    after the grant, so a client of a running stack never misses a privilege it needs.
    """
    cur.execute(f"grant {', '.join(APPLICATION_PRIVILEGES)} on *.* to {account}")
    cur.execute(
        "select privilege_type, is_grantable from information_schema.user_privileges where grantee = %s",
        (account,),
    )
    held = cur.fetchall()
    extra = sorted({str(name) for name, _ in held} - set(APPLICATION_PRIVILEGES))
    if extra:
        cur.execute(f"revoke {', '.join(extra)} on *.* from {account}")
    if any(grantable == "YES" for _, grantable in held):
        cur.execute(f"revoke grant option on *.* from {account}")


def _quote_literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


class _MariaDbServer(Service):
    role: str
    server_id: int

    def __init__(self, layout: StackLayout) -> None:
        super().__init__(layout)
        self.name = f"mariadb-{self.role}"

    @property
    @abstractmethod
    def port(self) -> int:
        """The server's TCP port."""

    @property
    def data_dir(self) -> Path:
        return self.layout.path("mariadb", self.role)

    @property
    def socket(self) -> Path:
        return self.layout.path("mariadb", f"{self.role}.sock")

    def address(self) -> str:
        return f"mysql://{self.layout.credentials.db_user}@{HOST}:{self.port}/{DEMO_DATABASE}"

    def install(self) -> None:
        ensure_debian_packages(
            ["mariadb-server", "mariadb-client"],
            lambda: which_or_none("mariadbd", *SERVER_BINARY_DIRS) is not None,
            "MariaDB server",
        )

    def _server_flags(self) -> list[str]:
        # TLS offered to every client (one certificate from the stack CA for both servers); required
        # only of the secured mode's user (REQUIRE SSL).
        tls = server_certificate(self.layout, "mariadb", None)
        return [
            f"--ssl-ca={tls.ca}",
            f"--ssl-cert={tls.certificate}",
            f"--ssl-key={tls.key}",
            f"--port={self.port}",
            f"--bind-address={HOST}",
            f"--socket={self.socket}",
            f"--pid-file={self.layout.path('mariadb', f'{self.role}.pid')}",
            "--user=root",
            f"--server-id={self.server_id}",
            # Each server writes its own GTID domain, so a promoted replica's GTID position still lists
            # the old primary's domain: Debezium 3.5's MariaDB connector compares GTIDs by domain AND
            # server id and refuses to resume on a server whose position lacks its offset's pair.
            f"--gtid-domain-id={self.server_id}",
            "--log-bin=mysql-bin",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--log-slave-updates=ON",
            "--gtid-strict-mode=ON",
            "--expire-logs-days=7",
            "--innodb-buffer-pool-size=64M",
            "--skip-name-resolve",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            "--default-time-zone=+00:00",
        ]

    def start(self) -> None:
        if not (self.data_dir / "mysql").exists():
            self.data_dir.mkdir(parents=True, exist_ok=True)
            install_db = which_or_none("mariadb-install-db", *SERVER_BINARY_DIRS) or "mysql_install_db"
            run_checked(
                [
                    install_db,
                    "--no-defaults",
                    f"--datadir={self.data_dir}",
                    "--user=root",
                    "--auth-root-authentication-method=socket",
                    "--skip-test-db",
                ],
                f"mariadb-install-db for {self.name}",
            )
        if self.process.pid() is not None:
            return
        mariadbd = which_or_none("mariadbd", *SERVER_BINARY_DIRS) or "mariadbd"
        self.process.start([mariadbd, "--no-defaults", f"--datadir={self.data_dir}", *self._server_flags()])

    def root_connection(self) -> pymysql.connections.Connection[Any]:
        """The local root account over the Unix socket (setup only)."""
        return pymysql.connect(unix_socket=str(self.socket), user="root", autocommit=True, connect_timeout=3)

    def connect(self, database: str | None = None) -> pymysql.connections.Connection[Any]:
        """The stack's application user over TCP."""
        creds = self.layout.credentials
        return pymysql.connect(
            host=HOST,
            port=self.port,
            user=creds.db_user,
            password=creds.db_password,
            database=database,
            autocommit=True,
            connect_timeout=3,
        )

    def healthy(self) -> bool:
        with self.root_connection() as conn, conn.cursor() as cur:
            cur.execute("select 1")
            return bool(cur.fetchone() == (1,))

    def gtid_binlog_pos(self) -> str:
        """The GTID position of the server's binlog (the last transaction of each domain)."""
        with self.root_connection() as conn, conn.cursor() as cur:
            cur.execute("select @@global.gtid_binlog_pos")
            row = cur.fetchone()
        return str(row[0]) if row else ""

    def wait_for_gtid(self, position: str, timeout: float) -> None:
        """Wait until this server has applied every transaction of ``position`` (``MASTER_GTID_WAIT``)."""
        with self.root_connection() as conn, conn.cursor() as cur:
            cur.execute("select master_gtid_wait(%s, %s)", (position, timeout))
            row = cur.fetchone()
        if not row or row[0] != 0:
            raise StackError(f"{self.name}: did not reach GTID position {position!r} within {timeout:.0f}s")

    def promote(self) -> None:
        """Make this server a writable primary: stop replicating and forget its primary."""
        with self.root_connection() as conn, conn.cursor() as cur:
            cur.execute("stop slave")
            cur.execute("reset slave all")
            cur.execute("set global read_only = 0")

    def follow(self, primary: _MariaDbServer) -> None:
        """Make this server a read-only replica of ``primary``, from the GTIDs its binlog already holds."""
        with self.root_connection() as conn, conn.cursor() as cur:
            cur.execute("set global read_only = 1")
            cur.execute("stop slave")
            cur.execute("set global gtid_slave_pos = @@global.gtid_binlog_pos")
            self._change_master(cur, primary)
            cur.execute("start slave")

    def _change_master(self, cur: pymysql.cursors.Cursor, primary: _MariaDbServer) -> None:
        creds = self.layout.credentials
        cur.execute(
            "change master to "
            f"master_host={_quote_literal(HOST)}, master_port={primary.port}, "
            f"master_user={_quote_literal(creds.db_user)}, "
            f"master_password={_quote_literal(creds.db_password)}, "
            "master_use_gtid=slave_pos, master_connect_retry=1"
        )


class MariaDbPrimary(_MariaDbServer):
    """The primary: binlog in ROW format with full row images; GTIDs are always on in MariaDB."""

    role = "primary"
    server_id = 1

    @property
    def port(self) -> int:
        return self.layout.ports.mariadb_primary

    def after_healthy(self) -> None:
        creds = self.layout.credentials
        user = f"{_quote_literal(creds.db_user)}@{_quote_literal('%')}"
        with self.root_connection() as conn, conn.cursor() as cur:
            cur.execute(f"create user if not exists {user} identified by {_quote_literal(creds.db_password)}")
            _grant_only(cur, user)
            cur.execute(f"create database if not exists `{DEMO_DATABASE}`")
            # The secured mode's user connects over TLS only; created here, replicated to the replica.
            tls_user = f"{_quote_literal(creds.tls_db_user)}@{_quote_literal('%')}"
            cur.execute(
                f"create user if not exists {tls_user} identified by {_quote_literal(creds.db_password)} "
                "require ssl"
            )
            _grant_only(cur, tls_user)


class MariaDbReplica(_MariaDbServer):
    """A read-only replica of the primary, positioned by GTID (`MASTER_USE_GTID=slave_pos`)."""

    role = "replica"
    server_id = 2

    def __init__(self, layout: StackLayout, primary: MariaDbPrimary) -> None:
        super().__init__(layout)
        self.primary = primary

    @property
    def port(self) -> int:
        return self.layout.ports.mariadb_replica

    def _server_flags(self) -> list[str]:
        return [*super()._server_flags(), "--read-only=ON", "--relay-log=relay-bin"]

    def after_healthy(self) -> None:
        with self.root_connection() as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("show slave status")
            row = cur.fetchone()
            if row and row.get("Slave_IO_Running") == "Yes" and row.get("Slave_SQL_Running") == "Yes":
                return
            if not row:
                self._change_master(cur, self.primary)
            cur.execute("start slave")

    def replicating(self) -> bool:
        """Both replication threads are running."""
        with self.root_connection() as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("show slave status")
            row = cur.fetchone()
        return bool(row) and bool(row["Slave_IO_Running"] == "Yes" and row["Slave_SQL_Running"] == "Yes")

    def detail(self) -> str:
        with self.root_connection() as conn, conn.cursor(pymysql.cursors.DictCursor) as cur:
            cur.execute("show slave status")
            row = cur.fetchone()
        if not row:
            return "replication not configured"
        return (
            f"io={row['Slave_IO_Running']} sql={row['Slave_SQL_Running']} "
            f"gtid={row.get('Gtid_IO_Pos', '')} behind={row.get('Seconds_Behind_Master')}"
        )
