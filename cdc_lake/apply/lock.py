"""One writer per table: a lock each apply batch holds, released however its process ends.

Hudi runs in single-writer mode, so two processes applying one table at once (``cdc-lake run`` and
``apply --once``, or a bootstrap's catch-up) could interleave commits.  Every batch therefore takes the
table's apply lock first; a batch that finds it taken is skipped, not queued.  The lock is an advisory
lock of the state store's database held on a connection of its own (Postgres ``pg_try_advisory_lock``,
MySQL/MariaDB ``GET_LOCK``), or, for a SQLite state store (one machine), an ``flock`` on a file next to
the database: the database or the kernel drops it when the holder dies, even by SIGKILL.
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
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from cdc_lake.exceptions import StateStoreError

_NAMESPACE = "cdc-lake apply "
_held_in_memory: set[str] = set()
_memory_guard = threading.Lock()


def _digest(table: str) -> bytes:
    return hashlib.sha256((_NAMESPACE + table).encode("utf-8")).digest()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[bool]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


@contextlib.contextmanager
def _memory_lock(table: str) -> Iterator[bool]:
    with _memory_guard:
        acquired = table not in _held_in_memory
        _held_in_memory.add(table)
    try:
        yield acquired
    finally:
        if acquired:
            with _memory_guard:
                _held_in_memory.discard(table)


@contextlib.contextmanager
def _database_lock(url: str, backend: str, table: str) -> Iterator[bool]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        try:
            connection = engine.connect()
            params: dict[str, object]
            if backend == "postgresql":
                query = "select pg_try_advisory_lock(:key)"
                params = {"key": int.from_bytes(_digest(table)[:8], "big", signed=True)}
            else:
                query = "select get_lock(:name, 0)"
                params = {"name": "cdc-lake-apply-" + _digest(table).hex()[:40]}
            acquired = connection.execute(text(query), params).scalar() in (True, 1)
        except SQLAlchemyError as exc:
            raise StateStoreError(
                f"state store: cannot take the apply lock of {table}: {type(exc).__name__}"
            ) from None
        with connection:  # closing the connection releases the session lock
            yield acquired
    finally:
        engine.dispose()


@contextlib.contextmanager
def apply_lock(state_store_url: str, table: str) -> Iterator[bool]:
    """Try to hold ``table``'s apply lock for the block; yields whether it was acquired."""
    url = make_url(state_store_url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        database = url.database or ""
        if not database or database == ":memory:" or database.startswith("file:"):
            with _memory_lock(table) as acquired:
                yield acquired
            return
        path = Path(database)
        with _file_lock(
            path.parent / f".{path.name}.locks" / f"apply-{_digest(table).hex()[:32]}"
        ) as acquired:
            yield acquired
        return
    if backend in ("postgresql", "mysql", "mariadb"):
        with _database_lock(state_store_url, backend, table) as acquired:
            yield acquired
        return
    raise StateStoreError(
        f"state store backend {backend} offers no lock for appliers (use sqlite, postgresql or mysql)"
    )
