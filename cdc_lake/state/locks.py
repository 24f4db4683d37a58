"""Per-table locks that die with the process holding them: one apply writer, one bootstrap at a time.

Hudi runs in single-writer mode, so every apply batch (``cdc-lake run``, ``apply --once``, a bootstrap's
catch-up) holds the table's :attr:`LockPurpose.APPLY` lock and a batch that finds it taken is skipped,
not queued; a bootstrap (or re-bootstrap) holds :attr:`LockPurpose.BOOTSTRAP` for its whole run, and
an execution of a table's services outside its writes :attr:`LockPurpose.TABLE_SERVICES`
(:mod:`cdc_lake.apply.table_services`).  A
crashed or killed holder must never keep a table locked, so a lock is never a flag in a table: it is a
session-level advisory lock of the state store's database held on a connection of its own (Postgres
``pg_try_advisory_lock``, MySQL/MariaDB ``GET_LOCK``), or, for a SQLite state store (one machine), an
``flock`` on a file next to the database (holding the holder's pid).  The database or the kernel
releases it when the holder exits, however it exits, even by SIGKILL.  Locks of different purposes
never conflict.

A one-off command that needs the apply lock of a table ``cdc-lake run`` keeps applying (``repair``, a
re-bootstrap's switch) would rarely find it free: ``run`` takes it again right after each batch.  So it
waits in turn (:func:`waited_table_lock`): it holds the table's :attr:`LockPurpose.APPLY_QUEUE` lock
while it polls, and ``run`` leaves a table whose queue lock is held alone (:func:`batch_lock`) until the
command is done; one batch in flight ends first.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from cdc_lake.exceptions import StateStoreError
from cdc_lake.redaction import private_directory


class LockPurpose(enum.StrEnum):
    """What a table lock guards; each purpose is a lock of its own."""

    APPLY = "apply"
    APPLY_QUEUE = "apply-queue"
    """Held by a command waiting for the apply lock: the applier's batches leave the table alone."""
    BOOTSTRAP = "bootstrap"
    TABLE_SERVICES = "table-services"


# The state store's SQLAlchemy dialect names (the database holding cdc-lake's state, not a source
# engine): Postgres takes an advisory lock by a 64-bit key, the MySQL family a named GET_LOCK.
_ADVISORY_KEY_DIALECT = "postgresql"
_NAMED_LOCK_DIALECTS = frozenset({"mysql", "mariadb"})

FENCE_SECONDS = 2.0
"""How often :meth:`HeldLock.fenced` re-checks a database lock while its holder writes."""


