"""Judge committed tables again from the cells they store, without retraining: `nlpbench judge`.

A table's verdicts (each cell within our noise or not, the table's status, its claims) depend only on its cells,
the printed numbers and the judging rule (nlpbench.results.judging), so when the rule, an ε, a unit or a claim changes, the
tables are judged again from what `results/` holds: the cells, their per-seed values and the provenance stay as
trained; the status, the Claims section, the CSV's noise column and the JSON's verdicts are rewritten.

A table's JSON sidecar stores its cells; one written before it did is refused with the command that rebuilds it,
and one that is not what the build wrote (truncated, a key missing, a value of the wrong kind) with the file and
the key. Every table named is read and judged before any file is written, so a bad one leaves all of them as they
were. A CSV that differs from the one its JSON was written with (edited by hand) is not overwritten without
--force (docs/tables.md).
"""

from __future__ import annotations

import csv
import warnings
from pathlib import Path

from nlpbench import config, registry
from nlpbench.config import ConfigError
from nlpbench.family import drawn_figures
from nlpbench.results import build, notes, tables
from nlpbench.results.cells import TableCells
from nlpbench.results.json_shape import NUMBER, Checker
from nlpbench.runtime import io


def stored(results_dir: Path, source: str, name: str) -> tuple[dict, dict, list[tables.Cell], list[str]]:
    """(sidecar, display, cells, notes) of a committed table; InputError naming the file (and the key) when it
    cannot be read."""
    base = Path(results_dir) / source
    path = base / f"{name}.json"
    if not path.is_file():
        raise ConfigError(f"{path}: no committed table to judge (build it first: `nlpbench table {source} {name}`)")
    side = io.read_json(path)
    if isinstance(side, dict) and "cells" not in side:
        raise ConfigError(f"{path}: written before a table's JSON stored its cells, so it cannot be judged from its "
                          f"files; build it again (`nlpbench table {source} {name}`, or its Snakemake rule)")
    check = Checker(path, f"restore it (`git checkout {path}`) or build it again (`nlpbench table {source} {name}`)")
    check.mapping(side, "", {"title": str, "status": str, "cells": list, "display": dict},
                  optional={"provenance": (dict, type(None)), "notes": (list, type(None))})
    display = side["display"]
    check.mapping(display, "display", {"rows": list, "columns": list, "decimals": int, "mean_row": bool,
                                       "pass_threshold": (*NUMBER, type(None))})
    for key in ("rows", "columns"):
        check.items(display[key], f"display.{key}", str)
    check.items(side.get("notes") or [], "notes", str)
    cells = []
    for i, c in enumerate(side["cells"]):
        where = f"cells[{i}]"
        check.mapping(c, where, {"row": str, "column": str, "reproduced": (*NUMBER, type(None)), "status": str,
                                 "detail": str}, optional={"seeds": (list, type(None)), "still_learning": list})
        for j, pair in enumerate(c.get("seeds") or []):
            check.value(pair, f"{where}.seeds[{j}]", list)
            if len(pair) != 2:
                check.fail(f"{where}.seeds[{j}]", f"expected [seed, value], found {pair!r:.60}")
            check.value(pair[0], f"{where}.seeds[{j}][0]", int)
            check.value(pair[1], f"{where}.seeds[{j}][1]", NUMBER)
        check.items(c.get("still_learning") or [], f"{where}.still_learning", int)
        seeds = {k: float(v) for k, v in c["seeds"]} if c.get("seeds") else None
        cells.append(tables.Cell(c["row"], c["column"], c["reproduced"], c["status"], c["detail"], seeds,
                                 tuple(c.get("still_learning") or ())))
    return side, display, cells, list(side.get("notes") or [])


def _scale_params(params_path: Path, scale: str, cache: dict) -> dict:
    if scale not in cache:
        cache[scale] = registry.load(params_path, {"scale": scale})
    return cache[scale]


