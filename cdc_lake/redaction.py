"""Keeping secrets out of everything cdc-lake prints, logs, stores or sends back: one rule, one mask.

Two ways a secret can leak, one function each:

- a **config mapping** (a connector config dump, a passthrough section of the cdc-lake config): a key
  whose name marks it as a credential (:func:`is_secret_key`) has its value replaced by :data:`MASK`
  (:func:`mask_mapping`), even when it only holds a ``${env:VAR}`` placeholder, so a dump never has
  to be judged value by value;
- **free text** (a log line, a traceback, an error from Kafka Connect, a database driver or the JVM):
  every known secret value is replaced by :data:`MASK` (:func:`redact`).  The values are the
  config's secrets, registered once when the config is loaded (:func:`register_secrets`), plus any
  given for the one call (the literal values of a connector config being sent).

Longer values are replaced first, so a secret that contains another vanishes whole.

What cdc-lake stores locally (the SQLite state store, lock files) goes into directories it creates
private to its user (:func:`private_directory`): offsets and table states are no one else's business.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

MASK: Final = "***"  # as SQLAlchemy renders a hidden URL password

# Lower-case fragments of setting names whose values are credentials.  "jaas.config" and "user.info"
# embed passwords in Kafka client and Confluent-style registry settings; "access.key" is the S3A
# access key id (Spark's own redaction treats it as a secret too).
_SECRET_KEY_MARKERS: Final = (
    "password", "secret", "token", "credential", "jaas.config", "user.info", "access.key"
)

_registered: set[str] = set()


def is_secret_key(key: str) -> bool:
    """Whether the value of setting ``key`` is a credential that must never be shown."""
    lowered = key.lower()
    return any(marker in lowered for marker in _SECRET_KEY_MARKERS)


def mask_mapping(config: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``config`` fit for printing: every secret key's value is replaced by :data:`MASK`."""
    return {key: MASK if is_secret_key(key) else value for key, value in config.items()}


def secret_values(configs: Iterable[Mapping[str, str]]) -> set[str]:
    """The literal values of the secret keys of ``configs``."""
    return {value for config in configs for key, value in config.items() if is_secret_key(key) and value}


def register_secrets(values: Iterable[str]) -> None:
    """Add secret values that must never appear in log output or user-facing messages."""
    _registered.update(value for value in values if value)


def redact(text: str, also: Iterable[str] = ()) -> str:
    """``text`` with every registered secret, and every value in ``also``, replaced by :data:`MASK`."""
    for secret in sorted(_registered.union(value for value in also if value), key=len, reverse=True):
        text = text.replace(secret, MASK)
    return text


def private_directory(path: Path) -> None:
    """Create ``path`` (and missing parents) so that only its owner can enter it (mode 0700).

    A directory that already exists is left as its owner made it.
    """
    if path.is_dir():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.mkdir(mode=0o700, exist_ok=True)
    os.chmod(path, 0o700)  # mkdir's mode is filtered by the umask
