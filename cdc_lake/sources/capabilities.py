"""What a source engine declares about itself, once: the facts shared code asks instead of comparing names.

Each engine package (:mod:`cdc_lake.sources.postgres`, :mod:`cdc_lake.sources.mysql`) declares one
:class:`EngineCapabilities` per engine name in its ``__init__``, which imports no database driver, so
the applier's decode path and the onboarding can read them on a machine that has only some drivers
installed.  :mod:`cdc_lake.sources` keeps the registry (``capabilities_for``,
``capabilities_for_connector``) and loads an engine's class, and so its driver, only when asked.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class PositionKind(enum.StrEnum):
    """How an engine's change stream is positioned, and so how an envelope's ``source`` block reads.

    ``LSN``: Postgres WAL; an event is placed by ``source.lsn`` and ordered by ``source.sequence``
    (``[last commit LSN, change LSN]``).  ``GTID``: the MySQL family's binlog; an event is placed by its
    Kafka offset inside a partition and ordered across a failover by ``source.gtid``.
    """

    LSN = "lsn"
    GTID = "gtid"


@dataclass(frozen=True)
class EngineCapabilities:
    """One source engine's facts: its names, change positions and the objects it keeps.

    ``connector_values`` are the ``source.connector`` values its Debezium connector writes into every
    change event; ``replication_slots`` says the source keeps a replication slot (and a publication)
    per connector, which onboarding creates, checks and releases;
    ``engine_module``/``engine_class`` locate the engine class (which imports the Python driver).
    """

    name: str
    connector_values: frozenset[str]
    position_kind: PositionKind
    replication_slots: bool
    engine_module: str
    engine_class: str
