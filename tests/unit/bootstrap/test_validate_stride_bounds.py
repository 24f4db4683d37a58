"""``validate``'s JDBC stride bounds are Java longs whatever the key column holds.

Found by the fuzzer (mariadb seeds 7011, 7012, 7014): a ``bigint`` key holding its maximum, or a
``bigint unsigned`` key above it, made ``validate`` exit 1 with py4j's ``NumberFormatException:
9223372036854775808`` (``hi + 1`` passed as ``upperBound``), where both readers found the lake equal.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cdc_lake_bootstrap.validate import stride_bounds

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
# Every value an integral key column holds on either engine: signed bigint to unsigned bigint.
KEY_VALUES = st.integers(LONG_MIN, 2**64 - 1)


@given(KEY_VALUES, KEY_VALUES)
def test_the_bounds_are_longs_in_order(a: int, b: int) -> None:
    lower, upper = stride_bounds(min(a, b), max(a, b))
    assert LONG_MIN <= lower <= upper <= LONG_MAX


@given(st.integers(LONG_MIN, LONG_MAX - 1), st.integers(LONG_MIN, LONG_MAX - 1))
def test_bounds_inside_the_long_range_are_the_values_and_one_past_the_maximum(a: int, b: int) -> None:
    assert stride_bounds(min(a, b), max(a, b)) == (min(a, b), max(a, b) + 1)


def test_the_edges_of_signed_and_unsigned_bigint_keys() -> None:
    assert stride_bounds(LONG_MIN, LONG_MAX) == (LONG_MIN, LONG_MAX)
    assert stride_bounds(1, 2**64 - 1) == (1, LONG_MAX)
    # Every value above the long range: one partition (Spark reads the whole table when they are equal).
    assert stride_bounds(2**63, 2**64 - 1) == (LONG_MAX, LONG_MAX)
