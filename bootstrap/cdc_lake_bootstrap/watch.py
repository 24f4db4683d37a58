"""What a wait for the lake to catch up checks while it waits: that the catch-up can still happen.

The lake catches up with the source only while Debezium streams the table's changes into Kafka and the
applier applies them.  :class:`CatchUpWatch` is asked at every poll of such a wait (the bootstrap's
``--apply`` catch-up, ``validate``'s wait for the lake): a capturing connector or one of its tasks
FAILED (the check ``cdc-lake lag``'s CdcLakeConnectorFailed makes,
:meth:`cdc_lake.connect.client.ConnectorStatus.failure`), or the table stopped by the applier
(FAILED), ends the wait at once with one line naming the cause and its runbook, instead of after the
whole timeout.  Kafka Connect being unreachable is not such a cause: it is logged and the wait goes on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol

from cdc_lake.connect.client import connector_failure
from cdc_lake.exceptions import ConnectError
from cdc_lake.state.lifecycle import TableState
from cdc_lake.state.records import TableInfo
from cdc_lake_bootstrap.handoff import ConnectOffsets, capturing_connectors

_LOG = logging.getLogger(__name__)

TABLE_FAILED_RUNBOOK = "docs/runbooks/table-failed.md"


class TableRows(Protocol):
    """The part of the state store a catch-up wait reads (:class:`cdc_lake.state.store.StateStore`)."""

    def require_table(self, qualified_name: str) -> TableInfo:
        """The table's lifecycle row."""
        ...

    def get_applied_offsets(self, table: str) -> dict[int, int]:
        """The Kafka offsets applied to the table, by partition."""
        ...


@dataclass(frozen=True)
class CatchUpWatch:
    """The table ``name`` (``source_table`` on its source, captured under ``topic_prefix``) and where to
    look: the state store and Kafka Connect."""

    name: str
    store: TableRows
    connect: ConnectOffsets
    topic_prefix: str
    source_table: str

    def failure(self) -> str | None:
        """Why the table cannot catch up any more, in one line with the runbook; None while it can."""
        info = self.store.require_table(self.name)
        if info.state is TableState.FAILED:
            return f"the applier stopped the table (FAILED): {info.last_error} ({TABLE_FAILED_RUNBOOK})"
        try:
            connectors = capturing_connectors(self.connect, self.topic_prefix, self.source_table)
            return connector_failure(self.connect, connectors)
        except ConnectError as exc:
            _LOG.warning("%s: cannot check the table's connectors while it catches up: %s", self.name, exc)
            return None
