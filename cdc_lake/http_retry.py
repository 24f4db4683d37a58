"""One way to call the HTTP services around cdc-lake (Kafka Connect, the schema registry): one retry policy.

A request that fails for a reason that passes by itself is tried again, with exponential backoff
(``backoff_seconds``, doubling up to ``max_backoff_seconds``) for at most ``attempts`` tries:

- no answer: the connection is refused or drops (also in the middle of the body), or the request
  times out (but not a failed TLS handshake: an untrusted or refused certificate stays so, and
  :class:`requests.exceptions.SSLError` goes back to the caller at once);
- HTTP 429 (slow down) and every 5xx (the server is starting, overloaded or failing over);
- any status the caller adds for its own service (Kafka Connect answers 409 while its worker group
  rebalances).

Every other answer, success or not, goes back to the caller, which knows what a 404 or a 400 means
for its resource.  When the last attempt fails too, :func:`send` raises :class:`Unavailable` with
the last reason (an exception class name, or ``HTTP <status>`` and what the caller's ``describe``
makes of the answer, which must not hold a secret); the caller wraps it in its own error naming the
service and the resource.

A policy with ``deadline_seconds`` also bounds the whole call: each attempt's timeout is cut to the
time left, and no attempt starts whose backoff would end past the deadline (the reason then says
so).  requests' timeout bounds the connection and each wait for bytes, so a server that keeps
sending a byte now and then can still hold one attempt past the deadline.

The session's ``verify`` (a caller's CA bundle) is passed with every request: requests otherwise lets
``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` from the environment replace it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import requests
from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential,
)

_TRANSIENT_EXCEPTIONS = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is tried; ``also_transient`` adds service-specific statuses.

    ``deadline_seconds`` (None: none) bounds all attempts and backoffs of one call together.
    """

    attempts: int = 6
    backoff_seconds: float = 0.5
    max_backoff_seconds: float = 8.0
    also_transient: frozenset[int] = frozenset()
    deadline_seconds: float | None = None

    def transient(self, status: int) -> bool:
        """Whether an answer with HTTP ``status`` is worth another attempt."""
        return status == 429 or status >= 500 or status in self.also_transient


class Unavailable(Exception):
    """Every attempt failed transiently; ``str()`` is the last reason, on one line; ``attempts`` were made."""

    def __init__(self, reason: str, attempts: int) -> None:
        super().__init__(reason)
        self.attempts = attempts


def _status_only(response: requests.Response) -> str:
    return f"HTTP {response.status_code}"


def send(
    session: requests.Session,
    method: str,
    url: str,
    policy: RetryPolicy,
    timeout: float,
    json: Mapping[str, Any] | None = None,
    describe: Callable[[requests.Response], str] = _status_only,
) -> requests.Response:
    """The first answer that is not transient, after retrying the transient ones under ``policy``.

    Raises :class:`Unavailable` when ``policy.attempts`` attempts all failed transiently, or when
    ``policy.deadline_seconds`` passed first.
    """
    deadline = policy.deadline_seconds
    started = time.monotonic()
    tried = 0

    def once() -> requests.Response:
        nonlocal tried
        tried += 1
        left = timeout if deadline is None else deadline - (time.monotonic() - started)
        try:
            # The session's CA bundle named per request: else REQUESTS_CA_BUNDLE would replace it.
            response = session.request(
                method, url, json=json, timeout=max(min(timeout, left), 0.001), verify=session.verify
            )
        except requests.exceptions.SSLError:
            raise  # a ConnectionError, but a certificate problem does not pass by itself
        except _TRANSIENT_EXCEPTIONS as exc:
            raise Unavailable(type(exc).__name__, tried) from exc
        if policy.transient(response.status_code):
            raise Unavailable(describe(response), tried)
        return response

    stop = stop_after_attempt(policy.attempts)
    retrying = Retrying(
        stop=stop if deadline is None else stop | stop_before_delay(deadline),
        wait=wait_exponential(multiplier=policy.backoff_seconds, max=policy.max_backoff_seconds),
        retry=retry_if_exception_type(Unavailable),
        reraise=True,
    )
    try:
        return retrying(once)
    except Unavailable as exc:
        if exc.attempts < policy.attempts:
            raise Unavailable(f"{exc}; the {deadline:g} s deadline passed", exc.attempts) from exc
        raise
