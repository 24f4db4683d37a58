"""A MySQL or MariaDB source's own settings: its server id, and its connections' TLS.

:class:`MySqlSource` requires the server id its connector reads the binlog as; each tier-0 table's
connector gets a stable id of its own derived from it (:meth:`MySqlSource.capture_ids`), each a
:class:`MySqlCaptureIds`.
:class:`MySqlConnection` adds the TLS settings: with ``ssl_ca`` every connection requires TLS and
verifies the server's chain against that CA (PEM), and ``ssl_verify_identity`` also checks the host
name (pymysql, the JDBC drivers, Debezium's ``database.ssl.mode``).  Debezium reads the CA from a
PKCS#12 truststore, ``ssl_truststore`` (default: ``ssl_ca`` with the suffix ``.p12``), which
onboarding makes from ``ssl_ca`` with ``keytool`` when it is missing; its password is read from the
environment variable named by ``ssl_truststore_password_env`` (by cdc-lake and, as ``${env:VAR}``, by
the Connect workers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Final

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from cdc_lake.exceptions import ConfigError
from cdc_lake.sources.settings import CaptureIds, Connection, Source, short_digest

_TIER0_SERVER_ID_SPREAD: Final = 100_000
_MAX_SERVER_ID: Final = 2**32 - 1


class MySqlConnection(Connection):
    """A MySQL or MariaDB server, with the TLS settings of every client."""

    ssl_ca: str | None = None
    ssl_verify_identity: bool = False
    ssl_truststore: str | None = None
    ssl_truststore_password_env: str = Field(
        default="CDC_LAKE_TRUSTSTORE_PASSWORD", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$"
    )

    @model_validator(mode="after")
    def _verification_needs_a_ca(self) -> MySqlConnection:
        if self.ssl_ca is None and (self.ssl_verify_identity or self.ssl_truststore is not None):
            raise PydanticCustomError(
                "tls_setting", "ssl_verify_identity and ssl_truststore are used only with ssl_ca"
            )
        return self

    def mysql_tls(self) -> bool:
        """Whether connections to this server require TLS (``ssl_ca`` is set)."""
        return self.ssl_ca is not None

    def truststore_path(self) -> str:
        """The PKCS#12 truststore Debezium verifies the server with: ``ssl_truststore`` or by ``ssl_ca``."""
        if self.ssl_ca is None:
            raise ConfigError("ssl_truststore is derived from ssl_ca, which is not set")
        return self.ssl_truststore or str(Path(self.ssl_ca).with_suffix(".p12"))


@dataclass(frozen=True)
class MySqlCaptureIds(CaptureIds):
    """A binlog connector's server id: the replica id it reads the binlog as (None: unset, refused where
    the template needs it)."""

    server_id: int | None = None

    @classmethod
    def of(cls, ids: CaptureIds) -> MySqlCaptureIds:
        """``ids`` as a binlog connector's; a capture planned without them names no server id."""
        return ids if isinstance(ids, MySqlCaptureIds) else cls()

    def describe(self) -> str:
        """``server id N``."""
        return f"server id {self.server_id}"

    def onboard_fields(self) -> dict[str, object]:
        """``server_id``."""
        return {**super().onboard_fields(), "server_id": self.server_id}

    def template_values(self) -> dict[str, str | None]:
        """``server_id``; ConfigError outside the ids a server takes (1 to 2^32 - 1)."""
        if self.server_id is not None and not 0 < self.server_id < 2**32:
            raise ConfigError(f"server_id {self.server_id} is out of range")
        return {"server_id": None if self.server_id is None else str(self.server_id)}


class MySqlSource(Source):
    """A MySQL or MariaDB source: the server id its connector reads the binlog as."""

    connection_model: ClassVar[type[Connection]] = MySqlConnection

    primary: MySqlConnection
    replica: MySqlConnection | None = None
    server_id: int | None = Field(default=None, ge=1, le=_MAX_SERVER_ID)

    @model_validator(mode="after")
    def _server_id(self) -> MySqlSource:
        """A server id for the connector."""
        if self.server_id is None:
            raise PydanticCustomError("engine_setting", "server_id is required for mysql/mariadb sources")
        return self

    def capture_ids(self, tier0_tables: Sequence[str]) -> dict[str | None, CaptureIds]:
        """The source's server id for the shared connector; per tier-0 table a stable id: the source's
        plus an offset hashed from the table name, distinct from the others."""
        ids: dict[str | None, CaptureIds] = {None: MySqlCaptureIds(server_id=self.server_id)}
        if self.server_id is None:
            return {**ids, **{name: MySqlCaptureIds() for name in tier0_tables}}
        taken = {self.server_id}
        for name in tier0_tables:
            candidate = self.server_id + 1 + int(short_digest(name), 16) % _TIER0_SERVER_ID_SPREAD
            while candidate in taken or candidate > _MAX_SERVER_ID:
                candidate = candidate + 1 if candidate < _MAX_SERVER_ID else 1
            taken.add(candidate)
            ids[name] = MySqlCaptureIds(server_id=candidate)
        return ids
