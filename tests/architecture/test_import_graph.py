"""The package's arrows point one way: a package imports only those below it.

Every ``import`` in ``mcfl_chain/`` (function-local ones included) is read with ``ast``
and mapped to the sub-package it names; the graph must respect ``ALLOWED`` and have no
cycle. Adding a package means placing it in ``ALLOWED`` first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "mcfl_chain"

# Each package and the packages it may import. The leaves (algorithms, learning,
# storage) know nothing of the chain; chain knows nothing of the DAG, the worker or
# the simulator; the DAG knows nothing of the worker; the CLI sits on top of all.
ALLOWED: dict[str, set[str]] = {
    "_utils": set(),
    "algorithms": set(),
    "learning": {"_utils"},
    "compute": {"learning"},
    "storage": {"_utils"},
    "chain": {"_utils"},
    "dag": {"chain", "algorithms", "learning", "storage", "_utils"},
    "strategies": {"algorithms", "_utils"},
    "adversaries": {"learning", "storage", "algorithms"},
    "worker": {
        "compute",
        "dag",
        "chain",
        "learning",
        "storage",
        "strategies",
        "algorithms",
        "adversaries",
        "_utils",
    },
    "host": {"worker", "compute", "chain", "dag", "learning", "_utils"},
    "explorer": {"dag", "chain", "learning", "storage", "_utils"},
    "simulation": {
        "algorithms",
        "host",
        "compute",
        "worker",
        "dag",
        "chain",
        "learning",
        "storage",
        "strategies",
        "adversaries",
        "_utils",
    },
    "cli": {
        "host",
        "compute",
        "worker",
        "simulation",
        "explorer",
        "dag",
        "chain",
        "learning",
        "storage",
        "strategies",
        "algorithms",
        "adversaries",
        "_utils",
    },
}
ROOT_MODULES = {"__init__", "__main__"}
"""Modules at the package root: the version and ``python -m mcfl_chain``."""


def _package_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imported_packages(path: Path) -> set[str]:
    """Sub-packages of ``mcfl_chain`` that the module at ``path`` imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise AssertionError(f"{path}: relative import; write mcfl_chain.<package>")
            module = node.module or ""
            names.add(module)
            if module == "mcfl_chain":  # `from mcfl_chain import worker`, not `__version__`
                names.update(
                    f"mcfl_chain.{alias.name}"
                    for alias in node.names
                    if (PACKAGE / alias.name).is_dir()
                )
    return {n.split(".")[1] for n in names if n.startswith("mcfl_chain.")}


def import_graph() -> dict[str, dict[str, set[str]]]:
    """package -> imported package -> the modules (relative paths) that import it."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _package_of(path)
        for target in _imported_packages(path):
            if target != source:
                graph.setdefault(source, {}).setdefault(target, set()).add(
                    str(path.relative_to(PACKAGE.parent))
                )
    return graph


def test_every_package_is_placed():
    # Prepare
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in PACKAGE.glob("*.py")}

    # Assert
    assert packages - ALLOWED.keys() == set(), "place new packages in ALLOWED"
    assert modules <= ROOT_MODULES, f"modules at the package root: {modules - ROOT_MODULES}"


def test_packages_import_only_those_below_them():
    # Execute
    graph = import_graph()

    # Assert
    wrong = [
        f"{source} -> {target} in {', '.join(sorted(where))}"
        for source, targets in graph.items()
        if source not in ROOT_MODULES
        for target, where in targets.items()
        if target not in ALLOWED[source]
    ]
    assert wrong == []


def test_the_allowed_graph_has_no_cycle():
    # Execute: a depth-first search for a back edge.
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(ALLOWED.get(node, ())):
            if state.get(nxt) == 1:
                return [*trail, node, nxt]
            if nxt not in state and (cycle := visit(nxt, [*trail, node])):
                return cycle
        state[node] = 2
        return None

    cycles = [c for n in sorted(ALLOWED) if n not in state and (c := visit(n, []))]

    # Assert
    assert cycles == []


@pytest.mark.parametrize(
    "source, target",
    [
        ("chain", "dag"),
        ("dag", "worker"),
        ("chain", "worker"),
        ("learning", "chain"),
        ("algorithms", "chain"),
        ("storage", "chain"),
    ],
)
def test_the_rules_of_the_issue_hold(source, target):
    assert target not in ALLOWED[source]


def test_the_checker_sees_a_forbidden_import(tmp_path):
    # Prepare: a module of the chain package that imports the DAG, as chain/gas.py did.
    module = tmp_path / "mcfl_chain" / "chain" / "bad.py"
    module.parent.mkdir(parents=True)
    module.write_text("def f():\n    from mcfl_chain.dag.model_id import ROOT_MODEL_ID\n")

    # Execute
    found = _imported_packages(module)

    # Assert
    assert found == {"dag"} and "dag" not in ALLOWED["chain"]
