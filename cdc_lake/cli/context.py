"""What the ``cdc-lake`` group hands its commands: the ``--config`` path, verbosity, and the loaded config."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import click

from cdc_lake.config import Config, resolve_config
from cdc_lake.redaction import register_secrets


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
            config = resolve_config(self.config_path, allow_default=allow_default)
            register_secrets(config.secret_values())
            self._configs[allow_default] = config
        return self._configs[allow_default]


def get_config(ctx: click.Context, allow_default: bool = False) -> Config:
    """The config for the running command (``allow_default=True`` only for ``stack`` and ``demo``)."""
    found = ctx.find_object(CliContext)
    return (found or CliContext()).config(allow_default=allow_default)
