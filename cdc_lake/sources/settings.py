"""The config of one source: what every engine's source has, and how an engine adds its own settings.

:class:`Source` (a name, an engine, a primary, a replica, a topic prefix, a heartbeat interval, tables)
and :class:`Connection` (host, port, database, user, password) hold only what every engine takes.  An
engine adds its settings by subclassing both in its package (``sources/<engine>/settings.py``: the
Postgres slot and TLS, the MySQL server id and TLS) and declaring its source model in its capabilities
(:attr:`~cdc_lake.sources.capabilities.EngineCapabilities.source_model`); its own validators require
what it needs and fill its defaults.  A source is validated as its engine's model, found in the
registry by its ``engine``: ``Source.model_validate(...)``, ``Source(...)`` and the config's
``sources`` build the engine's model.

A source that sets another engine's setting is refused in one line naming the engines that take it
(``server_id applies only to mariadb/mysql sources``), not as an unknown key: the settings a source
may set are the union of the registered engines' models.  The source's hooks give shared code what it
needs of the engine's settings without naming an engine: :meth:`Source.capture_ids` (each connector's
ids, a :class:`CaptureIds` of the engine's: slot and publication, or server id) and
:meth:`Source.interval_mode`.

This module imports neither the config nor an engine's driver: the config imports it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final, Literal, Self, TypeVar

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from cdc_lake.exceptions import SourceEngineError, UnknownTableError
from cdc_lake.representation import parse_column_type

TableTypeName = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]
"""The table types a table may be created with (``cdc_lake.lake.layout.TableType``'s values)."""
IndexName = Literal["GLOBAL_BLOOM", "RECORD_INDEX", "GLOBAL_SIMPLE", "BLOOM", "SIMPLE", "BUCKET"]
"""The indexes a table may be created with (``cdc_lake.lake.layout.IndexType``'s values)."""

DEFAULT_HEARTBEAT_SECONDS: Final = 2.0
"""A source's default heartbeat interval.  On an idle Postgres table the hand-off waits for two
heartbeats (the first writes the heartbeat row, the next commits the offset past it): 2 s keeps that
near 5 s, where 10 s cost about 17 s per table (docs/benchmarks.md, goal 4); its cost is one row
upsert and one Kafka record per connector per interval."""

# Source names become Postgres slot names, Kafka topic prefixes and lake directories;
# slot names only allow lowercase letters, digits and underscores.
_SOURCE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")
_HASH_CHARS = 8

_Model = TypeVar("_Model", bound="ConfigModel")

IntervalHandling = Literal["numeric", "string"]
"""How a source's connector sends interval columns: ``numeric`` (Debezium's default, lossy, so interval
columns are refused) or ``string`` (exact text, ``docs/type-mapping.md``); a Postgres setting."""


def short_digest(text: str) -> str:
    """Eight hexadecimal digits of ``text``'s SHA-1: what stable generated names add to stay distinct."""
    return hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:_HASH_CHARS]


