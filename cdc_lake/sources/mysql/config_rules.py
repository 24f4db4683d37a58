"""The MySQL family's rules for a source in the config (MySQL and MariaDB alike: its config hook).

:class:`~cdc_lake.config.Source` calls :func:`source_rules` through the engine's declaration once its
fields have validated; a broken rule raises ``PydanticCustomError``, which the config reports as one
line under ``sources.<name>``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic_core import PydanticCustomError

if TYPE_CHECKING:
    from cdc_lake.config import Source


def source_rules(source: Source) -> None:
    """A server id for the connector, no slots, the MySQL family's TLS settings only."""
    for role, connection in (("primary", source.primary), ("replica", source.replica)):
        if connection is not None and connection.tls_settings():
            raise PydanticCustomError(
                "engine_setting",
                "{role}.sslmode and {role}.sslrootcert apply only to postgres sources "
                "(mysql/mariadb: ssl_ca, ssl_verify_identity)",
                {"role": role},
            )
    if source.slot_name is not None or source.publication_name is not None:
        raise PydanticCustomError(
            "engine_setting", "slot_name and publication_name apply only to postgres sources"
        )
    if source.server_id is None:
        raise PydanticCustomError("engine_setting", "server_id is required for mysql/mariadb sources")
    if source.interval_handling != "numeric":
        raise PydanticCustomError("engine_setting", "interval_handling applies only to postgres sources")