def judge_table(params_path: Path, results_dir: Path, source: str, name: str,
                cache: dict) -> tuple[dict, tables.TableResult]:
    """Judge one committed table again from its stored cells; returns (its sidecar as stored, the table judged
    again). Nothing is written here."""
    side, display, cells, kept = stored(results_dir, source, name)
    path = Path(results_dir) / source / f"{name}.json"
    scale = str((side.get("provenance") or {}).get("scale", "cpu")).split(" ", 1)[0]   # "cpu (what it means here)"
    params = _scale_params(params_path, scale, cache)
    d = config.declaration(params, "tables", source, name)
    spec = tables.TableSpec(source, name, side["title"], display["rows"], display["columns"], display["decimals"],
                            display["pass_threshold"], display["mean_row"], rules=build.rules(d, params),
                            figures=drawn_figures(d.decl, Path(results_dir) / source))
    try:
        result = tables.build_table(spec, cells, side.get("provenance") or {}, kept)
    except ValueError as e:            # a cell outside the table's rows and columns, twice, or of an unknown status
        raise io.InputError(f"{path}: {e}; restore it (`git checkout {path}`) or build it again "
                            f"(`nlpbench table {source} {name}`)") from None
    if d.decl.get("claims"):
        table_cells = TableCells(source)
        table_cells.add(name, spec.rows, spec.columns, cells, spec.decimals, spec.pass_threshold)
        for other in notes.referenced_tables(d.decl, name):
            _, o_display, o_cells, _ = stored(results_dir, source, other)
            table_cells.add(other, o_display["rows"], o_display["columns"], o_cells, o_display["decimals"],
                            o_display["pass_threshold"])
        result.claims = build.declared_claims(d, table_cells, result)
    return side, result


def edited_csv(results_dir: Path, source: str, name: str, side: dict, result: tables.TableResult) -> Path | None:
    """The table's CSV when it is not the one its JSON was written with (edited by hand), else None. A JSON that
    records the CSV's digest is compared by it; an older one by the CSV its cells give, less the noise column
    (the judge's own)."""
    path = Path(results_dir) / source / f"{name}.csv"
    if not path.is_file():
        return None
    on_disk = path.read_bytes()
    if "csv_sha256" in side:
        return None if tables.csv_digest(on_disk) == side["csv_sha256"] else path
    try:
        text = on_disk.decode("utf-8")
    except UnicodeDecodeError:
        return path
    return None if _without_noise(text) == _without_noise(tables.render_csv(result)) else path


def _without_noise(csv_text: str) -> list[list[str]]:
    rows = list(csv.reader(csv_text.splitlines(keepends=True)))
    if not rows or "noise" not in rows[0]:
        return rows
    at = rows[0].index("noise")
    return [r[:at] + r[at + 1:] for r in rows]


def committed(params: dict, results_dir: Path) -> list[tuple[str, str]]:
    """Every declared table with a committed sidecar, in declaration order."""
    return [(d.source, d.name) for d in config.declared(params, "tables")
            if (Path(results_dir) / d.source / f"{d.name}.json").is_file()]


def judge_all(params_path: Path, params: dict, results_dir: Path, which: list[str] | None = None,
              force: bool = False) -> list[tuple]:
    """Judge the named tables ("source/name"), or every committed one; returns (source, name, old, new). Every
    table is judged before any is written; a CSV edited by hand stops it (InputError naming the files) unless
    `force`, when it is overwritten with a warning."""
    targets = committed(params, results_dir)
    if which:
        known = {f"{s}/{n}": (s, n) for s, n in targets}
        missing = [w for w in which if w not in known]
        if missing:
            raise ConfigError(f"nlpbench judge: no committed table {missing[0]!r} under {results_dir}/ "
                              f"(committed: {', '.join(known)})")
        targets = list(dict.fromkeys(known[w] for w in which))
    cache = {params["scale"]: params}
    judged = []
    for source, name in targets:
        side, result = judge_table(params_path, results_dir, source, name, cache)
        judged.append((source, name, side["status"], result, edited_csv(results_dir, source, name, side, result)))
    edited = [str(e) for *_, e in judged if e is not None]
    if edited and not force:
        raise io.InputError(f"{', '.join(edited)}: not the CSV {'its' if len(edited) == 1 else 'their'} JSON was "
                            "written with (edited by hand?), so nothing was judged or written; keep a copy of the "
                            "edit, then run again with --force to overwrite it")
    for path in edited:
        warnings.warn(f"{path} was edited by hand (not the CSV its JSON was written with); overwritten (--force)")
    with io.staged(results_dir) as stage:
        for *_, result, _ in judged:
            tables.write_table(result, stage)
    if not which:                    # and the claims of every built output that declares some (benchmarks, dofs)
        for d in config.declared(params, "outputs"):
            build.judge_output_claims(d, results_dir, params)
    return [(source, name, old, result.status) for source, name, old, result, _ in judged]