class HeldLock:
    """The outcome of taking a lock: true when acquired; :meth:`verify` re-checks it is still held.

    A database session lock dies with its connection: a state database restart, a failover or a
    connection pooler can drop it while the holder runs on, and another process may then take it.  A
    writer calls :meth:`verify` right before it commits, and writes inside :meth:`fenced`, which
    re-checks the lock every :data:`FENCE_SECONDS` while the write runs and stops it when the lock is
    lost, so a long write does not go on beside another writer.  Once found lost, a lock stays lost.
    """

    def __init__(self, acquired: bool, what: str, check: Callable[[], bool] | None = None) -> None:
        self.acquired = acquired
        self._what = what
        self._check = check
        self._guard = threading.Lock()  # the lock's connection serves one caller at a time
        self._lost: str | None = None

    def __bool__(self) -> bool:
        return self.acquired

    @property
    def lost(self) -> str | None:
        """Why the lock was found lost (by :meth:`verify` or :meth:`fenced`); None while it is held."""
        return self._lost

    def verify(self) -> None:
        """Raise StateStoreError unless this lock is still held (a file or in-process lock always is)."""
        if not self.acquired:
            raise StateStoreError(f"{self._what} is not held")
        if self._held():
            return
        raise StateStoreError(
            f"{self._what} was lost ({self._lost}: the state store's connection dropped?); the batch was "
            "not committed and the next one starts from the last commit"
        )

    def _held(self) -> bool:
        with self._guard:
            if self._lost is None and self._check is not None:
                try:
                    held = self._check()
                except SQLAlchemyError as exc:
                    held, cause = False, type(exc).__name__
                else:
                    cause = "another session holds it, or none does"
                if not held:
                    self._lost = cause
            return self._lost is None

    @contextlib.contextmanager
    def fenced(self, on_lost: Callable[[], None], every: float = FENCE_SECONDS) -> Iterator[None]:
        """Re-check the lock every ``every`` seconds while the block runs; the first time it is found
        lost, call ``on_lost`` (from another thread: the applier cancels the table's Spark jobs, so the
        Hudi write stops before it commits).  A lock with nothing to re-check (a file or in-process
        lock, which cannot be lost) is not watched."""
        if self._check is None:
            yield
            return
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(every):
                if not self._held():
                    on_lost()
                    return

        watcher = threading.Thread(target=watch, name=f"fence: {self._what}", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            stop.set()
            watcher.join()


_held_in_memory: set[tuple[LockPurpose, str]] = set()
_memory_guard = threading.Lock()


def _digest(purpose: LockPurpose, table: str) -> bytes:
    return hashlib.sha256(f"cdc-lake {purpose.value} {table}".encode()).digest()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[bool]:
    private_directory(path.parent)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield True
    finally:
        os.close(fd)


@contextlib.contextmanager
def _memory_lock(purpose: LockPurpose, table: str) -> Iterator[bool]:
    with _memory_guard:
        acquired = (purpose, table) not in _held_in_memory
        _held_in_memory.add((purpose, table))
    try:
        yield acquired
    finally:
        if acquired:
            with _memory_guard:
                _held_in_memory.discard((purpose, table))


@contextlib.contextmanager
def _database_lock(url: str, backend: str, purpose: LockPurpose, table: str) -> Iterator[HeldLock]:
    digest = _digest(purpose, table)
    params: dict[str, object]
    if backend == _ADVISORY_KEY_DIALECT:
        query = "select pg_try_advisory_lock(:key)"
        key = int.from_bytes(digest[:8], "big", signed=True)
        params = {"key": key}
        # The 64-bit key is stored as classid (high 32 bits) and objid (low 32 bits), objsubid 1.
        held_query = (
            "select count(*) from pg_locks where locktype = 'advisory' and granted and objsubid = 1 "
            "and pid = pg_backend_pid() and classid = :high and objid = :low"
        )
        unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
        held_params: dict[str, object] = {"high": unsigned >> 32, "low": unsigned & 0xFFFF_FFFF}
    else:
        query = "select get_lock(:name, 0)"
        params = {"name": f"cdc-lake-{purpose.value}-{digest.hex()[:40]}"}
        held_query = "select is_used_lock(:name) = connection_id()"
        held_params = params
    engine = create_engine(url, poolclass=NullPool)
    try:
        try:
            connection = engine.connect()
            acquired = connection.execute(text(query), params).scalar() in (True, 1)
        except SQLAlchemyError as exc:
            raise StateStoreError(
                f"state store: cannot take the {purpose.value} lock of {table}: {type(exc).__name__}"
            ) from None
        def still_held() -> bool:
            return connection.execute(text(held_query), held_params).scalar() in (True, 1)

        with connection:  # closing the connection releases the session lock
            yield HeldLock(acquired, f"the {purpose.value} lock of {table}", still_held)
    finally:
        engine.dispose()


@contextlib.contextmanager
def table_lock(state_store_url: str, purpose: LockPurpose, table: str) -> Iterator[HeldLock]:
    """Try to hold ``table``'s ``purpose`` lock for the block; yields it, true when acquired.

    Raises StateStoreError when the state store's backend offers no lock or cannot be reached.
    """
    url = make_url(state_store_url)
    backend = url.get_backend_name()
    if backend == "sqlite":
        database = url.database or ""
        if not database or database == ":memory:" or database.startswith("file:"):
            with _memory_lock(purpose, table) as acquired:
                yield HeldLock(acquired, f"the {purpose.value} lock of {table}")
            return
        path = Path(database)
        name = f"{purpose.value}-{_digest(purpose, table).hex()[:32]}"
        with _file_lock(path.parent / f".{path.name}.locks" / name) as acquired:
            yield HeldLock(acquired, f"the {purpose.value} lock of {table}")
        return
    if backend == _ADVISORY_KEY_DIALECT or backend in _NAMED_LOCK_DIALECTS:
        with _database_lock(state_store_url, backend, purpose, table) as held:
            yield held
        return
    raise StateStoreError(
        f"state store backend {backend} offers no {purpose.value} lock (use sqlite, postgresql or mysql)"
    )


@contextlib.contextmanager
def waited_table_lock(
    state_store_url: str, purpose: LockPurpose, table: str, seconds: float, poll: float = 0.05
) -> Iterator[HeldLock]:
    """:func:`table_lock`, tried again every ``poll`` seconds for up to ``seconds`` while another process
    holds it; yields it, false when it stayed held.  For the apply lock it waits in turn: holding the
    table's queue lock (see the module docstring), so ``cdc-lake run``, which takes the lock for each
    batch, leaves it to this caller after the batch in flight."""
    deadline = time.monotonic() + seconds
    with contextlib.ExitStack() as queued:
        while purpose is LockPurpose.APPLY:
            attempt = contextlib.ExitStack()
            if attempt.enter_context(table_lock(state_store_url, LockPurpose.APPLY_QUEUE, table)):
                queued.enter_context(attempt)  # held until this caller is done
                break
            attempt.close()
            if time.monotonic() >= deadline:  # another command kept the turn
                break
            time.sleep(poll)
        while True:
            with table_lock(state_store_url, purpose, table) as lock:
                if lock or time.monotonic() >= deadline:
                    yield lock
                    return
            time.sleep(poll)


@contextlib.contextmanager
def batch_lock(state_store_url: str, table: str) -> Iterator[HeldLock]:
    """``table``'s apply lock as the applier takes it for a batch: refused (false) while a command waits
    for it in turn (holds its queue lock, :func:`waited_table_lock`), else :func:`table_lock`."""
    with table_lock(state_store_url, LockPurpose.APPLY_QUEUE, table) as free:
        waiting = not free
    if waiting:
        yield HeldLock(False, f"the {LockPurpose.APPLY.value} lock of {table}")
        return
    with table_lock(state_store_url, LockPurpose.APPLY, table) as lock:
        yield lock
