"""Local certificates for the stack's TLS listeners: one CA, one server certificate for 127.0.0.1.

Made once per data directory with Debian's ``openssl`` and kept: clients verify servers with
``ca.crt`` (``sslmode=verify-full`` checks the chain and that the certificate names 127.0.0.1).
The private keys are readable only by the service user that serves them.
"""

from __future__ import annotations

import pwd
from dataclasses import dataclass
from pathlib import Path

from cdc_lake.stack.process import run_checked
from cdc_lake.stack.service import HOST, StackLayout
from cdc_lake.stack.system import own

_DAYS = "3650"


@dataclass(frozen=True)
class ServerCertificate:
    """The CA clients trust and the certificate and key a server presents."""

    ca: Path
    certificate: Path
    key: Path


def tls_dir(layout: StackLayout) -> Path:
    """Where the stack keeps its certificates."""
    return layout.path("tls")


def stack_ca(layout: StackLayout) -> Path:
    """The local CA certificate (what ``sslrootcert`` points to)."""
    return tls_dir(layout) / "ca.crt"


def server_certificate(layout: StackLayout, name: str, owner: pwd.struct_passwd | None) -> ServerCertificate:
    """The certificate of server ``name`` for 127.0.0.1/localhost, signed by the stack CA (made once)."""
    base = tls_dir(layout)
    base.mkdir(parents=True, exist_ok=True)
    ca, ca_key = base / "ca.crt", base / "ca.key"
    if not ca.exists():
        run_checked(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                _DAYS,
                "-subj",
                "/CN=cdc-lake local stack CA",
                "-keyout",
                str(ca_key),
                "-out",
                str(ca),
            ],
            "openssl: the stack CA",
        )
        ca_key.chmod(0o600)
    own_dir = base / name
    certificate, key = own_dir / "server.crt", own_dir / "server.key"
    if not certificate.exists():
        own_dir.mkdir(exist_ok=True)
        request, extensions = own_dir / "server.csr", own_dir / "san.cnf"
        extensions.write_text(f"subjectAltName=IP:{HOST},DNS:localhost\n", encoding="utf-8")
        run_checked(
            [
                "openssl",
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                f"/CN={HOST}",
                "-keyout",
                str(key),
                "-out",
                str(request),
            ],
            f"openssl: the {name} key",
        )
        run_checked(
            [
                "openssl",
                "x509",
                "-req",
                "-in",
                str(request),
                "-CA",
                str(ca),
                "-CAkey",
                str(ca_key),
                "-CAcreateserial",
                "-days",
                _DAYS,
                "-extfile",
                str(extensions),
                "-out",
                str(certificate),
            ],
            f"openssl: the {name} certificate",
        )
        request.unlink()
        key.chmod(0o600)
        own(own_dir, owner)
        own_dir.chmod(0o700)
    return ServerCertificate(ca, certificate, key)
