"""The package layering, read from the source with ``ast``, so that it cannot regress unnoticed.

- ``bootstrap/`` (and every other folder of the repository) depends on ``cdc_lake``, never the reverse,
  not even in a function nor by a name handed to ``importlib`` (``resources.files("connectors")``
  imports that package): the command line starts the bootstrap stage through the ``cdc_lake.stages``
  entry point it registers (``cdc_lake/cli/stages.py``), and the connector templates are data of
  the engine packages (``cdc_lake/sources/<engine>/connector*.json``).
- The parts of ``cdc_lake`` (its subpackages and its top-level modules such as ``jvm.py``) import each
  other without a cycle.  An import counts when it is made at module level or under
  ``if TYPE_CHECKING``: a type a module names is a dependency of its design even when Python need not
  load it, and a cycle through one is a cycle a reader must untangle.
- No module of ``cdc_lake`` or the bootstrap imports itself back through others, imports inside
  functions counted: a deferred import (how a command loads a heavy stage only when it runs) hides a
  cycle from Python's loader, not from a reader.
- The two stages that write lake tables meet in the lake-table contract (``cdc_lake/lake``): ``bootstrap/``
  never imports the applier (``cdc_lake.apply``), not even in a function, and the contract imports
  neither stage.  Spark's JVM gateway is used only behind ``cdc_lake/hudi`` (Hudi and its Hadoop files),
  ``cdc_lake/spark`` (the session) and the Hive metastore client.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CORE = ROOT / "cdc_lake"
BOOTSTRAP = ROOT / "bootstrap"
BOOTSTRAP_PACKAGE = "cdc_lake_bootstrap"
"""The import name of the bootstrap stage, which lives in the repository's ``bootstrap/`` folder."""
OUTSIDE = frozenset(p.name for p in ROOT.iterdir() if p.is_dir() and p.name[0] != ".") - {"cdc_lake"} | {
    BOOTSTRAP_PACKAGE
}
"""The repository's other folders (``bootstrap``, ``tests``, ...) and the packages they hold: none is a
module ``cdc_lake`` may load."""
JVM_GATEWAY_USERS = ("cdc_lake/hudi/", "cdc_lake/spark/", "cdc_lake/catalog/hive.py")
"""Where Spark's JVM gateway (``_jvm``) may be used; everything else asks these modules."""


_IMPORTERS_BY_NAME = ("files", "import_module", "__import__", "find_spec")
"""Calls that import the module whose name they are given (``importlib.resources.files`` among them)."""


def _imported(node: ast.AST) -> Iterator[str]:
    """The modules ``node`` imports; ``from package import name`` may import the module ``package.name``."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
        yield node.module
        yield from (f"{node.module}.{alias.name}" for alias in node.names)
    elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if called in _IMPORTERS_BY_NAME and isinstance(node.args[0].value, str):
            yield node.args[0].value


def _all_imports(path: Path) -> set[str]:
    """Every module ``path`` imports anywhere (module level, functions, TYPE_CHECKING blocks)."""
    return {
        name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) for name in _imported(node)
    }


def _module_level_imports(path: Path) -> set[str]:
    """The modules ``path`` imports outside functions: when it is loaded, or under ``if TYPE_CHECKING``."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If | ast.Try | ast.With):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                visit(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
            else:
                found.update(_imported(node))

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def _core_modules() -> list[Path]:
    return sorted(CORE.rglob("*.py"))


def test_core_never_imports_the_outer_packages() -> None:
    reverse = {
        (path.relative_to(ROOT).as_posix(), module)
        for path in _core_modules()
        for module in _all_imports(path)
        if module.split(".")[0] in OUTSIDE
    }

    assert {"bootstrap", BOOTSTRAP_PACKAGE} <= OUTSIDE
    assert (BOOTSTRAP / BOOTSTRAP_PACKAGE / "__init__.py").is_file()
    assert reverse == set(), f"cdc_lake must not import bootstrap/ or another folder: {sorted(reverse)}"


@pytest.mark.parametrize(
    ("source", "imported"),
    [
        (
            "def f() -> None:\n    from cdc_lake_bootstrap.run import bootstrap_tables\n",
            "cdc_lake_bootstrap.run",
        ),
        ("from importlib import resources\n\nTEXT = resources.files('connectors')\n", "connectors"),
        ("from cdc_lake import jvm\n", "cdc_lake.jvm"),
    ],
    ids=["deferred", "by-name", "module-from-its-package"],
)
def test_the_import_finder_sees(tmp_path: Path, source: str, imported: str) -> None:
    module = tmp_path / "m.py"
    module.write_text(source)

    assert imported in _all_imports(module)


