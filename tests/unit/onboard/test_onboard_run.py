"""Which tables an onboarding captures, how a failed run rolls back, and lazy source engines."""

from __future__ import annotations

import fnmatch
import tomllib
from importlib import resources
from pathlib import Path

import pytest

from cdc_lake.config import Connection, Source, Table
from cdc_lake.engines import ENGINE_NAMES
from cdc_lake.exceptions import ConnectError, UnknownTableError
from cdc_lake.onboard.reconcile import Journal
from cdc_lake.onboard.run import planned_tables, server_ids_in_use
from cdc_lake.sources import ENGINES, engine_for
from cdc_lake.sources.base import Change

ROOT = Path(__file__).resolve().parents[3]

SOURCE = Source(
    name="pg",
    engine="postgres",
    primary=Connection(port=5432, database="app", user="cdc"),
    tables=[Table(name="shop.a"), Table(name="shop.b", tier=0), Table(name="shop.c")],
)


def test_default_is_every_configured_table() -> None:
    assert [t.name for t in planned_tables(SOURCE, (), [])] == ["shop.a", "shop.b", "shop.c"]


def test_tables_asked_for_join_those_already_onboarded() -> None:
    tables = planned_tables(SOURCE, ("shop.c",), ["pg.shop.a", "pg.shop.c"])

    assert [t.name for t in tables] == ["shop.c", "shop.a"]


def test_a_table_asked_for_must_be_configured() -> None:
    with pytest.raises(UnknownTableError, match=r"table pg\.shop\.zz is not in the config"):
        planned_tables(SOURCE, ("shop.zz",), [])


def test_an_onboarded_table_that_left_the_config_must_be_offboarded_first() -> None:
    with pytest.raises(UnknownTableError) as raised:
        planned_tables(SOURCE, (), ["pg.shop.gone"])

    assert str(raised.value) == (
        "table pg.shop.gone is onboarded but no longer in the config: "
        "put it back or run cdc-lake offboard pg.shop.gone"
    )


def test_rollback_undoes_newest_first_and_reports_what_is_left() -> None:
    undone: list[str] = []

    def undo(what: str) -> str:
        undone.append(what)
        return f"undid {what}"

    def broken() -> str:
        raise ConnectError("connector 'x' at http://c: unreachable")

    journal = Journal()
    journal.add(
        Change("created heartbeat table"),
        Change("created publication p", undo=lambda: undo("publication")),
        Change("registered connector c", undo=lambda: undo("connector")),
        Change("added t to publication p", undo=broken),
    )

    assert journal.rollback() == (
        ["undid connector", "undid publication"],
        [
            "added t to publication p (undo failed: connector 'x' at http://c: unreachable)",
            "created heartbeat table",
        ],
    )
    assert undone == ["connector", "publication"]


def test_engines_are_found_by_name() -> None:
    assert type(engine_for(SOURCE)).__name__ == "PostgresEngine"
    maria = Source(name="m", engine="mariadb", primary=Connection(port=3306, user="cdc"), server_id=7)
    assert type(engine_for(maria)).__name__ == "MariaDbEngine"


def test_every_engine_name_has_one_class_and_one_connector_template() -> None:
    templates = {
        name: resources.files(caps.connector_template.package).joinpath(caps.connector_template.resource)
        for name, caps in ENGINES.items()
    }
    assert set(ENGINES) == set(ENGINE_NAMES)
    assert all(template.is_file() for template in templates.values())
    assert len({str(template) for template in templates.values()}) == len(ENGINES)
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"
    ]["cdc_lake"]
    for template in templates.values():
        shipped = Path(str(template)).relative_to(ROOT / "cdc_lake").as_posix()
        assert any(fnmatch.fnmatch(shipped, glob) for glob in package_data), f"{shipped} is not package data"


class _ConnectorsVanishing:
    """A Connect worker group where another client deletes ``gone`` between a list and a read."""

    def __init__(self) -> None:
        self.configs = {
            "other.maria": {"database.hostname": "db", "database.port": "3306", "database.server.id": "7"},
            "elsewhere": {"database.hostname": "db2", "database.port": "3306", "database.server.id": "8"},
            "pg.shop": {"database.hostname": "db", "database.port": "3306", "database.server.id": "9"},
        }

    def list_connectors(self) -> list[str]:
        return [*self.configs, "gone"]

    def get_config(self, name: str) -> dict[str, str]:
        if name not in self.configs:
            raise ConnectError(f"connector {name!r} at http://c: not found")
        return self.configs[name]

    def list_configs(self) -> dict[str, dict[str, str]]:
        return dict(self.configs)


def test_server_ids_in_use_ignore_a_connector_deleted_meanwhile_and_our_own() -> None:
    source = Source(
        name="m",
        engine="mysql",
        primary=Connection(host="db", port=3306, database="app", user="cdc"),
        tables=[Table(name="app.a")],
        server_id=5,
    )

    in_use = server_ids_in_use(_ConnectorsVanishing(), source, {"pg.shop"})  # type: ignore[arg-type]

    assert in_use == {7: "connector other.maria"}
