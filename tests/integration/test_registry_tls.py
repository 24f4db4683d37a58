"""The decoder and the onboarding preflight reach the schema registry over verified, mutual TLS.

The shared stack's registry speaks plain HTTP and is not restarted for this: the test puts a
short-lived HTTPS front before it (Python ``ssl`` + ``http.server`` in a thread) that forwards GETs
to the stack's registry.  Its server certificate comes from a CA the stack's own helpers
(:func:`cdc_lake.stack.tls.server_certificate`) make in a tmp dir, and it requires a client
certificate from that CA (``CERT_REQUIRED``).  With ``schema_registry.ca_cert`` and the client
certificate the decoder's client (:func:`~cdc_lake.decode.registry.registry_client`) reads a schema
registered for the test and the preflight passes; without the client certificate, or with another
CA (the stack's own), both fail in one line naming the setting to fix.
"""

from __future__ import annotations

import json
import ssl
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import requests
from support.http_server import serving

from cdc_lake.config import Config, SchemaRegistrySettings
from cdc_lake.decode.registry import registry_client
from cdc_lake.exceptions import SchemaRegistryError
from cdc_lake.onboard.preflight import check_registry
from cdc_lake.stack.manager import LocalStack
from cdc_lake.stack.service import StackLayout
from cdc_lake.stack.tls import ServerCertificate, server_certificate, stack_ca

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


@contextmanager
def https_front(upstream: str, certificate: ServerCertificate) -> Iterator[str]:
    """An HTTPS server on 127.0.0.1 requiring a client certificate from ``certificate.ca`` and
    forwarding every GET to ``upstream``; yields its base URL."""

    class Forward(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answer = requests.get(upstream + self.path, timeout=10)
            self.send_response(answer.status_code)
            self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            self.wfile.write(answer.content)

        def log_message(self, format: str, *args: object) -> None:
            return

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate.certificate, certificate.key)
    context.load_verify_locations(certificate.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    with serving(Forward, context) as url:
        yield url


@contextmanager
def registered(registry_url: str) -> Iterator[int]:
    """A schema registered under a subject of its own for the block; its id.  Removed afterwards."""
    subject = f"{registry_url}/subjects/regtls_{uuid.uuid4().hex[:8]}-value"
    schema = {
        "type": "record",
        "name": "Key",
        "namespace": "regtls",
        "fields": [{"name": "id", "type": "int"}],
    }
    response = requests.post(
        f"{subject}/versions",
        json={"schema": json.dumps(schema)},
        headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
        timeout=10,
    )
    response.raise_for_status()
    try:
        yield int(response.json()["id"])
    finally:
        requests.delete(subject, timeout=10).raise_for_status()
        requests.delete(subject, params={"permanent": "true"}, timeout=10).raise_for_status()


def _config(url: str, ca: Path, client: ServerCertificate | None) -> Config:
    settings = SchemaRegistrySettings(
        url=url,
        ca_cert=str(ca),
        client_cert=None if client is None else str(client.certificate),
        client_key=None if client is None else str(client.key),
    )
    return Config.default().model_copy(update={"schema_registry": settings})


def test_decoder_and_preflight_use_the_registry_ca_and_client_certificate(
    local_stack: LocalStack, tmp_path: Path
) -> None:
    layout = StackLayout(tmp_path / "tls")
    server, client = server_certificate(layout, "registry", None), server_certificate(layout, "client", None)
    other_ca = stack_ca(local_stack.layout)
    stack_base = local_stack.registry.base_url
    confluent_path = local_stack.registry.confluent_url.removeprefix(stack_base)

    with (
        https_front(stack_base, server) as front,
        registered(local_stack.registry.confluent_url) as schema_id,
    ):
        url = front + confluent_path
        trusted = _config(url, server.ca, client)
        with registry_client(trusted) as registry:
            assert registry.get_schema(schema_id).name == "regtls.Key"
        assert not check_registry(trusted).failed

        for config, setting in (
            (_config(url, server.ca, None), "schema_registry.client_cert"),
            (_config(url, other_ca, client), "schema_registry.ca_cert"),
        ):
            with registry_client(config) as registry, pytest.raises(SchemaRegistryError) as raised:
                registry.get_schema(schema_id)
            message = str(raised.value)
            assert message.startswith(f"schema registry at {url}: ") and setting in message
            assert "\n" not in message
            check = check_registry(config)
            assert check.failed and setting in (check.fix or "")
