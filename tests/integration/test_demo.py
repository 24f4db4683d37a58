"""The README's demo command, shortened: every step runs for real and the lake ends equal to the source;
then the Kafka and Trino commands docs/operations.md prints for the demo's table run as printed."""

from __future__ import annotations

import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
AFTER_THE_DEMO = "### On the local stack, after `cdc-lake demo`"

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def test_demo_ends_with_the_lake_equal_to_the_source(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cdc_lake",
            "demo",
            "--seconds",
            "20",
            "--rows",
            "2000",
            "--work-dir",
            str(tmp_path / "demo"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )

    try:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        documented = _documented_commands(tmp_path / "demo")
        outputs = [_run_documented(command) for command in documented]
    finally:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "cdc_lake",
                "--config",
                str(tmp_path / "demo" / "cdc-lake.yaml"),
                "offboard",
                "shop",
                "--drop-slot",
            ],
            capture_output=True,
            check=False,
        )
    steps = ("onboard shop", "bootstrap --source shop", "apply --once", "compact --schedule")
    for step in (f"cdc-lake {step}" for step in steps):
        assert f"$ {step}" in proc.stdout
    assert "The lake equals the source." in proc.stdout
    assert "state LIVE" in proc.stdout
    # Its config, state store and lake are the user's alone (docs/security.md).
    assert stat.S_IMODE((tmp_path / "demo").stat().st_mode) == 0o700

    rows = re.search(r"source: (\d+) rows", proc.stdout)
    assert rows is not None, proc.stdout[-2000:]
    listed, described, offsets, tables, count = outputs
    assert re.search(r"^cdc-lake\.shop\.demo\.orders\.[0-9a-f]{12}$", listed, re.M), listed[-2000:]
    assert "LAG" in described and "shop.demo.orders" in described, described
    assert re.search(r"^shop\.demo\.orders:0:\d+$", offsets, re.M), offsets
    assert "shop_demo_orders" in tables, tables
    assert count.strip().strip('"') == rows.group(1), (count, rows.group(1))


def _documented_commands(work_dir: Path) -> list[str]:
    """The first bash block under :data:`AFTER_THE_DEMO` in docs/operations.md, one command a line, the
    demo's default work directory replaced by this test's."""
    text = OPERATIONS.read_text()
    block = text.split(AFTER_THE_DEMO, 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 5, commands
    return [command.replace(".cdc-lake/demo/", f"{work_dir}/") for command in commands]


def _run_documented(command: str) -> str:
    """``command`` in bash, ``cdc-lake`` being this checkout's; its stdout.  Kafka's tools exit 0 on some
    errors, so their stderr must not name one either."""
    shell = f'cdc-lake() {{ "{sys.executable}" -m cdc_lake "$@"; }}\n{command}'
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    assert not re.search(r"Error|Exception", done.stdout + done.stderr), f"{command}\n{done.stderr[-2000:]}"
    return done.stdout
