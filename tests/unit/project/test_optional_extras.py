"""Optional dependencies (pyproject.toml's extras) are imported only when used, and a missing one is one line.

Each extra's modules are hidden from a fresh interpreter (``sys.modules[name] = None``, as on an install
without the extra) that runs the command line on this checkout: the verbs that do not need the extra
work, the ones that do stop with one line naming the extra (``pip install 'cdc-lake[EXTRA]'``), never a
traceback.  The installed wheel does the same against the running stack (test_installed_wheel.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.imports import run_on_checkout

from cdc_lake.exceptions import NotInstalledError
from cdc_lake.extras import EXTRAS, needs_extra

ROOT = Path(__file__).resolve().parents[3]

_WITHOUT = """
import sys
for _name in sys.argv.pop(1).split(","):
    sys.modules[_name] = None
from cdc_lake.cli.main import main
sys.argv[0] = "cdc-lake"
main()
"""


def _run_without(modules: tuple[str, ...], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``cdc-lake ARGS`` in a fresh interpreter on this checkout in which ``modules`` cannot be imported."""
    return run_on_checkout(_WITHOUT, ",".join(modules), *args, cwd=cwd)


def test_every_extra_of_the_distribution_is_known_with_its_modules() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    # dev: the tests' tools (pytest, ruff, ...), which the product never imports.
    assert set(EXTRAS) == set(declared) - {"dev"}
    assert all(EXTRAS.values())


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_a_missing_module_of_an_extra_is_one_line_naming_it(extra: str) -> None:
    with pytest.raises(NotInstalledError) as raised, needs_extra(extra, "the feature"):
        raise ModuleNotFoundError(name=f"{EXTRAS[extra][0]}.sub")

    assert str(raised.value) == (
        f"the feature needs {EXTRAS[extra][0]}, which is not installed: pip install 'cdc-lake[{extra}]'"
    )


def test_a_missing_module_of_no_extra_is_a_bug_raised_unchanged() -> None:
    with pytest.raises(ModuleNotFoundError), needs_extra("glue", "the feature"):
        raise ModuleNotFoundError(name="yaml")


def _stack_config(tmp_path: Path) -> Path:
    config = tmp_path / "cdc-lake.yaml"
    config.write_text(f"stack:\n  data_dir: {tmp_path / 'stack'}\n", encoding="utf-8")
    return config


def test_stack_status_without_the_stack_extra_reports_every_service(tmp_path: Path) -> None:
    done = _run_without(
        EXTRAS["stack"], "--config", str(_stack_config(tmp_path)), "stack", "status", "--json", cwd=tmp_path
    )

    assert "Traceback" not in done.stderr, done.stderr
    # Nothing runs under this data directory: every service reported, stopped (exit 1).
    assert done.returncode == 1, done.stderr
    assert {row["running"] for row in json.loads(done.stdout)} == {False}


def test_stack_up_without_the_stack_extra_is_one_line_naming_it(tmp_path: Path) -> None:
    # Installing checks the Python libraries first: nothing is downloaded or started.
    from cdc_lake.config import StackSettings
    from cdc_lake.stack.manager import LocalStack

    stack = LocalStack(StackSettings(data_dir=tmp_path / "stack"))
    for service in (stack.object_store, stack.glue):
        with pytest.MonkeyPatch.context() as patch:
            for name in EXTRAS["stack"]:
                patch.setitem(sys.modules, name, None)
            with pytest.raises(NotInstalledError, match=r"pip install 'cdc-lake\[stack\]'$") as raised:
                service.install()
        assert "\n" not in str(raised.value)
