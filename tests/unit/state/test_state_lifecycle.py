"""Properties of the table lifecycle that the hand-off and operations depend on."""

from __future__ import annotations

import re

import pytest

from cdc_lake.exceptions import StateStoreError
from cdc_lake.state.lifecycle import ALLOWED_TRANSITIONS, TableState, check_transition


def reachable_from(start: TableState) -> set[TableState]:
    seen = {start}
    frontier = [start]
    while frontier:
        for nxt in ALLOWED_TRANSITIONS[frontier.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                frontier.append(nxt)
    return seen


def test_every_state_is_reachable_from_onboarding() -> None:
    assert reachable_from(TableState.PENDING_BOOTSTRAP) == set(TableState)


@pytest.mark.parametrize("state", [s for s in TableState if s is not TableState.OFFBOARDED])
def test_every_state_can_be_offboarded_or_rebootstrapped(state: TableState) -> None:
    reachable = reachable_from(state)
    assert TableState.OFFBOARDED in reachable
    assert TableState.PENDING_BOOTSTRAP in reachable


@pytest.mark.parametrize("state", [TableState.PENDING_BOOTSTRAP, TableState.BOOTSTRAPPING])
def test_a_table_is_never_published_before_catching_up(state: TableState) -> None:
    with pytest.raises(StateStoreError, match=re.escape(f"cannot go from {state.value} to LIVE")):
        check_transition("pg.public.t", state, TableState.LIVE)


@pytest.mark.parametrize("state", [TableState.CATCHING_UP, TableState.LIVE, TableState.PAUSED])
def test_a_running_table_cannot_jump_back_into_a_snapshot(state: TableState) -> None:
    with pytest.raises(
        StateStoreError, match=re.escape(f"table pg.public.t: cannot go from {state.value} to BOOTSTRAPPING")
    ):
        check_transition("pg.public.t", state, TableState.BOOTSTRAPPING)


def test_offboarded_only_returns_through_onboarding() -> None:
    """Copied afresh, or recaptured after a failover with its lake copy kept (onboard --after-failover)."""
    back = {TableState.PENDING_BOOTSTRAP, TableState.CATCHING_UP}
    assert ALLOWED_TRANSITIONS[TableState.OFFBOARDED] == back


STOPPED_WITH_A_CAUSE = (TableState.FAILED, TableState.SCHEMA_CHANGED)


@pytest.mark.parametrize("state", [s for s in TableState if s not in STOPPED_WITH_A_CAUSE])
def test_only_failed_may_repeat_itself(state: TableState) -> None:
    with pytest.raises(StateStoreError):
        check_transition("pg.public.t", state, state)
