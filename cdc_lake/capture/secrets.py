"""Which environment variable holds a source's password, so Kafka Connect can read it too.

Connector configs carry ``database.password=${env:VAR}``: the Connect worker resolves it from its
own environment and the password is never in a request, a stored config or a dump.  The
variable is the one the cdc-lake config file reads the primary's password from, so the file
must give it as ``${VAR}`` (or ``${VAR:-default}``); a literal password cannot be passed on
without copying it into the connector config, and is refused.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from cdc_lake.exceptions import ConfigError

_WHOLE_REFERENCE = re.compile(r"^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}$")


def password_env(config_file: Path, source: str) -> str:
    """The variable named by ``sources.<source>.primary.password`` in ``config_file``."""
    where = f"{config_file}: sources.{source}.primary.password"
    try:
        raw = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{config_file}: cannot read the config file again: {type(exc).__name__}") from None
    value = (
        raw.get("sources", {}).get(source, {}).get("primary", {}).get("password")
        if isinstance(raw, dict)
        else None
    )
    if value is None:
        raise ConfigError(f"{where} is not set: give it as ${{VAR}}, the variable Kafka Connect reads too")
    match = _WHOLE_REFERENCE.match(str(value).strip())
    if match is None:
        raise ConfigError(
            f"{where} must be exactly ${{VAR}} (or ${{VAR:-default}}): Kafka Connect resolves the same "
            "variable, so a literal password would be copied into the connector config"
        )
    return match.group(1)
