"""A Postgres source's own settings: its slot, publication and interval encoding, and its connections' TLS.

:class:`PostgresSource` requires a database to connect to and names the slot and publication after the
source unless set; each tier-0 table gets a slot and publication of its own (:func:`tier0_pg_name`),
both a connector's :class:`PostgresCaptureIds`. :class:`PostgresConnection` adds ``sslmode`` and
``sslrootcert``, used by every connection cdc-lake opens to the server (preflight, positions, lag,
bootstrap and validate JDBC reads) and rendered into the Debezium connector (``database.sslmode``,
``database.sslrootcert``: the path must exist on the Connect workers too). ``verify-full`` checks the
certificate chain and the host name.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Final, Literal

from pydantic import model_validator
from pydantic_core import PydanticCustomError

from cdc_lake.sources.settings import CaptureIds, Connection, IntervalHandling, Source, short_digest

PG_NAME_MAX: Final = 63
_UNSAFE_PG_CHARS = re.compile(r"[^a-z0-9_]")


def tier0_pg_name(base: str, table_name: str) -> str:
    """A tier-0 slot or publication name: ``<base>_t0_<schema>_<table>_<hash>``, at most 63 characters.

    The hash of the table name keeps names distinct when lower-casing, replacing characters
    or truncating would make two tables' names equal.
    """
    readable = _UNSAFE_PG_CHARS.sub("_", f"{base}_t0_{table_name.replace('.', '_')}".lower())
    suffix = f"_{short_digest(table_name)}"
    return readable[: PG_NAME_MAX - len(suffix)] + suffix


@dataclass(frozen=True)
class PostgresCaptureIds(CaptureIds):
    """A Postgres connector's slot and publication (None: unset, refused where a template needs it)."""

    slot_name: str | None = None
    publication_name: str | None = None

    @classmethod
    def of(cls, ids: CaptureIds) -> PostgresCaptureIds:
        """``ids`` as a Postgres connector's; a capture planned without them names neither."""
        return ids if isinstance(ids, PostgresCaptureIds) else cls()

    @property
    def slot(self) -> str | None:
        """The connector's replication slot."""
        return self.slot_name

    @property
    def publication(self) -> str | None:
        """The publication the slot reads."""
        return self.publication_name

    def describe(self) -> str:
        """The slot's name."""
        return self.slot_name or ""

    def onboard_fields(self) -> dict[str, object]:
        """``slot`` and ``publication``."""
        return {**super().onboard_fields(), "slot": self.slot_name, "publication": self.publication_name}

    def template_values(self) -> dict[str, str | None]:
        """``slot_name`` and ``publication_name``."""
        return {"slot_name": self.slot_name, "publication_name": self.publication_name}


class PostgresConnection(Connection):
    """A Postgres server, with the libpq/pgJDBC TLS settings."""

    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] | None = None
    sslrootcert: str | None = None

    @model_validator(mode="after")
    def _root_cert_needs_verification(self) -> PostgresConnection:
        if self.sslrootcert is not None and self.sslmode not in ("verify-ca", "verify-full"):
            raise PydanticCustomError(
                "tls_setting", "sslrootcert is used only with sslmode verify-ca or verify-full"
            )
        return self

    def tls_settings(self) -> dict[str, str]:
        """The libpq/pgJDBC TLS parameters set for this server (empty: the driver defaults)."""
        settings = {"sslmode": self.sslmode, "sslrootcert": self.sslrootcert}
        return {key: value for key, value in settings.items() if value is not None}


class PostgresSource(Source):
    """A Postgres source: slot and publication (default ``cdc_lake_<name>``), interval encoding."""

    connection_model: ClassVar[type[Connection]] = PostgresConnection

    primary: PostgresConnection
    replica: PostgresConnection | None = None
    slot_name: str | None = None
    publication_name: str | None = None
    interval_handling: IntervalHandling = "numeric"
    """The connector's ``interval.handling.mode``: ``numeric`` (Debezium's default, lossy, so interval
    columns are refused) or ``string`` (exact text, ``docs/type-mapping.md``)."""

    @model_validator(mode="after")
    def _database_and_names(self) -> PostgresSource:
        """A database to connect to; slot and publication names (default: by source name)."""
        if not self.primary.database:
            raise PydanticCustomError("engine_setting", "primary.database is required for postgres sources")
        self.slot_name = self.slot_name or f"cdc_lake_{self.name}"
        self.publication_name = self.publication_name or f"cdc_lake_{self.name}"
        return self

    def capture_ids(self, tier0_tables: Sequence[str]) -> dict[str | None, CaptureIds]:
        """The source's slot and publication for the shared connector; each tier-0 table its own."""
        ids: dict[str | None, CaptureIds] = {
            None: PostgresCaptureIds(slot_name=self.slot_name, publication_name=self.publication_name)
        }
        for name in tier0_tables:
            ids[name] = PostgresCaptureIds(
                slot_name=tier0_pg_name(self.slot_name, name) if self.slot_name else None,
                publication_name=tier0_pg_name(self.publication_name, name)
                if self.publication_name
                else None,
            )
        return ids

    def interval_mode(self) -> IntervalHandling:
        """The source's ``interval_handling``."""
        return self.interval_handling
