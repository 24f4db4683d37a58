"""Per-table locks: one holder per table and purpose, released when the holder ends, even if killed."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc_lake.exceptions import StateStoreError
from cdc_lake.state.locks import LockPurpose, table_lock


@pytest.mark.parametrize("purpose", list(LockPurpose))
@pytest.mark.parametrize("url", ["sqlite:///{tmp}/state.db", "sqlite://"])
def test_a_second_holder_is_refused_until_the_first_lets_go(
    tmp_path: Path, url: str, purpose: LockPurpose
) -> None:
    url = url.format(tmp=tmp_path)
    with (
        table_lock(url, purpose, "pg.s.t") as first,
        table_lock(url, purpose, "pg.s.t") as second,
        table_lock(url, purpose, "pg.s.other") as other,
    ):
        assert (bool(first), bool(second), bool(other)) == (True, False, True)
    with table_lock(url, purpose, "pg.s.t") as again:
        assert again


@pytest.mark.parametrize("url", ["sqlite:///{tmp}/state.db", "sqlite://"])
def test_locks_of_different_purposes_do_not_conflict(tmp_path: Path, url: str) -> None:
    url = url.format(tmp=tmp_path)
    with (
        table_lock(url, LockPurpose.BOOTSTRAP, "pg.s.t") as bootstrap,
        table_lock(url, LockPurpose.APPLY, "pg.s.t") as apply,
    ):
        assert (bool(bootstrap), bool(apply)) == (True, True)


def test_a_killed_holder_releases_the_lock(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom cdc_lake.state.locks import LockPurpose, table_lock\n"
            f"with table_lock({url!r}, LockPurpose.APPLY, 'pg.s.t') as held:\n"
            "    print(bool(held), flush=True)\n    time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
    with table_lock(url, LockPurpose.APPLY, "pg.s.t") as taken:
        assert not taken
    holder.kill()
    holder.wait()
    time.sleep(0.1)
    with table_lock(url, LockPurpose.APPLY, "pg.s.t") as taken:
        assert taken


@pytest.mark.parametrize("purpose", list(LockPurpose))
def test_backends_without_locks_are_refused(purpose: LockPurpose) -> None:
    with (
        pytest.raises(StateStoreError, match=f"offers no {purpose.value} lock"),
        table_lock("oracle://u@h/db", purpose, "t"),
    ):
        pass
