"""A Glue-compatible catalog for tests: moto's server mode (PyPI ``moto[server]``) on loopback.

AWS Glue has no local server of its own; moto implements the Glue Data Catalog API (databases,
tables, table versions) in memory, which is what cdc-lake's Glue sync calls.  Its state lives as long
as the process: ``stack down`` forgets every registered table.  moto and boto3 are the ``stack`` extra
(:mod:`cdc_lake.extras`), imported when the server is installed or checked.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

from cdc_lake.exceptions import StackError
from cdc_lake.extras import install_hint, optional_module
from cdc_lake.stack.service import HOST, Service

REGION = "us-east-1"
_FEATURE = "the local stack's Glue catalog"


def moto_server() -> Path:
    """The ``moto_server`` script of this Python environment (``pip install 'moto[server]'``)."""
    beside = Path(sys.executable).with_name("moto_server")
    found = str(beside) if beside.exists() else shutil.which("moto_server")
    if found is None:
        raise StackError(f"{_FEATURE} needs moto's server: {install_hint('stack')}")
    return Path(found)


class GlueCatalog(Service):
    """The Glue Data Catalog API on loopback (moto)."""

    name = "glue-catalog"

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.layout.ports.glue}"

    def address(self) -> str:
        return self.endpoint

    def install(self) -> None:
        for name in ("boto3", "moto"):  # the client that checks the server, the server
            optional_module(name, "stack", _FEATURE)
        moto_server()

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        self.process.start([str(moto_server()), "-H", HOST, "-p", str(self.layout.ports.glue)])

    def client(self) -> Any:
        """A boto3 Glue client for this server (moto accepts any credentials)."""
        boto3 = optional_module("boto3", "stack", _FEATURE)
        from botocore.config import Config as BotoConfig

        return boto3.client(
            "glue",
            endpoint_url=self.endpoint,
            region_name=REGION,
            aws_access_key_id="local",
            aws_secret_access_key="local",
            config=BotoConfig(retries={"max_attempts": 2}, connect_timeout=3, read_timeout=10),
        )

    def healthy(self) -> bool:
        self.client().get_databases()
        return True
