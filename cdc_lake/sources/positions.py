"""Typed source positions: the shared base each engine's position type extends, parsed once, compared one way.

A source position says how far a database's change log goes: what the primary had written when a
snapshot point was taken, or what a connector has committed.  Each engine has its own kind, declared
in its package (Postgres: an LSN, :mod:`cdc_lake.sources.postgres.positions`; MySQL and MariaDB: GTID
sets and positions, :mod:`cdc_lake.sources.mysql.positions`), and only positions of one kind compare.

``a.covers(b)`` is the one comparison: "every change up to ``b`` is included in ``a``".  Each type
also reads a Debezium connector's committed source offset (what Kafka Connect answers at
``GET /connectors/{name}/offsets``).

Each engine declares its type once (``SourceEngine.position_type``), so shared code asks the engine
and never compares engine names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, Self


class LogPosition(ABC):
    """How far a change log goes; each engine has one subclass (its ``position_type``)."""

    @classmethod
    @abstractmethod
    def parse(cls, text: str) -> Self:
        """The position ``text`` as the engine prints it; SourceEngineError naming it if malformed."""

    @classmethod
    @abstractmethod
    def from_connector_offset(cls, offset: Mapping[str, Any]) -> Self | None:
        """The position a Debezium connector committed, or None when the offset holds none yet."""

    @abstractmethod
    def covers(self, other: Self) -> bool:
        """Whether every change up to ``other`` is included in this position."""

    @classmethod
    def offset_covers(cls, offset: Mapping[str, Any], position: str) -> bool:
        """Whether a connector's committed source ``offset`` includes every change up to ``position``."""
        committed = cls.from_connector_offset(offset)
        return committed is not None and committed.covers(cls.parse(position))
