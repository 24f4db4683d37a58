"""Kafka Connect REST behind HTTP basic authentication, as ``kafka_connect.user``/``password`` configure it.

A real HTTP server on 127.0.0.1 (Python's ``http.server`` in a thread) that answers only requests
carrying the right ``Authorization`` header, like Connect's ``BasicAuthSecurityRestExtension``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest
from pydantic import SecretStr
from support.http_server import send_json, serving

from cdc_lake.config import KafkaConnectSettings
from cdc_lake.connect.client import KafkaConnectClient
from cdc_lake.exceptions import ConnectError

USER, PASSWORD = "operator", "c0nnect-s3cret"


class _BasicAuthConnect(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != expected:
            body, status = {"error_code": 401, "message": "User cannot access the resource."}, 401
        else:
            body, status = ["pg-connector"], 200
        send_json(self, status, body, "application/json")

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def connect_url() -> Iterator[str]:
    with serving(_BasicAuthConnect) as url:
        yield url


def test_configured_credentials_are_sent(connect_url: str) -> None:
    settings = KafkaConnectSettings(url=connect_url, user=USER, password=SecretStr(PASSWORD))
    with KafkaConnectClient.for_settings(settings) as client:
        assert client.list_connectors() == ["pg-connector"]


@pytest.mark.parametrize("password", [None, "wrong"])
def test_missing_or_wrong_credentials_fail_in_one_line_without_the_password(
    connect_url: str, password: str | None
) -> None:
    settings = KafkaConnectSettings(
        url=connect_url,
        user=None if password is None else USER,
        password=None if password is None else SecretStr(password),
    )
    with (
        KafkaConnectClient.for_settings(settings, attempts=1) as client,
        pytest.raises(ConnectError) as caught,
    ):
        client.list_connectors()
    message = str(caught.value)
    assert "HTTP 401" in message and "\n" not in message
    assert PASSWORD not in message and (password is None or password not in message)


def test_a_password_without_user_is_refused() -> None:
    with pytest.raises(ValueError, match="password is set but user is not"):
        KafkaConnectSettings(password=SecretStr("x"))
