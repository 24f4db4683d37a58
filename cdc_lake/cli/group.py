"""The click group class behind ``cdc-lake``: lazily imported subcommands and one-line errors."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import click

from cdc_lake.cli.stages import stage_command
from cdc_lake.exceptions import CdcLakeError
from cdc_lake.redaction import redact


class CdcLakeGroup(click.Group):
    """A group that imports some subcommands on first use and turns CdcLakeError into an exit code.

    ``lazy_subcommands`` maps a command name to ``"module:attribute"``; the module
    is imported only when that command is listed or run, so ``cdc-lake status``
    never pays for the stack's imports.  ``stage_subcommands`` maps a command name
    to the stage that registers it (:mod:`cdc_lake.cli.stages`), loaded from the
    stage when listed or run.
    """

    def __init__(
        self,
        *args: Any,
        lazy_subcommands: Mapping[str, str] | None = None,
        stage_subcommands: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._lazy = dict(lazy_subcommands or {})
        self._staged = dict(stage_subcommands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Eager, lazy and stage command names, sorted."""
        return sorted({*super().list_commands(ctx), *self._lazy, *self._staged})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The command called ``cmd_name``, importing it (or its stage) first if it is lazy."""
        if cmd_name in self._staged:
            return stage_command(self._staged[cmd_name], cmd_name)
        if cmd_name in self._lazy and cmd_name not in self.commands:
            module_name, attribute = self._lazy[cmd_name].split(":")
            command = getattr(importlib.import_module(module_name), attribute)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self._lazy[cmd_name]} is not a click command")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a CdcLakeError prints ``error: <message>`` on stderr and exits with its code."""
        try:
            return super().invoke(ctx)
        except CdcLakeError as exc:
            message = " ".join(redact(str(exc)).split()) or type(exc).__name__
            click.echo(f"error: {message}", err=True)
            ctx.exit(exc.exit_code)
