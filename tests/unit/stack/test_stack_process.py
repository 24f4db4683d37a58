"""Pid-file handling of the local stack: `down` stops only what `up` started."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc_lake.stack.process import ManagedProcess


def test_a_recycled_pid_is_never_signalled(tmp_path: Path) -> None:
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        managed = ManagedProcess("svc", tmp_path / "run", tmp_path / "logs", marker=str(tmp_path))
        managed.pid_file.parent.mkdir(parents=True)
        managed.pid_file.write_text(str(stranger.pid))

        assert managed.pid() is None
        assert managed.stop() is False
        assert stranger.poll() is None
        assert not managed.pid_file.exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_start_and_stop_our_own_process(tmp_path: Path) -> None:
    managed = ManagedProcess("svc", tmp_path / "run", tmp_path / "logs", marker=str(tmp_path))
    pid = managed.start([sys.executable, "-c", "print('ready', flush=True); import time; time.sleep(30)"])

    assert managed.pid() == pid
    deadline = time.monotonic() + 60  # an interpreter start under a loaded CI machine
    while "ready" not in managed.log_tail() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "ready" in managed.log_tail()
    assert managed.stop(timeout=5) is True
    assert managed.pid() is None
    assert managed.stop() is False


def test_a_process_still_inside_execve_is_recognised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Popen returns once execve closed the close-on-exec pipe; the kernel lays out the new
    # argv and environment after that, so /proc briefly shows both empty (CI failed on it).
    managed = ManagedProcess("svc", tmp_path / "run", tmp_path / "logs", marker=str(tmp_path))
    pid = managed.start([sys.executable, "-c", "import time; time.sleep(30)"])
    real_read_bytes = Path.read_bytes
    empty_reads = {"left": 6}

    def mid_exec(path: Path) -> bytes:
        if path.name in ("cmdline", "environ") and path.parent.name == str(pid) and empty_reads["left"] > 0:
            empty_reads["left"] -= 1
            return b""
        return real_read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", mid_exec)
    try:
        assert managed.pid() == pid
        assert empty_reads["left"] == 0
    finally:
        monkeypatch.undo()
        assert managed.stop(timeout=5) is True
