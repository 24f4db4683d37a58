"""The stages the command line starts but does not own, found through the ``cdc_lake.stages`` entry points.

``bootstrap/`` depends on ``cdc_lake``, never the reverse, so the CLI cannot import the bootstrap stage.
The ``bootstrap`` package registers itself instead, in ``pyproject.toml``::

    [project.entry-points."cdc_lake.stages"]
    bootstrap = "cdc_lake_bootstrap.stage:stage"

and the CLI asks for it by that name: for its commands (``bootstrap``, ``validate``, ``repair``,
``rebootstrap``), for the automatic re-bootstrap ``run`` and ``apply`` start on a schema change, for
``run``'s continuous validation, and for the bootstrap progress ``status --json`` and the metrics show.
The registration is a one-way dependency, not a plug-in: ``bootstrap/`` ships in the same distribution
as ``cdc_lake``, so the entry point is there wherever the command line is (a missing one is a broken
installation, a ``KeyError`` naming it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    import click
    from pyspark.sql import SparkSession

    from cdc_lake.apply.commands import Background
    from cdc_lake.config import Config
    from cdc_lake.lake.applier import ApplierFactory, RepairFactory
    from cdc_lake.lake.schema_change import SchemaDiff
    from cdc_lake.state.lifecycle import TableState
    from cdc_lake.state.store import StateStore

STAGE_GROUP: Final = "cdc_lake.stages"
"""The entry point group a stage registers in."""

BOOTSTRAP: Final = "bootstrap"
"""The bootstrap stage's entry point name."""


class Stage(Protocol):
    """What the command line asks of every stage: its commands."""

    @property
    def commands(self) -> Mapping[str, click.Command]:
        """The stage's commands by name."""


class BootstrapStage(Stage, Protocol):
    """What the command line asks of the bootstrap stage besides its commands."""

    def schema_change_handler(
        self, config: Config, applier: ApplierFactory
    ) -> Callable[[str, SchemaDiff], None]:
        """What ``run`` calls when a table stops in SCHEMA_CHANGED (the ``rebootstrap`` schema policy)."""

    def progress(self, store: StateStore, table: str, state: TableState) -> dict[str, Any] | None:
        """A JSON-ready view of ``table``'s current (or last) bootstrap; None if it was never bootstrapped."""

    def validator(
        self,
        config: Config,
        spark: SparkSession,
        store: StateStore,
        tables: Sequence[str],
        repair: RepairFactory,
    ) -> Background:
        """``run``'s continuous validation of ``tables`` (started and stopped by ``run``)."""


def load_stage(name: str) -> Any:
    """The stage registered as ``name`` in :data:`STAGE_GROUP`."""
    return entry_points(group=STAGE_GROUP)[name].load()


def stage_command(stage: str, name: str) -> click.Command:
    """The command ``name`` of the installed stage ``stage``."""
    registered: Stage = load_stage(stage)
    return registered.commands[name]


def bootstrap_stage() -> BootstrapStage:
    """The bootstrap stage, as the ``bootstrap`` package registers it."""
    registered: BootstrapStage = load_stage(BOOTSTRAP)
    return registered
