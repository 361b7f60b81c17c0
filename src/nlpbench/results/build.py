"""From a family's answers to files under results/: one table (its cells rendered beside the paper's numbers)
or one other output. The one place that writes a table or an output's index sidecar, whatever its family. The
index (results/index.csv and README.md) is written only by `nlpbench index`, so that tables built side by side
never race on it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from nlpbench import config, registry
from nlpbench.config import ConfigError
from nlpbench.family import OutputPage, Paths, declared_figures
from nlpbench.results import claims, judging, notes, paper, results_index, tables
from nlpbench.results.cells import TableCells
from nlpbench.runtime import io

NO_VALUE = ("not_run", "cited", "not_applicable", "paper_only")   # cell statuses that say nothing was trained for the cell


SMOKE_NOTE = ("Scale `smoke`: every rule of the pipeline on a few examples for an epoch or two. These numbers test "
              "the pipeline and mean nothing about the models; the differences from the paper are not results.")


def table(params: dict, source: str, name: str, paths: Paths, allow_empty: bool = False) -> dict[str, Path]:
    """Write results/<source>/<name>.{csv,md,json} (and any figure drawn from the CSV); returns the paths.

    A table none of whose runs exists is not written over an existing one (a committed table, say) unless
    `allow_empty`: that would replace numbers with 'not run' cells."""
    d = config.declaration(params, "tables", source, name)
    io.inside(paths.results, paths.results / source / name)
    parts = registry.get(d.family).table(source, name, params, paths)
    target = paths.results / source / f"{name}.md"
    if not allow_empty and target.exists() and all(c.status in NO_VALUE for c in parts.cells):
        raise ConfigError(f"{target}: nothing trained for this table at scale {params['scale']} (no run under "
                          f"{paths.runs}/ has a result for it), so it was left as it is; train its groups first "
                          "(`nlpbench plan`), or pass --allow-empty to write the empty table")
    spec = dataclasses.replace(parts.spec, rules=rules(d, params), figures=declared_figures(d.decl))
    cells = table_cells(params, d, parts, paths) if d.decl.get("claims") or d.decl.get("notes") else None
    lines = ([SMOKE_NOTE] if params["scale"] == "smoke" else []) + parts.notes + declared_notes(d, cells)
    result = tables.build_table(spec, parts.cells, parts.provenance, lines)
    result.claims = declared_claims(d, cells, result)
    # the table's files land together, or none of them (a full disk never leaves a new CSV beside an old .md)
    with io.staged(paths.results) as stage:
        out = tables.write_table(result, stage)
        for i, draw in enumerate(parts.after):        # figures are drawn from the staged CSV
            drawn = draw(stage)
            if isinstance(drawn, OutputPage):          # a figure the index lists on its own, named after its file
                figure = Path(drawn.files[0])
                write_sidecar(stage, source, figure.stem, drawn, params)
                drawn = stage / source / figure
            out[f"figure{i or ''}"] = drawn
        if (source, name) not in {(r["source"], r["table"]) for r in paper.reference_index()}:
            # an addition the documents never ran: listed in the index as such
            page = OutputPage(d.decl.get("title", name), "study" if d.decl.get("study") else "addition",
                              (out["md"].name, out["csv"].name),
                              f"{result.count('ok')} of {len(result.lines)} cells run")
            write_sidecar(stage, source, name, page, params)
    return {key: paths.results / path.relative_to(stage) for key, path in out.items()}


def table_cells(params: dict, d: config.Declared, parts, paths: Paths) -> TableCells:
    """This table's cells and the printed ones, with those of every table its notes quote or its claims read."""
    cells = TableCells(d.source)
    cells.add(d.name, parts.spec.rows, parts.spec.columns, parts.cells, parts.spec.decimals, parts.spec.pass_threshold)
    for other in notes.referenced_tables(d.decl, d.name):
        o = config.declaration(params, "tables", d.source, other)
        op = registry.get(o.family).table(d.source, other, params, paths)
        cells.add(other, op.spec.rows, op.spec.columns, op.cells, op.spec.decimals, op.spec.pass_threshold)
    return cells


