"""The import graph of nlpbench (tests/import_graph.py): no cycle, function-level and importlib imports
included, and no family reaching up to the orchestrator or to the measurements of itself."""

from __future__ import annotations

import textwrap
from pathlib import Path

import import_graph
import pytest

from nlpbench import registry

FAMILY_PACKAGES = ("memnet", "dmn", "squad", "textgen", "acvi")
# what a family must never import: the orchestrator and the measurements, which depend on the families
ABOVE_THE_FAMILIES = ("nlpbench.plan", "nlpbench.status", "nlpbench.end_to_end", "nlpbench.timing")


def test_no_import_cycles_between_modules():
    cycles = import_graph.build().cycles()
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_no_family_imports_the_orchestrator_or_the_timing_package():
    assert set(FAMILY_PACKAGES) == set(registry.FAMILIES) - {"timing"}
    bad = [f"{e.source} imports {e.target} (line {e.line}, {e.how})" for e in import_graph.build().edges
           if e.source.split(".")[1:2] and e.source.split(".")[1] in FAMILY_PACKAGES
           and any(e.target == m or e.target.startswith(m + ".") for m in ABOVE_THE_FAMILIES)]
    assert not bad, "\n".join(bad)


def test_the_registry_is_read_through_its_table_of_family_modules():
    edges = {(e.source, e.target, e.how) for e in import_graph.build().edges}
    for spec in registry.FAMILIES.values():
        assert ("nlpbench.registry", spec.split(":")[0], "importlib") in edges


# -- the graph sees every import a module can run ----------------------------------------------------------

def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "nlpbench" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


BASE = {"__init__.py": "", "a.py": "from nlpbench import b\n", "fam/__init__.py": "", "fam/x.py": "X = 1\n",
        "b.py": "import os\n"}


@pytest.mark.parametrize("closing, how", [
    ("def f():\n    from nlpbench import a\n", "function"),                        # inside a function
    ("class C:\n    def m(self):\n        import nlpbench.a\n", "function"),     # inside a method
    ("try:\n    from . import a\nexcept ImportError:\n    pass\n", "module"),      # relative, in a try block
    ("import importlib\ndef f():\n    return importlib.import_module('nlpbench.a')\n", "importlib"),
    ("import importlib\ndef f(n):\n    return importlib.import_module(f'nlpbench.{n}')\n", "importlib"),
    ("import importlib\nT = {'x': 'nlpbench.a:thing'}\n"
     "def f(k):\n    return getattr(importlib.import_module(T[k].split(':')[0]), 'thing')\n", "importlib"),
])
def test_a_cycle_closed_by_any_kind_of_import_is_found(tmp_path, closing, how):
    src = _package(tmp_path, {**BASE, "b.py": closing})
    graph = import_graph.build(src)
    assert ["nlpbench.a", "nlpbench.b", "nlpbench.a"] in graph.cycles()
    assert how in {e.how for e in graph.edges if e.source == "nlpbench.b" and e.target == "nlpbench.a"}


def test_an_import_that_never_runs_is_no_edge(tmp_path):
    src = _package(tmp_path, {**BASE, "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                              "    from nlpbench import a\n"})
    assert import_graph.build(src).cycles() == []


def test_a_package_that_imports_on_init_is_an_edge_of_its_modules_importers(tmp_path):
    src = _package(tmp_path, {**BASE, "fam/__init__.py": "from nlpbench import a\n",
                              "b.py": "from nlpbench.fam.x import X\n"})
    assert ["nlpbench.a", "nlpbench.b", "nlpbench.fam", "nlpbench.a"] in import_graph.build(src).cycles()


def test_the_figures_count_modules_edges_and_cycles(tmp_path, capsys):
    src = _package(tmp_path, {**BASE, "b.py": "def f():\n    from nlpbench import a\n"})
    figures = import_graph.figures(import_graph.build(src))
    assert figures == {"modules": 5, "edges": 2, "edges at module level": 1, "edges only inside functions": 1,
                       "edges through importlib": 0, "cycles": 1}
    import_graph.main([str(src)])
    assert "cycle: a -> b -> a" in capsys.readouterr().out
