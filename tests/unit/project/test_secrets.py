"""One secret rule: which setting names are credentials, masking config dumps, redacting free text."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc_lake import redaction as secrets
from cdc_lake.redaction import MASK, mask_mapping, private_directory, redact, register_secrets, secret_values


@pytest.fixture(autouse=True)
def _no_registered_secrets(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(secrets, "_registered", set())
    yield


def test_redact_masks_every_secret_key_and_nothing_else() -> None:
    config = {
        "database.password": "${env:PG_PASSWORD}",
        "database.user": "cdc",
        "value.converter.apicurio.registry.auth.client.secret": "s3cr3t",
        "producer.override.sasl.jaas.config": "PlainLoginModule password=x;",
        "DATABASE.PASSWORD.FILE": "hunter2",
        "topic.prefix": "pg1",
    }

    redacted = mask_mapping(config)

    assert redacted == {
        "database.password": MASK,
        "database.user": "cdc",
        "value.converter.apicurio.registry.auth.client.secret": MASK,
        "producer.override.sasl.jaas.config": MASK,
        "DATABASE.PASSWORD.FILE": MASK,
        "topic.prefix": "pg1",
    }
    assert config["database.password"] == "${env:PG_PASSWORD}"


def test_scrub_hides_literal_secret_values_in_text() -> None:
    text = "login failed for cdc with hunter2"

    also = secret_values([{"database.password": "hunter2", "database.user": "cdc"}])

    assert redact(text, also) == (
        f"login failed for cdc with {MASK}"
    )


def test_registered_and_given_secrets_are_redacted_longest_first() -> None:
    register_secrets(["abc", ""])

    assert redact("x abcdef y abc", also=["abcdef"]) == f"x {MASK} y {MASK}"
    assert redact("nothing here") == "nothing here"


def test_the_state_directory_is_created_private(tmp_path: Path) -> None:
    from cdc_lake.state.store import StateStore

    state_dir = tmp_path / "new" / ".cdc-lake"
    with StateStore.open(f"sqlite:///{state_dir / 'state.db'}"):
        pass
    assert stat.S_IMODE(state_dir.stat().st_mode) == 0o700

    existing = tmp_path / "shared"
    existing.mkdir(mode=0o755)
    existing.chmod(0o755)
    private_directory(existing)
    assert stat.S_IMODE(existing.stat().st_mode) == 0o755
