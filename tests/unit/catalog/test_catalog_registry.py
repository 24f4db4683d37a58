"""The catalog registry: a catalog's module is imported only when the config names it, and a catalog
whose library is an optional extra says which extra to install."""

from __future__ import annotations

import sys

import pytest
from support.imports import heavy_imports

from cdc_lake.catalog import CatalogKind, load_catalogs
from cdc_lake.catalog.sync import CatalogSync
from cdc_lake.config import CatalogSettings, Config, GlueSettings, HiveMetastoreSettings
from cdc_lake.exceptions import CatalogError
from cdc_lake.lake.format import DEFAULT_FORMAT

HIVE = HiveMetastoreSettings(uri="thrift://127.0.0.1:19083", database="lake")


@pytest.fixture
def without_boto3(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on an install without the ``glue`` extra: boto3 and botocore cannot be imported."""
    for name in ("boto3", "botocore"):
        monkeypatch.setitem(sys.modules, name, None)
    for name in ("cdc_lake.catalog.glue", "cdc_lake.catalog.hive"):
        monkeypatch.delitem(sys.modules, name, raising=False)


def test_the_applier_loads_no_aws_sdk() -> None:
    assert "boto3" not in heavy_imports("import cdc_lake.apply.runner")


def test_every_catalog_the_config_can_name_has_a_kind() -> None:
    assert {kind.value for kind in CatalogKind} == set(CatalogSettings.model_fields)


def test_no_catalog_configured_loads_none() -> None:
    assert load_catalogs(CatalogSettings(), DEFAULT_FORMAT) == []
    assert CatalogSync.for_config(Config.default()) is None


@pytest.mark.usefixtures("without_boto3")
def test_a_glue_catalog_without_boto3_names_the_extra_to_install() -> None:
    glue = CatalogSettings(glue=GlueSettings(database="lake"))
    config = Config.default().model_copy(update={"catalog": glue})

    with pytest.raises(CatalogError) as raised:
        CatalogSync.for_config(config)

    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("catalog.glue: ")
    assert "pip install 'cdc-lake[glue]'" in message


@pytest.mark.usefixtures("without_boto3")
def test_a_hive_catalog_needs_no_boto3() -> None:
    catalogs = load_catalogs(CatalogSettings(hive=HIVE), DEFAULT_FORMAT)

    assert [type(catalog).__name__ for catalog in catalogs] == ["HiveMetastoreCatalog"]
