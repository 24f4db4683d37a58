"""The running local stack is local-only and least-privileged (docs/security.md, "The local stack").

Read-only checks of what the services do, not of how they were configured: every port a stack
process listens on is bound to loopback (the Hive metastore's included), both Postgres servers
refuse a password-less connection over their socket and keep it to their own user, MariaDB's
application users hold neither FILE nor GRANT OPTION, and the stack's data directory is private.

These hold for a stack created by this version (``initdb``, the data directory and the MariaDB
users are made once).  A stack made before is fixed in part when each server next starts
(``cdc-lake stack down`` then ``stack up``): Postgres' ``trust`` rules, the MariaDB grants, the Hive
metastore's address; its data directory keeps its mode until changed by hand (docs/security.md).
"""

from __future__ import annotations

import ipaddress
import os
import stat
from pathlib import Path

import psycopg
import pytest
from support.processes import descendants

from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.mariadb import APPLICATION_PRIVILEGES
from cdc_lake.stack.postgres import PostgresServer

pytestmark = [pytest.mark.integration]

_LISTEN = "0A"
"""The TCP state of a listening socket in ``/proc/net/tcp``."""


def _socket_inodes(pids: set[int]) -> set[str]:
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
        except OSError:
            continue
    return inodes


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """An address as ``/proc/net/tcp{,6}`` writes it: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(words)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _listening(pids: set[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket the processes listen on."""
    inodes = _socket_inodes(pids)
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == _LISTEN and inode in inodes:
                address, port = local.rsplit(":", 1)
                found.append((str(_address(address)), int(port, 16)))
    return found


def test_every_stack_service_listens_on_loopback_only(local_stack: LocalStack) -> None:
    listening: dict[str, list[tuple[str, int]]] = {}
    for service in local_stack.services:
        pid = service.process.pid()
        assert pid is not None, f"{service.name} is not running"
        listening[service.name] = _listening({pid, *descendants(pid)})

    exposed = {
        name: [(address, port) for address, port in sockets if not ipaddress.ip_address(address).is_loopback]
        for name, sockets in listening.items()
    }
    silent = sorted(name for name, sockets in listening.items() if not sockets)
    assert not silent, f"no listening socket found for {silent}: the check above would pass unseen"
    assert not any(exposed.values()), {name: sockets for name, sockets in exposed.items() if sockets}
    assert ("127.0.0.1", local_stack.layout.ports.hive_metastore) in listening["hive-metastore"]


@pytest.mark.parametrize("role", ["primary", "replica"])
def test_postgres_has_no_trust_rule_and_keeps_its_socket(
    local_stack: LocalStack, role: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    server: PostgresServer = getattr(local_stack, f"postgres_{role}")
    with server.connect() as conn:
        rules = conn.execute("select type, user_name, auth_method from pg_hba_file_rules").fetchall()
    assert rules and not [rule for rule in rules if rule[2] == "trust"], rules

    socket = server.socket_dir / f".s.PGSQL.{server.port}"
    assert stat.S_IMODE(socket.stat().st_mode) == 0o700
    assert stat.S_IMODE(server.socket_dir.stat().st_mode) == 0o700
    # Over the socket without the password: refused, whoever asks (trust would have let us in).
    monkeypatch.delenv("PGPASSWORD", raising=False)
    creds = local_stack.layout.credentials
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(
            host=str(server.socket_dir),
            port=server.port,
            user=creds.db_user,
            dbname="postgres",
            passfile="/dev/null",
        )


@pytest.mark.parametrize("role", ["primary", "replica"])
def test_mariadb_application_users_hold_neither_file_nor_grant_option(
    local_stack: LocalStack, role: str
) -> None:
    server = getattr(local_stack, f"mariadb_{role}")
    creds = local_stack.layout.credentials
    with server.root_connection() as conn, conn.cursor() as cur:
        for user in (creds.db_user, creds.tls_db_user):
            cur.execute("show grants for %s@'%%'", (user,))
            grants = " ".join(str(row[0]) for row in cur.fetchall()).upper()
            for forbidden in ("FILE", "GRANT OPTION", "ALL PRIVILEGES", "SUPER"):
                assert forbidden not in grants, (user, forbidden, grants)
            for privilege in APPLICATION_PRIVILEGES:
                assert privilege in grants, (user, privilege, grants)
    # And the server enforces it: without FILE, LOAD_FILE reads nothing (with it, any file mariadbd,
    # running as root, can read).
    with server.connect() as conn, conn.cursor() as cur:
        cur.execute("select load_file('/etc/hostname')")
        assert cur.fetchone() == (None,)


def test_stack_data_directory_is_private(local_stack: LocalStack) -> None:
    mode = stat.S_IMODE(local_stack.layout.path().stat().st_mode)

    # Postgres runs as its own user and needs to traverse to its data: 0701 at most.
    assert mode & 0o076 == 0, oct(mode)
