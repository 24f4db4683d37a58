"""What each source engine declares once, and that shared code can read it without the engine's driver."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cdc_lake.engines import ENGINE_NAMES
from cdc_lake.exceptions import SourceEngineError
from cdc_lake.jvm import JDBC_DRIVERS, spark_jars
from cdc_lake.lake.format import DEFAULT_FORMAT
from cdc_lake.sources import ENGINES, capabilities_for, capabilities_for_connector, codec_for_mark
from cdc_lake.sources.mysql.codec import BinlogPositionCodec
from cdc_lake.sources.postgres.codec import PostgresPositionCodec


def test_every_engine_name_declares_its_capabilities_once() -> None:
    assert set(ENGINES) == set(ENGINE_NAMES)
    assert all(capabilities_for(name).name == name for name in ENGINE_NAMES)
    connector_values = [value for caps in ENGINES.values() for value in caps.connector_values]
    assert len(connector_values) == len(set(connector_values))


@pytest.mark.parametrize(
    ("connector", "engine", "codec", "slots"),
    [
        ("postgresql", "postgres", PostgresPositionCodec, True),
        ("mysql", "mysql", BinlogPositionCodec, False),
        ("mariadb", "mariadb", BinlogPositionCodec, False),
    ],
)
def test_a_debezium_connector_value_finds_its_engine(
    connector: str, engine: str, codec: type, slots: bool
) -> None:
    caps = capabilities_for_connector(connector)

    assert (caps.name, type(caps.positions), caps.replication_slots) == (engine, codec, slots)
    assert codec_for_mark(caps.positions.mark_kind) is caps.positions, "one codec per mark kind"


def test_unknown_names_are_one_line_errors_listing_the_known_ones() -> None:
    with pytest.raises(SourceEngineError) as connector:
        capabilities_for_connector("oracle")
    with pytest.raises(SourceEngineError) as engine:
        capabilities_for("oracle")

    assert str(connector.value) == "connector 'oracle' is not supported (mariadb, mysql, postgresql)"
    assert str(engine.value) == "unknown source engine 'oracle' (mariadb, mysql, postgres)"


def test_spark_loads_a_jdbc_driver_for_every_engine() -> None:
    artifacts = spark_jars("3.5.6", DEFAULT_FORMAT).artifacts

    assert set(JDBC_DRIVERS) == set(ENGINE_NAMES)
    assert set(JDBC_DRIVERS.values()) <= set(artifacts)


def test_capabilities_and_the_decode_path_load_without_any_engine_driver() -> None:
    # A finder that refuses the drivers, as on a machine that has none of them installed.
    script = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in {'psycopg', 'pymysql'}:\n"
        "            raise ModuleNotFoundError(name=name)\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "import cdc_lake.decode.envelope, cdc_lake.apply.redelivery, cdc_lake.jvm\n"
        "from cdc_lake.sources import ENGINES\n"
        "assert not {'psycopg', 'pymysql'} & set(sys.modules), sorted(sys.modules)\n"
        "print(len(ENGINES))\n"
    )

    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(len(ENGINE_NAMES))
