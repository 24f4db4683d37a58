"""Optional dependencies: imported when a feature uses them, one line naming the extra when missing.

In the manner of pyiceberg's ``NotInstalledError``: a library that only some features need is an
extra of the ``cdc-lake`` distribution (``pyproject.toml``'s ``[project.optional-dependencies]``),
and nothing imports it at module level outside the module of the feature that needs it.  The feature
imports that module (or the library) under :func:`needs_extra`, which turns the ``ModuleNotFoundError``
of one of the extra's libraries into a one-line :class:`~cdc_lake.exceptions.NotInstalledError`
(or the feature's own error class) naming the feature, the library and the ``pip install`` that adds
it.  A missing module of any other library is a bug and is raised unchanged.

:data:`EXTRAS` maps every extra the product names to the top-level modules it installs; a unit test
keeps it equal to ``pyproject.toml`` (``dev`` aside: the tests' tools, which the product never imports).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType
from typing import Final

from cdc_lake.exceptions import CdcLakeError, NotInstalledError

EXTRAS: Final[Mapping[str, tuple[str, ...]]] = {
    # The AWS Glue catalog (catalog.glue): cdc_lake/catalog/glue.py.
    "glue": ("boto3", "botocore"),
    # The local stack (`cdc-lake stack`, `demo`): the object store's S3 client, the Glue server (moto).
    "stack": ("boto3", "botocore", "moto"),
    # The benchmarks' PNG plots (benchmarks/*.py --plots).
    "bench": ("matplotlib",),
}
"""Each extra of the distribution and the top-level modules it makes importable."""


def install_hint(extra: str) -> str:
    """The command that installs ``extra``."""
    return f"pip install 'cdc-lake[{extra}]'"


@contextmanager
def needs_extra(
    extra: str, feature: str, error: type[CdcLakeError] = NotInstalledError
) -> Iterator[None]:
    """Run the block (an import) for ``feature``; a missing module of ``extra`` raises ``error`` in one line.

    The message: ``<feature> needs <module>, which is not installed: pip install 'cdc-lake[<extra>]'``.
    """
    try:
        yield
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in EXTRAS[extra]:
            raise
        raise error(f"{feature} needs {missing}, which is not installed: {install_hint(extra)}") from None


def optional_module(name: str, extra: str, feature: str) -> ModuleType:
    """The module ``name`` of ``extra``, imported now, or one line (:func:`needs_extra`) naming the extra."""
    with needs_extra(extra, feature):
        return importlib.import_module(name)
    raise AssertionError("unreachable: needs_extra raised")  # pragma: no cover - for the type checker
