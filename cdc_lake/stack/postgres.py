"""PostgreSQL 15 from Debian: a logical-decoding primary and a streaming read replica.

Local-only and least-privileged: both servers listen on loopback only, and no connection is let in
without a password, the Unix socket included (``initdb --auth-local=scram-sha-256``; a data
directory made before that is fixed when the server starts, see :func:`_no_trust`). The socket
directory and the socket are the server user's alone (0700): every client of the stack, its tests
and the demo connects over TCP with the stack credentials.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import tempfile
import time
from abc import abstractmethod
from pathlib import Path

import psycopg
from psycopg import sql

from cdc_lake.exceptions import StackError
from cdc_lake.stack.process import ManagedProcess, run_checked
from cdc_lake.stack.service import DEMO_DATABASE, HOST, Service, StackLayout
from cdc_lake.stack.system import drop_privileges, ensure_debian_packages, own, service_user
from cdc_lake.stack.tls import ServerCertificate, server_certificate

PG_MAJOR = "15"
PG_BIN = Path(f"/usr/lib/postgresql/{PG_MAJOR}/bin")
REPLICA_SLOT = "cdc_lake_replica"


def _settings(port: int, socket_dir: Path, tls: ServerCertificate) -> list[str]:
    """Server settings, passed as -c flags so the data directory needs no edited config file.

    TLS is on (clients choose: ``sslmode=verify-full`` with the stack CA, or plain connections; the
    secured mode's role ``credentials.tls_db_user`` only over TLS, by ``pg_hba.conf``).
    """
    values = {
        "ssl": "on",
        "ssl_cert_file": str(tls.certificate),
        "ssl_key_file": str(tls.key),
        "listen_addresses": HOST,
        "port": str(port),
        "unix_socket_directories": str(socket_dir),
        "unix_socket_permissions": "0700",
        "wal_level": "logical",
        "max_wal_senders": "20",
        "max_replication_slots": "20",
        "hot_standby": "on",
        "hot_standby_feedback": "on",
        "shared_buffers": "64MB",
        "max_connections": "200",
        "logging_collector": "off",
        "log_min_messages": "warning",
    }
    return [arg for key, value in values.items() for arg in ("-c", f"{key}={value}")]


WAL_KEEP_SETTINGS = {"max_slot_wal_keep_size": "4GB", "wal_keep_size": "256MB"}
"""WAL retention, kept out of the -c flags (which ``ALTER SYSTEM`` cannot override) in an included
file of the data directory: a test may lower them with ``ALTER SYSTEM SET`` and a reload to drive a
slot to ``unreserved``/``lost``, and ``ALTER SYSTEM RESET`` brings these values back."""

_WAL_KEEP_FILE = "cdc-lake-wal-keep.conf"


def _include_wal_keep_settings(data_dir: Path, user: pwd.struct_passwd | None) -> None:
    """Write :data:`WAL_KEEP_SETTINGS` next to ``postgresql.conf`` and include them from it (once)."""
    settings = data_dir / _WAL_KEEP_FILE
    settings.write_text("".join(f"{key} = '{value}'\n" for key, value in WAL_KEEP_SETTINGS.items()))
    if user is not None:
        os.chown(settings, user.pw_uid, user.pw_gid)
    main = data_dir / "postgresql.conf"
    include = f"include_if_exists = '{_WAL_KEEP_FILE}'\n"
    if include not in main.read_text():
        with main.open("a") as conf:
            conf.write(include)


LOCAL_AUTH = "scram-sha-256"
"""How ``pg_hba.conf`` authenticates connections over the Unix socket: with the password, never
``trust`` (which lets any local user who can reach the socket in as any role)."""

_TRUST = re.compile(r"^(?P<rule>\s*(?:local|host\w*)\s.*?\s)trust(?P<rest>\s*(?:#.*)?)$", re.MULTILINE)


def _no_trust(data_dir: Path) -> None:
    """Replace every ``trust`` rule of ``pg_hba.conf`` by :data:`LOCAL_AUTH` (a data directory that an
    older stack initialised with ``--auth-local=trust``); read at the server's next start."""
    hba = data_dir / "pg_hba.conf"
    current = hba.read_text()
    hardened = _TRUST.sub(lambda match: f"{match['rule']}{LOCAL_AUTH}{match['rest']}", current)
    if hardened != current:
        hba.write_text(hardened)


def _initdb_argv(data_dir: Path, superuser: str, pwfile: str) -> list[str]:
    """``initdb`` of the primary: the superuser with its password, and password authentication on
    the socket and on TCP."""
    return [
        str(PG_BIN / "initdb"),
        "-D",
        str(data_dir),
        "-U",
        superuser,
        f"--pwfile={pwfile}",
        f"--auth-local={LOCAL_AUTH}",
        "--auth-host=scram-sha-256",
        "--encoding=UTF8",
        "--locale=C.UTF-8",
    ]


_TLS_ONLY_MARK = "# cdc-lake secured mode: this role connects over TLS only\n"


def _require_tls_for(data_dir: Path, role: str) -> None:
    """Put ``role``'s hostssl-only rules first in ``pg_hba.conf`` (first match wins; written once)."""
    hba = data_dir / "pg_hba.conf"
    current = hba.read_text()
    if _TLS_ONLY_MARK in current:
        return
    rules = "".join(
        f"{kind} {database} {role} {address} {method}\n"
        for kind, address, method in (
            ("hostssl", f"{HOST}/32", "scram-sha-256"),
            ("hostnossl", "0.0.0.0/0", "reject"),
        )
        for database in ("all", "replication")
    )
    hba.write_text(_TLS_ONLY_MARK + rules + current)


class PostgresServer(Service):
    """One Postgres server of the stack, in the role its data directory is named after; a failover test
    may swap the roles (:meth:`promote`, :meth:`follow`, :func:`restore_pair`)."""

    role: str

    def __init__(self, layout: StackLayout) -> None:
        super().__init__(layout)
        self.name = f"postgres-{self.role}"
        self.user = service_user("postgres")

    @property
    def process(self) -> ManagedProcess:
        # SIGINT is Postgres' fast shutdown; SIGTERM would wait for every client to leave.
        return self.layout.process(self.name, stop_signal=signal.SIGINT)

    @property
    def data_dir(self) -> Path:
        return self.layout.path("postgres", self.role)

    @property
    def socket_dir(self) -> Path:
        return self.layout.path("postgres", f"{self.role}-socket")

    @property
    @abstractmethod
    def port(self) -> int:
        """The server's TCP port."""

    def address(self) -> str:
        return f"postgresql://{self.layout.credentials.db_user}@{HOST}:{self.port}/{DEMO_DATABASE}"

    def install(self) -> None:
        ensure_debian_packages(
            [f"postgresql-{PG_MAJOR}", f"postgresql-client-{PG_MAJOR}"],
            lambda: (PG_BIN / "postgres").exists(),
            f"PostgreSQL {PG_MAJOR}",
        )

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        """A superuser connection over TCP."""
        creds = self.layout.credentials
        return psycopg.connect(
            host=HOST,
            port=self.port,
            user=creds.db_user,
            password=creds.db_password,
            dbname=dbname,
            connect_timeout=3,
            autocommit=True,
        )

    def _start_server(self) -> None:
        if self.process.pid() is not None:
            return
        self.socket_dir.mkdir(parents=True, exist_ok=True)
        self.socket_dir.chmod(0o700)
        own(self.socket_dir, self.user)
        tls = server_certificate(self.layout, "postgres", self.user)
        _include_wal_keep_settings(self.data_dir, self.user)
        _no_trust(self.data_dir)
        _require_tls_for(self.data_dir, self.layout.credentials.tls_db_user)
        self.process.start(
            [str(PG_BIN / "postgres"), "-D", str(self.data_dir), *_settings(self.port, self.socket_dir, tls)],
            preexec=drop_privileges(self.user),
            env={"HOME": str(self.data_dir)},
        )

    def _run_as_server_user(self, argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
        run_checked(argv, what, env=env, preexec_fn=drop_privileges(self.user), cwd="/")

    def _basebackup(self, upstream: PostgresServer) -> None:
        """A new data directory: a base backup of ``upstream`` set up to stream from it through its
        physical slot :data:`REPLICA_SLOT` (created there when missing)."""
        with upstream.connect() as conn:
            has_slot = conn.execute(
                "select 1 from pg_replication_slots where slot_name = %s", (REPLICA_SLOT,)
            ).fetchone()
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        own(self.data_dir.parent, self.user)
        creds = self.layout.credentials
        self._run_as_server_user(
            [
                str(PG_BIN / "pg_basebackup"),
                "-h",
                HOST,
                "-p",
                str(upstream.port),
                "-U",
                creds.db_user,
                "-D",
                str(self.data_dir),
                "-R",
                "-X",
                "stream",
                "-c",
                "fast",
                "-S",
                REPLICA_SLOT,
                *([] if has_slot else ["-C"]),
            ],
            f"pg_basebackup of {self.name} from {upstream.name}",
            env={"PGPASSWORD": creds.db_password},
        )

    def in_recovery(self) -> bool:
        """Whether the server is a standby."""
        with self.connect() as conn:
            return conn.execute("select pg_is_in_recovery()").fetchone() == (True,)

    def promote(self, timeout: int = 60) -> None:
        """Make this standby a writable primary on a new timeline (``pg_promote``, waited for)."""
        with self.connect() as conn:
            done = conn.execute("select pg_promote(true, %s)", (timeout,)).fetchone()
        if done != (True,):
            raise StackError(f"{self.name} was not promoted within {timeout}s")

    def stop_receiving(self) -> None:
        """A standby stops receiving WAL (its ``primary_conninfo`` emptied and reloaded): what its primary
        commits from now on never reaches it, as in a network partition before a failover."""
        with self.connect() as conn:
            conn.execute("alter system set primary_conninfo = ''")
            conn.execute("select pg_reload_conf()")

    def follow(self, upstream: PostgresServer, timeout: float = 120.0) -> None:
        """Become a streaming standby of ``upstream``: stopped, its data directory replaced by a base
        backup of ``upstream`` (a server that diverged, an old primary, cannot rejoin otherwise without
        ``wal_log_hints``), started, and waited for until it streams."""
        self.stop()
        if self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        self._basebackup(upstream)
        self._start_server()
        deadline = time.monotonic() + timeout
        while not self.streams_from(upstream):
            if time.monotonic() > deadline:
                raise StackError(f"{self.name} does not stream from {upstream.name} after {timeout:.0f}s")
            time.sleep(0.5)

    def streams_from(self, upstream: PostgresServer) -> bool:
        """Whether this server is a standby that ``upstream`` streams WAL to."""
        try:
            with upstream.connect() as conn:
                row = conn.execute(
                    "select count(*) from pg_stat_replication where state = 'streaming'"
                ).fetchone()
            return self.in_recovery() and row is not None and int(str(row[0])) >= 1
        except psycopg.OperationalError:
            return False

    def caught_up_with(self, upstream: PostgresServer, timeout: float = 120.0) -> None:
        """Wait until this standby replayed everything ``upstream`` has written so far."""
        with upstream.connect() as conn:
            row = conn.execute("select pg_current_wal_lsn()::text").fetchone()
        target = str(row[0]) if row else "0/0"
        deadline = time.monotonic() + timeout
        while True:
            with self.connect() as conn:
                behind = conn.execute(
                    "select pg_wal_lsn_diff(%s::pg_lsn, pg_last_wal_replay_lsn())", (target,)
                ).fetchone()
            if behind is not None and behind[0] is not None and float(str(behind[0])) <= 0:
                return
            if time.monotonic() > deadline:
                raise StackError(
                    f"{self.name} did not replay {upstream.name}'s WAL up to {target} in {timeout:.0f}s"
                )
            time.sleep(0.2)


class PostgresPrimary(PostgresServer):
    """The primary: `wal_level=logical`, replication slots for Debezium and the replica."""

    role = "primary"

    @property
    def port(self) -> int:
        return self.layout.ports.postgres_primary

    def start(self) -> None:
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb()
        self._start_server()

    def _initdb(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        own(self.data_dir, self.user)
        creds = self.layout.credentials
        with tempfile.NamedTemporaryFile("w", prefix="cdc-lake-pw-", delete=True) as pwfile:
            pwfile.write(creds.db_password + "\n")
            pwfile.flush()
            own(Path(pwfile.name), self.user)
            self._run_as_server_user(
                _initdb_argv(self.data_dir, creds.db_user, pwfile.name), "initdb of the Postgres primary"
            )
        with (self.data_dir / "pg_hba.conf").open("a") as hba:
            hba.write(f"host replication all {HOST}/32 scram-sha-256\n")

    def healthy(self) -> bool:
        with self.connect() as conn:
            return conn.execute("select 1").fetchone() == (1,)

    def after_healthy(self) -> None:
        with self.connect() as conn:
            exists = conn.execute("select 1 from pg_database where datname = %s", (DEMO_DATABASE,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("create database {}").format(sql.Identifier(DEMO_DATABASE)))
            # The secured mode's role: pg_hba lets it in over TLS only (see _require_tls_for).
            creds = self.layout.credentials
            role = conn.execute("select 1 from pg_roles where rolname = %s", (creds.tls_db_user,)).fetchone()
            if not role:
                conn.execute(
                    sql.SQL("create role {} login superuser replication password {}").format(
                        sql.Identifier(creds.tls_db_user), sql.Literal(creds.db_password)
                    )
                )


class PostgresReplica(PostgresServer):
    """A hot standby made with `pg_basebackup`, streaming from the primary through a physical slot."""

    role = "replica"

    def __init__(self, layout: StackLayout, primary: PostgresPrimary) -> None:
        super().__init__(layout)
        self.primary = primary

    @property
    def port(self) -> int:
        return self.layout.ports.postgres_replica

    def start(self) -> None:
        if not (self.data_dir / "PG_VERSION").exists():
            self._basebackup(self.primary)
        self._start_server()

    def healthy(self) -> bool:
        with self.connect() as conn:
            in_recovery = conn.execute("select pg_is_in_recovery()").fetchone()
        with self.primary.connect() as conn:
            streaming = conn.execute(
                "select count(*) from pg_stat_replication where state = 'streaming'"
            ).fetchone()
        return in_recovery == (True,) and streaming is not None and int(str(streaming[0])) >= 1

    def detail(self) -> str:
        with self.connect() as conn:
            row = conn.execute("select pg_last_wal_replay_lsn()::text").fetchone()
        with self.primary.connect() as conn:
            lag = conn.execute(
                "select pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)", (row[0] if row else None,)
            ).fetchone()
        return f"replay lag {lag[0] if lag else '?'} bytes"


def restore_pair(primary: PostgresPrimary, replica: PostgresReplica) -> None:
    """The stack's pair as it was, after a failover promoted ``replica`` (the old ``primary`` is stopped or
    diverged): ``primary`` follows ``replica`` and catches up; ``replica`` stops cleanly (its last WAL
    reaches ``primary`` first), ``primary`` is promoted and ``replica`` follows it.  Nothing the promoted
    server committed is lost; what only the old primary had is.  Replication slots of logical decoding
    are not in a base backup: connectors of the old servers must be onboarded again."""
    if not primary.streams_from(replica):
        primary.follow(replica)
    primary.caught_up_with(replica)
    replica.stop()
    primary.promote()
    replica.follow(primary)
