"""Reading a config file: YAML that refuses a key given twice, ``${VAR}`` / ``${VAR:-default}`` expanded
from the environment, strict validation reported by dotted path, relative paths resolved."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cdc_lake.config.model import Config
from cdc_lake.exceptions import ConfigError

DEFAULT_CONFIG_NAME = "cdc-lake.yaml"

_ENV_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_CONNECT_ENV_REFERENCE = re.compile(r"^env:[A-Za-z_][A-Za-z0-9_]*$")
_ENV_BODY = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?$", re.DOTALL)


def find_config(path: str | Path | None) -> Path | None:
    """The config file to use: ``path`` (which must exist), else ``./cdc-lake.yaml`` if present, else None."""
    if path is not None:
        explicit = Path(path)
        if not explicit.is_file():
            raise ConfigError(f"{explicit}: config file not found")
        return explicit
    default = Path.cwd() / DEFAULT_CONFIG_NAME
    return default if default.is_file() else None


def resolve_config(path: str | Path | None, allow_default: bool = False) -> Config:
    """Load the config a command asked for; without a file, local defaults only if ``allow_default``."""
    found = find_config(path)
    if found is not None:
        return load_config(found)
    if allow_default:
        return Config.default()
    raise ConfigError(f"{DEFAULT_CONFIG_NAME}: config file not found in {Path.cwd()}; pass --config PATH")


def load_config(path: Path) -> Config:
    """Read, expand, validate and path-resolve the config file at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from None
    try:
        raw = yaml.load(text, Loader=_StrictLoader)  # _StrictLoader is a SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}{where}: invalid YAML: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {type(exc).__name__}") from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    expanded = _expand_env(raw, (), path)
    try:
        config = Config.model_validate(expanded)
    except ValidationError as exc:
        raise ConfigError(_describe_validation_error(path, exc)) from None
    return config.with_paths_resolved(path.resolve().parent)


class _StrictLoader(yaml.SafeLoader):
    """A SafeLoader that rejects a key given twice in one mapping instead of keeping the last."""


def _construct_unique_mapping(loader: _StrictLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    mapping: dict[Any, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in mapping:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def _expand_env(value: object, loc: tuple[str | int, ...], path: Path) -> object:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in every string value (keys are left alone)."""
    if isinstance(value, str):
        return _ENV_REFERENCE.sub(lambda match: _env_value(match.group(1), loc, path), value)
    if isinstance(value, dict):
        return {key: _expand_env(item, (*loc, str(key)), path) for key, item in value.items()}
    if isinstance(value, list):
        return [_expand_env(item, (*loc, index), path) for index, item in enumerate(value)]
    return value


def _env_value(body: str, loc: tuple[str | int, ...], path: Path) -> str:
    if _CONNECT_ENV_REFERENCE.match(body):
        # ${env:VAR} is Kafka Connect's EnvVarConfigProvider syntax: the Connect worker resolves it from
        # its own environment, so a connector setting can name a secret without holding it.
        return f"${{{body}}}"
    parsed = _ENV_BODY.match(body)
    if parsed is None:
        raise ConfigError(
            f"{path}: {_dotted(loc)}: malformed reference ${{{body}}}; use ${{VAR}} or ${{VAR:-default}}"
        )
    name, default = parsed.group(1), parsed.group(2)
    value = os.environ.get(name)
    if default is not None and not value:
        return default
    if value is None:
        raise ConfigError(f"{path}: {_dotted(loc)}: environment variable {name} is not set")
    return value


def _dotted(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "<top level>"


def _describe_validation_error(path: Path, exc: ValidationError) -> str:
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        loc = tuple(part for part in error["loc"] if isinstance(part, str | int))
        if error["type"] == "extra_forbidden":
            message = "unknown key"
        elif error["type"] == "missing":
            message = "required key is missing"
        else:
            message = error["msg"]
        problems.append(f"{_dotted(loc)}: {message}")
    return f"{path}: " + "; ".join(problems)
