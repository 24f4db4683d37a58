"""The YAML config: strict keys, environment expansion, secrets, defaults and path resolution."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from cdc_lake.config import (
    Config,
    Connection,
    LakeSettings,
    Source,
    find_config,
    load_config,
    resolve_config,
)
from cdc_lake.engines import ENGINE_NAMES
from cdc_lake.exceptions import ConfigError, UnknownSourceError, UnknownTableError
from cdc_lake.lake.format import DEFAULT_FORMAT, FORMATS
from cdc_lake.lake.layout import CompactionExecutor, CompactionSpec, IndexType, TableLayout, TableType
from cdc_lake.lake.target import select_targets
from cdc_lake.sources import ENGINES

REPO_ROOT = Path(__file__).resolve().parents[3]

PG_SOURCE = """
sources:
  pg:
    engine: postgres
    primary:
      port: 15432
      database: app
      user: cdc
      password: ${PG_PASSWORD}
    tables:
      - name: public.customers
        tier: 0
      - name: public.orders
"""


def write(tmp_path: Path, text: str, name: str = "cdc-lake.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _pg_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PG_PASSWORD", "s3cret-pg-pass")


def error_of(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_defaults_are_the_local_stack(tmp_path: Path) -> None:
    config = Config.default(tmp_path)

    assert config.lake.base_path == str(tmp_path / ".cdc-lake" / "lake")
    assert config.lake.table_type == "COPY_ON_WRITE"
    assert config.lake.index == "GLOBAL_BLOOM"
    assert config.lake.format == DEFAULT_FORMAT
    assert config.state_store.url == f"sqlite:///{tmp_path}/.cdc-lake/state.db"
    assert config.kafka.bootstrap_servers == "127.0.0.1:19092"
    assert config.schema_registry.url == "http://127.0.0.1:18081/apis/ccompat/v7"
    assert config.kafka_connect.url == "http://127.0.0.1:18083"
    assert (config.spark.master, config.spark.driver_memory, config.spark.jars) == ("local[2]", "1g", [])
    assert config.apply.batch_max_events == 500_000
    assert config.apply.default_interval_seconds == {0: 0, 1: 900, 2: 3600}
    assert config.bootstrap.replica_delay_seconds == 60
    assert config.bootstrap.allow_primary_reads is False
    assert config.stack.data_dir == tmp_path / ".cdc-lake" / "stack"
    assert config.stack.ports.object_store == 17070
    assert config.sources == {}


def test_empty_file_gives_defaults_relative_to_the_file(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, ""))

    assert config.state_store.url == f"sqlite:///{tmp_path}/.cdc-lake/state.db"


def test_example_config_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CDC_LAKE_DB_PASSWORD", raising=False)

    config = load_config(REPO_ROOT / "cdc-lake.example.yaml")

    assert {name for name in config.sources} == {"pg", "maria"}
    assert config.lake.base_path == str(REPO_ROOT / ".cdc-lake" / "lake")
    assert config.sources["pg"].primary.password is not None
    assert config.sources["pg"].primary.password.get_secret_value() == "cdc-lake-local"
    assert config.spark.conf == {"spark.sql.shuffle.partitions": "4"}
    # The table version Trino reads (issue 36): the example showed 9, which Trino 476 cannot read.
    assert config.lake.table_version == LakeSettings().table_version == 6
    # The tier-0 layout the example shows is the default one (issue 35).
    assert config.lake.tier_layouts == LakeSettings().tier_layouts
    assert [t.qualified_name("maria") for t in config.sources["maria"].tables] == [
        "maria.app.products",
        "maria.app.inventory",
    ]


def test_unknown_key_is_named_with_its_dotted_path_and_file(tmp_path: Path) -> None:
    path = write(tmp_path, PG_SOURCE + "        teir: 2\n")

    assert error_of(path) == f"{path}: sources.pg.tables[1].teir: unknown key"


def test_unknown_top_level_section_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "lakes:\n  base_path: x\n")

    assert error_of(path) == f"{path}: lakes: unknown key"


def test_unknown_nested_setting_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "lake:\n  s3:\n    endpoint: http://x\n    acces_key: k\n")

    assert error_of(path) == f"{path}: lake.s3.acces_key: unknown key"


def test_missing_required_key_is_named(tmp_path: Path) -> None:
    path = write(tmp_path, "sources:\n  pg:\n    engine: postgres\n    primary: {port: 1, database: d}\n")

    assert "sources.pg.primary.user: required key is missing" in error_of(path)


def test_bad_value_names_the_setting(tmp_path: Path) -> None:
    path = write(tmp_path, "lake:\n  table_type: MERGE_ON_WRITE\n")

    message = error_of(path)

    assert message.startswith(f"{path}: lake.table_type: ")
    assert "MERGE_ON_READ" in message


def test_env_vars_expand_before_validation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PG_PORT", "25432")
    path = write(tmp_path, PG_SOURCE.replace("port: 15432", "port: ${PG_PORT}"))

    source = load_config(path).sources["pg"]

    assert source.primary.port == 25432
    assert source.primary.password is not None
    assert source.primary.password.get_secret_value() == "s3cret-pg-pass"


def test_env_default_applies_when_unset_or_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAKE_ROOT", raising=False)
    monkeypatch.setenv("EMPTY_SERVERS", "")
    path = write(
        tmp_path,
        "lake:\n  base_path: s3a://${LAKE_ROOT:-lake}/cdc\n"
        "kafka:\n  bootstrap_servers: ${EMPTY_SERVERS:-k:9092}\n",
    )

    config = load_config(path)

    assert config.lake.base_path == "s3a://lake/cdc"
    assert config.kafka.bootstrap_servers == "k:9092"


def test_unset_env_var_names_var_and_setting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PG_PASSWORD")
    path = write(tmp_path, PG_SOURCE)

    assert (
        error_of(path) == f"{path}: sources.pg.primary.password: environment variable PG_PASSWORD is not set"
    )


def test_malformed_env_reference_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "kafka:\n  bootstrap_servers: ${1BAD}\n")

    assert "kafka.bootstrap_servers: malformed reference ${1BAD}" in error_of(path)


def test_secrets_stay_out_of_repr_and_errors(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, PG_SOURCE))
    assert "s3cret-pg-pass" not in repr(config)
    assert "s3cret-pg-pass" not in str(config.sources["pg"])

    broken = write(tmp_path, PG_SOURCE.replace("user: cdc", "user: [cdc]"), "broken.yaml")
    message = error_of(broken)
    assert "sources.pg.primary.user" in message
    assert "s3cret-pg-pass" not in message

    wrong_type = write(tmp_path, PG_SOURCE.replace("${PG_PASSWORD}", '{v: "${PG_PASSWORD}"}'), "wrong.yaml")
    message = error_of(wrong_type)
    assert "sources.pg.primary.password" in message
    assert "s3cret-pg-pass" not in message


def test_secret_values_collects_every_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STATE_PW", "state-pw")
    text = PG_SOURCE + textwrap.dedent(
        """
        state_store:
          url: postgresql+psycopg://cdc:${STATE_PW}@db/cdc_lake
        kafka:
          consumer:
            sasl.password: kafka-pw
            session.timeout.ms: 45000
        schema_registry:
          user: reader
          password: registry-pw
        """
    )

    secrets = load_config(write(tmp_path, text)).secret_values()

    assert secrets == {"s3cret-pg-pass", "state-pw", "kafka-pw", "registry-pw"}


def test_duplicate_yaml_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path, "lake:\n  index: BLOOM\n  index: SIMPLE\n")

    message = error_of(path)

    assert message.startswith(f"{path}:3:")
    assert "duplicate key 'index'" in message


def test_invalid_yaml_reports_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "lake:\n  base_path: [unclosed\n")

    assert error_of(path).startswith(f"{path}:3:")


def test_top_level_must_be_a_mapping(tmp_path: Path) -> None:
    assert "top level must be a mapping" in error_of(write(tmp_path, "- a\n- b\n"))


@pytest.mark.parametrize(
    ("table_yaml", "expected"),
    [
        ("[{name: customers}]", "sources.pg.tables[0].name: must be schema.table (exactly one dot)"),
        ("[{name: a.b.c}]", "sources.pg.tables[0].name: must be schema.table (exactly one dot)"),
        ("[{name: public.a}, {name: public.a}]", "sources.pg: table public.a is listed more than once"),
        ("[{name: public.a, tier: -1}]", "sources.pg.tables[0].tier: Input should be greater than"),
    ],
)
def test_table_rules(tmp_path: Path, table_yaml: str, expected: str) -> None:
    text = f"""
    sources:
      pg:
        engine: postgres
        primary: {{port: 1, database: d, user: u}}
        tables: {table_yaml}
    """

    assert expected in error_of(write(tmp_path, text))


@pytest.mark.parametrize(
    ("source_yaml", "expected"),
    [
        (
            "Bad-Name:\n    engine: postgres\n    primary: {port: 1, database: d, user: u}",
            "sources.Bad-Name.name: source names must be lowercase identifiers",
        ),
        ("pg:\n    engine: postgres\n    primary: {port: 1, user: u}", "primary.database is required"),
        ("my:\n    engine: mysql\n    primary: {port: 1, user: u}", "sources.my: server_id is required"),
        (
            "pg:\n    engine: postgres\n    server_id: 5\n    primary: {port: 1, database: d, user: u}",
            "sources.pg: server_id applies only to mariadb/mysql sources",
        ),
        (
            "my:\n    engine: mariadb\n    server_id: 5\n    slot_name: s\n    primary: {port: 1, user: u}",
            "sources.my: slot_name applies only to postgres sources",
        ),
        (
            "pg:\n    engine: oracle\n    primary: {port: 1, user: u}",
            "sources.pg.engine: unknown source engine 'oracle' (mariadb, mysql, postgres)",
        ),
        (
            "pg:\n    name: other\n    engine: postgres\n    primary: {port: 1, database: d, user: u}",
            "sources.pg.name must equal its key pg",
        ),
    ],
)
def test_source_rules(tmp_path: Path, source_yaml: str, expected: str) -> None:
    assert expected in error_of(write(tmp_path, "sources:\n  " + source_yaml + "\n"))


def test_every_engine_declares_its_own_source_model() -> None:
    # An engine name without its own entry used to fall into the MySQL family's rules (server_id).
    models = {name: ENGINES[name].source_model for name in ENGINE_NAMES}
    assert models["mysql"] is models["mariadb"] is not models["postgres"]


def test_the_engine_specific_settings_live_in_the_engines_models_only() -> None:
    declared = {name: ENGINES[name].settings for name in ENGINE_NAMES}

    assert declared["postgres"] == {
        "slot_name",
        "publication_name",
        "interval_handling",
        "sslmode",
        "sslrootcert",
    }
    assert (
        declared["mysql"]
        == declared["mariadb"]
        == {
            "server_id",
            "ssl_ca",
            "ssl_verify_identity",
            "ssl_truststore",
            "ssl_truststore_password_env",
        }
    )
    assert not set(Source.model_fields) & set().union(*declared.values())
    assert not set(Connection.model_fields) & set().union(*declared.values())


def test_source_defaults_derive_from_its_name(tmp_path: Path) -> None:
    text = PG_SOURCE + "  maria:\n    engine: mariadb\n    server_id: 7\n    primary: {port: 3306, user: u}\n"

    config = load_config(write(tmp_path, text))

    pg, maria = config.sources["pg"], config.sources["maria"]
    assert (pg.name, pg.topic_prefix, pg.slot_name, pg.publication_name) == (
        "pg",
        "pg",
        "cdc_lake_pg",
        "cdc_lake_pg",
    )
    assert (maria.topic_prefix, maria.server_id) == ("maria", 7)
    assert not hasattr(maria, "slot_name"), "a Postgres setting is no MariaDB source's"


def test_compaction_is_only_for_merge_on_read(tmp_path: Path) -> None:
    cow = write(tmp_path, "lake:\n  compaction: {inline: false}\n" + PG_SOURCE)
    mor = write(
        tmp_path, "lake:\n  table_type: MERGE_ON_READ\n  compaction: {max_delta_commits: 3}\n", "m.yaml"
    )
    one_mor_table = write(
        tmp_path,
        "lake:\n  compaction: {inline: false}\n" + PG_SOURCE + "        table_type: MERGE_ON_READ\n",
        "t.yaml",
    )

    assert "lake.compaction applies only to MERGE_ON_READ tables" in error_of(cow)
    assert load_config(mor).lake.compaction.max_delta_commits == 3
    assert load_config(one_mor_table).lake.compaction.inline is False


def test_a_table_names_its_own_layout_for_its_new_copies(tmp_path: Path) -> None:
    text = PG_SOURCE.replace(
        "        tier: 0\n", "        tier: 0\n        table_type: MERGE_ON_READ\n        index: BUCKET\n"
    )
    config = load_config(write(tmp_path, text))

    customers, orders = select_targets(config)
    assert (customers.table_type, customers.index) == (TableType.MERGE_ON_READ, IndexType.BUCKET)
    assert (orders.table_type, orders.index) == (TableType.COPY_ON_WRITE, IndexType.GLOBAL_BLOOM)
    assert customers.spec(("id",)).layout == TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET, 4)


def test_a_tier0_table_gets_the_tier0_layout_by_default_and_the_others_the_lakes(tmp_path: Path) -> None:
    # Issue 35's curve: MERGE_ON_READ + BUCKET with compaction outside the writes costs the batch, not the
    # table; COPY_ON_WRITE stays for the other tiers, partitioned tables and tables naming their own.
    text = PG_SOURCE + "      - name: public.events\n        tier: 0\n        partition_by: [region]\n"
    text += "      - name: public.audit\n        tier: 0\n        index: RECORD_INDEX\n"
    config = load_config(write(tmp_path, text))

    customers, orders, events, audit = select_targets(config)

    assert (customers.table_type, customers.index) == (TableType.MERGE_ON_READ, IndexType.BUCKET)
    assert customers.compaction == CompactionSpec(
        inline=False, max_delta_commits=5, max_delta_seconds=120, plan_io_mb=1
    )
    assert customers.spec(("id",)).layout == TableLayout(TableType.MERGE_ON_READ, IndexType.BUCKET, 4)
    assert (orders.table_type, orders.index) == (TableType.COPY_ON_WRITE, IndexType.GLOBAL_BLOOM)
    assert (events.table_type, events.index) == (TableType.COPY_ON_WRITE, IndexType.GLOBAL_BLOOM)
    # A table naming either half of its layout takes the other from the lake's, never from its tier's.
    assert (audit.table_type, audit.index) == (TableType.COPY_ON_WRITE, IndexType.RECORD_INDEX)
    assert config.lake.compaction_of_tier(0).max_staleness_seconds == 300
    assert config.lake.check_seconds == 5


def test_a_plans_io_budget_reaches_the_target_and_a_bad_one_is_named(tmp_path: Path) -> None:
    text = "lake:\n  compaction: {inline: false, plan_io_mb: 256}\n  table_type: MERGE_ON_READ\n" + PG_SOURCE
    customers, _ = select_targets(load_config(write(tmp_path, text)))
    assert customers.compaction.plan_io_mb == 256
    bad = write(tmp_path, text.replace("plan_io_mb: 256", "plan_io_mb: 0"), "bad.yaml")
    with pytest.raises(ConfigError, match=r"lake\.compaction\.plan_io_mb"):
        load_config(bad)


def test_a_compaction_job_executor_reaches_the_target_and_needs_async_plans(tmp_path: Path) -> None:
    text = "lake:\n  compaction: {inline: false, executor: job}\n  table_type: MERGE_ON_READ\n" + PG_SOURCE
    customers, _ = select_targets(load_config(write(tmp_path, text)))
    assert customers.compaction.executor is CompactionExecutor.JOB
    bad = write(tmp_path, text.replace("inline: false, ", ""), "bad.yaml")
    with pytest.raises(ConfigError, match=r"lake\.compaction.*executor: job needs inline: false"):
        load_config(bad)


def test_tier_layouts_replace_the_default_and_name_their_setting(tmp_path: Path) -> None:
    none = load_config(write(tmp_path, "lake:\n  tier_layouts: {}\n" + PG_SOURCE))
    tier1 = load_config(write(
        tmp_path,
        "lake:\n  tier_layouts:\n    1:\n      table_type: MERGE_ON_READ\n      index: BUCKET\n"
        "      compaction: {inline: false, check_seconds: 2, max_staleness_seconds: 60}\n" + PG_SOURCE,
        "one.yaml",
    ))
    cow_compacted = write(
        tmp_path,
        "lake:\n  tier_layouts:\n    0: {table_type: COPY_ON_WRITE, index: BUCKET, compaction: {}}\n",
        "cow.yaml",
    )

    assert [(t.table_type, t.index) for t in select_targets(none)] == [
        (TableType.COPY_ON_WRITE, IndexType.GLOBAL_BLOOM)
    ] * 2
    customers, orders = select_targets(tier1)
    assert (customers.table_type, orders.table_type) == (TableType.COPY_ON_WRITE, TableType.MERGE_ON_READ)
    assert orders.compaction.inline is False
    assert tier1.lake.compaction_of_tier(1).max_staleness_seconds == 60
    assert tier1.lake.compaction_of_tier(0).max_staleness_seconds == 300  # the lake's
    assert tier1.lake.check_seconds == 2
    message = error_of(cow_compacted)
    assert "lake.tier_layouts[0]: compaction applies only to MERGE_ON_READ" in message


def test_a_lake_layout_the_config_names_is_every_tiers_unless_it_lists_tier_layouts(tmp_path: Path) -> None:
    # A config written before the tier-0 default (test_table_services.py's, with RECORD_INDEX and its own
    # compaction) meant its layout for every table: tier 0 silently took the bucket layout instead.
    lake = "lake:\n  table_type: MERGE_ON_READ\n  index: RECORD_INDEX\n"
    named = load_config(write(tmp_path, lake + PG_SOURCE))
    tier0 = "  tier_layouts: {0: {table_type: MERGE_ON_READ, index: BUCKET}}\n"
    both = load_config(write(tmp_path, "lake:\n  index: RECORD_INDEX\n" + tier0 + PG_SOURCE, "both.yaml"))

    assert named.lake.tier_layouts == {}
    assert {(t.table_type, t.index) for t in select_targets(named)} == {
        (TableType.MERGE_ON_READ, IndexType.RECORD_INDEX)
    }
    customers, orders = select_targets(both)
    assert (customers.index, orders.index) == (IndexType.BUCKET, IndexType.RECORD_INDEX)


def test_a_tables_per_partition_index_with_partition_by_is_refused_naming_its_setting(tmp_path: Path) -> None:
    text = PG_SOURCE + "        index: BUCKET\n        partition_by: [region]\n"
    bad_value = write(tmp_path, PG_SOURCE + "        index: HASHED\n", "v.yaml")

    message = error_of(write(tmp_path, text))

    assert "sources.pg.tables[1].index BUCKET" in message and "pg.public.orders" in message
    assert "GLOBAL_BLOOM, GLOBAL_SIMPLE or RECORD_INDEX" in message
    assert "sources.pg.tables[1].index: Input should be" in error_of(bad_value)


def test_an_unknown_lake_format_is_named_with_the_known_ones(tmp_path: Path) -> None:
    path = write(tmp_path, "lake:\n  format: iceberg\n")

    known = ", ".join(sorted(FORMATS))
    assert error_of(path) == f"{path}: lake.format: unknown format 'iceberg' (known: {known})"


def test_table_lookup(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, PG_SOURCE))

    source, table = config.table("pg.public.orders")

    assert (source.name, table.name, table.tier) == ("pg", "public.orders", 1)
    assert (table.schema_name, table.table_name) == ("public", "orders")
    assert table.qualified_name(source) == "pg.public.orders"
    assert [t.qualified_name(s) for s, t in config.iter_tables()] == [
        "pg.public.customers",
        "pg.public.orders",
    ]
    with pytest.raises(UnknownSourceError, match="source mysql is not in the config"):
        config.table("mysql.public.orders")
    with pytest.raises(UnknownTableError, match=re.escape("table pg.public.missing is not in the config")):
        config.table("pg.public.missing")
    with pytest.raises(UnknownTableError, match=re.escape("expected source.schema.table")):
        config.table("pg.orders")


def test_relative_paths_resolve_against_the_config_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config_dir = tmp_path / "conf"
    config_dir.mkdir()
    monkeypatch.chdir(tmp_path)
    path = write(
        config_dir,
        """
        lake: {base_path: data/lake}
        state_store: {url: "sqlite:///state/cdc.db"}
        spark: {jars: [jars/hudi.jar, "https://repo.example/x.jar", /opt/abs.jar]}
        stack: {data_dir: stack-data}
        """,
    )

    config = load_config(Path("conf/cdc-lake.yaml"))

    assert config.lake.base_path == str(config_dir / "data" / "lake")
    assert config.state_store.url == f"sqlite:///{config_dir}/state/cdc.db"
    assert config.spark.jars == [
        str(config_dir / "jars" / "hudi.jar"),
        "https://repo.example/x.jar",
        "/opt/abs.jar",
    ]
    assert config.stack.data_dir == config_dir / "stack-data"
    assert path.is_file()


def test_uris_and_server_urls_are_kept(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'lake: {base_path: "s3a://lake/cdc"}\nstate_store: {url: "postgresql+psycopg://u:p@db:5432/state"}\n',
    )

    config = load_config(path)

    assert config.lake.base_path == "s3a://lake/cdc"
    assert config.state_store.url == "postgresql+psycopg://u:p@db:5432/state"


def test_lake_table_base_path() -> None:
    lake = Config.default(Path("/srv")).lake

    assert lake.table_base_path("pg.public.orders") == "/srv/.cdc-lake/lake/pg/public/orders"


def test_passthrough_values_become_strings(tmp_path: Path) -> None:
    path = write(
        tmp_path, "spark:\n  conf:\n    spark.ui.enabled: false\n    spark.sql.shuffle.partitions: 8\n"
    )

    assert load_config(path).spark.conf == {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "8"}


def test_apply_intervals_merge_over_defaults(tmp_path: Path) -> None:
    apply = load_config(write(tmp_path, "apply:\n  default_interval_seconds: {1: 60, 4: 86400}\n")).apply

    assert apply.default_interval_seconds == {0: 0, 1: 60, 2: 3600, 4: 86400}
    assert apply.interval_for(1) == 60
    assert apply.interval_for(3) == 3600
    assert apply.interval_for(9) == 86400


def test_find_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert find_config(None) is None
    with pytest.raises(ConfigError, match=re.escape("other.yaml: config file not found")):
        find_config("other.yaml")

    write(tmp_path, "")
    assert find_config(None) == tmp_path / "cdc-lake.yaml"


def test_resolve_config_uses_defaults_only_when_allowed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    with pytest.raises(ConfigError, match=re.escape("cdc-lake.yaml: config file not found")):
        resolve_config(None)
    assert (
        resolve_config(None, allow_default=True).state_store.url == f"sqlite:///{tmp_path}/.cdc-lake/state.db"
    )


@pytest.mark.parametrize("setting", ["auto.offset.reset", "enable.auto.commit"])
def test_kafka_retention_consumer_settings_the_applier_fixes_are_refused(
    tmp_path: Path, setting: str
) -> None:
    path = write(tmp_path, f"kafka:\n  consumer:\n    {setting}: earliest\n")

    message = error_of(path)

    assert message.startswith(f"{path}: kafka.consumer: ")
    assert f"{setting} cannot be set" in message


def test_postgres_tls_settings_are_kept_and_checked(tmp_path: Path) -> None:
    tls = "      sslmode: verify-full\n      sslrootcert: /etc/ssl/pg-ca.crt\n"
    config = load_config(write(tmp_path, PG_SOURCE.replace("      user: cdc\n", "      user: cdc\n" + tls)))
    assert config.source("pg").primary.tls_settings() == {
        "sslmode": "verify-full",
        "sslrootcert": "/etc/ssl/pg-ca.crt",
    }

    unverified = PG_SOURCE.replace("      user: cdc\n", "      user: cdc\n      sslrootcert: /ca.crt\n")
    assert "sslrootcert is used only with sslmode verify-ca or verify-full" in error_of(
        write(tmp_path, unverified)
    )


def test_tls_settings_are_refused_for_mysql_sources(tmp_path: Path) -> None:
    text = """
    sources:
      maria:
        engine: mariadb
        server_id: 7
        primary: {port: 13306, user: cdc, sslmode: require}
    """
    expected = (
        "sources.maria: primary.sslmode applies only to postgres sources "
        "(mariadb: ssl_ca, ssl_truststore, ssl_truststore_password_env, ssl_verify_identity)"
    )
    assert expected in error_of(write(tmp_path, text))


def test_connection_options_key_is_unknown(tmp_path: Path) -> None:
    text = PG_SOURCE.replace("      user: cdc\n", "      user: cdc\n      options: {sslmode: require}\n")
    assert "sources.pg.primary.options: unknown key" in error_of(write(tmp_path, text))


def test_connector_registry_credentials_need_the_confluent_converter(tmp_path: Path) -> None:
    text = "schema_registry:\n  connect_credentials_env: SR_AUTH\n"
    assert "connect_credentials_env needs converter: confluent" in error_of(write(tmp_path, text))
    config = load_config(write(tmp_path, text + "  converter: confluent\n"))
    assert config.schema_registry.converter == "confluent"


def test_connect_env_references_are_left_for_the_connect_workers(tmp_path: Path) -> None:
    jaas = "'Scram required password=\"${env:KAFKA_PW}\";'"
    text = f"kafka:\n  connector_clients:\n    sasl.jaas.config: {jaas}\n"
    config = load_config(write(tmp_path, text))
    assert config.kafka.connector_clients["sasl.jaas.config"] == 'Scram required password="${env:KAFKA_PW}";'


@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("sasl.jaas.config: 'Scram required password=\"${KAFKA_PW}\";'", "sasl.jaas.config: password"),
        ("sasl.jaas.config: 'Scram required password=\"hunter2-pw\";'", "sasl.jaas.config: password"),
        ("sasl.jaas.config: 'OAuth required clientSecret=hunter2-pw;'", "sasl.jaas.config: clientSecret"),
        ("ssl.keystore.password: ${KAFKA_PW}", "ssl.keystore.password"),
        ("ssl.key.password: hunter2-pw", "ssl.key.password"),
    ],
)
def test_connector_clients_refuse_a_secret_the_connect_workers_would_not_resolve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, named: str
) -> None:
    monkeypatch.setenv("KAFKA_PW", "hunter2-pw")
    message = error_of(write(tmp_path, f"kafka:\n  connector_clients:\n    {setting}\n"))
    assert f"kafka.connector_clients: {named} must be Kafka Connect's ${{env:VAR}}" in message
    assert "hunter2" not in message
    assert "\n" not in message


def test_connector_clients_take_connect_env_references_and_expand_plain_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROTOCOL", "SASL_SSL")
    jaas = '\'Scram required username="${PROTOCOL}" password="${env:KAFKA_PW}";\''
    text = (
        "kafka:\n  connector_clients:\n    security.protocol: ${PROTOCOL}\n"
        f"    sasl.jaas.config: {jaas}\n    ssl.truststore.password: ${{env:TRUST_PW}}\n"
    )
    clients = load_config(write(tmp_path, text)).kafka.connector_clients
    assert clients["security.protocol"] == "SASL_SSL"
    assert clients["sasl.jaas.config"] == 'Scram required username="SASL_SSL" password="${env:KAFKA_PW}";'
    assert clients["ssl.truststore.password"] == "${env:TRUST_PW}"


def test_registry_takes_basic_auth_or_a_bearer_token_not_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SR_TOKEN", "tok")
    config = load_config(write(tmp_path, "schema_registry:\n  bearer_token: ${SR_TOKEN}\n"))
    assert config.schema_registry.auth_headers() == {"Authorization": "Bearer tok"}
    assert config.schema_registry.basic_auth() is None
    both = "schema_registry:\n  user: u\n  password: p\n  bearer_token: ${SR_TOKEN}\n"
    assert "set either user/password or bearer_token, not both" in error_of(write(tmp_path, both))


@pytest.mark.parametrize("setting", ["ca_cert", "client_cert", "client_key"])
def test_registry_tls_files_must_exist(tmp_path: Path, setting: str) -> None:
    pem = tmp_path / "registry.pem"
    pem.write_text("PEM", encoding="utf-8")
    text = f"schema_registry:\n  ca_cert: {pem}\n  client_cert: {pem}\n  client_key: {pem}\n"
    settings = load_config(write(tmp_path, text)).schema_registry
    assert (settings.ca_cert, settings.client_certificate()) == (str(pem), (str(pem), str(pem)))

    missing = tmp_path / "nowhere.pem"
    message = error_of(write(tmp_path, text.replace(f"{setting}: {pem}", f"{setting}: {missing}")))

    assert message.endswith(f"schema_registry.{setting}: no file at {missing}")


def test_registry_client_certificate_and_key_go_together(tmp_path: Path) -> None:
    pem = tmp_path / "client.pem"
    pem.write_text("PEM", encoding="utf-8")
    for given, missing in (("client_cert", "client_key"), ("client_key", "client_cert")):
        message = error_of(write(tmp_path, f"schema_registry:\n  {given}: {pem}\n"))
        expected = f"schema_registry: {given} is set but {missing} is not (mutual TLS needs both)"
        assert message.endswith(expected)


def test_two_sources_with_one_topic_prefix_are_refused(tmp_path: Path) -> None:
    text = PG_SOURCE + textwrap.indent(
        "pg2:\n  engine: postgres\n  topic_prefix: pg\n  primary: {port: 1, database: d, user: u}\n", "  "
    )

    message = error_of(write(tmp_path, text))

    assert "sources: pg and pg2 both use topic prefix 'pg'" in message
    assert "set sources.pg2.topic_prefix to a prefix of its own" in message


@pytest.mark.parametrize("index", ["BLOOM", "SIMPLE", "BUCKET"])
def test_a_per_partition_index_with_partition_by_is_refused(tmp_path: Path, index: str) -> None:
    text = f"lake:\n  index: {index}\n" + PG_SOURCE + "        partition_by: [region]\n"

    message = error_of(write(tmp_path, text))

    assert f"lake.index {index}" in message and "pg.public.orders" in message and "partition_by" in message
    assert "GLOBAL_BLOOM, GLOBAL_SIMPLE or RECORD_INDEX" in message


@pytest.mark.parametrize(
    ("index", "partitioned"),
    [("BUCKET", False), ("GLOBAL_BLOOM", True), ("GLOBAL_SIMPLE", True), ("RECORD_INDEX", True)],
)
def test_global_indexes_serve_partitioned_tables_and_others_unpartitioned_ones(
    tmp_path: Path, index: str, partitioned: bool
) -> None:
    partition_by = "        partition_by: [region]\n" if partitioned else ""
    text = f"lake:\n  index: {index}\n" + PG_SOURCE + partition_by

    assert load_config(write(tmp_path, text)).lake.index == index
