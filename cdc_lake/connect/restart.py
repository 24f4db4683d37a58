"""Restarting a connector at the start of the transaction it stopped in, never past it.

Debezium's binlog readers store, beside the position where a transaction starts, how many of its
events (``event``) and rows (``row``) they had already emitted; a restarted task skips that many
before it emits again.  The MariaDB reader takes every GTID event for the start of a transaction, a
standalone DDL's too, and then counts each heartbeat the server sends while idle as one more event of
that "transaction": a task restarted from such an offset skipped whole transactions written after the
DDL, changes of tables that were streaming included
(``tests/integration/test_onboard_mariadb.py::test_a_table_added_after_a_ddl_and_a_quiet_spell_loses_no_change_of_a_streaming_table``).

So every restart cdc-lake makes (an onboarding that changes a connector, the restart of a failed
one, ``connectors restart``) stops the connector, drops the counts its engine declares
(:attr:`~cdc_lake.sources.capabilities.EngineCapabilities.transaction_progress_offset_keys`) from its
committed offsets, and resumes it: the task starts again at the transaction's start and sends again
what it had emitted of it, which the applier takes as re-sent changes (docs/applier.md).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.exceptions import ConnectError

STOPPED = "STOPPED"
_POLL_SECONDS = 0.5


def stop(connect: KafkaConnectClient, name: str, timeout: float) -> None:
    """Stop ``name`` and wait until its tasks are gone, so no old task emits or commits anything more."""
    connect.stop(name)
    deadline = time.monotonic() + timeout
    while True:
        status = connect.status(name)
        if status.state == STOPPED and not status.tasks:
            return
        if time.monotonic() > deadline:
            raise ConnectError(f"connector {name!r} did not stop within {timeout:.0f}s: {status.describe()}")
        time.sleep(_POLL_SECONDS)


def forget_transaction_progress(connect: KafkaConnectClient, name: str, keys: Sequence[str]) -> bool:
    """Drop ``keys`` from every committed offset of the STOPPED connector ``name``; True if one had them."""
    if not keys:
        return False
    changed = [
        (partition, {key: value for key, value in offset.items() if key not in keys})
        for partition, offset in connect.offset_entries(name)
        if any(key in offset for key in keys)
    ]
    if changed:
        connect.alter_offsets(name, changed)
    return bool(changed)


def restart_at_transaction_start(
    connect: KafkaConnectClient, name: str, keys: Sequence[str], timeout: float
) -> bool:
    """Stop ``name``, forget its transaction progress, resume it; True if progress was forgotten."""
    stop(connect, name, timeout)
    forgot = forget_transaction_progress(connect, name, keys)
    connect.resume(name)
    return forgot
