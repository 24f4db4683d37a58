"""The stages the command line starts but does not own, found through the ``cdc_lake.stages`` entry points.

``bootstrap/`` depends on ``cdc_lake``, never the reverse, so the CLI cannot import the bootstrap stage.
The ``bootstrap`` package registers itself instead, in ``pyproject.toml``::

    [project.entry-points."cdc_lake.stages"]
    bootstrap = "bootstrap.stage:stage"

and the CLI asks for it by that name: for its commands (``bootstrap``, ``validate``, ``rebootstrap``,
listed only when the stage is installed), for the automatic re-bootstrap ``run`` and ``apply`` start on a
schema change, and for the bootstrap progress ``status --json`` and the metrics show.  A command that
needs a stage no installed package registers stops with one line naming what to install.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Final, Protocol

from cdc_lake.exceptions import StageNotInstalledError

if TYPE_CHECKING:
    import click

    from cdc_lake.config import Config
    from cdc_lake.lake.applier import ApplierFactory
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


def installed(name: str) -> bool:
    """Whether an installed package registers the stage ``name``."""
    return bool(entry_points(group=STAGE_GROUP, name=name))


def load_stage(name: str) -> Any:
    """The stage ``name`` an installed package registers; a one-line error naming what to install."""
    found = entry_points(group=STAGE_GROUP, name=name)
    if not found:
        raise StageNotInstalledError(
            f"the {name} stage is not installed (no {name!r} entry point in group {STAGE_GROUP}): "
            "install the cdc-lake package, which ships it (pip install cdc-lake, or pip install -e . "
            "in a checkout)"
        )
    return next(iter(found)).load()


def stage_command(stage: str, name: str) -> click.Command:
    """The command ``name`` of the installed stage ``stage``."""
    registered: Stage = load_stage(stage)
    return registered.commands[name]


def bootstrap_stage() -> BootstrapStage:
    """The bootstrap stage an installed package registers; a one-line error naming what to install."""
    registered: BootstrapStage = load_stage(BOOTSTRAP)
    return registered
