"""The local stack's services are local-only and least-privileged, as rendered (no service started).

Postgres authenticates its socket and keeps it to its own user; MariaDB's application users hold
only what capture and the application need; the Hive metastore is served on loopback; the demo's
work directory is private. ``tests/integration/test_stack_hardening.py`` checks the running stack.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

from cdc_lake.config import Config
from cdc_lake.demo import DemoRun
from cdc_lake.stack import hive, mariadb, postgres
from cdc_lake.stack.service import HOST
from cdc_lake.stack.tls import ServerCertificate

# The rules `initdb --auth-local=trust` wrote at the end of a Debian PostgreSQL 15 pg_hba.conf.
OLD_PG_HBA = """\
# TYPE  DATABASE        USER            ADDRESS                 METHOD

# "local" is for Unix domain socket connections only
local   all             all                                     trust
# IPv4 local connections:
host    all             all             127.0.0.1/32            scram-sha-256
# IPv6 local connections:
host    all             all             ::1/128                 scram-sha-256
# Allow replication connections from localhost, by a user with the
# replication privilege.
local   replication     all                                     trust
host    replication     all             127.0.0.1/32            scram-sha-256
host    replication     all             ::1/128                 scram-sha-256
host    all             all             10.0.0.0/8              trust  # a hand-made rule
"""


def test_initdb_authenticates_the_socket_with_the_password() -> None:
    argv = postgres._initdb_argv(Path("/data/pg"), "cdc", "/tmp/pw")

    assert "--auth-local=scram-sha-256" in argv
    assert "--auth-host=scram-sha-256" in argv
    assert not any("trust" in arg for arg in argv), argv


def test_postgres_socket_is_the_server_users_alone() -> None:
    tls = ServerCertificate(Path("ca.crt"), Path("server.crt"), Path("server.key"))

    settings = postgres._settings(15432, Path("/data/sock"), tls)

    assert "unix_socket_permissions=0700" in settings
    assert f"listen_addresses={HOST}" in settings


def test_an_old_data_directorys_trust_rules_ask_for_the_password(tmp_path: Path) -> None:
    (tmp_path / "pg_hba.conf").write_text(OLD_PG_HBA)

    postgres._no_trust(tmp_path)
    postgres._no_trust(tmp_path)

    hardened = (tmp_path / "pg_hba.conf").read_text()
    rules = [line.split() for line in hardened.splitlines() if line and not line.startswith("#")]
    assert all("trust" not in rule for rule in rules), hardened
    assert rules[0] == ["local", "all", "all", "scram-sha-256"]
    assert rules[3] == ["local", "replication", "all", "scram-sha-256"]
    assert "10.0.0.0/8              scram-sha-256  # a hand-made rule" in hardened
    assert hardened.splitlines()[:3] == OLD_PG_HBA.splitlines()[:3]


class _RecordingCursor:
    """Records statements; answers the privilege query with ``held``."""

    def __init__(self, held: list[tuple[str, str]]) -> None:
        self.held = held
        self.statements: list[str] = []

    def execute(self, query: str, args: Any = None) -> None:
        self.statements.append(query)

    def fetchall(self) -> list[tuple[str, str]]:
        return self.held


def test_mariadb_application_user_gets_capture_and_write_privileges_only() -> None:
    held = [(name, "NO") for name in mariadb.APPLICATION_PRIVILEGES]
    cur = _RecordingCursor(held)

    mariadb._grant_only(cur, "'cdc'@'%'")  # type: ignore[arg-type]

    grant = cur.statements[0]
    assert grant.startswith("grant ") and grant.endswith(" on *.* to 'cdc'@'%'")
    granted = {name.strip() for name in grant[len("grant ") : -len(" on *.* to 'cdc'@'%'")].split(",")}
    for needed in ("SELECT", "RELOAD", "SHOW DATABASES", "REPLICATION SLAVE", "BINLOG MONITOR"):
        assert needed in granted
    assert not granted & {"ALL PRIVILEGES", "FILE", "SUPER", "CREATE USER", "BINLOG ADMIN"}
    assert not any("grant option" in statement for statement in cur.statements)
    assert not any(statement.startswith("revoke") for statement in cur.statements)


def test_mariadb_revokes_what_an_older_stack_granted() -> None:
    held = [(name, "YES") for name in (*mariadb.APPLICATION_PRIVILEGES, "FILE", "SUPER", "CREATE USER")]
    cur = _RecordingCursor(held)

    mariadb._grant_only(cur, "'cdc'@'%'")  # type: ignore[arg-type]

    assert cur.statements[-2] == "revoke CREATE USER, FILE, SUPER on *.* from 'cdc'@'%'"
    assert cur.statements[-1] == "revoke grant option on *.* from 'cdc'@'%'"


def test_hive_metastore_is_served_on_loopback_only() -> None:
    argv = hive._argv(Path("/data/hive/conf"), 19083)

    assert argv[-3:] == [hive.LAUNCHER, HOST, "19083"]
    assert hive.SOURCE_LOADER in argv
    assert "org.apache.hadoop.hive.metastore.HiveMetaStore" not in argv
    sources = Path(argv[argv.index("-sourcepath") + 1])
    launcher = (sources / f"{hive.LAUNCHER}.java").read_text()
    assert "new InetSocketAddress(host, port)" in launcher


def test_demo_work_directory_is_private(tmp_path: Path) -> None:
    demo = DemoRun(Config.default(tmp_path), tmp_path / "demo", lambda _: None)

    demo.write_config()

    assert stat.S_IMODE((tmp_path / "demo").stat().st_mode) == 0o700
    assert demo.config_path.exists()
