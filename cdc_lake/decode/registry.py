"""Client for the Confluent schema registry REST API (also served by Apicurio under ``/apis/ccompat/v7``).

Only the reads the decoder and the schema-change check need: ``GET /schemas/ids/{id}``,
``GET /subjects/{subject}/versions/latest``, and a subject's history (``GET
/subjects/{subject}/versions`` and ``.../versions/{n}``), read only when a writer schema would stop a
table.  Schema ids are immutable, so parsed schemas are cached
by id for the life of the client.  Connection errors, timeouts, HTTP 429 and 5xx are retried under
cdc-lake's one HTTP retry policy (:mod:`cdc_lake.http_retry`), within an overall deadline per read
(:data:`DEADLINE_SECONDS`: a registry that does not answer fails the batch then, not after every
attempt's timeout and backoff); the password is a :class:`~pydantic.SecretStr` and never appears in
a message, a log line or ``repr``.

TLS: ``ca_cert`` verifies an ``https://`` registry, ``client_cert`` (certificate and key) is presented
for mutual TLS.  The paths travel with the pickled client and are opened on each host (driver and
executors).  A failed handshake is not retried and is one line naming the setting to fix
(:func:`tls_problem`, shared with the onboarding preflight).

Why not ``confluent_kafka.schema_registry.SchemaRegistryClient`` (measured, docs/benchmarks.md): its
reads have no overall deadline (and no timeout by default), it retries TLS failures, it cannot be
pickled to the executors (it holds an ``SSLContext``), and its errors name no setting; it was a few
milliseconds faster per uncached read (httpx against requests), paid once per schema id and executor
process, and no faster on the cached path every message takes.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import requests
from pydantic import SecretStr

from cdc_lake.decode.schema import RegisteredSchema
from cdc_lake.exceptions import ConfigError, SchemaRegistryError
from cdc_lake.http_retry import RetryPolicy, Unavailable, send

if TYPE_CHECKING:
    from cdc_lake.config import Config

log = logging.getLogger(__name__)

CREDENTIALS_HINT = (
    "check schema_registry.user and schema_registry.password (or schema_registry.bearer_token) in the config"
)
"""What to fix when the registry refuses the decoder's or the preflight's credentials."""

_ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"

DEADLINE_SECONDS = 60.0
"""How long one read may take with all its retries: about what 5 attempts of 10 s with their backoff
took before, now a bound (a registry restart shorter than this is ridden out)."""


class SchemaRegistry:
    """Cached, retrying client for a Confluent-compatible schema registry at ``url``.

    Thread-safe: the cache is guarded by a lock, and the HTTP session is only used for GETs.
    """

    def __init__(
        self,
        url: str,
        *,
        username: str | None = None,
        password: SecretStr | None = None,
        bearer_token: SecretStr | None = None,
        timeout_seconds: float = 10.0,
        attempts: int = 5,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 8.0,
        deadline_seconds: float = DEADLINE_SECONDS,
        ca_cert: str | None = None,
        client_cert: tuple[str, str] | None = None,
    ) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"schema registry URL {url!r} is not an http(s) URL")
        if parts.username or parts.password:
            raise ConfigError("schema registry URL must not embed credentials; set username and password")
        if attempts < 1:
            raise ConfigError(f"schema registry attempts must be at least 1, not {attempts}")
        self.url = url.rstrip("/")
        self._username = username
        self._password = password
        self._bearer_token = bearer_token
        self._timeout = timeout_seconds
        self._ca_cert = ca_cert
        self._client_cert = client_cert
        self._policy = RetryPolicy(
            attempts, backoff_seconds, max_backoff_seconds, deadline_seconds=deadline_seconds
        )
        self._cache: dict[int, RegisteredSchema] = {}
        self._lock = threading.Lock()
        self._session = self._new_session()

    def _new_session(self) -> requests.Session:
        session = requests.Session()
        session.headers["Accept"] = _ACCEPT
        session.verify = self._ca_cert or True
        session.cert = self._client_cert
        if self._username is not None:
            secret = self._password.get_secret_value() if self._password is not None else ""
            session.auth = (self._username, secret)
        if self._bearer_token is not None:
            session.headers["Authorization"] = f"Bearer {self._bearer_token.get_secret_value()}"
        return session

    def get_schema(self, schema_id: int) -> RegisteredSchema:
        """The schema registered under ``schema_id``, fetched once and then served from the cache."""
        with self._lock:
            cached = self._cache.get(schema_id)
        if cached is not None:
            return cached
        body = self._get(f"/schemas/ids/{schema_id}", not_found=f"schema id {schema_id} is not registered")
        return self._remember(schema_id, body, f"schema id {schema_id}")

    def latest(self, subject: str) -> RegisteredSchema:
        """The latest version of ``subject`` (e.g. ``<topic>-value``); its id is cached like any other."""
        body = self._get(
            f"/subjects/{quote(subject, safe='')}/versions/latest",
            not_found=f"subject {subject!r} has no registered versions",
        )
        schema_id = body.get("id")
        if not isinstance(schema_id, int):
            raise SchemaRegistryError(f"schema registry at {self.url} returned no schema id for {subject!r}")
        return self._remember(schema_id, body, f"subject {subject!r}")

    def versions(self, subject: str) -> list[RegisteredSchema]:
        """Every version of ``subject`` in registration order (its history; the last is the latest)."""
        path = f"/subjects/{quote(subject, safe='')}"
        missing = f"subject {subject!r} has no registered versions"
        listed = self._get_any(f"{path}/versions", not_found=missing)
        if not isinstance(listed, list) or not all(isinstance(v, int) for v in listed):
            raise SchemaRegistryError(f"schema registry at {self.url} listed no versions for {subject!r}")
        history = []
        for version in sorted(listed):
            what = f"subject {subject!r} version {version}"
            body = self._get(f"{path}/versions/{version}", not_found=f"{what} is not registered")
            schema_id = body.get("id")
            if not isinstance(schema_id, int):
                raise SchemaRegistryError(f"schema registry at {self.url} returned no schema id for {what}")
            history.append(self._remember(schema_id, body, what))
        return history

    def _remember(self, schema_id: int, body: dict[str, Any], what: str) -> RegisteredSchema:
        schema_type = body.get("schemaType", "AVRO")
        if schema_type != "AVRO":
            raise SchemaRegistryError(f"{what} at {self.url} is a {schema_type} schema, not Avro")
        definition = body.get("schema")
        if not isinstance(definition, str):
            raise SchemaRegistryError(f"schema registry at {self.url} returned no schema text for {what}")
        registered = RegisteredSchema(schema_id, definition)
        with self._lock:
            return self._cache.setdefault(schema_id, registered)

    def _get(self, path: str, *, not_found: str) -> dict[str, Any]:
        body = self._get_any(path, not_found=not_found)
        if not isinstance(body, dict):
            raise SchemaRegistryError(f"schema registry at {self.url} returned a non-object for {path}")
        return body

    def _get_any(self, path: str, *, not_found: str) -> Any:
        try:
            response = send(self._session, "GET", self.url + path, self._policy, self._timeout)
        except Unavailable as exc:
            log.debug("schema registry GET %s failed: %s", path, exc)
            raise SchemaRegistryError(
                f"schema registry at {self.url} is unreachable after {exc.attempts} attempts: {exc}"
            ) from exc
        except requests.exceptions.SSLError as exc:
            what, fix = tls_problem(exc, client_certificate=self._client_cert is not None)
            raise SchemaRegistryError(f"schema registry at {self.url}: {what}: {fix}") from exc
        except requests.RequestException as exc:
            raise SchemaRegistryError(
                f"schema registry at {self.url} failed GET {path}: {type(exc).__name__}"
            ) from exc
        except OSError as exc:
            # requests opens the CA bundle and the client certificate per request, on this host.
            raise SchemaRegistryError(f"schema registry at {self.url}: {self._unreadable(exc)}") from exc
        if response.status_code == 404:
            raise SchemaRegistryError(f"{not_found} at {self.url}")
        if response.status_code in (401, 403):
            raise SchemaRegistryError(
                f"schema registry at {self.url} refused GET {path} with HTTP {response.status_code} "
                f"({_error_message(response)}): {CREDENTIALS_HINT}"
            )
        if response.status_code >= 400:
            raise SchemaRegistryError(
                f"schema registry at {self.url} answered HTTP {response.status_code} for {path}: "
                f"{_error_message(response)}"
            )
        try:
            body = response.json()
        except ValueError as exc:
            raise SchemaRegistryError(f"schema registry at {self.url} returned non-JSON for {path}") from exc
        return body

    def _unreadable(self, exc: OSError) -> str:
        """Which TLS file requests could not open (its messages name the kind, then the path)."""
        text = str(exc)
        cert, key = self._client_cert or ("", "")
        named = [("ca_cert", self._ca_cert or ""), ("client_cert", cert), ("client_key", key)]
        setting, path = next(((s, p) for s, p in named if p and p in text), ("ca_cert", ""))
        if "key file" in text:
            setting, path = "client_key", key
        elif "certificate file" in text:
            setting, path = "client_cert", cert
        return (
            f"cannot read schema_registry.{setting} {path} on this host (the TLS files must be readable "
            "at the same paths by the driver and every executor)"
        )

    def identity(self) -> tuple[str, str, str]:
        """What makes two clients interchangeable: the URL, the user, and a digest of the secrets and
        TLS files (so a rotated password or token is a new client; the digest is a cache key, never
        shown)."""
        held = (self._password, self._bearer_token)
        secrets = [secret.get_secret_value() if secret is not None else "" for secret in held]
        secrets += [self._ca_cert or "", *(self._client_cert or ("", ""))]
        digest = hashlib.sha256("\0".join(secrets).encode()).hexdigest()
        return self.url, self._username or "", digest

    def close(self) -> None:
        """Close the HTTP session."""
        self._session.close()

    def __enter__(self) -> SchemaRegistry:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        auth = f", username={self._username!r}" if self._username is not None else ""
        return f"SchemaRegistry({self.url!r}{auth})"

    def __getstate__(self) -> dict[str, Any]:
        # Spark ships the client to executors: the session, lock and compiled converters stay behind.
        state = self.__dict__.copy()
        for key in ("_session", "_lock", "_cache"):
            del state[key]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._cache = {}
        self._lock = threading.Lock()
        self._session = self._new_session()


def registry_client(config: Config) -> SchemaRegistry:
    """The schema registry client of ``config`` (``schema_registry``), as the driver and executors use it."""
    settings = config.schema_registry
    return SchemaRegistry(
        settings.url,
        username=settings.user,
        password=settings.password,
        bearer_token=settings.bearer_token,
        ca_cert=settings.ca_cert,
        client_cert=settings.client_certificate(),
    )


def tls_problem(exc: requests.exceptions.SSLError, *, client_certificate: bool) -> tuple[str, str]:
    """What a failed TLS handshake with the registry was, and the setting to check (one line each)."""
    failure = _ssl_failure(exc)
    reason = (failure.reason or type(failure).__name__) if failure is not None else "SSLError"
    if isinstance(failure, ssl.SSLCertVerificationError):
        return (
            f"the registry's certificate is not trusted ({failure.verify_message})",
            "check schema_registry.ca_cert (the CA bundle that signed it)",
        )
    said = f"TLS handshake failed ({reason})"
    if "ALERT" in reason or isinstance(failure, ssl.SSLEOFError):
        # The server ended the handshake: the usual cause is a client certificate it wants or refuses.
        if client_certificate:
            return (
                f"{said}, the registry refused the client certificate",
                "check schema_registry.client_cert and schema_registry.client_key",
            )
        return (
            f"{said}, the registry may require a client certificate",
            "set schema_registry.client_cert and schema_registry.client_key",
        )
    return said, "check schema_registry.url (does the registry speak TLS there?)"


def _ssl_failure(exc: BaseException) -> ssl.SSLError | None:
    """The :class:`ssl.SSLError` under requests' and urllib3's wrappers (in ``args`` and ``reason``)."""
    pending: list[object] = [exc]
    seen: set[int] = set()
    while pending:
        item = pending.pop()
        if not isinstance(item, BaseException) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, ssl.SSLError):
            return item
        pending += [*item.args, getattr(item, "reason", None), item.__cause__, item.__context__]
    return None


def _error_message(response: requests.Response) -> str:
    """The registry's own error text (Confluent: ``{"error_code": ..., "message": ...}``), shortened."""
    try:
        body = response.json()
    except ValueError:
        return response.reason or "no message"
    message = body.get("message") if isinstance(body, dict) else None
    return str(message)[:200] if message else response.reason or "no message"
