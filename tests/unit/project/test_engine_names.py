"""Engine names are literals only where an engine is declared or a product is really talked to.

Shared code asks an engine's declaration (:mod:`cdc_lake.sources.capabilities`: its connector values,
its position codec, its slots) and never compares engine names, so a new engine is its own package
(its connector template and JVM artifacts declared there) and one registry line.  This lint reads
``cdc_lake`` with ``ast`` and allows a string literal equal to an engine name (``postgres``,
``postgresql``, ``mysql``, ``mariadb``; docstrings aside) only in the files below, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CORE = ROOT / "cdc_lake"
ENGINE_NAMES = frozenset({"postgres", "postgresql", "mysql", "mariadb"})

ALLOWED: dict[str, str] = {
    "cdc_lake/sources/postgres/": "the Postgres engine's own package",
    "cdc_lake/sources/mysql/": "the MySQL family's own package (MySQL and MariaDB)",
    "cdc_lake/stack/": "the local stack runs the real servers (Postgres, MariaDB)",
    "cdc_lake/state/locks.py": "SQLAlchemy dialect names of the state store's own database, not engines",
    "cdc_lake/state/migrate.py": "SQLAlchemy dialect names of the state store's own database, not engines",
}
"""Where engine-name literals may appear, by file or folder (``/``), and why."""


def engine_literals(text: str) -> list[tuple[int, str]]:
    """(line, name) of every string literal in ``text`` that equals an engine name, docstrings aside."""
    tree = ast.parse(text)
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in ENGINE_NAMES and id(node) not in docstrings
    )


def _allowed(path: Path) -> bool:
    relative = path.relative_to(ROOT).as_posix()
    return any(relative == entry or (entry.endswith("/") and relative.startswith(entry)) for entry in ALLOWED)


def test_engine_name_literals_appear_only_in_the_named_files() -> None:
    found = {
        f"{path.relative_to(ROOT).as_posix()}:{line}: {name!r}"
        for path in sorted(CORE.rglob("*.py"))
        if not _allowed(path)
        for line, name in engine_literals(path.read_text(encoding="utf-8"))
    }

    ask = "ask the engine's declaration (cdc_lake/sources/capabilities.py) instead"
    assert not found, f"{ask}:\n" + "\n".join(sorted(found))


def test_every_named_file_exists_and_holds_an_engine_name() -> None:
    for entry in ALLOWED:
        paths = sorted((ROOT / entry).rglob("*.py")) if entry.endswith("/") else [ROOT / entry]
        held = any(engine_literals(path.read_text(encoding="utf-8")) for path in paths)
        assert held, f"{entry} holds no engine name: remove its exception"


def test_the_lint_sees_comparisons_but_not_docstrings() -> None:
    text = '"""Postgres or mysql."""\n\n\ndef f(name: str) -> bool:\n    return name == "mysql"\n'

    assert engine_literals(text) == [(5, "mysql")]
