"""The state store's schema revision: read with plain SQL, upgraded with the Alembic migrations shipped.

Writers (``onboard``, ``bootstrap``, ``apply``, ``run``, …) and ``cdc-lake migrate`` bring a store to
:data:`HEAD_REVISION` (:func:`upgrade_to_head`); read-only commands only compare its revision with it
(:func:`stored_revision`, one query), so they never migrate a shared store under running appliers of
another version, and never load Alembic (about a quarter of a second) when the store is current.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

from sqlalchemy import Connection, Engine, inspect, text

if TYPE_CHECKING:
    from alembic.config import Config as AlembicConfig

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
HEAD_REVISION: Final = "0010"
"""The newest migration in :data:`MIGRATIONS_DIR`; tests/unit/state/test_state_store_discipline.py checks it
against Alembic's script directory, so a new migration cannot forget it."""
VERSION_TABLE: Final = "alembic_version"
# Any constant works; it keeps two processes from migrating one Postgres database at once.
_PG_MIGRATION_LOCK = 7_303_251_001


def alembic_config() -> AlembicConfig:
    """An Alembic config pointing at the packaged migrations (there is no alembic.ini)."""
    from alembic.config import Config as AlembicConfig

    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    return config


def stored_revision(connection: Connection) -> str | None:
    """The revision the database is at, None when it has never been migrated (no version table)."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    found = connection.execute(text(f'SELECT version_num FROM "{VERSION_TABLE}"')).scalar_one_or_none()
    return None if found is None else str(found)


def known_revision(revision: str) -> bool:
    """Whether ``revision`` is one of the migrations this cdc-lake ships (an older store, not a newer one)."""
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    try:
        return ScriptDirectory.from_config(alembic_config()).get_revision(revision) is not None
    except CommandError:
        return False


def upgrade_to_head(engine: Engine) -> str | None:
    """Run every migration the database lacks; returns the revision it was at (None: created now).

    A database already at head is left untouched.  Raises ``alembic.util.CommandError`` when a newer
    cdc-lake migrated it (a revision this one does not know).
    """
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":  # the state store's SQLAlchemy dialect
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        before = stored_revision(connection)
        if before == HEAD_REVISION:
            return before
        from alembic import command

        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
        return before
