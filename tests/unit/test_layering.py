"""The package layering, read from the source with ``ast``, so that it cannot regress unnoticed.

- ``bootstrap/`` and ``connectors/`` depend on ``cdc_lake``, never the reverse, not even in a function:
  the command line starts the bootstrap stage through the ``cdc_lake.stages`` entry point it registers
  (``cdc_lake/cli/stages.py``).
- The subpackages of ``cdc_lake`` import each other without a cycle (imports at module level, as they
  run when a module is loaded; imports under ``if TYPE_CHECKING`` do not run).
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

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "cdc_lake"
BOOTSTRAP = ROOT / "bootstrap"
JVM_GATEWAY_USERS = ("cdc_lake/hudi/", "cdc_lake/spark/", "cdc_lake/catalog/hive.py")
"""Where Spark's JVM gateway (``_jvm``) may be used; everything else asks these modules."""


def _imported(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
        yield node.module


def _all_imports(path: Path) -> set[str]:
    """Every module ``path`` imports anywhere (module level, functions, TYPE_CHECKING blocks)."""
    return {
        name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) for name in _imported(node)
    }


def _load_time_imports(path: Path) -> set[str]:
    """The modules ``path`` imports when it is loaded (not inside functions or ``if TYPE_CHECKING``)."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse)
            elif isinstance(node, ast.If | ast.Try | ast.With):
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
        if module.split(".")[0] in ("bootstrap", "connectors")
    }

    assert reverse == set(), f"cdc_lake must not import bootstrap/ or connectors/: {sorted(reverse)}"


def test_the_import_finder_sees_a_deferred_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f() -> None:\n    from bootstrap.run import bootstrap_tables\n")

    assert "bootstrap.run" in _all_imports(module)


def _subpackage_graph() -> dict[str, set[str]]:
    subpackages = {path.name for path in CORE.iterdir() if (path / "__init__.py").is_file()}
    graph: dict[str, set[str]] = {name: set() for name in subpackages}
    for path in _core_modules():
        parts = path.relative_to(CORE).parts
        if len(parts) < 2:
            continue  # a module of cdc_lake itself (config, exceptions, ...): a leaf every package may use
        for module in _load_time_imports(path):
            target = module.split(".")
            if (
                target[0] == "cdc_lake"
                and len(target) > 1
                and target[1] in subpackages
                and target[1] != parts[0]
            ):
                graph[parts[0]].add(target[1])
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


def test_cdc_lake_subpackages_import_each_other_without_a_cycle() -> None:
    graph = _subpackage_graph()

    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def _imports_of_subpackage(name: str) -> set[str]:
    return {module for path in sorted((CORE / name).rglob("*.py")) for module in _all_imports(path)}


def test_the_cycles_fixed_by_issue_9_stay_fixed() -> None:
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
    stages = ("cdc_lake.apply", "bootstrap")
    found = {
        m for m in _imports_of_subpackage("lake") if any(m == s or m.startswith(f"{s}.") for s in stages)
    }

    assert found == set(), sorted(found)


def test_jvm_calls_stay_behind_the_hudi_and_spark_packages() -> None:
    """A meta client or a ``hoodie.properties`` read outside ``cdc_lake/hudi`` duplicates what it has."""
    paths = [*CORE.rglob("*.py"), *BOOTSTRAP.rglob("*.py"), *(ROOT / "connectors").rglob("*.py")]
    users = {
        path.relative_to(ROOT).as_posix()
        for path in paths
        if "_jvm" in path.read_text(encoding="utf-8")
    }

    assert {u for u in users if not u.startswith(JVM_GATEWAY_USERS)} == set()


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_no_top_level_module_of_cdc_lake_shadows_the_standard_library() -> None:
    """spark-submit runs ``cdc_lake/__main__.py`` as a script, which puts ``cdc_lake/`` first on
    ``sys.path``: a ``cdc_lake/http.py`` there hid the standard ``http`` package from every import."""
    package = Path(__file__).resolve().parents[2] / "cdc_lake"
    names = {p.stem for p in package.glob("*.py")} | {p.name for p in package.iterdir() if p.is_dir()}
    assert not names & set(sys.stdlib_module_names), sorted(names & set(sys.stdlib_module_names))


STAGES = {
    "cdc_lake.onboard": CORE / "onboard",
    "bootstrap": BOOTSTRAP,
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
