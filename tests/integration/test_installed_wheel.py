"""The product as a user installs it: the wheel in a fresh virtual environment, run outside the checkout.

The wheel is built from this checkout and installed with its dependencies at the tested versions
(``dev/constraints.txt``; pip's cache makes this a copy, not a download) into a virtual environment
under the test's temporary directory, and every command runs there with that directory as its working
directory, so nothing of the checkout is importable.  It must hold only ``cdc_lake`` and
``cdc_lake_bootstrap`` (no generic top-level name), and its commands must work: ``--help``, ``runbook``
(the pages ship in the wheel), ``alerts render``, ``spark check`` (a local Spark job whose workers run
the installed interpreter) and one onboarding preflight (``onboard --dry-run``) against the stack.
It is installed without extras: ``stack status`` reports the running stack, and the services it cannot
check without the ``stack`` extra (boto3, moto) say so in one line naming the extra, never a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.bootstrap import SourceDb, postgres_db, write_db_config

from cdc_lake.stack.manager import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def db(local_stack: LocalStack) -> Iterator[SourceDb]:
    with postgres_db(local_stack) as created:
        created.execute("create table public.items (id bigint primary key, val text)")
        yield created


def _run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    # Outside the checkout: no PYTHONPATH, the working directory a temporary one.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` directory of a fresh virtual environment holding the wheel."""
    work = tmp_path_factory.mktemp("wheel")
    built = _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(work), str(ROOT)], work)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = work.glob("cdc_lake-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"cdc_lake", "cdc_lake_bootstrap"}

    venv = work / "venv"
    created = _run([sys.executable, "-m", "venv", str(venv)], work)
    assert created.returncode == 0, created.stderr
    constraints = ROOT / "dev" / "constraints.txt"
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel), "-c", str(constraints)]
    done = _run(pip, work)
    assert done.returncode == 0, done.stderr[-3000:]
    return venv / "bin"


def test_the_installed_wheel_runs_its_commands_outside_the_checkout(
    installed: Path, db: SourceDb, tmp_path: Path, local_stack: LocalStack
) -> None:
    cdc_lake = str(installed / "cdc-lake")
    stack = {"data_dir": str(local_stack.layout.path())}
    config = write_db_config(tmp_path, db, [{"name": "items"}], str(tmp_path / "lake"), stack=stack)

    where = _run(
        [str(installed / "python"), "-c", "import cdc_lake, cdc_lake_bootstrap as b; print(b.__file__)"],
        tmp_path,
    )
    assert where.returncode == 0, where.stderr
    assert where.stdout.startswith(str(installed.parent)), where.stdout

    helped = _run([cdc_lake, "--help"], tmp_path)
    assert helped.returncode == 0 and "bootstrap" in helped.stdout, helped.stderr

    # No extra installed: the stack's S3 and Glue clients (boto3, moto) are the `stack` extra.
    stacked = _run([cdc_lake, "--config", str(config), "stack", "status", "--json"], tmp_path)
    assert "Traceback" not in stacked.stderr, stacked.stderr[-3000:]
    services = {row["name"]: row for row in json.loads(stacked.stdout)}
    assert services["postgres-primary"]["healthy"] and services["kafka"]["healthy"], services
    for name in ("object-store", "glue-catalog"):
        assert services[name]["running"] and not services[name]["healthy"], services[name]
        assert services[name]["detail"].endswith("which is not installed: pip install 'cdc-lake[stack]'")

    page = _run([cdc_lake, "runbook", "docs/runbooks/table-failed.md"], tmp_path)
    assert page.returncode == 0 and page.stdout.startswith("#"), page.stderr

    rules = _run(
        [
            cdc_lake,
            "--config",
            str(config),
            "alerts",
            "render",
            "--runbook-base-url",
            "https://runbooks.invalid/x",
        ],
        tmp_path,
    )
    assert rules.returncode == 0, rules.stderr
    assert "runbook_url: https://runbooks.invalid/x/table-failed.md" in rules.stdout

    checked = _run([cdc_lake, "--config", str(config), "spark", "check", "--json"], tmp_path)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert str(installed.parent) in checked.stdout, checked.stdout

    preflight = _run(
        [cdc_lake, "--config", str(config), "onboard", db.source, "--dry-run", "--json"], tmp_path
    )
    assert preflight.returncode == 0, preflight.stderr[-3000:]
    assert json.loads(preflight.stdout), preflight.stdout
