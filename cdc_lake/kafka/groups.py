"""The consumer group of each lake table copy, by name only: no Kafka client is loaded.

``status --json`` names the group and :mod:`cdc_lake.kafka.group_offsets` commits to it; the name is
here so that naming it costs no Kafka client (nor the Spark reader the committing module sits beside).
"""

from __future__ import annotations

import hashlib
from typing import Final

GROUP_PREFIX: Final = "cdc-lake."
"""Every group cdc-lake commits to starts with this (one prefixed ACL covers them all)."""
_DIGEST_CHARS: Final = 12


def group_id(table: str, base_path: str) -> str:
    """The consumer group of the table copy at ``base_path``: ``cdc-lake.<table>.<12 hex digits>``."""
    digest = hashlib.sha256(base_path.rstrip("/").encode()).hexdigest()[:_DIGEST_CHARS]
    return f"{GROUP_PREFIX}{table}.{digest}"
