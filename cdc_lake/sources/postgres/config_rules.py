"""The Postgres engine's rules for a source in the config, and the defaults it derives (its config hook).

:class:`~cdc_lake.config.Source` calls :func:`source_rules` through the engine's declaration once its
fields have validated and it has refused the settings the engine does not declare (``server_id``,
``ssl_ca``, ...); a broken rule raises ``PydanticCustomError``, which the config reports as one line
under ``sources.<name>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic_core import PydanticCustomError

if TYPE_CHECKING:
    from cdc_lake.config import Source


def source_rules(source: Source) -> None:
    """A database to connect to; slot and publication names (default: by source name)."""
    if not source.primary.database:
        raise PydanticCustomError("engine_setting", "primary.database is required for postgres sources")
    source.slot_name = source.slot_name or f"cdc_lake_{source.name}"
    source.publication_name = source.publication_name or f"cdc_lake_{source.name}"
