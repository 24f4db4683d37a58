"""One bootstrap per table at a time: a lock that dies with the process holding it.

A crashed or killed bootstrap must not keep the table locked (re-running it resumes the work), so the
lock is never a flag in a table: it is a session-level advisory lock of the state store's database
(Postgres ``pg_try_advisory_lock``, MySQL/MariaDB ``GET_LOCK``) held on a connection of its own, or,
for a SQLite state store (one machine), an ``flock`` on a file next to the database.  The operating
system or the database releases it when the holder exits, however it exits.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from cdc_lake.exceptions import BootstrapBusyError, StateStoreError

_LOCK_NAMESPACE = "cdc-lake bootstrap "
_memory_locks: set[str] = set()
_memory_guard = threading.Lock()


def _digest(table: str) -> bytes:
    return hashlib.sha256((_LOCK_NAMESPACE + table).encode("utf-8")).digest()


def _busy(table: str) -> BootstrapBusyError:
    return BootstrapBusyError(
        f"table {table}: another bootstrap of this table is running; wait for it, or stop it and run again"
    )


@contextlib.contextmanager
def _file_lock(path: Path, table: str) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _busy(table) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def _memory_lock(table: str) -> Iterator[None]:
    with _memory_guard:
        if table in _memory_locks:
            raise _busy(table)
        _memory_locks.add(table)
    try:
        yield
    finally:
        with _memory_guard:
            _memory_locks.discard(table)


def _try_database_lock(connection: Connection, backend: str, table: str) -> bool:
    if backend == "postgresql":
        key = int.from_bytes(_digest(table)[:8], "big", signed=True)
        return bool(connection.execute(text("select pg_try_advisory_lock(:key)"), {"key": key}).scalar())
    name = "cdc-lake-bootstrap-" + _digest(table).hex()[:40]
    return connection.execute(text("select get_lock(:name, 0)"), {"name": name}).scalar() == 1


@contextlib.contextmanager
def _database_lock(url: str, backend: str, table: str) -> Iterator[None]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        try:
            connection = engine.connect()
            locked = _try_database_lock(connection, backend, table)
        except SQLAlchemyError as exc:
            raise StateStoreError(
                f"state store: cannot take the bootstrap lock of {table}: {type(exc).__name__}"
            ) from None
        # Closing the connection releases the session lock.
        with connection:
            if not locked:
                raise _busy(table)
            yield
    finally:
        engine.dispose()


@contextlib.contextmanager
def table_lock(state_store_url: str, table: str) -> Iterator[None]:
    """Hold the bootstrap lock of ``table`` for the block; raise BootstrapBusyError if someone else has it."""
    url = make_url(state_store_url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        database = url.database or ""
        if not database or database == ":memory:" or database.startswith("file:"):
            with _memory_lock(table):
                yield
            return
        path = Path(database)
        lock_file = path.parent / f".{path.name}.locks" / f"bootstrap-{_digest(table).hex()[:32]}"
        with _file_lock(lock_file, table):
            yield
        return
    if backend in ("postgresql", "mysql", "mariadb"):
        with _database_lock(state_store_url, backend, table):
            yield
        return
    raise StateStoreError(
        f"state store backend {backend} offers no lock for bootstraps (use sqlite, postgresql or mysql)"
    )
