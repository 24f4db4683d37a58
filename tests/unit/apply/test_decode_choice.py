"""When a table's large batch is tried in the JVM (:class:`cdc_lake.apply.jvm_decode.DecodeChoice`)."""

from __future__ import annotations

from cdc_lake.apply.jvm_decode import RETRY_AFTER, DecodeChoice


def test_after_a_batch_left_to_python_the_next_ones_go_to_python_then_the_jvm_tries_again() -> None:
    choice = DecodeChoice()
    assert [choice.wanted() for _ in range(3)] == [True, True, True]

    choice.refused()

    assert [choice.wanted() for _ in range(RETRY_AFTER)] == [False] * RETRY_AFTER
    assert choice.wanted() is True
    assert choice.wanted() is True
