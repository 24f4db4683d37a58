"""Local paths: the default state directory, and how a relative path in the config resolves against the
directory of the file that names it (a URI is kept as written)."""

from __future__ import annotations

import re
from pathlib import Path

from sqlalchemy.engine import make_url

DEFAULT_STATE_DIR = ".cdc-lake"


def resolve_path(path: Path, base_dir: Path) -> Path:
    """``path`` with ``~`` expanded, made absolute against ``base_dir`` when relative."""
    path = path.expanduser()
    return path if path.is_absolute() else (base_dir / path).resolve()


def resolve_location(location: str, base_dir: Path) -> str:
    """A local path becomes absolute; a URI (``s3a://…``, ``file:/…``) is kept as written."""
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", location):
        return location
    return str(resolve_path(Path(location), base_dir))


def resolve_sqlite_url(url: str, base_dir: Path) -> str:
    """A SQLite URL with its relative database file made absolute; any other URL is kept as written."""
    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return url
    if database.startswith("file:"):
        return url
    resolved = resolve_path(Path(database), base_dir)
    return parsed.set(database=str(resolved)).render_as_string(hide_password=False)
