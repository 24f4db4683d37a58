"""The lifecycle of a replicated table and the transitions between its states.

A table is onboarded as PENDING_BOOTSTRAP, snapshotted (BOOTSTRAPPING), replays
Kafka from its watermark (CATCHING_UP) and is published once the applier has
passed the snapshot point (LIVE).  PAUSED and FAILED stop it; PENDING_BOOTSTRAP
is also where a re-bootstrap starts; OFFBOARDED is the end unless it is onboarded again (copied afresh,
or, after a failover, CATCHING_UP from the new primary's capture with its lake copy kept).
SCHEMA_CHANGED stops a table whose source schema changed in a way the lake table cannot follow
(docs/schema-changes.md); ``cdc-lake rebootstrap`` leads out of it, as out of FAILED.
"""

from __future__ import annotations

import enum

from cdc_lake.exceptions import StateStoreError


class TableState(enum.StrEnum):
    """Where a table is in its lifecycle."""

    PENDING_BOOTSTRAP = "PENDING_BOOTSTRAP"
    BOOTSTRAPPING = "BOOTSTRAPPING"
    CATCHING_UP = "CATCHING_UP"
    LIVE = "LIVE"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    SCHEMA_CHANGED = "SCHEMA_CHANGED"
    OFFBOARDED = "OFFBOARDED"


APPLIABLE_STATES = frozenset(
    {TableState.CATCHING_UP, TableState.LIVE, TableState.FAILED, TableState.SCHEMA_CHANGED}
)
"""States whose tables the applier works on; FAILED and SCHEMA_CHANGED tables are retried (a config
change may have made the schema change invisible; they stop again at the same offset otherwise)."""


_S = TableState

ALLOWED_TRANSITIONS: dict[TableState, frozenset[TableState]] = {
    _S.PENDING_BOOTSTRAP: frozenset({_S.BOOTSTRAPPING, _S.PAUSED, _S.FAILED, _S.OFFBOARDED}),
    # Back to PENDING_BOOTSTRAP when a bootstrap is abandoned before it wrote anything.
    _S.BOOTSTRAPPING: frozenset({_S.CATCHING_UP, _S.PENDING_BOOTSTRAP, _S.FAILED, _S.OFFBOARDED}),
    _S.CATCHING_UP: frozenset(
        {_S.LIVE, _S.PENDING_BOOTSTRAP, _S.PAUSED, _S.FAILED, _S.SCHEMA_CHANGED, _S.OFFBOARDED}
    ),
    _S.LIVE: frozenset({_S.PENDING_BOOTSTRAP, _S.PAUSED, _S.FAILED, _S.SCHEMA_CHANGED, _S.OFFBOARDED}),
    _S.PAUSED: frozenset({_S.PENDING_BOOTSTRAP, _S.CATCHING_UP, _S.LIVE, _S.OFFBOARDED}),
    # FAILED -> FAILED records a newer error for a table that is still broken.
    _S.FAILED: frozenset(
        {_S.FAILED, _S.SCHEMA_CHANGED, _S.PENDING_BOOTSTRAP, _S.CATCHING_UP, _S.PAUSED, _S.OFFBOARDED}
    ),
    # SCHEMA_CHANGED -> SCHEMA_CHANGED records a newer report; CATCHING_UP when the config now hides it.
    _S.SCHEMA_CHANGED: frozenset(
        {_S.SCHEMA_CHANGED, _S.FAILED, _S.CATCHING_UP, _S.PENDING_BOOTSTRAP, _S.PAUSED, _S.OFFBOARDED}
    ),
    # CATCHING_UP: recaptured on a new primary with the lake copy kept (onboard --after-failover).
    _S.OFFBOARDED: frozenset({_S.PENDING_BOOTSTRAP, _S.CATCHING_UP}),
}


def check_transition(table: str, current: TableState, new: TableState) -> None:
    """Raise :class:`StateStoreError` unless ``table`` may move from ``current`` to ``new``."""
    if new not in ALLOWED_TRANSITIONS[current]:
        raise StateStoreError(f"table {table}: cannot go from {current.value} to {new.value}")
