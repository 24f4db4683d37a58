"""Alembic environment for the state store: migrations run on the connection the caller passes in.

``cdc_lake.state.migrate.upgrade_to_head`` puts an open connection in
``config.attributes["connection"]``; there is no alembic.ini and no offline mode.
"""

from __future__ import annotations

from alembic import context

from cdc_lake.state.models import Base

connection = context.config.attributes["connection"]
# render_as_batch lets later migrations alter tables on SQLite (which cannot ALTER most things).
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
