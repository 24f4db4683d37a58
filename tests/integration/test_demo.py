"""The README's demo command, shortened: every step runs for real and the lake ends equal to the source."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for step in ("cdc-lake onboard shop", "cdc-lake bootstrap --source shop", "cdc-lake apply --once"):
        assert f"$ {step}" in proc.stdout
    assert "The lake equals the source." in proc.stdout
    assert "state LIVE" in proc.stdout
    # Its config, state store and lake are the user's alone (docs/security.md).
    assert stat.S_IMODE((tmp_path / "demo").stat().st_mode) == 0o700
