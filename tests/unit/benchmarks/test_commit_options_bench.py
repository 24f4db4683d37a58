"""``benchmarks/commit_options_bench.py``: an arm's options, and the arm a run compares by default."""

from __future__ import annotations

from pathlib import Path

import pytest
from commit_options_bench import COMPACTION_ARM, DEFAULT_ARM, PRODUCT, arm_spec, parse_arm

from cdc_lake.hudi.options import HudiTableSpec, table_service_options


def test_an_arm_is_a_name_and_the_options_it_sets_over_the_products() -> None:
    assert parse_arm("no-stats:hoodie.a=1,hoodie.b=x=y") == ("no-stats", {"hoodie.a": "1", "hoodie.b": "x=y"})
    assert DEFAULT_ARM == ("with-metadata-table", {"hoodie.metadata.enable": "true"})


@pytest.mark.parametrize(
    "text", ["", "name", "name:", ":hoodie.a=1", f"{PRODUCT}:hoodie.a=1", "n:hoodie.a=1,b"]
)
def test_a_malformed_arm_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="--arm"):
        parse_arm(text)


def test_timing_compactions_an_arms_options_reach_the_table_service_and_a_protected_one_is_refused(
    tmp_path: Path,
) -> None:
    spec = HudiTableSpec("t", str(tmp_path / "t"), ("id",), "_o")
    overrides = COMPACTION_ARM[1]
    compacted = arm_spec(spec, tmp_path / "a", overrides, compaction=True)
    assert compacted.base_path == str(tmp_path / "a")
    assert overrides.items() <= table_service_options(compacted).items()
    assert arm_spec(spec, tmp_path / "b", overrides, compaction=False).extra_options == ()
    with pytest.raises(ValueError, match=r"--arm with --compaction: 'hoodie\.metadata\.enable' cannot"):
        arm_spec(spec, tmp_path / "c", DEFAULT_ARM[1], compaction=True)
