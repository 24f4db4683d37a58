"""A source's connectors brought in line with the config, as a stage other than onboarding sees it.

A re-bootstrap of a table whose frozen column list changed must update the connectors capturing it
first, with onboarding's checks and reconciliation.  ``bootstrap/`` does not import onboarding (the
stages never import each other): it takes a :data:`ConnectorUpdate`, and the command line passes
onboarding's (``cdc_lake.cli.context.connector_update``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cdc_lake.config import Config

ConnectorUpdate = Callable[["Config", str, str], list[str]]
"""Update the connectors of a source (its name) to capture a table (``schema.table``) as the config
says; returns what changed (nothing when they already do) and raises when a check fails."""
