"""Judge committed tables again from the cells they store, without retraining: `nlpbench judge`.

A table's verdicts (each cell within our noise or not, the table's status, its claims) depend only on its cells,
the printed numbers and the judging rule (nlpbench.judging), so when the rule, an ε, a unit or a claim changes, the
tables are judged again from what `results/` holds: the cells, their per-seed values and the provenance stay as
trained; the status, the Claims section, the CSV's noise column and the JSON's verdicts are rewritten.

A table's JSON sidecar stores its cells; one written before it did is refused with the command that rebuilds it.
"""

from __future__ import annotations

from pathlib import Path

from nlpbench import build, config, io, notes, registry, tables
from nlpbench.config import ConfigError
from nlpbench.family import drawn_figures


def stored(results_dir: Path, source: str, name: str) -> tuple[dict, dict, list[tables.Cell], list[str]]:
    """(sidecar, display, cells, notes) of a committed table; ConfigError naming the file when it cannot be read."""
    base = Path(results_dir) / source
    path = base / f"{name}.json"
    if not path.is_file():
        raise ConfigError(f"{path}: no committed table to judge (build it first: `nlpbench table {source} {name}`)")
    side = io.read_json(path)
    if "cells" in side:
        cells = [tables.Cell(c["row"], c["column"], c["reproduced"], c["status"], c["detail"],
                             {int(k): float(v) for k, v in c["seeds"]} if c.get("seeds") else None)
                 for c in side["cells"]]
        return side, side["display"], cells, list(side.get("notes") or [])
    raise ConfigError(f"{path}: written before a table's JSON stored its cells, so it cannot be judged from its "
                      f"files; build it again (`nlpbench table {source} {name}`, or its Snakemake rule)")


def _scale_params(params_path: Path, scale: str, cache: dict) -> dict:
    if scale not in cache:
        cache[scale] = registry.load(params_path, {"scale": scale})
    return cache[scale]


def judge_table(params_path: Path, results_dir: Path, source: str, name: str, cache: dict) -> tuple[str, str]:
    """Judge one committed table again and rewrite its files; returns (old status, new status)."""
    side, display, cells, kept = stored(results_dir, source, name)
    scale = str(side.get("provenance", {}).get("scale", "cpu")).split(" ", 1)[0]   # "cpu (what it means here)"
    params = _scale_params(params_path, scale, cache)
    d = config.declaration(params, "tables", source, name)
    spec = tables.TableSpec(source, name, side["title"], display["rows"], display["columns"], display["decimals"],
                            display["pass_threshold"], display["mean_row"], rules=build.rules(d, params),
                            figures=drawn_figures(d.decl, Path(results_dir) / source))
    result = tables.build_table(spec, cells, side.get("provenance") or {}, kept)
    if d.decl.get("claims"):
        table_cells = notes.TableCells(source)
        table_cells.add(name, spec.rows, spec.columns, cells, spec.decimals)
        for other in notes.referenced_tables(d.decl, name):
            _, o_display, o_cells, _ = stored(results_dir, source, other)
            table_cells.add(other, o_display["rows"], o_display["columns"], o_cells, o_display["decimals"])
        result.claims = build.declared_claims(d, table_cells, result)
    with io.staged(results_dir) as stage:
        tables.write_table(result, stage)
    return side["status"], result.status


def committed(params: dict, results_dir: Path) -> list[tuple[str, str]]:
    """Every declared table with a committed sidecar, in declaration order."""
    return [(d.source, d.name) for d in config.declared(params, "tables")
            if (Path(results_dir) / d.source / f"{d.name}.json").is_file()]


def judge_all(params_path: Path, params: dict, results_dir: Path, which: list[str] | None = None) -> list[tuple]:
    """Judge the named tables ("source/name"), or every committed one; returns (source, name, old, new)."""
    targets = committed(params, results_dir)
    if which:
        known = {f"{s}/{n}": (s, n) for s, n in targets}
        missing = [w for w in which if w not in known]
        if missing:
            raise ConfigError(f"nlpbench judge: no committed table {missing[0]!r} under {results_dir}/ "
                              f"(committed: {', '.join(known)})")
        targets = [known[w] for w in which]
    cache = {params["scale"]: params}
    judged = [(s, n, *judge_table(params_path, results_dir, s, n, cache)) for s, n in targets]
    if not which:                    # and the claims of every built output that declares some (benchmarks, dofs)
        for d in config.declared(params, "outputs"):
            build.judge_output_claims(d, results_dir)
    return judged
