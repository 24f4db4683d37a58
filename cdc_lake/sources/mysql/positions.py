"""The MySQL family's positions: a MariaDB GTID position and a MySQL GTID set.

- MariaDB: a GTID position (``domain-server-seq,...``): the highest sequence number per replication
  domain.  It covers another when it is at least as far in every domain the other names.
- MySQL: a GTID set (``uuid:1-5:7,...``): intervals of transaction numbers per source uuid (or
  ``uuid:tag``).  It covers another when it contains every transaction of the other.

A connector's committed offset holds them as ``gtids``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc_lake.exceptions import SourceEngineError
from cdc_lake.sources.positions import LogPosition

_MARIADB_GTID = re.compile(r"^(\d+)-(\d+)-(\d+)$")
_MYSQL_INTERVAL = re.compile(r"^(\d+)(?:-(\d+))?$")


@dataclass(frozen=True)
class MariaDbGtidPosition(LogPosition):
    """A MariaDB GTID position: the highest sequence number seen per replication domain."""

    highest: Mapping[int, int]

    @classmethod
    def parse(cls, text: str) -> MariaDbGtidPosition:
        """``domain-server-seq`` entries separated by commas (``@@gtid_binlog_pos``); empty is allowed."""
        highest: dict[int, int] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            match = _MARIADB_GTID.match(part)
            if match is None:
                raise SourceEngineError(f"{text!r} is not a MariaDB GTID position ({part!r})")
            domain, seq = int(match.group(1)), int(match.group(3))
            highest[domain] = max(highest.get(domain, 0), seq)
        return cls(highest)

    @classmethod
    def from_connector_offset(cls, offset: Mapping[str, Any]) -> MariaDbGtidPosition | None:
        """The GTID position of the connector's committed offset, None without GTIDs."""
        gtids = offset.get("gtids")
        return cls.parse(str(gtids)) if gtids else None

    def covers(self, other: MariaDbGtidPosition) -> bool:
        """At least as far as ``other`` in every domain ``other`` names."""
        return all(self.highest.get(domain, -1) >= seq for domain, seq in other.highest.items())


@dataclass(frozen=True)
class MySqlGtidSet(LogPosition):
    """A MySQL GTID set: disjoint, sorted intervals of transaction numbers per source (``uuid[:tag]``)."""

    intervals: Mapping[str, tuple[tuple[int, int], ...]]

    @classmethod
    def parse(cls, text: str) -> MySqlGtidSet:
        """``uuid[:tag]:1-5:7,...`` (``@@gtid_executed``; line breaks allowed); empty is allowed."""
        found: dict[str, list[tuple[int, int]]] = {}
        for part in filter(None, (p.strip() for p in text.replace("\n", "").split(","))):
            source: list[str] = []
            numbers: list[tuple[int, int]] = []
            for item in part.split(":"):
                match = _MYSQL_INTERVAL.match(item)
                if match is None:
                    if numbers:
                        raise SourceEngineError(f"{text!r} is not a MySQL GTID set ({part!r})")
                    source.append(item.lower())
                    continue
                numbers.append((int(match.group(1)), int(match.group(2) or match.group(1))))
            if not source or not numbers:
                raise SourceEngineError(f"{text!r} is not a MySQL GTID set ({part!r})")
            found.setdefault(":".join(source), []).extend(numbers)
        return cls({source: _merged(numbers) for source, numbers in found.items()})

    @classmethod
    def from_connector_offset(cls, offset: Mapping[str, Any]) -> MySqlGtidSet | None:
        """The GTID set of the connector's committed offset, None without GTIDs."""
        gtids = offset.get("gtids")
        return cls.parse(str(gtids)) if gtids else None

    def covers(self, other: MySqlGtidSet) -> bool:
        """Whether this set contains every transaction of ``other``."""
        return all(
            any(low <= want_low and want_high <= high for low, high in self.intervals.get(source, ()))
            for source, wanted in other.intervals.items()
            for want_low, want_high in wanted
        )


def _merged(numbers: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Intervals sorted, with overlapping and adjacent ones joined (``1-5:6-9`` is ``1-9``)."""
    merged: list[tuple[int, int]] = []
    for low, high in sorted(numbers):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return tuple(merged)
