"""Issue 35 goal 6: freshness p99 and throughput against the table's size, per layout, as one plot.

The points live in ``benchmarks/growth_points.json``, each with the run it came from (date, command's
output, section of docs/benchmarks.md), so the plot is redrawn from measured figures only::

    # add a run's figures: freshness_bench.py --json or apply_bench.py --parts throughput --json
    .venv/bin/python -P benchmarks/growth_curve.py --add /tmp/fresh/b5m.json --section "Issue 35: ..."
    # draw docs/growth-curve.png (each layout's latest point per size; needs the ``bench`` extra,
    # matplotlib) and print the table (every point)
    .venv/bin/python -P benchmarks/growth_curve.py --plot docs/growth-curve.png

Freshness: p99 of the seconds from the source's commit to the lake commit that made each change visible
(``freshness_bench.py``: 500 changes/s of 70/15/15 random-key updates/inserts/deletes).  Throughput:
changes/s of one ``apply --once`` of 500,000 random-key changes from a pre-filled topic
(``apply_bench.py --parts throughput``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from layouts import LAYOUTS

POINTS = Path(__file__).resolve().parent / "growth_points.json"
METRICS = {
    "freshness_p99_seconds": "freshness p99 at 500 changes/s (s)",
    "changes_per_second": "apply from a pre-filled topic (changes/s)",
}
LABELS = {
    "default": "COPY_ON_WRITE + GLOBAL_BLOOM (tiers 1+)",
    "mor-bucket-bounded": "MERGE_ON_READ + BUCKET, compaction outside, plans of every file group",
    "mor-bucket-async": "MERGE_ON_READ + BUCKET, compaction outside, plans of every file group",
    "mor-bucket-one-group": "MERGE_ON_READ + BUCKET, plans of one file group (tier 0)",
    "mor-bucket-timed": "MERGE_ON_READ + BUCKET, compaction every 120 s only",
    "mor-ri-async": "MERGE_ON_READ + RECORD_INDEX, compaction outside",
}


def layout_name(layout: dict[str, Any] | str) -> str:
    """The name of a layout a result file records, by name or as its lake settings."""
    if isinstance(layout, str):
        return layout
    settings = {k: v for k, v in layout.items() if k != "tier_layouts"}
    for name, known in LAYOUTS.items():
        if {k: v for k, v in known.items() if k != "tier_layouts"} == settings:
            return name
    raise ValueError(f"a layout benchmarks/layouts.py does not name: {layout}")


def points_of(results: dict[str, Any], section: str, fallback_utc: str) -> list[dict[str, Any]]:
    """The growth points of one result file of ``freshness_bench.py`` or ``apply_bench.py``."""
    found = []
    if "phases" in results:  # freshness_bench.py
        for phase in results["phases"]:
            if "arrangement" in phase or phase["rate"] != 500:  # a SIGKILL phase, or another rate
                continue
            found.append({
                "metric": "freshness_p99_seconds", "layout": layout_name(results["layout"]),
                "rows": results["rows"], "value": phase["p99_seconds"],
                "seconds": phase.get("seconds"), "utc": results.get("started_utc", fallback_utc),
                "section": section,
            })  # fmt: skip
    for run in results.get("throughput", []):  # apply_bench.py --parts throughput
        found.append({
            "metric": "changes_per_second", "layout": run["layout"], "rows": run["rows"],
            "value": run["changes_per_second"], "utc": fallback_utc, "section": section,
        })  # fmt: skip
    if not found:
        raise ValueError("no freshness phase at 500/s without a kill, and no throughput run, in the file")
    return found


def table(points: list[dict[str, Any]]) -> str:
    """The points as a Markdown table: one row per metric and layout, one column per size."""
    sizes = sorted({p["rows"] for p in points})
    head = "| figure | layout | " + " | ".join(f"{n / 1e6:g}M rows" for n in sizes) + " |"
    lines = [head, "| --- | --- | " + " | ".join("---" for _ in sizes) + " |"]
    for metric in METRICS:
        for label in sorted({_label(p) for p in points if p["metric"] == metric}):
            cells = []
            for n in sizes:
                where = (metric, label, n)
                mine = [p["value"] for p in points if (p["metric"], _label(p), p["rows"]) == where]
                cells.append(" / ".join(f"{v:,g}" for v in mine) or "-")
            lines.append(f"| {METRICS[metric]} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _label(point: dict[str, Any]) -> str:
    """The layout's label: the bucket layouts with and without the 120 s plan are one line (a plan's
    timing does not change a commit's cost)."""
    layout = str(point["layout"])
    return LABELS.get(layout, layout)


def latest(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each metric's, layout label's and size's latest point (by ``utc``): the code changes between runs,
    so a line joins what the product measures now; the table lists every point."""
    chosen: dict[tuple[str, str, int], dict[str, Any]] = {}
    for point in sorted(points, key=lambda p: str(p["utc"])):
        chosen[(point["metric"], _label(point), point["rows"])] = point
    return list(chosen.values())


def plot(points: list[dict[str, Any]], path: Path) -> None:
    """Two panels, freshness p99 and throughput against rows, a line per layout through its
    :func:`latest` points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, metric in zip(axes, METRICS, strict=True):
        mine = [p for p in latest(points) if p["metric"] == metric]
        for label in sorted({_label(p) for p in mine}):
            line = sorted((p["rows"] / 1e6, p["value"]) for p in mine if _label(p) == label)
            ax.plot([x for x, _ in line], [y for _, y in line], marker="o", label=label)
        if metric == "freshness_p99_seconds":
            ax.axhline(10, color="grey", linestyle="--", linewidth=1)
            ax.annotate("goal p99 10 s", (0.01, 10), xycoords=("axes fraction", "data"), fontsize=7)
            ax.set_yscale("log")
        else:
            ax.axhline(5000, color="grey", linestyle="--", linewidth=1)
            ax.annotate("goal 5,000/s", (0.01, 5000), xycoords=("axes fraction", "data"), fontsize=7)
            ax.set_ylim(bottom=0)
        ax.set_title(METRICS[metric], fontsize=9)
        ax.set_xlabel("table rows (millions)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Issue 35: the tier-0 layout against the default as the table grows (2 cores)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--add", type=Path, action="append", default=[], help="a result JSON to add")
    parser.add_argument("--section", default="", help="the docs/benchmarks.md section the run is in")
    parser.add_argument("--plot", type=Path, help="PNG to draw")
    args = parser.parse_args(argv)
    points: list[dict[str, Any]] = json.loads(POINTS.read_text()) if POINTS.exists() else []
    for path in args.add:
        utc = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC).isoformat(timespec="seconds")
        points.extend(points_of(json.loads(path.read_text()), args.section, utc))
    if args.add:
        POINTS.write_text(json.dumps(points, indent=1) + "\n")
    if args.plot is not None:
        plot(points, args.plot)
    print(table(points))
    return 0


if __name__ == "__main__":
    sys.exit(main())
