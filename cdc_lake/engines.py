"""The names of the source engines cdc-lake knows, read from the engine registry.

An engine is its package under :mod:`cdc_lake.sources` (its capabilities, settings model, capture
ids, connector template and jars) plus its entry in :data:`cdc_lake.sources.ENGINES`; this tuple
lists the registered names, in the registry's order, for code that goes through every engine (the
local stack's Connect plugins and connector classes).  It is taken when this module is loaded: an
engine a test adds to the registry later is found by the registry's lookups, not here.
"""

from __future__ import annotations

from typing import Final

from cdc_lake.sources import ENGINES

ENGINE_NAMES: Final[tuple[str, ...]] = tuple(ENGINES)
