"""The import graph of the nlpbench package, read from its source: every import a module can run.

    python tests/import_graph.py          (or python -m tests.import_graph) prints the figures and the cycles

An edge A -> B is any import of B that A can run, wherever it stands:
  - `import x` and `from x import y` at module level, inside functions, methods, `try` and `if` blocks
    (relative imports resolved; `from p import m` is an import of the module p.m where one exists);
  - `importlib.import_module(...)`: a string literal, an f-string (every module its literal parts match), or a
    name (every module a string literal of the same file names, as "pkg.mod" or "pkg.mod:attr": the registry's
    table of family modules is such a mapping);
  - the package of an imported module when its __init__.py imports something itself (Python runs it first).
Imports under `if TYPE_CHECKING:` never run and are left out.
"""

from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "nlpbench"


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    how: str          # "module" (runs at import time) | "function" (runs when the function does) | "importlib"
    line: int


@dataclass
class Graph:
    modules: set[str]
    edges: list[Edge] = field(default_factory=list)

    def pairs(self) -> set[tuple[str, str]]:
        return {(e.source, e.target) for e in self.edges}

    def successors(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {m: set() for m in self.modules}
        for a, b in self.pairs():
            out[a].add(b)
        return out

    def cycles(self) -> list[list[str]]:
        return elementary_cycles(self.successors())


def module_name(path: Path, src: Path = SRC) -> str:
    return ".".join(path.relative_to(src).with_suffix("").parts).removesuffix(".__init__")


def modules_of(src: Path = SRC, root: str = ROOT) -> dict[str, Path]:
    return {module_name(p, src): p for p in sorted((src / root).rglob("*.py"))}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _walk(tree: ast.AST):
    """Every node with whether it runs at import time (outside any function body); TYPE_CHECKING blocks skipped."""
    def visit(node: ast.AST, top: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for n in child.orelse:
                    yield from visit_one(n, top)
                continue
            yield from visit_one(child, top)

    def visit_one(node: ast.AST, top: bool):
        yield node, top
        inner = top and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from visit(node, inner)

    yield from visit(tree, True)


def _resolve(name: str, modules: set[str]) -> str | None:
    """The deepest existing module a dotted name starts with (a name may end in a class or function)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _importlib_targets(call: ast.Call, strings: list[str], modules: set[str]) -> set[str]:
    if not call.args:
        return set()
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return {m for m in [_resolve(arg.value, modules)] if m}
    if isinstance(arg, ast.JoinedStr):
        pattern = "".join(re.escape(v.value) if isinstance(v, ast.Constant) else r"[\w.]+" for v in arg.values)
        return {m for m in modules if re.fullmatch(pattern, m)}
    named = set()      # a name or an expression: the modules the file's own string literals name
    for s in strings:
        head = s.split(":", 1)[0]
        if head in modules:
            named.add(head)
    return named


def imports_of(path: Path, name: str, modules: set[str], root: str = ROOT) -> list[Edge]:
    """Every import of an nlpbench module in one file, as edges (self-imports left out)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    out: list[Edge] = []

    def add(target: str | None, top: bool, line: int, how: str | None = None) -> None:
        if target and target != name and (target == root or target.startswith(root + ".")):
            out.append(Edge(name, target, how or ("module" if top else "function"), line))

    for node, top in _walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(_resolve(alias.name, modules), top, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                add(sub if sub in modules else _resolve(mod, modules), top, node.lineno)
        elif isinstance(node, ast.Call):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr == "import_module") or \
                    (isinstance(f, ast.Name) and f.id == "import_module"):
                for target in _importlib_targets(node, strings, modules):
                    add(target, top, node.lineno, "importlib")
    return out


def build(src: Path = SRC, root: str = ROOT) -> Graph:
    files = modules_of(src, root)
    modules = set(files)
    graph = Graph(modules)
    for name, path in files.items():
        graph.edges += imports_of(path, name, modules, root)
    # a package whose __init__ imports something runs first for every import of a module inside it
    busy = {m for m in modules if files[m].name == "__init__.py" and any(e.source == m for e in graph.edges)}
    implicit = []
    for e in graph.edges:
        parts = e.target.split(".")
        for i in range(1, len(parts)):
            pkg = ".".join(parts[:i])
            if pkg in busy and pkg != e.source and not e.source.startswith(pkg + "."):
                implicit.append(Edge(e.source, pkg, e.how, e.line))
    graph.edges += implicit
    return graph


def elementary_cycles(succ: dict[str, set[str]], limit: int = 1000) -> list[list[str]]:
    """The simple cycles of a graph (each once, starting at its smallest module), at most `limit` of them."""
    found: list[list[str]] = []
    nodes = sorted(succ)
    index = {n: i for i, n in enumerate(nodes)}
    for start in nodes:            # cycles whose smallest node is `start`: a depth-first search above it
        stack, path, on_path = [(start, iter(sorted(succ[start])))], [start], {start}
        while stack and len(found) < limit:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                on_path.discard(path.pop())
            elif nxt == start:
                found.append(path + [start])
            elif index[nxt] > index[start] and nxt not in on_path:
                stack.append((nxt, iter(sorted(succ[nxt]))))
                path.append(nxt)
                on_path.add(nxt)
    return found


def figures(graph: Graph) -> dict:
    pairs = graph.pairs()
    by_how = {how: {(e.source, e.target) for e in graph.edges if e.how == how}
              for how in ("module", "function", "importlib")}
    return {"modules": len(graph.modules), "edges": len(pairs),
            "edges at module level": len(by_how["module"]),
            "edges only inside functions": len(by_how["function"] - by_how["module"]),
            "edges through importlib": len(by_how["importlib"]),
            "cycles": len(graph.cycles())}


def main(argv: list[str] | None = None) -> int:
    src = Path(argv[0]) if argv else SRC
    graph = build(src)
    for key, value in figures(graph).items():
        print(f"{key}: {value}")
    for cycle in graph.cycles():
        print("cycle: " + " -> ".join(m.removeprefix(ROOT + ".") for m in cycle))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
