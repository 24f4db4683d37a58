"""Small configs of the unit tests: a one-source config file, a Postgres source of the capture plans."""

from __future__ import annotations

from pathlib import Path

from cdc_lake.config import Connection, Source, Table


def config_file(tmp_path: Path, password: str | None) -> Path:
    """``cdc-lake.yaml`` in ``tmp_path``: one Postgres source ``pg``, with ``password`` if given."""
    line = "" if password is None else f"      password: {password}\n"
    path = tmp_path / "cdc-lake.yaml"
    path.write_text(
        "sources:\n  pg:\n    engine: postgres\n    primary:\n      port: 5432\n      database: app\n"
        f"      user: cdc\n{line}",
        encoding="utf-8",
    )
    return path


def postgres(tables: list[Table], name: str = "pg") -> Source:
    """A Postgres source capturing ``tables``."""
    primary = Connection(port=5432, database="app", user="cdc")
    return Source(name=name, engine="postgres", primary=primary, tables=tables)
