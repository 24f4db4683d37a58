"""The root :class:`Config`: one field per section, the checks that span sections, the local-stack
defaults, relative paths made absolute, and the lookups every command uses (a source, a table, the
secrets to redact)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError
from sqlalchemy.engine import make_url

from cdc_lake.config.kafka import KafkaConnectSettings, KafkaSettings, SchemaRegistrySettings
from cdc_lake.config.lake import CatalogSettings, LakeSettings
from cdc_lake.config.paths import resolve_location, resolve_path, resolve_sqlite_url
from cdc_lake.config.runtime import (
    ApplySettings,
    BootstrapSettings,
    MonitoringSettings,
    SparkSettings,
    StateStoreSettings,
    ValidationSettings,
)
from cdc_lake.config.stack import StackSettings
from cdc_lake.exceptions import UnknownSourceError, UnknownTableError
from cdc_lake.redaction import is_secret_key
from cdc_lake.sources.settings import ConfigModel as _Model
from cdc_lake.sources.settings import Source, Table


class Config(_Model):
    """The whole config file; every section has local-stack defaults."""

    lake: LakeSettings = Field(default_factory=LakeSettings)
    state_store: StateStoreSettings = Field(default_factory=StateStoreSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    schema_registry: SchemaRegistrySettings = Field(default_factory=SchemaRegistrySettings)
    kafka_connect: KafkaConnectSettings = Field(default_factory=KafkaConnectSettings)
    spark: SparkSettings = Field(default_factory=SparkSettings)
    apply: ApplySettings = Field(default_factory=ApplySettings)
    bootstrap: BootstrapSettings = Field(default_factory=BootstrapSettings)
    validation: ValidationSettings = Field(default_factory=ValidationSettings)
    monitoring: MonitoringSettings = Field(default_factory=MonitoringSettings)
    stack: StackSettings = Field(default_factory=StackSettings)
    catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    sources: dict[str, Source] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _name_sources(cls, data: object) -> object:
        """Give each source its key as ``name`` (a ``name`` key that disagrees is left to fail below)."""
        if isinstance(data, Mapping) and isinstance(data.get("sources"), Mapping):
            named = {
                key: {"name": key, **value} if isinstance(value, Mapping) else value
                for key, value in data["sources"].items()
            }
            return {**data, "sources": named}
        return data

    @model_validator(mode="after")
    def _names_match_keys(self) -> Config:
        for key, source in self.sources.items():
            if source.name != key:
                raise PydanticCustomError(
                    "source_name", "sources.{key}.name must equal its key {key}", {"key": key}
                )
        return self

    @field_validator("sources")
    @classmethod
    def _one_topic_prefix_per_source(cls, value: dict[str, Source]) -> dict[str, Source]:
        # Debezium names every topic (tables, heartbeats, schema history) after the prefix: two sources
        # sharing one would write their changes into the same topics.
        owners: dict[str, str] = {}
        for name, source in value.items():
            prefix = source.topic_prefix or name
            if prefix in owners:
                raise PydanticCustomError(
                    "topic_prefix",
                    "{first} and {second} both use topic prefix '{prefix}', so their changes would share "
                    "topics; set sources.{second}.topic_prefix to a prefix of its own",
                    {"first": owners[prefix], "second": name, "prefix": prefix},
                )
            owners[prefix] = name
        return value

    @model_validator(mode="after")
    def _partitioned_tables_need_a_global_index(self) -> Config:
        # A per-partition index looks a key up only in the partition its incoming row names: a delete whose
        # image lacks the partition value (Postgres REPLICA IDENTITY DEFAULT) or an update that changes it
        # would miss the stored row, which would stay.
        from cdc_lake.lake.layout import IndexType

        for key, source in self.sources.items():
            for position, table in enumerate(source.tables):
                index = IndexType(table.index or self.lake.index)
                if not table.partition_by or index.is_global:
                    continue
                setting = f"sources.{key}.tables[{position}].index" if table.index else "lake.index"
                raise PydanticCustomError(
                    "per_partition_index",
                    "{setting} {index} is per partition and cannot serve table {table}, which has "
                    "partition_by: a delete without the partition value or an update that changes it "
                    "would miss the stored row; use a global index: GLOBAL_BLOOM, GLOBAL_SIMPLE or "
                    "RECORD_INDEX",
                    {"setting": setting, "index": index.value, "table": table.qualified_name(source)},
                )
        return self

    @model_validator(mode="after")
    def _compaction_needs_mor(self) -> Config:
        if "compaction" not in self.lake.model_fields_set or self.lake.table_type == "MERGE_ON_READ":
            return self
        if any(table.table_type == "MERGE_ON_READ" for _, table in self.iter_tables()):
            return self
        raise PydanticCustomError(
            "compaction_needs_mor",
            "lake.compaction applies only to MERGE_ON_READ tables, and neither lake.table_type nor any "
            "table's table_type is MERGE_ON_READ",
        )

    @model_validator(mode="after")
    def _format_options_pass_through(self) -> Config:
        # Which options pass through is the format's answer, so the lake's and every table's are checked
        # here, where lake.format is known; each error names the setting, as a field's would.
        from cdc_lake.lake.format import format_facts

        facts = format_facts(self.lake.format)
        located: list[tuple[tuple[str | int, ...], dict[str, str]]] = [
            (("lake", "format_options"), self.lake.format_options)
        ]
        for key, source in self.sources.items():
            located += [
                (("sources", key, "tables", index, "format_options"), table.format_options)
                for index, table in enumerate(source.tables)
            ]
        errors = []
        for loc, options in located:
            problem = next(filter(None, map(facts.option_problem, options)), None)
            if problem is not None:
                error = PydanticCustomError("format_option", "{problem}", {"problem": problem})
                errors.append(InitErrorDetails(type=error, loc=loc, input=options))
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    @classmethod
    def default(cls, base_dir: Path | None = None) -> Config:
        """Local-stack defaults with no sources; relative paths resolve against ``base_dir`` (cwd)."""
        return cls().with_paths_resolved(base_dir or Path.cwd())

    def with_paths_resolved(self, base_dir: Path) -> Config:
        """This config with every relative local path made absolute against ``base_dir``."""
        return self.model_copy(
            update={
                "lake": self.lake.model_copy(
                    update={"base_path": resolve_location(self.lake.base_path, base_dir)}
                ),
                "state_store": self.state_store.model_copy(
                    update={"url": resolve_sqlite_url(self.state_store.url, base_dir)}
                ),
                "spark": self.spark.model_copy(
                    update={"jars": [resolve_location(jar, base_dir) for jar in self.spark.jars]}
                ),
                "stack": self.stack.model_copy(
                    update={"data_dir": resolve_path(self.stack.data_dir, base_dir)}
                ),
            }
        )

    def source(self, name: str) -> Source:
        """The source called ``name``."""
        try:
            return self.sources[name]
        except KeyError:
            known = ", ".join(sorted(self.sources)) or "none"
            raise UnknownSourceError(f"source {name} is not in the config (configured: {known})") from None

    def table(self, qualified: str) -> tuple[Source, Table]:
        """The source and table for ``source.schema.table``."""
        parts = qualified.split(".")
        if len(parts) != 3 or not all(parts):
            raise UnknownTableError(f"table {qualified}: expected source.schema.table")
        source = self.source(parts[0])
        return source, source.table(f"{parts[1]}.{parts[2]}")

    def iter_tables(self) -> Iterator[tuple[Source, Table]]:
        """Every configured table with its source, in config order."""
        for source in self.sources.values():
            for table in source.tables:
                yield source, table

    def secret_values(self) -> set[str]:
        """Every secret in this config, for the log redaction filter."""
        found: set[str] = set()
        _collect_secrets(self, found)
        password = make_url(self.state_store.url).password
        if password:
            found.add(str(password))
        found.discard("")
        return found


def _collect_secrets(value: object, found: set[str]) -> None:
    if isinstance(value, SecretStr):
        found.add(value.get_secret_value())
    elif isinstance(value, BaseModel):
        for field_name in type(value).model_fields:
            _collect_secrets(getattr(value, field_name), found)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(item, str) and is_secret_key(str(key)):
                found.add(item)
            else:
                _collect_secrets(item, found)
    elif isinstance(value, list):
        for item in value:
            _collect_secrets(item, found)
