"""The bootstrap stage as the command line sees it: registered, not imported.

``pyproject.toml`` registers :data:`stage` under the ``cdc_lake.stages`` entry points, and
:mod:`cdc_lake.cli.stages` loads it by name, so ``cdc_lake`` never imports ``bootstrap`` (the
dependency runs one way).  It offers the stage's commands, the automatic re-bootstrap on a schema
change, ``run``'s continuous validation, and a table's bootstrap progress; the heavy modules are imported
only when used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click

from cdc_lake_bootstrap.cli import bootstrap, rebootstrap, repair, validate

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from cdc_lake.config import Config
    from cdc_lake.lake.applier import ApplierFactory, RepairFactory
    from cdc_lake.lake.schema_change import SchemaDiff
    from cdc_lake.state.lifecycle import TableState
    from cdc_lake.state.store import StateStore
    from cdc_lake_bootstrap.continuous import ContinuousValidation


class _BootstrapStage:
    """The :class:`cdc_lake.cli.stages.BootstrapStage` this package registers."""

    @property
    def commands(self) -> Mapping[str, click.Command]:
        """``bootstrap``, ``validate``, ``repair`` and ``rebootstrap``."""
        return {command.name or "": command for command in (bootstrap, validate, repair, rebootstrap)}

    def schema_change_handler(
        self, config: Config, applier: ApplierFactory
    ) -> Callable[[str, SchemaDiff], None]:
        """The automatic re-bootstrap of tables whose schema policy is ``rebootstrap``."""
        from cdc_lake_bootstrap.rebootstrap import AutoRebootstrap

        return AutoRebootstrap(config, applier)

    def progress(self, store: StateStore, table: str, state: TableState) -> dict[str, Any] | None:
        """A JSON-ready view of ``table``'s current (or last) bootstrap; None if it was never bootstrapped."""
        from cdc_lake_bootstrap.progress import bootstrap_status

        return bootstrap_status(store, table, state)


    def validator(
        self,
        config: Config,
        spark: SparkSession,
        store: StateStore,
        tables: Sequence[str],
        repair: RepairFactory,
    ) -> ContinuousValidation:
        """``run``'s continuous validation of ``tables``: a sample of key ranges every
        ``validation.sample_seconds``, repairing through ``repair`` with ``validation.auto_repair``."""
        from cdc_lake_bootstrap.continuous import ContinuousValidation
        from cdc_lake_bootstrap.continuous_looks import SparkLooks

        looks = SparkLooks(spark, config, store, tables, repair(spark, store, config))
        return ContinuousValidation(config, store, looks)


stage = _BootstrapStage()
"""The bootstrap stage, as the ``bootstrap`` entry point of group ``cdc_lake.stages``."""
