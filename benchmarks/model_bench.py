"""The applier's property suite against its reference model, with many examples and several seeds.

CI runs ``tests/unit/apply/test_apply_model.py`` with the ``ci`` profile (250 examples per test, one fixed
seed).  This runs it with the ``thorough`` profile (5,000 examples per test) once per seed and reports,
per seed, the examples run, what Hypothesis' events counted (cuts inside shared-position groups,
crashes before a commit, snapshot points), the outcome and the wall time.  A failing seed's falsifying
example is printed by pytest; keep it as a regression case (an ``@example`` or a unit test).  No stack
is needed::

    .venv/bin/python benchmarks/model_bench.py --seeds 5 [--examples 5000] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SUITE = "tests/unit/apply/test_apply_model.py"
_PASSING = re.compile(r"- (\d+) passing, (\d+) failing")
_EVENT = re.compile(r"\* ([\d.]+)%, (.+)")


def run_seed(seed: int, examples: int) -> dict[str, Any]:
    """One run of the suite with ``seed``: outcome, examples, event shares, wall time."""
    env = dict(os.environ, HYPOTHESIS_PROFILE="thorough", CDC_LAKE_MODEL_EXAMPLES=str(examples))
    command = [
        sys.executable, "-m", "pytest", SUITE, "-q", "-p", "no:cacheprovider",
        f"--hypothesis-seed={seed}", "--hypothesis-show-statistics",
    ]
    began = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    output = done.stdout + done.stderr
    passing = sum(int(m.group(1)) for m in _PASSING.finditer(output))
    failing = sum(int(m.group(2)) for m in _PASSING.finditer(output))
    events: dict[str, float] = {}
    for match in _EVENT.finditer(output):
        events[match.group(2)] = max(events.get(match.group(2), 0.0), float(match.group(1)))
    result = {
        "seed": seed,
        "passed": done.returncode == 0,
        "examples_passing": passing,
        "examples_failing": failing,
        "events_percent": events,
        "seconds": round(time.monotonic() - began, 1),
    }
    if done.returncode != 0:
        result["output_tail"] = output[-4000:]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="how many seeds (1..N)")
    parser.add_argument("--examples", type=int, default=5_000, help="examples per test and seed")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = []
    for seed in range(1, args.seeds + 1):
        result = run_seed(seed, args.examples)
        results.append(result)
        verdict = "ok" if result["passed"] else "FAILED"
        print(
            f"seed {seed}: {verdict}, {result['examples_passing']} examples passing, "
            f"{result['examples_failing']} failing, {result['seconds']} s"
        )
        for name, share in sorted(result["events_percent"].items()):
            print(f"    {share:5.1f}%  {name}")
        if not result["passed"]:
            print(result["output_tail"])
    failed = [r["seed"] for r in results if not r["passed"]]
    print(f"seeds run {len(results)}, failed {len(failed)} {failed if failed else ''}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
