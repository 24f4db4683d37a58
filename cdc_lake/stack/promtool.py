"""``promtool``, Prometheus' rule checker, for testing the generated alert rules against real metrics.

A ``promtool`` on ``PATH`` is used as it is.  Otherwise the binary is taken from Debian's
``prometheus`` package: ``apt-get download`` fetches the package (about 19 MB, no root needed, nothing
installed, no service started) and ``dpkg-deb`` extracts ``usr/bin/promtool`` into the cache, once.
Building it from Prometheus' Go module, as this module did before, took 170 s of two cores on a fresh
machine (measured 2026-11-26: most of it compiling the service-discovery clients promtool links),
about 7% of the CI run; the rule tests pass the same with Debian's 2.42 (``test_ops_alerts.py``,
``test_ops_metrics.py``, the ``test_ops_*`` stack tests).  Run ``python -m cdc_lake.stack.promtool``
with network access (``dev/setup.sh`` does) before tests that need it run without network.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from cdc_lake import jvm
from cdc_lake.exceptions import StackError
from cdc_lake.stack.process import run_checked
from cdc_lake.stack.system import which_or_none

DEBIAN_PACKAGE = "prometheus"
"""The Debian package whose ``usr/bin/promtool`` is used when none is on ``PATH``."""


def promtool_binary() -> Path:
    """promtool from ``PATH``, else extracted from Debian's package into the cache on first use."""
    on_path = which_or_none("promtool")
    if on_path is not None:
        return Path(on_path)
    binary = jvm.cache_root() / "bin" / "promtool-debian" / "promtool"
    if binary.exists():
        return binary
    apt_get, dpkg_deb = which_or_none("apt-get"), which_or_none("dpkg-deb")
    if apt_get is None or dpkg_deb is None:
        raise StackError("promtool is neither on PATH nor fetchable: apt-get and dpkg-deb are missing")
    with tempfile.TemporaryDirectory(prefix="promtool-") as work:
        run_checked(
            [apt_get, "download", DEBIAN_PACKAGE],
            f"apt-get download {DEBIAN_PACKAGE} (with no package lists yet, run apt-get update first)",
            cwd=work,
        )
        [package] = Path(work).glob(f"{DEBIAN_PACKAGE}_*.deb")
        extracted = Path(work) / "root"
        run_checked([dpkg_deb, "-x", str(package), str(extracted)], f"extracting {package.name}")
        binary.parent.mkdir(parents=True, exist_ok=True)
        staged = binary.with_suffix(".partial")
        (extracted / "usr" / "bin" / "promtool").replace(staged)
        staged.replace(binary)
    return binary


if __name__ == "__main__":
    print(promtool_binary())
