"""An S3-compatible object store for `s3a://` lakes: the Versity S3 Gateway over a local directory.

It is built from source through the Go module proxy (one `go install`, about a
minute) because no object store server ships in Debian or on PyPI.  Its S3 client is boto3, of the
``stack`` extra (:mod:`cdc_lake.extras`), imported when the store is installed or checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cdc_lake import jvm
from cdc_lake.exceptions import StackError
from cdc_lake.extras import optional_module
from cdc_lake.stack.process import run_checked
from cdc_lake.stack.service import HOST, LAKE_BUCKET, Service
from cdc_lake.stack.system import which_or_none

VERSITYGW_MODULE = "github.com/versity/versitygw/cmd/versitygw"
VERSITYGW_VERSION = "v1.8.0"


def versitygw_binary() -> Path:
    """The gateway binary, built once into the cache with `go install`."""
    bin_dir = jvm.cache_root() / "bin" / f"versitygw-{VERSITYGW_VERSION}"
    binary = bin_dir / "versitygw"
    if binary.exists():
        return binary
    go = which_or_none("go", "/usr/local/go/bin", "/usr/lib/go/bin")
    if go is None:
        raise StackError(
            "the object store is built with Go, which is not installed (apt-get install golang-go)"
        )
    run_checked(
        [go, "install", f"{VERSITYGW_MODULE}@{VERSITYGW_VERSION}"],
        "building versitygw",
        env={"GOBIN": str(bin_dir), "CGO_ENABLED": "0"},
    )
    return binary


class ObjectStore(Service):
    """S3 API on loopback; buckets are directories under the stack's data dir."""

    name = "object-store"

    @property
    def endpoint(self) -> str:
        return f"http://{HOST}:{self.layout.ports.object_store}"

    def address(self) -> str:
        return self.endpoint

    def install(self) -> None:
        _boto3()
        versitygw_binary()

    def start(self) -> None:
        if self.process.pid() is not None:
            return
        root = self.layout.path("object-store")
        root.mkdir(parents=True, exist_ok=True)
        creds = self.layout.credentials
        self.process.start(
            [
                str(versitygw_binary()),
                "--port",
                f"{HOST}:{self.layout.ports.object_store}",
                "posix",
                str(root),
            ],
            # Keys go through the environment: a command line is visible to every user in `ps`.
            env={"ROOT_ACCESS_KEY": creds.s3_access_key, "ROOT_SECRET_KEY": creds.s3_secret_key},
        )

    def client(self) -> Any:
        """A boto3 S3 client for this store."""
        boto3 = _boto3()
        from botocore.config import Config as BotoConfig

        creds = self.layout.credentials
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=creds.s3_access_key,
            aws_secret_access_key=creds.s3_secret_key,
            region_name="us-east-1",
            config=BotoConfig(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 2},
                connect_timeout=3,
                read_timeout=10,
            ),
        )

    def healthy(self) -> bool:
        self.client().list_buckets()
        return True

    def after_healthy(self) -> None:
        from botocore.exceptions import ClientError

        s3 = self.client()
        try:
            s3.head_bucket(Bucket=LAKE_BUCKET)
        except ClientError:
            s3.create_bucket(Bucket=LAKE_BUCKET)


def _boto3() -> Any:
    """boto3, or one line naming the ``stack`` extra."""
    return optional_module("boto3", "stack", "the local stack's object store")
