"""Bring a state store database to the newest schema with the Alembic migrations shipped in the package."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
# Any constant works; it keeps two processes from migrating one Postgres database at once.
_PG_MIGRATION_LOCK = 7_303_251_001


def alembic_config() -> AlembicConfig:
    """An Alembic config pointing at the packaged migrations (there is no alembic.ini)."""
    config = AlembicConfig()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("path_separator", "os")
    return config


def head_revision() -> str:
    """The newest migration revision shipped with this version of cdc-lake."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise RuntimeError(f"no migrations found in {MIGRATIONS_DIR}")
    return head


def current_revision(connection: Connection) -> str | None:
    """The revision the database is at, None when it has never been migrated."""
    return MigrationContext.configure(connection).get_current_revision()


def upgrade_to_head(engine: Engine) -> None:
    """Run every migration the database lacks; a database already at head is left untouched."""
    with engine.begin() as connection:
        if connection.dialect.name == "postgresql":  # the state store's SQLAlchemy dialect
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_MIGRATION_LOCK})
        if current_revision(connection) == head_revision():
            return
        config = alembic_config()
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
