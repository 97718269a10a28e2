"""The Python package's structure as docs/architecture.md draws it: imports, module-level
or inside a function, form no cycle, and each goes down the layers (or stays in its own
package), so data flows one way and any layer can be used without the ones above it."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "sojourn"

# Lowest first; a module may import from its own layer's package or from lower layers.
LAYERS = (
    ("sojourn.engine", "sojourn.papers", "sojourn.argtypes"),
    ("sojourn.workloads", "sojourn.testbed"),
    ("sojourn.servers", "sojourn.theory"),
    ("sojourn.analysis",),
    ("sojourn.results", "sojourn.report", "sojourn.plan"),
    ("sojourn.runner",),
    ("sojourn.reproduce", "sojourn.overload"),
    ("sojourn.cli", "sojourn.__init__", "sojourn.__main__"),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def imports_of(path: Path) -> set[str]:
    """The sojourn modules ``path`` imports (``from sojourn.x import y`` names sojourn.x.y
    when that is a module, else sojourn.x)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names if alias.name.startswith("sojourn")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sojourn") and not node.level:
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                is_module = (PACKAGE.parent / Path(*sub.split("."))).with_suffix(".py").is_file() or \
                    (PACKAGE.parent / Path(*sub.split("."))).is_dir()
                names.add(sub if is_module else node.module)
    return names


def graph() -> dict[str, set[str]]:
    """Each module of the package and the package's modules it imports."""
    return {module_name(path): imports_of(path) - {module_name(path)} for path in PACKAGE.rglob("*.py")}


def layer(module: str) -> int:
    for index, prefixes in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    raise AssertionError(f"{module} is in no layer of test_layers.LAYERS: add it where it belongs")


def package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_import_cycle():
    try:
        graphlib.TopologicalSorter(graph()).prepare()
    except graphlib.CycleError as cycle:
        raise AssertionError("import cycle: " + " -> ".join(reversed(cycle.args[1]))) from None


def test_imports_go_down_the_layers():
    upward = [f"{a} -> {b}" for a, targets in graph().items() for b in targets
              if package(a) != package(b) and layer(b) > layer(a)]
    assert not upward, "imports from a lower layer to a higher one: " + ", ".join(sorted(upward))
