"""The applier as the bootstrap stage sees it: something that catches a lake table up with its topic.

The bootstrap hands a table to the applier (``bootstrap --apply``'s catch-up, a re-bootstrap's last
catch-up before the switch) without importing it: ``bootstrap/`` and ``cdc_lake/apply`` both depend on
the lake-table contract and not on each other.  The bootstrap takes an :data:`ApplierFactory`; the
command line passes the applier's (``ApplyRunner.for_config``), which satisfies these protocols.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_lake.config import Config
    from cdc_lake.lake.target import TableTarget
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
