"""The schema registry client against an in-process fake of the Confluent REST API."""

from __future__ import annotations

import pickle
import socket
import threading
import time
from pathlib import Path

import pytest
from pydantic import SecretStr
from support import debezium as dbz
from support.fake_registry import FakeRegistry, serve
from support.wire import framed

from cdc_lake.decode import SchemaRegistry, decode_message
from cdc_lake.exceptions import ConfigError, SchemaRegistryError


def client(url: str, username: str | None = None, password: str | None = None) -> SchemaRegistry:
    """A registry client with three quick attempts."""
    return SchemaRegistry(
        url,
        username=username,
        password=None if password is None else SecretStr(password),
        attempts=3,
        backoff_seconds=0.001,
        max_backoff_seconds=0.002,
        timeout_seconds=2.0,
    )


@pytest.fixture
def fake() -> FakeRegistry:
    return FakeRegistry({1: dbz.pg_key(), 2: dbz.pg_envelope()}, {"pg.public.orders-value": 2})


def test_schema_is_fetched_once_and_cached(fake: FakeRegistry) -> None:
    with serve(fake), client(fake.url) as registry:
        first = registry.get_schema(2)
        assert registry.get_schema(2) is first
        assert first.is_envelope and first.name == "pg.public.orders.Envelope"
    assert [path for path, _ in fake.requests] == ["/schemas/ids/2"]


def test_latest_version_of_a_subject_fills_the_id_cache(fake: FakeRegistry) -> None:
    with serve(fake), client(fake.url + "/") as registry:
        latest = registry.latest("pg.public.orders-value")
        assert latest.schema_id == 2 and registry.get_schema(2) is latest
        with pytest.raises(
            SchemaRegistryError, match="subject 'nope-value' has no registered versions at http://"
        ):
            registry.latest("nope-value")
    assert [path for path, _ in fake.requests] == [
        "/subjects/pg.public.orders-value/versions/latest",
        "/subjects/nope-value/versions/latest",
    ]


def test_versions_of_a_subject_in_registration_order(fake: FakeRegistry) -> None:
    """What tells an older writer version from a column dropped and re-added (docs/schema-changes.md)."""
    fake.schemas[3] = dbz.pg_envelope()
    fake.history["pg.public.orders-value"] = [2, 3, 2]
    with serve(fake), client(fake.url) as registry:
        versions = registry.versions("pg.public.orders-value")
        assert [v.schema_id for v in versions] == [2, 3, 2]
        assert registry.get_schema(3) is versions[1]
        with pytest.raises(SchemaRegistryError, match="subject 'nope-value' has no registered versions"):
            registry.versions("nope-value")
    assert [path for path, _ in fake.requests][:4] == [
        "/subjects/pg.public.orders-value/versions",
        "/subjects/pg.public.orders-value/versions/1",
        "/subjects/pg.public.orders-value/versions/2",
        "/subjects/pg.public.orders-value/versions/3",
    ]


def test_unknown_id_names_id_and_registry(fake: FakeRegistry) -> None:
    with (
        serve(fake),
        client(fake.url) as registry,
        pytest.raises(SchemaRegistryError, match=f"schema id 404 is not registered at {fake.url}$"),
    ):
        registry.get_schema(404)


def test_server_errors_are_retried(fake: FakeRegistry) -> None:
    fake.fail_next = [503, 500]
    with serve(fake), client(fake.url) as registry:
        assert registry.get_schema(1).name == "pg.public.orders.Key"
    assert len(fake.requests) == 3


def test_persistent_outage_reports_unreachable(fake: FakeRegistry) -> None:
    fake.fail_next = [503, 503, 503]
    with (
        serve(fake),
        client(fake.url) as registry,
        pytest.raises(SchemaRegistryError, match=r"is unreachable after 3 attempts: HTTP 503"),
    ):
        registry.get_schema(1)


def test_refused_connection_reports_unreachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/apis/ccompat/v7"
    with (
        client(url) as registry,
        pytest.raises(SchemaRegistryError, match=f"schema registry at {url} is unreachable after 3 attempts"),
    ):
        registry.get_schema(1)


def test_a_silent_registry_fails_at_the_deadline_not_after_every_timeout() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}/apis/ccompat/v7"
        registry = SchemaRegistry(url, timeout_seconds=10.0, attempts=5, deadline_seconds=0.5)
        started = time.monotonic()
        with registry, pytest.raises(SchemaRegistryError) as raised:
            registry.get_schema(1)
        elapsed = time.monotonic() - started

    assert elapsed < 1.5
    assert str(raised.value) == (
        f"schema registry at {url} is unreachable after 1 attempts: ReadTimeout; the 0.5 s deadline passed"
    )


def test_basic_auth_is_sent_and_never_shown(fake: FakeRegistry) -> None:
    fake.credentials = ("reader", "s3cr3t-pw")
    with serve(fake):
        with client(fake.url, "reader", "s3cr3t-pw") as registry:
            assert registry.get_schema(1).schema_id == 1
            assert "s3cr3t" not in repr(registry) and "reader" in repr(registry)
        with client(fake.url, "reader", "wrong-pw") as registry:
            refused = r"refused GET /schemas/ids/1 with HTTP 401 .*Unauthorized.*schema_registry.user and"
            with pytest.raises(SchemaRegistryError, match=refused) as info:
                registry.get_schema(1)
            assert "wrong-pw" not in str(info.value) and "\n" not in str(info.value)
            assert len(fake.requests) == 2  # refused credentials are not retried


