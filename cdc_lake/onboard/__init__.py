"""Onboarding: preflight checks, the connector plan per tier, and the idempotent onboard/offboard runs.

Modules are imported where used (``cdc_lake.onboard.run`` pulls in the source drivers only
through :func:`cdc_lake.sources.engine_for`).
"""
