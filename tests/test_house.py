"""House rules of the code that no other test keeps: what a family leaves to the core."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "nlpbench"
# the model families and the timing package, which answers the same interface
FAMILIES = ("acvi", "dmn", "memnet", "squad", "textgen", "timing")
INDEX = "nlpbench.results.results_index"


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
    """The lines of the module at `path` that import nlpbench.results.results_index."""
    return sorted({line for line, name in imported_modules(path, root)
                   if name == INDEX or name.startswith(INDEX + ".")})


@pytest.mark.parametrize("family", FAMILIES)
def test_no_family_writes_the_results_index_itself(family):
    """A family's output returns its OutputPage and nlpbench.results.build writes the index sidecar from it: no module of
    a family imports nlpbench.results.results_index."""
    modules = sorted((PACKAGE / family).rglob("*.py"))
    assert modules, f"no modules under {PACKAGE / family}"
    bad = [f"{path.relative_to(PACKAGE.parent)}:{line}" for path in modules for line in index_imports(path)]
    assert not bad, f"imports {INDEX}: " + ", ".join(bad)


def test_the_rule_sees_every_way_of_importing_the_index(tmp_path):
    module = tmp_path / "nlpbench" / "fam" / "x.py"
    module.parent.mkdir(parents=True)
    module.write_text("from nlpbench.results import results_index\n"
                      "from nlpbench.results.results_index import register_output\n"
                      "def f():\n"
                      "    import nlpbench.results.results_index\n"
                      "from ..results import results_index as ri\n"
                      "from nlpbench.results import results_indexer, io\n")
    assert index_imports(module, tmp_path) == [1, 2, 4, 5]


def _edges():
    import import_graph
    return import_graph.build(PACKAGE.parent).edges


def test_the_runtime_wing_knows_no_table_and_no_family():
    """What a running job needs (files, runs, checkpoints, clocks, devices) imports only its own wing, the
    configuration and the prepared-data checks: never the results wing, the plan or a family."""
    allowed = ("nlpbench.runtime", "nlpbench.config", "nlpbench.data.prepared")
    bad = [f"{e.source} -> {e.target} (line {e.line})" for e in _edges()
           if e.source.startswith("nlpbench.runtime.") and e.target.startswith("nlpbench.")
           and not any(e.target == a or e.target.startswith(a + ".") for a in allowed)]
    assert not bad, bad


def test_the_results_wing_imports_no_family_module():
    """The results wing meets families only through the family interface (nlpbench.family, nlpbench.registry)."""
    bad = [f"{e.source} -> {e.target} (line {e.line})" for e in _edges()
           if e.source.startswith("nlpbench.results.") and e.target.split(".")[1:2] in ([f] for f in FAMILIES)]
    assert not bad, bad
