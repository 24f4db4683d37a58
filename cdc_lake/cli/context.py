"""What the ``cdc-lake`` group hands its commands: the ``--config`` path, verbosity, and the loaded config.

The config module (pydantic models, SQLAlchemy's URL parser) is imported when a command first asks for
the config, not when the command line starts: ``--help`` never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cdc_lake.exceptions import ConfigError
from cdc_lake.redaction import register_secrets

if TYPE_CHECKING:
    from cdc_lake.capture.update import ConnectorUpdate
    from cdc_lake.config import Config
    from cdc_lake.lake.applier import ApplierFactory, RepairFactory


@dataclass
class CliContext:
    """Options of the top-level group, shared with every command through ``ctx.obj``."""

    config_path: Path | None = None
    verbosity: int = 0
    _configs: dict[bool, Config] = field(default_factory=dict, repr=False)

    def config(self, allow_default: bool = False) -> Config:
        """The config from ``--config`` or ``./cdc-lake.yaml``; local defaults only if ``allow_default``.

        Its secrets are registered for log redaction before it is returned.
        """
        if allow_default not in self._configs:
            from cdc_lake.config import resolve_config

            config = resolve_config(self.config_path, allow_default=allow_default)
            register_secrets(config.secret_values())
            self._configs[allow_default] = config
        return self._configs[allow_default]


def get_config(ctx: click.Context, allow_default: bool = False) -> Config:
    """The config for the running command (``allow_default=True`` only for ``stack`` and ``demo``)."""
    found = ctx.find_object(CliContext)
    return (found or CliContext()).config(allow_default=allow_default)


def config_file(ctx: click.Context) -> Path:
    """The config file the command loaded (``get_config`` has already required one)."""
    from cdc_lake.config import find_config

    found = find_config((ctx.find_object(CliContext) or CliContext()).config_path)
    if found is None:
        raise ConfigError("no config file: pass --config PATH")
    return found


def applier_factory() -> ApplierFactory:
    """The applier a bootstrap hands its tables over to: the command line wires the two stages together.

    ``bootstrap/`` never imports the applier (both depend on the lake-table contract), so its commands
    and hooks take it from here.
    """
    from cdc_lake.apply.runner import ApplyRunner

    return ApplyRunner.for_config


def repair_factory() -> RepairFactory:
    """The applier as ``cdc-lake repair`` uses it: one batch of a table under its apply lock
    (:func:`applier_factory` says why the command line passes it)."""
    from cdc_lake.apply.runner import ApplyRunner

    return ApplyRunner.for_config


def connector_update(ctx: click.Context) -> ConnectorUpdate:
    """Onboarding's connector update, for a re-bootstrap: the command line wires the two stages together.

    The password variable is the one the config file names for the source (as ``onboard`` passes it to
    Kafka Connect); ``bootstrap/`` never imports onboarding, so it takes the update from here.
    """
    from cdc_lake.capture.secrets import password_env
    from cdc_lake.onboard.run import update_connectors

    path = config_file(ctx)
    return lambda config, source, table: update_connectors(config, source, table, password_env(path, source))
