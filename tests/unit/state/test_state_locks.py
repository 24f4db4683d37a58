"""Per-table locks: one holder per table and purpose, released when the holder ends, even if killed."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cdc_lake.exceptions import StateStoreError
from cdc_lake.state.locks import LockPurpose, batch_lock, table_lock, waited_table_lock


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


@pytest.mark.parametrize("url", ["sqlite:///{tmp}/state.db", "sqlite://"])
def test_a_waiting_command_gets_the_apply_lock_from_a_greedy_applier(tmp_path: Path, url: str) -> None:
    """``cdc-lake run`` takes a table's apply lock again right after each batch; a repair or a
    re-bootstrap's switch waiting for it polled in vain (the benchmark's switch waited 13 minutes).  It now
    waits in turn: the applier's next batch is refused while it waits, and it gets the lock."""
    url = url.format(tmp=tmp_path)
    stop, batches = threading.Event(), [0]

    def applier() -> None:
        while not stop.is_set():
            with batch_lock(url, "pg.s.t") as lock:
                if lock:
                    batches[0] += 1
                    time.sleep(0.05)  # a batch; then straight to the next one

    greedy = threading.Thread(target=applier, daemon=True)
    greedy.start()
    try:
        time.sleep(0.2)
        started = time.monotonic()
        with waited_table_lock(url, LockPurpose.APPLY, "pg.s.t", 5.0) as lock:
            waited = time.monotonic() - started
            assert lock, f"the command never got the lock from an applier that made {batches[0]} batches"
            during = batches[0]
            time.sleep(0.2)
            assert batches[0] == during, "the applier wrote a batch while the command held the lock"
        assert waited < 1.0, waited
        time.sleep(0.3)
        assert batches[0] > during, "the applier did not go on after the command"
    finally:
        stop.set()
        greedy.join(5)
