"""``benchmarks/growth_curve.py``: which figures of a result file become growth points, and the table."""

from __future__ import annotations

import pytest
from growth_curve import latest, layout_name, points_of, table
from layouts import LAYOUTS


def test_a_freshness_run_gives_its_500_per_second_phases_without_a_kill() -> None:
    old = {k: v for k, v in LAYOUTS["mor-bucket-bounded"].items() if k != "tier_layouts"}
    results = {
        "layout": old,  # recorded before layouts named tier_layouts
        "rows": 5_000_000,
        "started_utc": "2026-12-04T23:00:00+00:00",
        "phases": [
            {"rate": 500, "seconds": 300, "p99_seconds": 12.5},
            {"rate": 500, "seconds": 300, "p99_seconds": 90.0, "arrangement": "cold"},
            {"rate": 1000, "seconds": 300, "p99_seconds": 30.0},
        ],
    }

    (point,) = points_of(results, "a section", "2026-12-05T00:00:00+00:00")

    assert point == {
        "metric": "freshness_p99_seconds", "layout": "mor-bucket-bounded", "rows": 5_000_000, "value": 12.5,
        "seconds": 300, "utc": "2026-12-04T23:00:00+00:00", "section": "a section",
    }  # fmt: skip


def test_a_throughput_run_gives_one_point_per_layout_and_a_file_without_either_is_refused() -> None:
    results = {"throughput": [
        {"layout": "default", "rows": 5_000_000, "changes_per_second": 1500},
        {"layout": "mor-bucket-async", "rows": 5_000_000, "changes_per_second": 5500},
    ]}  # fmt: skip

    points = points_of(results, "s", "2026-12-05T00:00:00+00:00")

    assert [(p["layout"], p["value"]) for p in points] == [("default", 1500), ("mor-bucket-async", 5500)]
    row = "| apply from a pre-filled topic (changes/s) | COPY_ON_WRITE + GLOBAL_BLOOM (tiers 1+) | 1,500 |"
    assert row in table(points)
    with pytest.raises(ValueError, match="no freshness phase"):
        points_of({"phases": [{"rate": 250, "p99_seconds": 1.0}], "layout": "default", "rows": 1}, "s", "t")
    with pytest.raises(ValueError, match="does not name"):
        layout_name({"table_type": "MERGE_ON_READ", "index": "SIMPLE"})


def test_the_plot_joins_each_layouts_latest_point_per_size_and_the_table_keeps_every_one() -> None:
    def point(rows: int, value: float, utc: str, layout: str = "mor-bucket-one-group") -> dict[str, object]:
        return {"metric": "freshness_p99_seconds", "layout": layout, "rows": rows, "value": value, "utc": utc}

    points = [
        point(10_000_000, 40.1, "2026-12-05T05:36:03+00:00"),
        point(10_000_000, 23.4, "2026-12-05T21:47:36+00:00"),
        point(1_000_000, 16.1, "2026-12-05T21:36:00+00:00"),
        point(10_000_000, 90.3, "2026-12-04T23:15:48+00:00", "mor-bucket-bounded"),
        point(10_000_000, 83.5, "2026-12-05T03:03:47+00:00", "mor-bucket-async"),  # the same label
    ]

    drawn = {(p["layout"], p["rows"]): p["value"] for p in latest(points)}

    assert drawn == {
        ("mor-bucket-one-group", 10_000_000): 23.4,
        ("mor-bucket-one-group", 1_000_000): 16.1,
        ("mor-bucket-async", 10_000_000): 83.5,
    }
    assert "| 40.1 / 23.4 |" in table(points)
