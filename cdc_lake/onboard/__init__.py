"""Onboarding: preflight checks and the idempotent onboard/offboard runs of the connectors planned by
:mod:`cdc_lake.capture` (the plan per tier is shared with the other stages).

Modules are imported where used (``cdc_lake.onboard.run`` pulls in the source drivers only
through :func:`cdc_lake.sources.engine_for`).
"""

DEFAULT_TIMEOUT = 120.0
"""Seconds onboard and offboard wait for a changed connector to run and stream, unless told otherwise.

Declared here, not in :mod:`cdc_lake.onboard.run`, so the command line's options can show it without
importing the onboarding run (and the state store and Connect client it loads).
"""