def test_the_import_finder_counts_type_checking_imports_but_not_deferred_ones(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from cdc_lake.sources.base import Capture\n\n\n"
        "def f() -> None:\n    from cdc_lake.cli import main\n"
    )

    found = _module_level_imports(module)

    assert "cdc_lake.sources.base" in found
    assert "cdc_lake.cli" not in found


def _part(path: Path) -> str:
    """The part of ``cdc_lake`` a module belongs to: its subpackage, or itself when it is top-level."""
    parts = path.relative_to(CORE).parts
    return parts[0] if len(parts) > 1 else path.stem


def _parts_graph() -> dict[str, set[str]]:
    """Which part of ``cdc_lake`` imports which, each subpackage and top-level module one node."""
    parts = {_part(path) for path in _core_modules()} - {"__init__"}
    graph: dict[str, set[str]] = {name: set() for name in parts}
    for path in _core_modules():
        source = _part(path)
        if source == "__init__":
            continue  # cdc_lake/__init__.py is the package itself
        for module in _module_level_imports(path):
            target = module.split(".")
            if target[0] == "cdc_lake" and len(target) > 1 and target[1] in parts and target[1] != source:
                graph[source].add(target[1])
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path that ends where it starts, or None."""
    done: set[str] = set()

    def walk(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        for successor in sorted(graph[node]):
            found = walk(successor, [*path, node])
            if found is not None:
                return found
        done.add(node)
        return None

    for start in sorted(graph):
        found = walk(start, [])
        if found is not None:
            return found
    return None


def test_the_parts_of_cdc_lake_import_each_other_without_a_cycle() -> None:
    graph = _parts_graph()

    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def _module_name(path: Path) -> str:
    root = BOOTSTRAP if path.is_relative_to(BOOTSTRAP) else ROOT
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules_graph() -> dict[str, set[str]]:
    """Which module of ``cdc_lake`` and the bootstrap imports which, imports inside functions counted: a
    module imported there is as much a dependency as one imported at the top (its package's
    ``__init__`` is not: Python runs it first anyway)."""
    paths = [*_core_modules(), *sorted((BOOTSTRAP / BOOTSTRAP_PACKAGE).rglob("*.py"))]
    names = {_module_name(path): path for path in paths}
    graph: dict[str, set[str]] = {name: set() for name in names}
    for name, path in names.items():
        for module in _all_imports(path):
            while module and module not in names:
                module = module.rpartition(".")[0]
            if module and module != name and not name.startswith(f"{module}."):
                graph[name].add(module)
    return graph


def test_no_module_imports_itself_through_others_not_even_in_a_function() -> None:
    graph = _modules_graph()

    assert {"cdc_lake.config", "cdc_lake.apply.runner", f"{BOOTSTRAP_PACKAGE}.run"} <= set(graph)
    assert "cdc_lake.stack.manager" in graph["cdc_lake.cli.stack"], "an import inside a function counts"
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_top_level_modules_are_nodes_of_the_graph() -> None:
    graph = _parts_graph()

    assert {"jvm", "config", "engines", "exceptions"} <= set(graph)
    assert "exceptions" in graph["config"]


def _imports_of_subpackage(name: str) -> set[str]:
    return {module for path in sorted((CORE / name).rglob("*.py")) for module in _all_imports(path)}


def test_engines_never_reach_into_onboarding_nor_operations_into_the_applier() -> None:
    """Not even a deferred import: engines never reach into onboarding, operations never into the applier."""
    assert not any(module.startswith("cdc_lake.onboard") for module in _imports_of_subpackage("sources"))
    assert not any(module.startswith("cdc_lake.apply") for module in _imports_of_subpackage("ops"))


def test_bootstrap_never_imports_the_applier() -> None:
    """Both stages depend on the lake-table contract (``cdc_lake.lake``), not on each other."""
    found = {
        (path.relative_to(ROOT).as_posix(), module)
        for path in sorted(BOOTSTRAP.rglob("*.py"))
        for module in _all_imports(path)
        if module == "cdc_lake.apply" or module.startswith("cdc_lake.apply.")
    }

    assert found == set(), sorted(found)


def test_the_lake_contract_imports_neither_stage() -> None:
    stages = ("cdc_lake.apply", BOOTSTRAP_PACKAGE)
    found = {
        m for m in _imports_of_subpackage("lake") if any(m == s or m.startswith(f"{s}.") for s in stages)
    }

    assert found == set(), sorted(found)


def test_jvm_calls_stay_behind_the_hudi_and_spark_packages() -> None:
    """A meta client or a ``hoodie.properties`` read outside ``cdc_lake/hudi`` duplicates what it has."""
    paths = [*CORE.rglob("*.py"), *BOOTSTRAP.rglob("*.py")]
    users = {
        path.relative_to(ROOT).as_posix() for path in paths if "_jvm" in path.read_text(encoding="utf-8")
    }

    assert {u for u in users if not u.startswith(JVM_GATEWAY_USERS)} == set()


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_top_level_module_of_cdc_lake_shadows_the_standard_library() -> None:
    """spark-submit runs ``cdc_lake/__main__.py`` as a script, which puts ``cdc_lake/`` first on
    ``sys.path``: a ``cdc_lake/http.py`` there hid the standard ``http`` package from every import."""
    package = Path(__file__).resolve().parents[3] / "cdc_lake"
    names = {p.stem for p in package.glob("*.py")} | {p.name for p in package.iterdir() if p.is_dir()}
    assert not names & set(sys.stdlib_module_names), sorted(names & set(sys.stdlib_module_names))


STAGES = {
    "cdc_lake.onboard": CORE / "onboard",
    BOOTSTRAP_PACKAGE: BOOTSTRAP,
    "cdc_lake.apply": CORE / "apply",
    "cdc_lake.ops": CORE / "ops",
}
"""The stages of docs/architecture.md by package: onboard, bootstrap (with ``validate``), apply, operate."""


def test_the_stages_never_import_each_other() -> None:
    """Stages meet in the state store and the lake table and share only the core (capture planning in
    ``cdc_lake/capture``, the applier's metrics, ...): not even a deferred or TYPE_CHECKING import of
    another stage.  The command line (``cdc_lake/cli``) wires them together where one needs another."""
    found = {
        (path.relative_to(ROOT).as_posix(), module)
        for stage, folder in STAGES.items()
        for path in sorted(folder.rglob("*.py"))
        for module in _all_imports(path)
        if any(module == other or module.startswith(f"{other}.") for other in STAGES if other != stage)
    }

    assert found == set(), sorted(found)


FORMAT_PACKAGE = "cdc_lake/hudi/"
NAMES_THE_FORMAT = frozenset({
    "cdc_lake/lake/format.py",  # the loader table: the one line a format adds
    "cdc_lake/state/migrations/versions/0001_initial.py",  # history: the column's first name
    "cdc_lake/state/migrations/versions/0008_commit_instant.py",  # history: its renaming
})
"""The modules outside the format's package that may name it in code."""
_FORMAT_WORDS = ("hudi", "hoodie")


def _documentation(tree: ast.AST) -> set[int]:
    """The string constants of ``tree`` that are documentation (docstrings, attribute docstrings)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    }


def _code_names(path: Path) -> Iterator[str]:
    """Every name and string of ``path``'s code: imports, identifiers, attributes, parameters, keywords,
    definitions and string constants; not its docstrings nor comments."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    documentation = _documentation(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in documentation:
            yield node.value
        elif isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.alias):
            yield node.name
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            yield node.module
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.arg | ast.keyword):
            yield node.arg or ""


