"""The apply lock: one holder per table, released when the holder ends, even if it is killed."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc_lake.apply.lock import apply_lock
from cdc_lake.exceptions import StateStoreError


@pytest.mark.parametrize("url", ["sqlite:///{tmp}/state.db", "sqlite://"])
def test_a_second_holder_is_refused_until_the_first_lets_go(tmp_path: Path, url: str) -> None:
    url = url.format(tmp=tmp_path)
    with (
        apply_lock(url, "pg.s.t") as first,
        apply_lock(url, "pg.s.t") as second,
        apply_lock(url, "pg.s.other") as other,
    ):
        assert (first, second, other) == (True, False, True)
    with apply_lock(url, "pg.s.t") as again:
        assert again


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom cdc_lake.apply.lock import apply_lock\n"
            f"with apply_lock({url!r}, 'pg.s.t') as held:\n    print(held, flush=True)\n    time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
    with apply_lock(url, "pg.s.t") as taken:
        assert not taken
    holder.kill()
    holder.wait()
    time.sleep(0.1)
    with apply_lock(url, "pg.s.t") as taken:
        assert taken


def test_backends_without_locks_are_refused() -> None:
    with pytest.raises(StateStoreError, match="offers no lock"), apply_lock("oracle://u@h/db", "t"):
        pass
