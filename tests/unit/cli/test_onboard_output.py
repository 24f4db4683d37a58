"""render_checks at 80 columns: one line per check, each failing or warning message whole below."""

from __future__ import annotations

import pytest

from cdc_lake.cli.onboard_output import render_checks
from cdc_lake.sources.checks import CheckResult

_FAILED_DETAIL = (
    "table pg.public.measures: column span (interval) cannot be replicated exactly: Debezium's "
    "interval encoding (microseconds, a month counted as 30.4375 days) does not round-trip; leave it "
    "out of the table's columns list"
)
_FAILED_FIX = "choose a fallback per column in the table's column_types (docs/type-mapping.md)"
_WARNED_DETAIL = "max_slot_wal_keep_size is -1: a stopped connector's slot keeps WAL until the disk is full"
_WARNED_FIX = (
    "set max_slot_wal_keep_size to a size the primary's disk can hold (docs/runbooks/wal-retained-high.md)"
)
_CHECKS = [
    CheckResult.ok("primary reachable", "postgres 15.8 at 127.0.0.1:15432/app as cdc_user, TLS verify-full"),
    CheckResult.ok("wal_level", "logical"),
    CheckResult.warn("wal retention", _WARNED_DETAIL, _WARNED_FIX),
    CheckResult.fail("column types", _FAILED_DETAIL, _FAILED_FIX),
    CheckResult.ok("replica", "standby 127.0.0.1:15433 replayed 0/3000148"),
]


def _render(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("COLUMNS", "80")
    render_checks("pg", _CHECKS)
    return capsys.readouterr().out.splitlines()


def test_the_checks_table_fits_80_columns_one_line_per_check(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _render(capsys, monkeypatch)

    table = [line for line in lines if line[:1] in "┃│"]
    assert max(len(line) for line in lines if line[:1] in "┏┃┡│└") <= 80
    assert len(table) == 1 + len(_CHECKS)  # the header and one line per check
    for check in _CHECKS:
        assert sum(check.name in line for line in table) == 1


def test_each_failing_or_warning_message_stands_whole_under_the_table(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = _render(capsys, monkeypatch)

    below = lines[max(i for i, line in enumerate(lines) if "─" in line) + 1 :]
    assert below == [
        f"WARN wal retention: {_WARNED_DETAIL}",
        f"  fix: {_WARNED_FIX}",
        f"FAIL column types: {_FAILED_DETAIL}",
        f"  fix: {_FAILED_FIX}",
    ]
