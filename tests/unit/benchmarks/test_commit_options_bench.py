"""``benchmarks/commit_options_bench.py``: an arm's options, and the arm a run compares by default."""

from __future__ import annotations

import pytest
from commit_options_bench import DEFAULT_ARM, PRODUCT, parse_arm


def test_an_arm_is_a_name_and_the_options_it_sets_over_the_products() -> None:
    assert parse_arm("no-stats:hoodie.a=1,hoodie.b=x=y") == ("no-stats", {"hoodie.a": "1", "hoodie.b": "x=y"})
    assert DEFAULT_ARM == ("with-metadata-table", {"hoodie.metadata.enable": "true"})


@pytest.mark.parametrize(
    "text", ["", "name", "name:", ":hoodie.a=1", f"{PRODUCT}:hoodie.a=1", "n:hoodie.a=1,b"]
)
def test_a_malformed_arm_is_refused_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="--arm"):
        parse_arm(text)
