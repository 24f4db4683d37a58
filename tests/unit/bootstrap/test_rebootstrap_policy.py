"""The ``schema_changes`` policy decides whether ``cdc-lake run`` re-bootstraps a stopped table itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_lake.apply.runner import ApplyRunner
from cdc_lake.config import load_config
from cdc_lake.exceptions import ConfigError
from cdc_lake.lake.schema_change import Change, ChangeKind, SchemaDiff, SchemaPolicy, key_change
from cdc_lake_bootstrap.rebootstrap import AutoRebootstrap

EXAMPLE = Path(__file__).resolve().parents[3] / "cdc-lake.example.yaml"


def test_the_example_sets_each_policy_it_documents() -> None:
    config = load_config(EXAMPLE)

    policies = {t.qualified_name(s): SchemaPolicy(t.schema_changes) for s, t in config.iter_tables()}

    assert policies["pg.public.events"] is SchemaPolicy.REBOOTSTRAP
    assert policies["pg.public.customers"] is SchemaPolicy.EVOLVE


def test_tables_of_other_policies_stay_stopped_for_the_operator() -> None:
    automatic = AutoRebootstrap(load_config(EXAMPLE), ApplyRunner.for_config)
    diff = key_change(3, ["id"], ["id", "region"], table="pg.public.orders")
    assert diff.breaking[0].kind is ChangeKind.KEY_CHANGED

    automatic("pg.public.customers", diff)

    assert not automatic._running


def test_a_change_only_a_copy_of_the_primary_resolves_waits_for_the_operator(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The policy re-bootstraps from the replica; reading the primary instead loads it, which is the
    operator's decision (``rebootstrap --from-primary``), so a table whose replica differs stays stopped."""
    automatic = AutoRebootstrap(load_config(EXAMPLE), ApplyRunner.for_config)
    added = Change(ChangeKind.ADDED_WITH_DEFAULT, "u", "uuid() at the source", from_primary=True)
    diff = SchemaDiff("pg.public.events", 4, (added,))

    automatic("pg.public.events", diff)

    assert not automatic._running
    assert "cdc-lake rebootstrap pg.public.events --from-primary" in caplog.text


def test_an_unknown_policy_is_refused_naming_the_setting(tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace("schema_changes: rebootstrap", "schema_changes: ignore")
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(text)

    with pytest.raises(ConfigError, match="schema_changes"):
        load_config(path)
