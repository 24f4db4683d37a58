"""Keeping connector secrets out of anything printed: dumps, logs and error messages."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

MASK = "******"

# Lower-case fragments of config keys whose values are credentials.  "jaas.config" and
# "user.info" embed passwords in Kafka client and Confluent-style registry settings.
_SECRET_KEY_MARKERS = ("password", "secret", "jaas.config", "user.info")


def is_secret_key(key: str) -> bool:
    """Whether the value of config ``key`` is a credential that must never be shown."""
    lowered = key.lower()
    return any(marker in lowered for marker in _SECRET_KEY_MARKERS)


def redact(config: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``config`` fit for printing: every secret key's value is replaced by ``******``.

    Secret keys are masked even when they hold a ``${env:VAR}`` placeholder, so a dump
    never has to be judged value by value.
    """
    return {key: MASK if is_secret_key(key) else value for key, value in config.items()}


def scrub(text: str, configs: Iterable[Mapping[str, str]]) -> str:
    """``text`` with every literal secret value found in ``configs`` replaced by ``******``.

    Used on messages that come back from Kafka Connect, which may quote config values.
    """
    for config in configs:
        for key, value in config.items():
            if is_secret_key(key) and value:
                text = text.replace(value, MASK)
    return text
