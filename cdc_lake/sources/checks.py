"""What a preflight check answers: the result type the source engines and the onboarding share.

A check passes, warns (reported, onboarding goes on) or fails (onboarding stops), and says what it found
and how to fix it.  It lives with the source engines, which run most checks
(:meth:`cdc_lake.sources.base.SourceEngine.preflight`); :mod:`cdc_lake.onboard.preflight` adds the checks
of the services every source needs and reports them all.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from cdc_lake.sources.settings import Connection, Source

_NAMES_SHOWN = 5


class Outcome(enum.StrEnum):
    """How a check ended: a warning is reported but does not stop onboarding."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class CheckResult:
    """One preflight check: its name, outcome, what was found, and the fix when it did not pass."""

    name: str
    outcome: Outcome
    detail: str
    fix: str | None = None

    @classmethod
    def ok(cls, name: str, detail: str) -> CheckResult:
        """A passed check."""
        return cls(name, Outcome.PASS, detail)

    @classmethod
    def warn(cls, name: str, detail: str, fix: str) -> CheckResult:
        """A check that found a risk worth knowing about but not worth stopping for."""
        return cls(name, Outcome.WARN, detail, fix)

    @classmethod
    def fail(cls, name: str, detail: str, fix: str) -> CheckResult:
        """A failed check: onboarding stops."""
        return cls(name, Outcome.FAIL, detail, fix)

    @property
    def failed(self) -> bool:
        """Whether this check stops onboarding."""
        return self.outcome is Outcome.FAIL

    def to_json(self) -> dict[str, str | None]:
        """The check as a JSON object."""
        return {"check": self.name, "outcome": self.outcome.value, "detail": self.detail, "fix": self.fix}


def name_list(names: Iterable[str]) -> str:
    """Names joined by commas, the first few only, with how many more there are."""
    items = list(names)
    shown = ", ".join(items[:_NAMES_SHOWN])
    more = len(items) - _NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


class KeyedTable(Protocol):
    """What the key check reads of a table's facts, whatever the engine."""

    @property
    def exists(self) -> bool:
        """Whether the table was found (a missing table is another check's failure)."""

    @property
    def columns(self) -> tuple[str, ...]:
        """The table's columns, in order."""

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The primary key's columns (empty without one)."""

    @property
    def unique_keys(self) -> tuple[tuple[str, ...], ...]:
        """The columns of each unique index that makes its rows unique: valid, not partial, no expression,
        every column NOT NULL (a NULL would let two rows share a value)."""


def _unique_in_source(table: KeyedTable, key: tuple[str, ...]) -> bool:
    """Whether no two rows of ``table`` can share ``key``: it holds the primary key or a unique index."""
    return any(
        unique and set(unique) <= set(key) for unique in (table.primary_key, *table.unique_keys)
    )


def check_primary_keys(
    tables: Mapping[str, KeyedTable], keys: Mapping[str, tuple[str, ...]], keyless_fix: str
) -> CheckResult:
    """Every table has a primary key, or a configured key whose columns exist and are unique.

    A configured key must be unique in the source (:func:`_unique_in_source`): the bootstrap's bulk insert
    stores every row, so rows sharing a key would be two lake rows under one record key, and the changes
    after them would diverge.
    """
    keyless, bad_keys, not_unique = [], [], []
    for name, configured in keys.items():
        table = tables[name]
        if not table.exists:
            continue
        if configured:
            unknown = [column for column in configured if column not in table.columns]
            if unknown:
                bad_keys.append(f"{name} ({', '.join(unknown)})")
            elif not _unique_in_source(table, configured):
                not_unique.append(f"{name} ({', '.join(configured)})")
        elif not table.primary_key:
            keyless.append(name)
    if bad_keys:
        return CheckResult.fail(
            "primary keys",
            f"configured key columns not in the table: {name_list(bad_keys)}",
            "fix tables[].key in the config",
        )
    if not_unique:
        return CheckResult.fail(
            "primary keys",
            "configured key not unique in the source (it holds neither the primary key nor a unique index "
            f"over NOT NULL columns): {name_list(not_unique)}",
            "CREATE UNIQUE INDEX on the key columns (all NOT NULL), or set tables[].key to columns that "
            "hold one",
        )
    if keyless:
        return CheckResult.fail(
            "primary keys", f"no primary key and no configured key: {name_list(keyless)}", keyless_fix
        )
    return CheckResult.ok("primary keys", f"{len(keys)} tables keyed")


def check_replica_configured(configured: bool, required: bool) -> CheckResult | None:
    """The replica check's answer when no replica is configured (None when one is: the engine judges it)."""
    if configured:
        return None
    if required:
        return CheckResult.fail(
            "replica",
            "no replica configured: bootstrap reads from a replica",
            "set replica: in the source config (or bootstrap.allow_primary_reads: true)",
        )
    return CheckResult.ok("replica", "none configured; bootstrap.allow_primary_reads is on")


def check_source_tls(source: Source, unverified: Callable[[Connection], str | None], fix: str) -> CheckResult:
    """Every configured server of ``source`` is reached over TLS that verifies its certificate.

    ``unverified`` says what a connection's settings leave unverified (None: nothing); a warning
    names each such server and ``fix``, the settings to set on it.  Only a warning: a private
    network may be trusted, but then the credentials and the captured rows cross it readable.
    """
    found = {
        role: problem
        for role, connection in (("primary", source.primary), ("replica", source.replica))
        if connection is not None and (problem := unverified(connection)) is not None
    }
    if not found:
        return CheckResult.ok("source tls", "every server's certificate is verified")
    detail = "; ".join(f"{role} {problem}" for role, problem in found.items())
    where = " and ".join(f"sources.{source.name}.{role}" for role in found)
    return CheckResult.warn("source tls", f"source {source.name}: {detail}", f"set {fix} on {where}")
