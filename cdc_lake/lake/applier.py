"""The applier as the bootstrap stage sees it: something that catches a lake table up with its topic.

The bootstrap hands a table to the applier (``bootstrap --apply``'s catch-up, a re-bootstrap's last
catch-up before the switch) without importing it: ``bootstrap/`` and ``cdc_lake/apply`` both depend on
the lake-table contract and not on each other.  The bootstrap takes an :data:`ApplierFactory`; the
command line passes the applier's (``ApplyRunner.for_config``), which satisfies these protocols.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_lake.config import Config
    from cdc_lake.lake.target import TableTarget
    from cdc_lake.state.locks import HeldLock
    from cdc_lake.state.store import StateStore

BUSY = "another process is applying it"
"""Why a batch was skipped when another process holds the table's apply lock."""


class CatchUpOutcome(Protocol):
    """What one catch-up did, as far as the caller needs: why it stopped, if it did."""

    @property
    def error(self) -> str | None:
        """The one-line cause when the table failed."""

    @property
    def skipped(self) -> str | None:
        """Why nothing was applied (:data:`BUSY`, a state the applier leaves alone), or None."""

    @property
    def failed(self) -> bool:
        """True when the table stopped with an error."""


class CatchUp(Protocol):
    """Applies a table's batches until it reaches the end offsets seen when the call started."""

    def catch_up(self, target: TableTarget) -> CatchUpOutcome:
        """Catch ``target`` up (under its apply lock, batch by batch); failures are returned."""


ApplierFactory = Callable[["SparkSession", "StateStore", "Config"], CatchUp]
"""The applier of a config, on a Spark session and a state store."""


INTERRUPTED_REPAIR = "a repair was interrupted"
"""How the error of a table an interrupted repair left FAILED begins (the applier leaves it alone until
``cdc-lake repair TABLE --resume``)."""


@dataclass(frozen=True)
class RepairRows:
    """The keys one repair makes exact and what the source held for them at its read point
    (:mod:`cdc_lake.apply.repair` states the design).

    ``keys``: the record key values of every repaired key (lake types, in ``key_fields`` order);
    ``rows``: the source rows read for them (lake columns; a key the source does not hold has none);
    ``end``: the Kafka end offsets read once Debezium committed past the read point ``point``;
    ``read_ms``: the primary's clock then (the rows' source time).
    """

    key_fields: tuple[str, ...]
    keys: tuple[tuple[Any, ...], ...]
    rows: tuple[dict[str, Any], ...]
    end: Mapping[int, int]
    point: str
    read_ms: int


class RepairOutcome(Protocol):
    """What a repair's batch did."""

    @property
    def changes(self) -> int:
        """Changes of the topic the batch applied besides the rows read."""

    @property
    def offsets(self) -> int:
        """Kafka offsets the batch consumed."""

    @property
    def commit_instant(self) -> str | None:
        """The batch's commit."""


class Repair(Protocol):
    """Makes chosen keys of a table exact in one batch, under the table's apply lock."""

    def repair(self, target: TableTarget, read: Callable[[HeldLock], RepairRows]) -> RepairOutcome:
        """Hold ``target``'s apply lock, call ``read`` under it, and write what it read in one batch."""
        ...


RepairFactory = Callable[["SparkSession", "StateStore", "Config"], Repair]
"""The applier of a config as a :class:`Repair`."""
