"""The state store: its connection lifecycle, and every area of it as one :class:`StateStore`.

``StateStore.open(url)`` accepts any SQLAlchemy URL (SQLite for one machine,
Postgres for a team), creates or migrates it to the newest schema and returns a store whose
methods each run in their own transaction and return plain values: the commands that write
the store open it so.  Read-only commands use ``StateStore.open_existing(url)``, which never
creates or migrates: a missing or older store is a one-line error naming ``cdc-lake migrate``.

The methods are those of the areas, each its own class and module over the one engine and
transaction of :class:`~cdc_lake.state.session.StoreSession`: sources, tables and their lifecycle
(:mod:`~cdc_lake.state.tables`), bootstrap watermarks and applied offsets
(:mod:`~cdc_lake.state.progress`), quarantined messages (:mod:`~cdc_lake.state.quarantine_store`),
re-bootstraps (:mod:`~cdc_lake.state.rebootstraps`), recaptures after a failover
(:mod:`~cdc_lake.state.recaptures`), runs and freshness (:mod:`~cdc_lake.state.runs`).
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

from sqlalchemy import URL, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import StaticPool

from cdc_lake.exceptions import StateStoreError
from cdc_lake.redaction import private_directory
from cdc_lake.state.migrate import HEAD_REVISION, known_revision, stored_revision, upgrade_to_head
from cdc_lake.state.progress import ProgressStore
from cdc_lake.state.quarantine_store import QuarantineStore
from cdc_lake.state.rebootstraps import RebootstrapStore
from cdc_lake.state.recaptures import RecaptureStore
from cdc_lake.state.runs import RunStore
from cdc_lake.state.session import one_line
from cdc_lake.state.tables import TableStore, versioned_path

__all__ = ["SQLITE_BUSY_TIMEOUT_SECONDS", "StateStore", "versioned_path"]

SQLITE_BUSY_TIMEOUT_SECONDS = 30


class StateStore(TableStore, ProgressStore, QuarantineStore, RebootstrapStore, RecaptureStore, RunStore):
    """Typed access to the state store database: every area over one engine."""

    @classmethod
    def open(cls, url: str) -> StateStore:
        """Connect to ``url``, create or upgrade its schema, and return the store (for writers)."""
        return cls.migrate(url)[0]

    @classmethod
    def migrate(cls, url: str) -> tuple[StateStore, str | None]:
        """Like :meth:`open`; also returns the schema revision the store was at (None: created now)."""
        parsed = _parse(url)
        from alembic.util import CommandError

        try:
            engine = _create_engine(parsed)
            before = upgrade_to_head(engine)
        except (SQLAlchemyError, OSError) as exc:
            raise StateStoreError(f"state store {_shown(parsed)}: cannot open: {one_line(exc)}") from None
        except CommandError as exc:
            # The database was migrated by a newer cdc-lake whose revisions this one does not know.
            raise StateStoreError(f"state store {_shown(parsed)}: cannot migrate: {one_line(exc)}") from None
        return cls(engine), before

    @classmethod
    def open_existing(cls, url: str) -> StateStore:
        """Connect to the store at ``url`` for reading; never creates or migrates it.

        Raises StateStoreError naming ``cdc-lake migrate`` when the store does not exist, has no schema
        or is at an older revision (one query, no Alembic), and naming the upgrade of cdc-lake when a
        newer one migrated it.
        """
        parsed = _parse(url)
        shown = _shown(parsed)
        if _sqlite_file(parsed) and not Path(str(parsed.database)).is_file():
            raise StateStoreError(f"state store {shown}: does not exist; create it with cdc-lake migrate")
        try:
            engine = _create_engine(parsed, create=False)
            with engine.connect() as connection:
                revision = stored_revision(connection)
        except (SQLAlchemyError, OSError) as exc:
            raise StateStoreError(f"state store {shown}: cannot open: {one_line(exc)}") from None
        if revision != HEAD_REVISION:
            engine.dispose()
            raise StateStoreError(f"state store {shown}: {_revision_problem(revision)}")
        return cls(engine)

    def close(self) -> None:
        """Release the database connections."""
        self._engine.dispose()

    def __enter__(self) -> StateStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def _parse(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError:
        raise StateStoreError("state_store.url is not a SQLAlchemy database URL") from None


def _shown(url: URL) -> str:
    """``url`` as errors show it: without its password."""
    return url.render_as_string(hide_password=True)


def _revision_problem(revision: str | None) -> str:
    """Why a store at schema ``revision`` cannot be read by this cdc-lake, and what to run."""
    if revision is None:
        return "has no cdc-lake schema; create it with cdc-lake migrate"
    if known_revision(revision):
        return (
            f"schema revision {revision}, this cdc-lake needs {HEAD_REVISION}; "
            "upgrade it with cdc-lake migrate"
        )
    return f"schema revision {revision} is newer than this cdc-lake knows ({HEAD_REVISION}); upgrade cdc-lake"


def _sqlite_file(url: URL) -> bool:
    """Whether ``url`` is a SQLite database in a file named by its path (not in memory, not a URI)."""
    database = url.database or ""
    return url.get_backend_name() == "sqlite" and database not in ("", ":memory:") and not (
        database.startswith("file:")
    )


def _create_engine(url: URL, create: bool = True) -> Engine:
    """An engine for ``url``; with ``create``, a SQLite file's directory is made (private) if missing."""
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True)
    database = url.database
    if not database or database == ":memory:":
        # One shared connection, or every session would see its own empty database.
        engine = create_engine(url, poolclass=StaticPool, connect_args={"check_same_thread": False})
    else:
        if create and _sqlite_file(url):
            private_directory(Path(database).parent)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS})
    event.listen(engine, "connect", _enable_sqlite_foreign_keys)
    return engine


def _enable_sqlite_foreign_keys(dbapi_connection: Any, connection_record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
