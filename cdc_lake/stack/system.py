"""Debian packages and OS users the local stack needs."""

from __future__ import annotations

import os
import pwd
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from cdc_lake.exceptions import StackError
from cdc_lake.stack.process import run_checked

_NO_SERVICE_START = (
    "#!/bin/sh\n# cdc-lake: keep Debian from starting system services during package installs\nexit 101\n"
)


_APT_LOCK = threading.Lock()
"""apt-get runs one at a time (its own lock would fail the second); ``stack up`` installs from threads."""


def ensure_debian_packages(packages: list[str], present: Callable[[], bool], what: str) -> None:
    """Install Debian `packages` with apt-get unless `present()` already holds.

    Package post-install scripts must not start system-wide servers (ours run
    on their own ports from their own data directory), so a temporary
    ``policy-rc.d`` denies service starts while apt runs.
    """
    with _APT_LOCK:
        _ensure_debian_packages(packages, present, what)


def _ensure_debian_packages(packages: list[str], present: Callable[[], bool], what: str) -> None:
    if present():
        return
    if os.geteuid() != 0:
        raise StackError(f"{what} is not installed; run: sudo apt-get install -y {' '.join(packages)}")
    policy = Path("/usr/sbin/policy-rc.d")
    had_policy = policy.exists()
    if not had_policy:
        policy.write_text(_NO_SERVICE_START)
        policy.chmod(0o755)
    try:
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        run_checked(["apt-get", "update", "-q"], "apt-get update", env=env)
        run_checked(
            ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
            f"installing {what}",
            env=env,
        )
    finally:
        if not had_policy:
            policy.unlink(missing_ok=True)
    if not present():
        raise StackError(f"{what} is still missing after installing {' '.join(packages)}")


def service_user(name: str) -> pwd.struct_passwd | None:
    """The OS account a server that refuses root runs as; None when we are not root (run as ourselves)."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(name)
    except KeyError:
        run_checked(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            f"useradd {name}",
        )
        return pwd.getpwnam(name)


def drop_privileges(user: pwd.struct_passwd | None) -> Callable[[], None] | None:
    """A pre-exec hook that switches the child to `user` (None: no switch)."""
    if user is None:
        return None

    def switch() -> None:
        os.setgid(user.pw_gid)
        os.initgroups(user.pw_name, user.pw_gid)
        os.setuid(user.pw_uid)

    return switch


def own(path: Path, user: pwd.struct_passwd | None) -> None:
    """Give `path` (recursively) to `user`, and make its parents traversable."""
    if user is None:
        return
    os.chown(path, user.pw_uid, user.pw_gid)
    for root, dirs, files in os.walk(path):
        os.chown(root, user.pw_uid, user.pw_gid)
        for entry in dirs + files:
            os.lchown(os.path.join(root, entry), user.pw_uid, user.pw_gid)
    for parent in path.parents:
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o001)


def which_or_none(binary: str, *extra_dirs: str) -> str | None:
    """`shutil.which` that also looks in server directories not on PATH."""
    found = shutil.which(binary)
    if found:
        return found
    for directory in extra_dirs:
        candidate = Path(directory, binary)
        if candidate.exists():
            return str(candidate)
    return None
