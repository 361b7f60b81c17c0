"""Judge committed tables again from the cells they store, without retraining: `nlpbench judge`.

A table's verdicts (each cell within our noise or not, the table's status, its claims) depend only on its cells,
the printed numbers and the judging rule (nlpbench.judging), so when the rule, an ε, a unit or a claim changes, the
tables are judged again from what `results/` holds: the cells, their per-seed values and the provenance stay as
trained; the status, the Claims section, the CSV's noise column and the JSON's verdicts are rewritten.

A table's JSON sidecar stores its cells. A table written before the sidecar held them is read from its CSV (the
per-seed values from its cell notes, as the families wrote them) and its page (the notes and the display).
"""

from __future__ import annotations

import csv
import io as _io
import re
from pathlib import Path

from nlpbench import build, config, io, notes, paper, registry, tables
from nlpbench.config import ConfigError
from nlpbench.family import drawn_figures

BY_SEED = re.compile(r"by seed ([-\d., ]+)\)")                 # memnet: "... (n=10; by seed 81.9, 82.7, ...)"
PER_SEED = re.compile(r"per seed ([-\d., ]+)$")                # memnet pilots: "...; per seed 81.9, 82.7"
OVER_SEEDS = re.compile(r"over seeds \(((?:\d+: [-\d.]+(?:, )?)+)\)")   # squad: "max over seeds (0: 5.61, 1: 6.76)"
DERIVED = ("mean", "passes")


def _legacy_seeds(detail: str) -> dict[int, float] | None:
    for pattern in (BY_SEED, PER_SEED):
        m = pattern.search(detail)
        if m:
            return {i: float(v) for i, v in enumerate(x.strip() for x in m[1].split(",") if x.strip())}
    m = OVER_SEEDS.search(detail)
    if m:
        return {int(k): float(v) for k, v in (p.split(": ") for p in m[1].split(", "))}
    return None


def _page_section(page: str, heading: str) -> list[str]:
    """The bullet lines of one '## heading' section of a table's page."""
    lines, inside = [], False
    for line in page.splitlines():
        if line.startswith("## "):
            inside = line[3:].strip() == heading
            continue
        if inside and line.startswith("- "):
            lines.append(line[2:])
    return lines


def _page_cells(page: str) -> dict[tuple[str, str], str]:
    """(row, column) -> the reproduced text of the page's results grid."""
    out, header = {}, None
    for line in page.splitlines():
        if not line.startswith("| "):
            header = None if not line.strip() else header
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\) \| ", line.strip()[2:-2])]
        if header is None:
            header = [c[: -len(" (reproduced)")] for c in cells[1::3]]
            continue
        if cells[0].startswith("---") or cells[0].startswith("**"):
            continue
        for j, column in enumerate(header):
            if 1 + 3 * j < len(cells):
                out[(cells[0].replace("\\|", "|"), column.replace("\\|", "|"))] = cells[1 + 3 * j]
    return out


def _legacy(source: str, name: str, csv_text: str, page: str, side: dict) -> tuple[dict, list[tables.Cell], list[str]]:
    """(display, cells, notes) of a table written before its sidecar stored its cells."""
    rows_read = list(csv.DictReader(_io.StringIO(csv_text)))
    grid, derived = rows_read[: side["n_cells"]], rows_read[side["n_cells"]:]
    try:
        ref = {(r["row"], r["column"]): r["note"] for r in paper.reference_cells(source, name)}
    except KeyError:
        ref = {}
    cells = []
    for r in grid:
        detail, ref_note = r["note"], ref.get((r["row"], r["column"]), "")
        if ref_note and (detail == ref_note or detail.startswith(ref_note + "; ")):
            detail = detail[len(ref_note):].removeprefix("; ")
        value = float(r["reproduced"]) if r["reproduced"] and r["status"] == "ok" else None
        cells.append(tables.Cell(r["row"], r["column"], value, r["status"], detail,
                                 _legacy_seeds(detail) if value is not None else None))
    shown = _page_cells(page)
    decimals = 1
    for c in cells:
        text = shown.get((c.row, c.column), "")
        m = re.match(r"-?\d+(?:\.(\d+))?", text)
        if c.reproduced is not None and m:
            decimals = len(m[1] or "")
            break
    threshold = re.search(r"\*\*# ≥ ([\d.]+)%\*\*", page)
    display = {"rows": list(dict.fromkeys(r["row"] for r in grid)),
               "columns": list(dict.fromkeys(r["column"] for r in grid)),
               "decimals": decimals,
               "pass_threshold": float(threshold[1]) if threshold and any(r["row"] == "passes" for r in derived)
               else None,
               "mean_row": any(r["row"] == "mean" for r in derived)}
    stale = set(_auto_notes(display, cells, source, name))
    kept = [n for n in _page_section(page, "Notes") if n not in stale and not n.startswith("Claim (")]
    return display, cells, kept


def _auto_notes(display: dict, cells: list[tables.Cell], source: str, name: str) -> list[str]:
    """The notes build_table generates by itself (so that they are not kept twice)."""
    spec = tables.TableSpec(source, name, "", display["rows"], display["columns"], display["decimals"],
                            display["pass_threshold"], display["mean_row"])
    return tables.build_table(spec, cells, {}, []).auto_notes


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
    display, cells, kept = _legacy(source, name, (base / f"{name}.csv").read_text(encoding="utf-8"),
                                   (base / f"{name}.md").read_text(encoding="utf-8"), side)
    return side, display, cells, kept


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
