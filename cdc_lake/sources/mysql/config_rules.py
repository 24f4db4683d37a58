"""The MySQL family's rules for a source in the config (MySQL and MariaDB alike: its config hook).

:class:`~cdc_lake.config.Source` calls :func:`source_rules` through the engine's declaration once its
fields have validated and it has refused the settings the engine does not declare (``slot_name``,
``sslmode``, ...); a broken rule raises ``PydanticCustomError``, which the config reports as one line
under ``sources.<name>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic_core import PydanticCustomError

if TYPE_CHECKING:
    from cdc_lake.config import Source


def source_rules(source: Source) -> None:
    """A server id for the connector."""
    if source.server_id is None:
        raise PydanticCustomError("engine_setting", "server_id is required for mysql/mariadb sources")