def test_other_client_errors_are_not_retried(fake: FakeRegistry) -> None:
    fake.fail_next = [422]
    with (
        serve(fake),
        client(fake.url) as registry,
        pytest.raises(SchemaRegistryError, match="answered HTTP 422 for /schemas/ids/1: injected failure"),
    ):
        registry.get_schema(1)
    assert len(fake.requests) == 1


def test_non_avro_and_invalid_schemas_are_refused(fake: FakeRegistry) -> None:
    fake.schemas[5] = {"type": "record", "name": "bad", "fields": [{"name": "a", "type": "no.such.Type"}]}
    fake.schemas[6] = "string"  # type: ignore[assignment]
    with serve(fake), client(fake.url) as registry:
        with pytest.raises(SchemaRegistryError, match="schema id 5 is not a valid Avro schema"):
            registry.get_schema(5)
        with pytest.raises(SchemaRegistryError, match="schema id 6 is not an Avro record"):
            registry.get_schema(6)


def test_a_registry_not_speaking_tls_fails_at_once_naming_the_url(fake: FakeRegistry) -> None:
    with serve(fake):
        url = fake.url.replace("http://", "https://")
        with client(url) as registry, pytest.raises(SchemaRegistryError) as info:
            registry.get_schema(1)
    message = str(info.value)
    assert message.startswith(f"schema registry at {url}: TLS handshake failed (WRONG_VERSION_NUMBER")
    assert message.endswith("check schema_registry.url (does the registry speak TLS there?)")
    assert "\n" not in message and fake.requests == []


def test_a_tls_file_missing_on_this_host_is_named(fake: FakeRegistry, tmp_path: Path) -> None:
    missing = tmp_path / "ca.pem"
    with serve(fake):
        url = fake.url.replace("http://", "https://")
        with (
            SchemaRegistry(url, ca_cert=str(missing), attempts=1) as registry,
            pytest.raises(SchemaRegistryError) as info,
        ):
            registry.get_schema(1)
    assert str(info.value) == (
        f"schema registry at {url}: cannot read schema_registry.ca_cert {missing} on this host "
        "(the TLS files must be readable at the same paths by the driver and every executor)"
    )


def test_bad_urls_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="'ftp://registry' is not an http"):
        SchemaRegistry("ftp://registry")
    with pytest.raises(ConfigError, match="must not embed credentials") as info:
        SchemaRegistry("http://user:hunter2@registry:8081")
    assert "hunter2" not in str(info.value)


def test_concurrent_lookups_share_one_schema(fake: FakeRegistry) -> None:
    with serve(fake), client(fake.url) as registry:
        seen: list[object] = []
        threads = [threading.Thread(target=lambda: seen.append(registry.get_schema(2))) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(seen) == 8 and all(s is seen[0] for s in seen)


def test_client_pickles_without_session_or_cache(fake: FakeRegistry) -> None:
    with serve(fake), client(fake.url, "u", "p") as registry:
        registry.get_schema(1)
        clone = pickle.loads(pickle.dumps(registry))
        assert clone.get_schema(2).schema_id == 2
        clone.close()
    assert [path for path, _ in fake.requests] == ["/schemas/ids/1", "/schemas/ids/2"]


def test_decode_message_through_the_http_registry(fake: FakeRegistry) -> None:
    value = framed(2, dbz.pg_envelope(), dbz.value("t", None, None, dbz.pg_source()))
    with serve(fake), client(fake.url) as registry:
        event = decode_message(registry, dbz.PG_TOPIC, 0, 1, None, value)
    assert event.ref.offset == 1


def test_bearer_token_is_sent_survives_pickling_and_is_never_shown(fake: FakeRegistry) -> None:
    fake.bearer_token = "t0ken-abc"
    with serve(fake):
        registry = SchemaRegistry(fake.url, bearer_token=SecretStr("t0ken-abc"), attempts=1)
        assert registry.get_schema(1).schema_id == 1
        shipped = pickle.loads(pickle.dumps(registry))  # what an executor gets
        assert shipped.get_schema(2).schema_id == 2
        assert "t0ken" not in repr(registry)
        wrong = SchemaRegistry(fake.url, bearer_token=SecretStr("stale-token"), attempts=1)
        with pytest.raises(SchemaRegistryError, match=r"HTTP 401 .*schema_registry.bearer_token") as info:
            wrong.get_schema(1)
        assert "stale-token" not in str(info.value)


def test_a_rotated_secret_makes_a_different_client_identity() -> None:
    url = "http://registry:8081/apis/ccompat/v7"
    first = SchemaRegistry(url, bearer_token=SecretStr("token-one"))
    assert first.identity() == SchemaRegistry(url, bearer_token=SecretStr("token-one")).identity()
    assert first.identity() != SchemaRegistry(url, bearer_token=SecretStr("token-two")).identity()
    user = SchemaRegistry(url, username="u", password=SecretStr("pw-one"))
    assert user.identity() != SchemaRegistry(url, username="u", password=SecretStr("pw-two")).identity()
    parts = (*first.identity(), *user.identity())
    assert all("token-one" not in part and "pw-one" not in part for part in parts)
