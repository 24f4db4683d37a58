"""What a preflight check answers: the result type the source engines and the onboarding share.

A check passes, warns (reported, onboarding goes on) or fails (onboarding stops), and says what it found
and how to fix it.  It lives with the source engines, which run most checks
(:meth:`cdc_lake.sources.base.SourceEngine.preflight`); :mod:`cdc_lake.onboard.preflight` adds the checks
of the services every source needs and reports them all.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

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
