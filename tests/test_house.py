"""House rules of the code that no other test keeps: what a family leaves to the core."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "nlpbench"
# the model families and the timing package, which answers the same interface
FAMILIES = ("acvi", "dmn", "memnet", "squad", "textgen", "timing")
INDEX = "nlpbench.results_index"


def imported_modules(path: Path, root: Path = PACKAGE.parent) -> list[tuple[int, str]]:
    """(line, dotted name) of everything the module at `path` under `root` imports, at any depth (a function's own
    imports too); `from a import b` names both a and a.b, since b may be a module."""
    package = list(path.relative_to(root).parts[:-1])
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out += [(node.lineno, module)] + [(node.lineno, f"{module}.{a.name}") for a in node.names]
    return out


def index_imports(path: Path, root: Path = PACKAGE.parent) -> list[int]:
    """The lines of the module at `path` that import nlpbench.results_index."""
    return sorted({line for line, name in imported_modules(path, root)
                   if name == INDEX or name.startswith(INDEX + ".")})


@pytest.mark.parametrize("family", FAMILIES)
def test_no_family_writes_the_results_index_itself(family):
    """A family's output returns its OutputPage and nlpbench.build writes the index sidecar from it: no module of
    a family imports nlpbench.results_index."""
    modules = sorted((PACKAGE / family).rglob("*.py"))
    assert modules, f"no modules under {PACKAGE / family}"
    bad = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in modules for line in index_imports(path)]
    assert not bad, f"imports {INDEX}: " + ", ".join(bad)


def test_the_rule_sees_every_way_of_importing_the_index(tmp_path):
    module = tmp_path / "nlpbench" / "fam" / "x.py"
    module.parent.mkdir(parents=True)
    module.write_text("from nlpbench import results_index\n"
                      "from nlpbench.results_index import register_output\n"
                      "def f():\n"
                      "    import nlpbench.results_index\n"
                      "from .. import results_index as ri\n"
                      "from nlpbench import results_indexer, io\n")
    assert index_imports(module, tmp_path) == [1, 2, 4, 5]
