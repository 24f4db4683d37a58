"""``promtool``, Prometheus' rule checker, for testing the generated alert rules against real metrics.

Prometheus ships no Python or Debian package the stack can use, and its Go module cannot be
``go install``-ed (its go.mod has replace directives), so the module is downloaded through the Go
module proxy and ``cmd/promtool`` built from it, once, into the cache (a few minutes).  Run
``python -m cdc_lake.stack.promtool`` with network access (``dev/setup.sh`` does) before tests that
need it run without network.
"""

from __future__ import annotations

import json
from pathlib import Path

from cdc_lake import jvm
from cdc_lake.exceptions import StackError
from cdc_lake.stack.process import run_checked
from cdc_lake.stack.system import which_or_none

PROMETHEUS_MODULE = "github.com/prometheus/prometheus"
PROMETHEUS_VERSION = "v0.54.1"
"""The Go module version of Prometheus 2.54.1."""


def promtool_binary() -> Path:
    """The promtool binary, built into the cache on first use."""
    binary = jvm.cache_root() / "bin" / f"promtool-{PROMETHEUS_VERSION}" / "promtool"
    if binary.exists():
        return binary
    go = which_or_none("go", "/usr/local/go/bin", "/usr/lib/go/bin")
    if go is None:
        raise StackError("promtool is built with Go, which is not installed (apt-get install golang-go)")
    described = run_checked(
        [go, "mod", "download", "-json", f"{PROMETHEUS_MODULE}@{PROMETHEUS_VERSION}"],
        f"downloading {PROMETHEUS_MODULE}@{PROMETHEUS_VERSION}",
    )
    module_dir = str(json.loads(described)["Dir"])
    binary.parent.mkdir(parents=True, exist_ok=True)
    run_checked(
        [go, "-C", module_dir, "build", "-o", str(binary), "./cmd/promtool"],
        "building promtool",
        env={"CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"},
    )
    return binary


if __name__ == "__main__":
    print(promtool_binary())
