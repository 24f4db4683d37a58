"""The one HTTP retry policy: which answers are tried again, how often, and what the caller gets back."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import requests
from support.http_server import send_json, serving

from cdc_lake.http_retry import RetryPolicy, Unavailable, send

QUICK = RetryPolicy(attempts=3, backoff_seconds=0.001, max_backoff_seconds=0.002)


class Scripted:
    """A server answering each request with the next status of ``statuses`` (then 200)."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.requests = 0
        self.url = ""


@pytest.fixture
def server() -> Iterator[Scripted]:
    state = Scripted()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests += 1
            send_json(
                self, state.statuses.pop(0) if state.statuses else 200, {"ok": True}, "application/json"
            )

        def log_message(self, format: str, *args: object) -> None:
            return

    with serving(Handler) as url:
        state.url = url + "/x"
        yield state


@pytest.mark.parametrize("status", [429, 500, 503])
def test_slow_down_and_server_errors_are_retried(server: Scripted, status: int) -> None:
    server.statuses = [status, status]

    with requests.Session() as session:
        response = send(session, "GET", server.url, QUICK, timeout=5)

    assert response.status_code == 200
    assert server.requests == 3


@pytest.mark.parametrize("status", [400, 404, 409])
def test_other_answers_go_back_to_the_caller_at_once(server: Scripted, status: int) -> None:
    server.statuses = [status]

    with requests.Session() as session:
        response = send(session, "GET", server.url, QUICK, timeout=5)

    assert response.status_code == status
    assert server.requests == 1


def test_a_service_adds_its_own_transient_status(server: Scripted) -> None:
    server.statuses = [409]
    policy = RetryPolicy(attempts=2, backoff_seconds=0.001, also_transient=frozenset({409}))

    with requests.Session() as session:
        response = send(session, "GET", server.url, policy, timeout=5)

    assert response.status_code == 200
    assert server.requests == 2


def test_the_last_reason_is_raised_after_the_last_attempt(server: Scripted) -> None:
    server.statuses = [500, 502, 503, 200]

    with requests.Session() as session, pytest.raises(Unavailable) as raised:
        send(session, "GET", server.url, QUICK, timeout=5, describe=lambda r: f"status {r.status_code}")

    assert str(raised.value) == "status 503"
    assert raised.value.attempts == 3
    assert server.requests == 3


def test_no_answer_is_retried_and_named() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    with requests.Session() as session, pytest.raises(Unavailable, match=r"^ConnectionError$"):
        send(session, "GET", f"http://127.0.0.1:{port}/", QUICK, timeout=1)


def test_the_deadline_bounds_every_attempt_and_the_retries_together() -> None:
    """A server that accepts connections and never answers: each attempt would wait its whole timeout."""
    policy = RetryPolicy(attempts=50, backoff_seconds=0.01, max_backoff_seconds=0.02, deadline_seconds=0.6)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/"
        started = time.monotonic()
        with requests.Session() as session, pytest.raises(Unavailable) as raised:
            send(session, "GET", url, policy, timeout=5)
        elapsed = time.monotonic() - started

    assert elapsed < 1.5
    assert str(raised.value) == "ReadTimeout; the 0.6 s deadline passed"
    assert raised.value.attempts < policy.attempts


class _Counting(requests.Session):
    """A session counting the requests it sends."""

    sent = 0

    def request(self, *args: Any, **kwargs: Any) -> requests.Response:
        self.sent += 1
        return super().request(*args, **kwargs)


def test_a_tls_failure_is_not_retried(server: Scripted) -> None:
    # A certificate problem does not pass by itself: https:// against a plain HTTP server fails the handshake.
    with _Counting() as session, pytest.raises(requests.exceptions.SSLError):
        send(session, "GET", server.url.replace("http://", "https://"), QUICK, timeout=5)

    assert session.sent == 1


def test_the_sessions_ca_bundle_wins_over_the_environments(
    server: Scripted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # requests lets REQUESTS_CA_BUNDLE replace a session's own bundle unless the request names it.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", requests.certs.where())
    missing = tmp_path / "configured-ca.pem"
    with requests.Session() as session, pytest.raises(OSError, match=f"invalid path: {missing}"):
        session.verify = str(missing)
        send(session, "GET", server.url.replace("http://", "https://"), QUICK, timeout=5)
