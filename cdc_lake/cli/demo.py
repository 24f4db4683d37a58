"""``cdc-lake demo``: the whole flow on local defaults (the lead owns it; this version reserves the verb)."""

from __future__ import annotations

import click

from cdc_lake.exceptions import NotImplementedYetError


@click.command()
def demo() -> None:
    """Run the whole flow on the local stack: onboard, bootstrap, apply, status.

    Not implemented yet: arrives with the demo issue.
    """
    raise NotImplementedYetError("cdc-lake demo is not implemented yet: it arrives with the demo issue")