def _scalar_to_str(value: object) -> object:
    """Let YAML numbers and booleans stand where a string is expected (``false`` becomes ``"false"``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


PassthroughValue = Annotated[str, BeforeValidator(_scalar_to_str)]
Secret = Annotated[SecretStr, BeforeValidator(_scalar_to_str)]


FormatOptions = dict[str, PassthroughValue]
"""The lake format's options passed to every write of a table; the config checks each key against the
format ``lake.format`` names (docs/hudi.md#passing-hudi-options)."""


class ConfigModel(BaseModel):
    """Base for every config model: unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class Connection(ConfigModel):
    """How to reach one database server; an engine's subclass adds its TLS settings."""

    host: str = "127.0.0.1"
    port: int = Field(ge=1, le=65535)
    database: str | None = None
    user: str
    password: Secret | None = None

    @classmethod
    def own_settings(cls) -> frozenset[str]:
        """The settings this engine's connections take beyond every engine's."""
        return frozenset(cls.model_fields) - frozenset(Connection.model_fields)


class Table(ConfigModel):
    """One replicated table, named ``schema.table`` (MySQL: ``database.table``)."""

    name: str
    tier: int = Field(default=1, ge=0)
    key: list[str] | None = None
    columns: list[str] | None = None
    partition_by: list[str] | None = None
    table_type: TableTypeName | None = None
    index: IndexName | None = None
    """The table's own layout (None: ``lake.table_type``, ``lake.index``), e.g. MERGE_ON_READ + BUCKET for
    a busy tier-0 table among COPY_ON_WRITE ones.  A layout is what a new copy is created with: an existing
    table keeps its own (docs/hudi.md, "A table keeps its layout"), so a change is a re-bootstrap."""
    format_options: FormatOptions = Field(default_factory=dict)
    column_types: dict[str, str] = Field(default_factory=dict)
    """Per-column lake representation for columns whose default mapping is not exact
    (docs/type-mapping.md): ``string`` (the exact text) or ``decimal(p,s)`` (Postgres unconstrained
    ``numeric``: fails loudly on a value it cannot hold).  Bootstrap and applier both honour it."""
    schema_changes: Literal["evolve", "freeze", "rebootstrap"] = "evolve"
    """What a new source schema does to the lake table (docs/schema-changes.md): ``evolve`` follows
    additive and widening changes and stops on others (SCHEMA_CHANGED); ``freeze`` ignores columns the
    lake table lacks; ``rebootstrap``: ``cdc-lake run`` re-bootstraps the table when it stops."""

    @field_validator("column_types")
    @classmethod
    def _known_column_types(cls, value: dict[str, str]) -> dict[str, str]:
        for column, spec in value.items():
            try:
                parse_column_type(spec)
            except ValueError as exc:
                raise PydanticCustomError(
                    "column_type", "column {column}: {problem}", {"column": column, "problem": str(exc)}
                ) from exc
        return value

    @field_validator("name")
    @classmethod
    def _one_dot(cls, value: str) -> str:
        parts = value.split(".")
        if len(parts) != 2 or not all(parts):
            raise PydanticCustomError("table_name", "must be schema.table (exactly one dot)")
        return value

    @property
    def schema_name(self) -> str:
        """The schema (MySQL: database) part of the name."""
        return self.name.split(".")[0]

    @property
    def table_name(self) -> str:
        """The table part of the name."""
        return self.name.split(".")[1]

    def qualified_name(self, source: Source | str) -> str:
        """``source.schema.table``: how commands, the state store and logs name this table."""
        source_name = source if isinstance(source, str) else source.name
        return f"{source_name}.{self.name}"


@dataclass(frozen=True)
class CaptureIds:
    """What names one connector's capture on its source, defined by the engine's package: its slot and
    publication (Postgres), its server id (MySQL/MariaDB).  Shared code asks only what is here: the slot
    the connector owns (onboarding creates a new connector's slot through it and releases it), a short
    description, the fields ``cdc-lake onboard --json`` prints and the connector template's values.

    This base names nothing, for an engine whose connectors need no ids on the source.  The JSON fields
    keep the keys they always had (``slot``, ``publication``, ``server_id``; null where an engine has
    none), an engine's subclass filling its own.
    """

    ONBOARD_KEYS: ClassVar[tuple[str, ...]] = ("slot", "publication", "server_id")

    @property
    def slot(self) -> str | None:
        """The replication slot the connector owns on the source; None where the engine keeps none."""
        return None

    @property
    def publication(self) -> str | None:
        """The publication the connector's slot reads; None where the engine keeps none."""
        return None

    def describe(self) -> str:
        """The ids in a few words, for a plan's table (``-``: none)."""
        return "-"

    def onboard_fields(self) -> dict[str, object]:
        """The ids as the onboarding's JSON output prints them, one key each."""
        return dict.fromkeys(self.ONBOARD_KEYS)

    def template_values(self) -> dict[str, str | None]:
        """The connector template's placeholders the ids fill (None: unset, named when a template
        needs it)."""
        return {}


class Source(ConfigModel):
    """One source database: its primary (CDC), its read replica (bootstrap) and its tables.

    ``name`` comes from the key under ``sources``; connector names and defaults derive from it.
    ``engine`` names a registered engine (:data:`cdc_lake.sources.ENGINES`), whose source model (a
    subclass of this one) holds its own settings: ``Source(engine=..., ...)`` builds that model.
    """

    connection_model: ClassVar[type[Connection]] = Connection
    """The engine's connection model (its ``primary`` and ``replica``)."""

    name: str
    engine: str
    primary: Connection
    replica: Connection | None = None
    topic_prefix: str | None = None
    heartbeat_interval_seconds: float = Field(default=DEFAULT_HEARTBEAT_SECONDS, ge=0.5, le=3600)
    """Debezium's ``heartbeat.interval.ms`` for this source's connectors: how often an idle connector
    commits an offset (and, on Postgres, writes its heartbeat row).  The bootstrap's hand-off and
    onboarding wait for those on an idle table, so it bounds their wait (docs/onboarding.md)."""
    tables: list[Table] = Field(default_factory=list)

    def __new__(cls, **data: Any) -> Self:
        """``Source(engine=..., ...)`` is a source of that engine's model."""
        if cls is Source and isinstance(data.get("engine"), str):
            try:
                return super().__new__(engine_source_model(data["engine"]))  # type: ignore[return-value]
            except SourceEngineError:
                pass  # validation names the unknown engine
        return super().__new__(cls)

    @classmethod
    def own_settings(cls) -> frozenset[str]:
        """The settings this engine's sources take beyond every engine's."""
        return frozenset(cls.model_fields) - frozenset(Source.model_fields)

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not _SOURCE_NAME.match(value):
            raise PydanticCustomError(
                "source_name", "source names must be lowercase identifiers ([a-z_][a-z0-9_]*)"
            )
        return value

    @field_validator("primary", "replica", mode="before")
    @classmethod
    def _as_engine_connection(cls, value: object) -> object:
        """A connection built as the shared model becomes this engine's (its settings are every engine's)."""
        if isinstance(value, Connection) and not isinstance(value, cls.connection_model):
            return value.model_dump(exclude_unset=True)
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _as_engine_model(cls, data: object, handler: ModelWrapValidatorHandler[Source]) -> Source:
        """A source validated as the shared model is validated as its engine's; an ``engine`` no engine
        registers is one line listing the known engines."""
        engine = data.get("engine") if isinstance(data, Mapping) else None
        if cls is not Source or not isinstance(engine, str):
            return handler(data)
        try:
            model = engine_source_model(engine)
        except SourceEngineError as exc:
            problem = PydanticCustomError("engine", "{problem}", {"problem": str(exc)})
            raise ValidationError.from_exception_data(
                "Source", [{"type": problem, "loc": ("engine",), "input": engine}]
            ) from None
        return model.model_validate(data)

    @model_validator(mode="before")
    @classmethod
    def _only_own_engine_settings(cls, data: object) -> object:
        """Refuse a setting of another engine in one line naming the engines that take it."""
        if isinstance(data, Mapping) and cls is not Source:
            _refuse_foreign_settings(cls, data)
        return data

    @model_validator(mode="after")
    def _defaults_and_unique_tables(self) -> Source:
        self.topic_prefix = self.topic_prefix or self.name
        seen: set[str] = set()
        for table in self.tables:
            if table.name in seen:
                raise PydanticCustomError(
                    "duplicate_table", "table {table} is listed more than once", {"table": table.name}
                )
            seen.add(table.name)
        return self

    def capture_ids(self, tier0_tables: Sequence[str]) -> dict[str | None, CaptureIds]:
        """What names each connector's capture: the shared connector's under None, then each tier-0
        table's (``schema.table``) own; empty where the engine names none."""
        return {None: CaptureIds(), **{name: CaptureIds() for name in tier0_tables}}

    def interval_mode(self) -> IntervalHandling:
        """How this source's connector sends interval columns (the engine's default: ``numeric``)."""
        return "numeric"

    def table(self, name: str) -> Table:
        """The table called ``schema.table`` in this source."""
        for table in self.tables:
            if table.name == name:
                return table
        raise UnknownTableError(f"table {self.name}.{name} is not in the config")


def engine_model(value: ConfigModel, model: type[_Model]) -> _Model:
    """``value`` (a source or a connection) as ``model``, the engine's, which its engine's are built as."""
    if not isinstance(value, model):
        raise SourceEngineError(f"{type(value).__name__} is not a {model.__name__}")
    return value


def engine_source_model(engine: str) -> type[Source]:
    """The source model of the registered engine ``engine``; SourceEngineError listing the known ones."""
    # The registry's package imports the engines, whose models subclass this module's: asked once
    # every module is loaded.
    from cdc_lake import sources

    return sources.capabilities_for(engine).source_model


def _engines_taking(setting: str, connection: bool) -> str:
    """The registered engines whose sources (or connections) take ``setting``, as ``mariadb/mysql``."""
    from cdc_lake.sources import ENGINES

    return "/".join(
        sorted(
            name
            for name, capabilities in ENGINES.items()
            if setting
            in (
                capabilities.source_model.connection_model.own_settings()
                if connection
                else capabilities.source_model.own_settings()
            )
        )
    )


def _set_keys(value: object) -> frozenset[str]:
    if isinstance(value, Connection):
        return frozenset(value.model_fields_set)
    if isinstance(value, Mapping):
        return frozenset(str(key) for key in value)
    return frozenset()


def _refuse_foreign_settings(model: type[Source], data: Mapping[str, Any]) -> None:
    """The first setting in ``data`` that another engine takes and ``model``'s engine does not, refused."""
    for setting in sorted(_set_keys(data) - frozenset(model.model_fields)):
        engines = _engines_taking(setting, connection=False)
        if engines:
            raise PydanticCustomError(
                "engine_setting",
                "{where} applies only to {engines} sources{alternatives}",
                {"where": setting, "engines": engines, "alternatives": ""},
            )
    own = ", ".join(sorted(model.connection_model.own_settings()))
    hint = f" ({data.get('engine')}: {own})" if own else ""
    for role in ("primary", "replica"):
        for setting in sorted(_set_keys(data.get(role)) - frozenset(model.connection_model.model_fields)):
            engines = _engines_taking(setting, connection=True)
            if engines:
                raise PydanticCustomError(
                    "engine_setting",
                    "{where} applies only to {engines} sources{alternatives}",
                    {"where": f"{role}.{setting}", "engines": engines, "alternatives": hint},
                )
