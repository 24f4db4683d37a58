"""Background processes the local stack starts, tracked by pid files in its data directory.

`down` must stop only what `up` started: a pid file is trusted only while the
process it names still carries the stack's data directory on its command line
or in its environment, so a recycled pid is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cdc_lake.exceptions import StackError

_EXEC_SETTLE_SECONDS = 5.0
"""How long a live process may show an empty command line (mid-execve) before we judge it."""


class ManagedProcess:
    """One long-running service process with its pid file and log file."""

    def __init__(
        self, name: str, run_dir: Path, log_dir: Path, marker: str, stop_signal: int = signal.SIGTERM
    ) -> None:
        self.name = name
        self._stop_signal = stop_signal
        self.pid_file = run_dir / f"{name}.pid"
        self.log_file = log_dir / f"{name}.log"
        self._marker = marker

    def pid(self) -> int | None:
        """The pid of our running process, or None when it is not running (stale pid files are removed)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if not self._is_ours(pid):
            self.pid_file.unlink(missing_ok=True)
            return None
        return pid

    def _is_ours(self, pid: int) -> bool:
        # A process we just started may still be inside execve: the kernel closes the
        # close-on-exec pipe (so Popen returns) before it lays out the new argv and
        # environment, and until then /proc shows both empty. Wait that out briefly.
        deadline = time.monotonic() + _EXEC_SETTLE_SECONDS
        while True:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                return False
            if "\nState:\tZ" in status:
                return False
            if cmdline or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        return self._marker.encode() in cmdline or f"CDC_LAKE_STACK={self._marker}".encode() in environ

    def start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        preexec: Callable[[], None] | None = None,
    ) -> int:
        """Start the process detached from our session, logging to its log file; returns its pid."""
        self.pid_file.parent.mkdir(parents=True, exist_ok=True)
        self.log_file.parent.mkdir(parents=True, exist_ok=True)
        full_env = {**os.environ, **(env or {}), "CDC_LAKE_STACK": self._marker}
        with self.log_file.open("ab") as log:
            log.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.name}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                list(argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=full_env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=preexec,
            )
        self.pid_file.write_text(str(proc.pid))
        return proc.pid

    def stop(self, timeout: float = 30.0) -> bool:
        """Signal our process to stop (SIGKILL after `timeout`); returns whether anything was running."""
        pid = self.pid()
        if pid is None:
            return False
        os.kill(pid, self._stop_signal)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self._is_ours(pid):
                break
            _reap(pid)
            time.sleep(0.2)
        else:
            os.kill(pid, signal.SIGKILL)
            time.sleep(0.5)
            _reap(pid)
        self.pid_file.unlink(missing_ok=True)
        return True

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the service log, for error messages."""
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log yet)"


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def wait_until(
    check: Callable[[], bool], timeout: float, what: str, on_timeout: Callable[[], str] | None = None
) -> None:
    """Poll `check` until it returns True; raise StackError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception:
            pass
        time.sleep(0.5)
    detail = f"\n{on_timeout()}" if on_timeout else ""
    raise StackError(f"{what} did not become healthy within {timeout:.0f}s{detail}")


def run_checked(
    argv: Sequence[str], what: str, env: Mapping[str, str] | None = None, **kwargs: object
) -> str:
    """Run a short setup command; raise StackError with its output when it fails."""
    proc = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        check=False,
        **kwargs,  # type: ignore[call-overload]
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
        raise StackError(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return str(proc.stdout)