def rules(d: config.Declared, params: dict) -> judging.Rules:
    """How the table is judged at this scale: its declaration's unit, units, epsilon, not_comparable, released rows
    and the cells its claims compare; nothing at the smoke scale is comparable with the documents."""
    r = judging.Rules.from_declaration(d.decl, d.at())
    r = dataclasses.replace(r, claim_cells=tuple(claims.compared_cells(c, d.name) for c in d.decl.get("claims") or []))
    if params["scale"] == "smoke":
        r = dataclasses.replace(r, comparable="the smoke scale runs every rule on a few examples for an epoch or two")
    return r


def declared_notes(d: config.Declared, cells: TableCells | None) -> list[str]:
    """The declaration's notes with their quoted numbers filled in from the cells."""
    return [notes.fill(n, d.name, cells, d.at(f"notes.{i}"))
            for i, n in enumerate(d.decl.get("notes") or [])]


def declared_claims(d: config.Declared, cells: TableCells | None, result: tables.TableResult) -> list[dict]:
    """The declaration's claims, each judged from the cells (nlpbench.results.claims.judged) given the table's status."""
    if not d.decl.get("claims"):
        return []
    claims.check(d.decl["claims"], d.name, cells, d.at("claims"))
    return claims.judged(d.decl["claims"], d.name, cells, result.status, result.count("needs_data") > 0,
                         result.spec.rules.comparable, bool(d.decl.get("claims_testable")),
                         d.decl.get("judged_at_budget"))


def output(params: dict, source: str, name: str, paths: Paths) -> list[Path]:
    """Build one output: its family writes its files under results/<source>/ and describes them, and its sidecar
    results/<source>/<name>.output.json is written from that (its claims judged into it); returns the files, then
    the sidecar."""
    d = config.declaration(params, "outputs", source, name)
    io.inside(paths.results, paths.results / source / name)
    page = registry.get(d.family).output(source, name, params, paths)
    sidecar = write_sidecar(paths.results, source, name, page, params)
    judge_output_claims(d, paths.results, params)
    return [paths.results / source / f for f in page.files] + [sidecar]


def write_sidecar(results: Path, source: str, name: str, page: OutputPage, params: dict) -> Path:
    """Write an output's index sidecar, results/<source>/<name>.output.json, from its page; returns its path."""
    return results_index.register_output(results, source, name, page.title, page.kind, page.files, page.status,
                                         page.scale or params["scale"], page.note)


def studies_only_groups(params: dict, but: str) -> dict[str, list[str]]:
    """group id -> the studies that read it, for every training group that only studies (additions, reading pilots)
    read, not the documents' tables and outputs; `but`: the target being judged ("source/name"), left out."""
    from nlpbench import plan
    planned = plan.make(params)
    documents = {g for t in planned.part(study=False) for g in t.groups}
    out: dict[str, list[str]] = {}
    for t in planned.part(study=True):
        if t.key != but:
            for g in t.groups:
                if g not in documents:
                    out.setdefault(g, []).append(t.name)
    return out


def judge_output_claims(d: config.Declared, results: Path, params: dict) -> bool:
    """The claims an output's home declares, judged on its CSV into its index sidecar (the claims registers read
    them); False when the output has no claims or has not been built. A claim with `studies_apart` is judged on the
    rows of the groups the documents' tables read, those of the studies' own groups named apart."""
    side_path = Path(results) / d.source / f"{d.name}{results_index.OUTPUT_SUFFIX}"
    data = Path(results) / d.source / f"{d.name}.csv"
    if not d.decl.get("claims") or not side_path.is_file() or not data.is_file():
        return False
    side = io.read_json(side_path)
    apart = (studies_only_groups(params, f"{d.source}/{d.name}")
             if any(c.get("studies_apart") for c in d.decl["claims"]) else {})
    side["claims"] = claims.judge_measured(d.decl["claims"], d.name, data.read_text(encoding="utf-8"),
                                           d.at("claims"), apart)
    io.write_json(side_path, side)
    return True