def _names_the_format(path: Path) -> bool:
    return any(word in name.lower() for name in _code_names(path) for word in _FORMAT_WORDS)


def test_only_the_format_package_names_the_lake_format_in_code() -> None:
    """Everything else asks the format's facts (``cdc_lake/lake/format.py``): a second format is its
    package plus its line in ``FORMATS``."""
    paths = [*_core_modules(), *sorted(BOOTSTRAP.rglob("*.py"))]
    outside = {path.relative_to(ROOT).as_posix(): path for path in paths}
    found = {
        rel for rel, path in outside.items() if not rel.startswith(FORMAT_PACKAGE) and _names_the_format(path)
    }

    assert found <= NAMES_THE_FORMAT, sorted(found - NAMES_THE_FORMAT)
    assert len(NAMES_THE_FORMAT) <= 3


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ('"""Hudi tables."""\nx = 1  # hudi\n', False),
        ("def f():\n    '''Writes Hudi.'''\n    return 1\n", False),
        ("from cdc_lake.hudi import keys\n", True),
        ("X = 'org.apache.hudi.Foo'\n", True),
        ("def write(hudi_name: str) -> None: ...\n", True),
        ("f(hoodie_options=1)\n", True),
        ("a.hudi_spec\n", True),
    ],
)
def test_the_format_name_finder_sees(tmp_path: Path, source: str, names: bool) -> None:
    module = tmp_path / "m.py"
    module.write_text(source)

    assert _names_the_format(module) is names


MAX_CLASS_LINES = 300


def test_no_class_is_over_300_lines() -> None:
    """A class that grows past this holds more than one role: split it along the roles that exist (the
    applier's lake state and schema merge, the bootstrap's partition copy)."""
    paths = [*_core_modules(), *sorted(BOOTSTRAP.rglob("*.py"))]
    sizes = {
        f"{path.relative_to(ROOT).as_posix()}::{node.name}": node.end_lineno - node.lineno + 1
        for path in paths
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None
    }

    assert sizes and max(sizes.values()) > 100, "the class finder sees the classes"
    assert {name: size for name, size in sizes.items() if size > MAX_CLASS_LINES} == {}
