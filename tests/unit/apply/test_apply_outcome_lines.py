"""What ``apply`` and ``run`` print per table: the batches' wall seconds per step, for people and ``--json``.

A catch-up's outcome sums its batches' steps; the line for people shows the total and the steps that
took some time, in the batch's order; ``--json`` keeps every step.
"""

from __future__ import annotations

from cdc_lake.apply.commands import describe, describe_steps, outcome_json
from cdc_lake.apply.runner import TableOutcome, _add

STEPS = {"plan": 0.04, "decode": 0.42, "schema": 0.001, "frame": 0.17, "write": 1.91, "offsets": 0.01}


def test_a_table_line_shows_the_batch_seconds_and_the_steps_that_took_some() -> None:
    outcome = TableOutcome("pg.public.items", batches=1, changes=1747, offsets=1990, commit_instant="1",
                           lag_messages=0, steps=STEPS)
    line = describe(outcome)
    assert line == (
        "pg.public.items: 1747 changes from 1990 messages in 1 commits (last 1), lag 0, "
        "2.6 s: decode 0.4, frame 0.2, write 1.9"
    ), line
    assert outcome_json(outcome)["step_seconds"] == {
        "plan": 0.04, "decode": 0.42, "schema": 0.001, "frame": 0.17, "write": 1.91, "offsets": 0.01
    }


def test_a_line_without_steps_is_unchanged_and_short_steps_leave_the_total() -> None:
    outcome = TableOutcome("t", batches=1, changes=1, offsets=1, commit_instant="2")
    assert describe(outcome) == "t: 1 changes from 1 messages in 1 commits (last 2)"
    assert describe_steps({"plan": 0.01, "offsets": 0.02}) == ", 0.0 s"
    assert outcome_json(outcome)["step_seconds"] == {}


def test_a_catch_up_sums_its_batches_steps_in_the_batch_order() -> None:
    first = TableOutcome("t", batches=1, offsets=5, steps={"plan": 0.1, "decode": 1.0, "write": 2.0})
    second = TableOutcome("t", batches=1, offsets=3, steps={"plan": 0.2, "decode": 0.5, "frame": 0.3,
                                                            "write": 1.0})
    total = _add(_add(TableOutcome("t"), first), second)
    assert total.batches == 2 and total.offsets == 8
    assert list(total.steps) == ["plan", "decode", "write", "frame"]
    assert {k: round(v, 6) for k, v in total.steps.items()} == {"plan": 0.3, "decode": 1.5, "write": 3.0,
                                                                  "frame": 0.3}
