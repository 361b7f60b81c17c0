"""Build one result table: reproduced cells beside the printed paper numbers, written as CSV, Markdown and JSON.

Output per table, under ``results/<source>/``:

* ``<table>.csv``  - long format ``row,column,reproduced,paper,diff,status,note`` (grid cells, then derived rows);
* ``<table>.md``   - title, provenance, one wide GitHub table, flagged cells, notes;
* ``<table>.json`` - status, summary statistics, every cell with its seeds and verdict, and the CSV's digest (read
  by ``results_index``, and by ``nlpbench judge``, which judges a committed table again without retraining and
  refuses to overwrite a CSV edited by hand).

Whether a cell and a table reproduce the document is decided in one place, ``nlpbench.results.judging``.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nlpbench.results import judging
from nlpbench.results.paper import parse_paper, printed_title, reference_cells, source_label
from nlpbench.runtime.io import inside, write_json, write_text

# "cited": a cell the document copied from other work; it keeps the printed number as a reference and is never
# run here. "not_applicable": a "-" of the printed table (e.g. diversity of a deterministic decoder). Neither
# counts towards the table's status.
CELL_STATUSES = ("ok", "needs_data", "not_run", "failed", "cited", "not_applicable", "paper_only")
STATUS_TEXT = {"ok": "ok", "needs_data": "needs data", "not_run": "not run", "failed": "failed",
               "cited": "cited (not run)", "not_applicable": "–", "paper_only": "paper scale only"}
NOT_COUNTED = ("cited", "not_applicable")
TABLE_STATUSES = judging.STATUSES
ADDITION = judging.ADDITION   # status of a table the documents never ran


@dataclass
class Cell:
    """One reproduced number, labelled like the reference CSV."""

    row: str
    column: str
    reproduced: float | None
    status: str = "ok"  # "ok" | "needs_data" | "not_run" | "failed" | "cited"
    detail: str = ""
    seeds: dict[int, float] | None = None   # the per-seed values behind the cell, where claims read them
    still_learning: tuple[int, ...] = ()    # the seeds whose run stopped while validation still rose (claims.still_learning)


@dataclass
class TableSpec:
    """Shape and display rules of one table."""

    source: str
    table: str
    title: str
    rows: list[str]
    columns: list[str]
    decimals: int = 1
    pass_threshold: float | None = None
    mean_row: bool = False
    rules: judging.Rules = field(default_factory=judging.Rules)   # units, ε, comparability (from the declaration)
    figures: list[str] = field(default_factory=list)   # files drawn from the table, beside it (fig4.1.png)


def spec_from_home(source: str, name: str, decl: dict, rows, columns, **display) -> TableSpec:
    """A table's spec from its home: the title the document printed (the reference index), else the home's own
    `title` (a study, an addition), else its name; `decimals` as the home says (1 where it says nothing).
    `display`: the family's other TableSpec fields (pass_threshold, mean_row)."""
    return TableSpec(source=source, table=name, title=printed_title(source, name) or decl.get("title") or name,
                     rows=list(rows), columns=list(columns), decimals=decl.get("decimals", 1), **display)


def _diff(reproduced: float | None, paper: float | None) -> float | None:
    """reproduced - paper, or None when a side has no value."""
    return None if reproduced is None or paper is None else reproduced - paper


@dataclass
class Line:
    """One grid cell of the built table: reproduced and paper side by side."""

    row: str
    column: str
    reproduced: float | None
    paper: float | None
    paper_text: str  # as printed
    status: str
    ref_note: str = ""  # "", "cited", "misprint: ...", "cited; misprint: ..."
    detail: str = ""
    seeds: dict[int, float] | None = None     # our per-seed values behind the cell, where the family keeps them
    still_learning: tuple[int, ...] = ()      # the seeds whose run stopped while validation still rose
    verdict: judging.CellVerdict | None = None   # a computed cell (a value beside a printed number): within noise?

    @property
    def diff(self) -> float | None:
        return _diff(self.reproduced, self.paper)

    @property
    def note(self) -> str:
        return "; ".join(s for s in (self.ref_note, self.detail) if s)


@dataclass
class Derived:
    """A derived per-column row: ``mean`` or ``passes`` (count of rows >= threshold)."""

    kind: str  # "mean" | "passes"
    column: str
    reproduced: float | None
    paper: float | None
    n_reproduced: int  # rows with a reproduced value
    n_rows: int  # rows in the table
    reproduced_rows: list[str] = field(default_factory=list)  # passing rows (passes only)
    paper_rows: list[str] = field(default_factory=list)

    @property
    def diff(self) -> float | None:
        return _diff(self.reproduced, self.paper)

    @property
    def note(self) -> str:
        parts = []
        if self.kind == "passes":
            if self.reproduced is not None:
                parts.append("reproduced: " + (" ".join(self.reproduced_rows) or "none"))
            if self.paper is not None:
                parts.append("paper: " + (" ".join(self.paper_rows) or "none"))
        if self.reproduced is not None and self.n_reproduced < self.n_rows:
            parts.append(f"over {self.n_reproduced} of {self.n_rows} rows")
        return "; ".join(parts)


@dataclass
class TableResult:
    """A built table, ready to write."""

    spec: TableSpec
    lines: list[Line]  # spec rows x spec columns, rows outer
    derived: list[Derived]  # mean rows, then passes rows
    provenance: dict
    notes: list[str]  # the caller's notes
    auto_notes: list[str]  # generated: reference notes, cell details, unmatched reference cells
    flagged: list[Line]    # computed cells outside our noise
    status: str
    verdict: judging.TableVerdict | None = None
    claims: list[dict] = field(default_factory=list)   # the declaration's claims, judged (nlpbench.results.claims.judged)

    @property
    def diffs(self) -> list[float]:
        """|Δ| of every cell with both sides, where the table holds one unit only (a mean over several units would
        mix them: the verdict's figures are per unit)."""
        units = {self.spec.rules.unit_of(ln.row, ln.column) for ln in self.lines if ln.diff is not None}
        if len(units) > 1:
            return []
        return [abs(d) for d in (ln.diff for ln in self.lines) if d is not None]

    @property
    def mean_abs_diff(self) -> float | None:
        d = self.diffs
        return sum(d) / len(d) if d else None

    @property
    def max_abs_diff(self) -> float | None:
        d = self.diffs
        return max(d) if d else None

    def count(self, status: str) -> int:
        """Grid cells with this status (an "ok" cell always carries a value)."""
        return sum(1 for ln in self.lines if ln.status == status)


def seed_sd(values: list[float]) -> float:
    """Sample standard deviation over seeds (0 for a single seed)."""
    return statistics.stdev(values) if len(values) > 1 else 0.0


def compare_seeds(a: list[float], b: list[float]) -> dict:
    """a against b over their seeds: the means, the sample SDs, the difference of the means and whether it exceeds
    the larger SD (the rule every claim judged against the seed spread uses; never with a single seed)."""
    mean_a, mean_b, sd_a, sd_b = statistics.fmean(a), statistics.fmean(b), seed_sd(a), seed_sd(b)
    diff, spread = mean_a - mean_b, max(sd_a, sd_b)
    return {"mean_a": mean_a, "mean_b": mean_b, "sd_a": sd_a, "sd_b": sd_b, "diff": diff, "spread": spread,
            "exceeds": len(a) > 1 and len(b) > 1 and abs(diff) > spread}


def _check_unique(labels: list[str], what: str) -> None:
    seen = set()
    for label in labels:
        if label in seen:
            raise ValueError(f"duplicate {what} {label!r}")
        seen.add(label)


def stored_value(v: float | None) -> float | None:
    """A cell's value as the table stores it, to 4 decimal places: an accuracy of 950 of 1,000 computed in float32
    (94.99999762) is 95.0 and passes a 95 % threshold, in the derived rows, the claims and the notes alike."""
    if v is None:
        return None
    v = float(v)
    return round(v, 4) + 0.0 if math.isfinite(v) else v


def _normalise(cell: Cell) -> tuple[float | None, str, str]:
    """(value, status, detail) with a consistent status: an ok cell without a finite value is not ok."""
    if cell.status not in CELL_STATUSES:
        raise ValueError(f"cell {cell.row!r}/{cell.column!r}: unknown status {cell.status!r}")
    value = stored_value(cell.reproduced)
    if value is not None and not math.isfinite(value):
        return None, "failed", "; ".join(s for s in (cell.detail, f"non-finite value {value}") if s)
    if cell.status != "ok":
        return None, cell.status, cell.detail
    if value is None:
        return None, "not_run", cell.detail
    return value, "ok", cell.detail


def counted(ln: Line) -> bool:
    """A cell the table's status counts: the paper printed a number there and it is not a cited one."""
    return ln.status not in NOT_COUNTED and ln.paper is not None


def judge(spec: TableSpec, lines: list[Line], has_reference: bool) -> judging.TableVerdict:
    """Each computed line's verdict (set on the line), then the table's (nlpbench.results.judging)."""
    judged, claim_misses, rescored = [], [], []
    for ln in lines:
        ln.verdict = None
        if ln.status == "ok" and counted(ln):
            unit = spec.rules.unit_of(ln.row, ln.column)
            seeds = list(ln.seeds.values()) if ln.seeds else None
            ln.verdict = judging.judge_cell(ln.reproduced, ln.paper, ln.paper_text, seeds, unit,
                                            spec.rules.epsilon_of(unit))
            judged.append((ln.diff, ln.verdict))
            rescored.append(spec.rules.is_rescored(ln.row, ln.column))
            if ln.verdict.status == judging.OUTSIDE and spec.rules.carries_claim(ln.row, ln.column):
                claim_misses.append(f"{ln.row}: {ln.column}")
    return judging.judge_table([ln.status for ln in lines if counted(ln)], judged, spec.rules, has_reference,
                               claim_misses, bool(rescored) and all(rescored))


def finish(result: "TableResult", has_reference: bool) -> "TableResult":
    """Judge the result's cells and set its verdict, status and the cells outside noise."""
    result.verdict = judge(result.spec, result.lines, has_reference)
    result.status = result.verdict.status
    result.flagged = [ln for ln in result.lines if ln.verdict is not None and ln.verdict.status == judging.OUTSIDE]
    return result


def _derive(spec: TableSpec, lines: list[Line]) -> list[Derived]:
    """Per-column mean and pass-count rows, over the table's rows (a printed ``mean`` row is excluded)."""
    if not spec.mean_row and spec.pass_threshold is None:
        return []
    if spec.mean_row and "mean" in spec.rows:
        raise ValueError(f"{spec.source}/{spec.table}: spec has a printed 'mean' row; set mean_row=False")
    if spec.pass_threshold is not None and "passes" in spec.rows:
        raise ValueError(f"{spec.source}/{spec.table}: spec has a row named 'passes'")
    means, passes = [], []
    for col in spec.columns:
        col_lines = [ln for ln in lines if ln.column == col and ln.row != "mean"]
        rep = [(ln.row, ln.reproduced) for ln in col_lines if ln.reproduced is not None]
        pap = [(ln.row, ln.paper) for ln in col_lines if ln.paper is not None]
        n = len(col_lines)
        if spec.mean_row:
            means.append(Derived(
                "mean", col,
                sum(v for _, v in rep) / len(rep) if rep else None,
                sum(v for _, v in pap) / len(pap) if pap else None,
                len(rep), n,
            ))
        if spec.pass_threshold is not None:
            thr = spec.pass_threshold
            rep_rows = [r for r, v in rep if v >= thr]
            pap_rows = [r for r, v in pap if v >= thr]
            passes.append(Derived(
                "passes", col,
                float(len(rep_rows)) if rep else None,
                float(len(pap_rows)) if pap else None,
                len(rep), n, rep_rows, pap_rows,
            ))
    return means + passes


def _auto_notes(lines: list[Line], unmatched: list[dict]) -> list[str]:
    """Notes generated from the reference notes, the cell details and reference cells outside the table's rows and columns."""
    notes: list[str] = []
    cited = [ln for ln in lines if "cited" in ln.ref_note.split("; ")]
    if cited:
        notes.append(
            f"{len(cited)} paper cell(s) marked (cited): the document copied these numbers from other work."
        )
    groups: dict[str, list[Line]] = {}
    for ln in lines:
        for part in ln.ref_note.split("; "):
            if part.startswith("misprint"):
                groups.setdefault(part, []).append(ln)
    for text, group in groups.items():
        rows = " ".join(dict.fromkeys(ln.row for ln in group))
        notes.append(f"Paper {text} ({len(group)} cell(s), row(s) {rows}).")
    details: dict[tuple[str, str], int] = {}
    for ln in lines:
        if ln.status != "ok" and ln.detail:
            key = (ln.status, ln.detail)
            details[key] = details.get(key, 0) + 1
    for (status, detail), n in details.items():
        label = "not applicable" if status == "not_applicable" else STATUS_TEXT[status]
        notes.append(f"{label} ({n} cell(s)): {detail}")
    if unmatched:
        shown = ", ".join(f"{c['row']} / {c['column']}" for c in unmatched[:5])
        more = f" and {len(unmatched) - 5} more" if len(unmatched) > 5 else ""
        notes.append(f"{len(unmatched)} printed cell(s) are not part of this table: {shown}{more}.")
    return notes


def build_table(spec: TableSpec, cells: list[Cell], provenance: dict, notes: list[str]) -> TableResult:
    """Match reproduced cells with the printed reference by (row, column) and compute the table status.

    Spec cells without a reproduced Cell are ``not_run``; a spec cell the paper did not print has an empty paper
    side. Cells outside the table's rows x columns, duplicate cells and unknown statuses raise ValueError.
    """
    _check_unique(spec.rows, "row")
    _check_unique(spec.columns, "column")
    try:
        ref = {(c["row"], c["column"]): c for c in reference_cells(spec.source, spec.table)}
    except KeyError:   # an addition the documents never ran (e.g. the priors ablation): nothing to compare
        ref = {}
    grid = [(r, c) for r in spec.rows for c in spec.columns]
    grid_set = set(grid)
    given: dict[tuple[str, str], Cell] = {}
    for cell in cells:
        key = (cell.row, cell.column)
        if key not in grid_set:
            raise ValueError(f"{spec.source}/{spec.table}: cell {key} is not in the table's rows x columns")
        if key in given:
            raise ValueError(f"{spec.source}/{spec.table}: duplicate cell {key}")
        given[key] = cell

    lines: list[Line] = []
    for key in grid:
        cell = given.get(key, Cell(key[0], key[1], None, "not_run"))
        value, status, detail = _normalise(cell)
        r = ref.get(key)
        lines.append(Line(
            row=key[0], column=key[1], reproduced=value,
            paper=parse_paper(r["paper"]) if r else None,
            paper_text=r["paper"] if r else "",
            status=status, ref_note=r["note"] if r else "", detail=detail,
            seeds={k: stored_value(v) for k, v in cell.seeds.items()} if cell.seeds and status == "ok" else None,
            still_learning=tuple(sorted(cell.still_learning)) if status == "ok" else (),
        ))

    unmatched = [c for k, c in ref.items() if k not in grid_set]
    result = TableResult(
        spec=spec, lines=lines, derived=_derive(spec, lines), provenance=dict(provenance),
        notes=list(notes), auto_notes=_auto_notes(lines, unmatched), flagged=[], status="",
    )
    return finish(result, has_reference=bool(ref))


# ---------------------------------------------------------------- rendering


def _num(v: float | None, digits: int = 4) -> str:
    """Machine-readable number for the CSV ("" for None; no "-0.0")."""
    if v is None:
        return ""
    v = round(v, digits) + 0.0
    return str(int(v)) if v.is_integer() and abs(v) < 1e15 else repr(v)


def _signed(v: float, decimals: int = 1) -> str:
    s = f"{v:+.{decimals}f}"
    return s[1:] if float(s) == 0 else s


def _md(text: Any) -> str:
    """Text safe inside a GitHub table cell."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def render_csv(result: TableResult) -> str:
    """Long CSV: one line per grid cell in spec order, then the derived rows."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["row", "column", "reproduced", "paper", "diff", "status", "note", "seeds", "noise"])
    for ln in result.lines:
        w.writerow([ln.row, ln.column, _num(ln.reproduced), ln.paper_text, _num(ln.diff), ln.status, ln.note,
                    seeds_text(ln.seeds), ln.verdict.status if ln.verdict else ""])
    for d in result.derived:
        paper = "" if d.paper is None else (f"{d.paper:.2f}" if d.kind == "mean" else _num(d.paper))
        status = "ok" if d.reproduced is not None else "not_run"
        w.writerow([d.kind, d.column, _num(d.reproduced), paper, _num(d.diff), status, d.note, "", ""])
    return buf.getvalue()


def seeds_text(seeds: dict[int, float] | None) -> str:
    """Per-seed values as the CSV stores them: "seed:value" separated by spaces (empty for one or none)."""
    if not seeds or len(seeds) < 2:
        return ""
    return " ".join(f"{k}:{_num(v)}" for k, v in sorted(seeds.items()))


def parse_seeds(text: str) -> dict[int, float] | None:
    """The inverse of seeds_text."""
    if not text.strip():
        return None
    return {int(k): float(v) for k, v in (part.split(":", 1) for part in text.split())}


def _reproduced_md(ln: Line, decimals: int) -> str:
    if ln.status != "ok":
        return STATUS_TEXT[ln.status]
    if ln.seeds and len(ln.seeds) > 1:     # the value shown, with the range of our seeds beside it
        lo, hi = min(ln.seeds.values()), max(ln.seeds.values())
        return f"{ln.reproduced:.{decimals}f} ({lo:.{decimals}f}–{hi:.{decimals}f})"
    return f"{ln.reproduced:.{decimals}f}"


def figures_text(verdict: judging.TableVerdict | None) -> str:
    """The mean and max |Δ| per unit, each in its unit ("mean |Δ| 2.55 points, max 11.30; ...")."""
    if verdict is None or not verdict.units:
        return ""
    if judging.points_alone([u.unit for u in verdict.units]):
        u = verdict.units[0]
        return f"mean |Δ| {four_places(u.mean_abs_diff):.2f}, max |Δ| {four_places(u.max_abs_diff):.2f}"
    return "; ".join(f"mean |Δ| {judging.in_unit(four_places(u.mean_abs_diff), u.unit)} over {u.n} cells (tolerance "
                     f"{u.tolerance:g}), max {four_places(u.max_abs_diff):.2f}" for u in verdict.units)


def _status_line(result: TableResult) -> str:
    v = result.verdict
    summary = [f"{len(result.lines)} cells", f"{result.count('ok')} with a reproduced value"]
    summary += [f"{result.count(s)} {'not applicable' if s == 'not_applicable' else STATUS_TEXT[s]}"
                for s in CELL_STATUSES[1:] if result.count(s)]
    if v is not None and v.n_computed:
        summary.append(f"{v.n_within} of {v.n_computed} compared cells within our noise")
    figures = figures_text(v)
    if figures:
        summary.append(figures)
    line = f"Status: **{result.status}** ({', '.join(summary)})"
    if result.status == judging.NOT_COMPARABLE:
        line += f". Not comparable at this scale: {result.spec.rules.comparable}"
    return line


def _paper_md(ln: Line) -> str:
    if not ln.paper_text:
        return ""
    tags = ["misprint" if p.startswith("misprint") else p for p in ln.ref_note.split("; ") if p]
    return ln.paper_text + (f" ({', '.join(tags)})" if tags else "")


def _derived_md(d: Derived, decimals: int) -> list[str]:
    if d.kind == "mean":
        rep = "" if d.reproduced is None else f"**{d.reproduced:.{decimals}f}**"
        if d.reproduced is not None and d.n_reproduced < d.n_rows:
            rep += f" (over {d.n_reproduced} of {d.n_rows})"
        pap = "" if d.paper is None else f"**{d.paper:.2f}**"
        delta = "" if d.diff is None else f"**{_signed(d.diff)}**"
    else:
        rep = "" if d.reproduced is None else f"**{d.reproduced:.0f}** ({' '.join(d.reproduced_rows) or 'none'})"
        pap = "" if d.paper is None else f"**{d.paper:.0f}** ({' '.join(d.paper_rows) or 'none'})"
        delta = "" if d.diff is None else f"**{_signed(d.diff, 0)}**"
    return [_md(rep), _md(pap), _md(delta)]


def _delta_decimals(ln: Line) -> int:
    """Δ printed with one decimal, more where the paper prints more (fractions: "0.4210")."""
    text = ln.paper_text.strip()
    return max(1, len(text.split(".", 1)[1]) if "." in text else 0)


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _agreement(provenance: dict, spec: TableSpec) -> list[str]:
    """What a rebuild elsewhere should give: the provenance's last bullet (docs/reproducibility.md measures it)."""
    device = str(provenance.get("device", ""))
    if not device.startswith("cpu"):
        return []
    return [f"- **rebuilding it**: bit for bit on a CPU whose torch kernels use the same instructions, with the same "
            f"torch and one thread a job; on another instruction set, with more threads or on a GPU, the kernels' last "
            f"bits differ and a run that selects an epoch or a seed by validation can select another, so cells can "
            f"move by a few points (docs/reproducibility.md); `nlpbench verify {spec.source}/{spec.table}` retrains "
            f"it in a clean clone and compares every cell"]


# The order of the provenance bullets, whatever order the keys were stored in (a sidecar's JSON sorts them, so a
# table judged again from its files writes them as the build did); a key not listed follows in its own order.
PROVENANCE_ORDER = ("scale", "data", "trained here", "code commit", "device", "memory read", "hop kernels",
                    "posterior kernels", "training wall time", "generated", "torch", "runs")


def _provenance_order(provenance: dict) -> list[str]:
    rank = {key: i for i, key in enumerate(PROVENANCE_ORDER)}
    return sorted(provenance, key=lambda key: rank.get(key, len(rank)))


def render_markdown(result: TableResult) -> str:
    """Title, provenance, one wide table (reproduced / paper / Δ per column), flagged cells, notes."""
    spec = result.spec
    out = [f"# {source_label(spec.source)} — Table {spec.table}: {spec.title}", ""]
    out += [_status_line(result), "", "## Provenance", ""]
    if result.provenance:
        for key in _provenance_order(result.provenance):
            value = result.provenance[key]
            if isinstance(value, dict):
                value = ", ".join(f"{k}={v}" for k, v in value.items())
            out.append(f"- **{key}**: {value}")
    else:
        out.append("- none recorded")
    out += _agreement(result.provenance or {}, spec)
    out += ["", "## Results", ""]

    header = ["row"]
    for col in spec.columns:
        header += [f"{_md(col)} (reproduced)", "(paper)", "(Δ)"]
    out.append(_md_row(header))
    out.append(_md_row(["---"] + ["---:"] * (3 * len(spec.columns))))
    by_key = {(ln.row, ln.column): ln for ln in result.lines}
    flagged = {(ln.row, ln.column) for ln in result.flagged}
    for row in spec.rows:
        cells = [_md(row)]
        for col in spec.columns:
            ln = by_key[(row, col)]
            delta = "" if ln.diff is None else _signed(ln.diff, _delta_decimals(ln))
            if (row, col) in flagged:
                delta = f"**{delta}**"
            cells += [_md(_reproduced_md(ln, spec.decimals)), _md(_paper_md(ln)), delta]
        out.append(_md_row(cells))
    for kind in ("mean", "passes"):
        derived = [d for d in result.derived if d.kind == kind]
        if not derived:
            continue
        label = "**mean**" if kind == "mean" else f"**# ≥ {spec.pass_threshold:g}%**"
        cells = [label]
        for d in derived:
            cells += _derived_md(d, spec.decimals)
        out.append(_md_row(cells))
    out += ["", "Δ = reproduced − paper, in the cell's unit. A value with a range beside it is the seed the table "
            "selects, and the range is that of all our seeds. Bold Δ: outside our noise, that is |Δ| above the unit's "
            "ε, with the paper's value outside our seeds' range widened by its rounding (`nlpbench.results.judging` says how "
            "ε was chosen).", ""]
    if result.claims:
        out += ["## Claims", ""]
        out += [f"- **{c['verdict']}**: {c['sentence']}" for c in result.claims]
        out.append("")
    if spec.figures:
        out += ["## Figure" + ("s" if len(spec.figures) > 1 else ""), ""]
        out += [f"![{Path(f).stem}]({f})" for f in spec.figures]
        out.append("")
    out += ["## Cells outside our noise", ""]
    if result.flagged:
        for ln in result.flagged:
            out.append(f"- row {ln.row}, {ln.column}: reproduced {_reproduced_md(ln, spec.decimals)}, "
                       f"paper {ln.paper_text}, Δ {_signed(ln.diff, _delta_decimals(ln))}: {ln.verdict.reason}")
    else:
        out.append("none")
    out += ["", "## Notes", ""]
    all_notes = result.notes + result.auto_notes
    out += [f"- {n}" for n in all_notes] if all_notes else ["none"]
    return "\n".join(out) + "\n"


def _jsonable(obj: Any) -> Any:
    """Provenance values as plain JSON (unknown objects become strings, non-finite floats too)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def four_places(v: float | None) -> float | None:
    """A figure as the JSON sidecar stores it (results/README.md formats the stored value)."""
    return None if v is None else round(v, 4)


def csv_digest(data: bytes | str) -> str:
    """The sha256 of a table's CSV as written (UTF-8): the sidecar records it, so that `nlpbench judge` knows a CSV
    edited by hand since."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def summary(result: TableResult) -> dict:
    """The JSON sidecar's content."""
    spec, v = result.spec, result.verdict
    return {
        "source": spec.source,
        "table": spec.table,
        "title": spec.title,
        "status": result.status,
        "provenance": _jsonable(result.provenance),
        "n_cells": len(result.lines),
        "n_ok": result.count("ok"),
        "n_needs_data": result.count("needs_data"),
        "n_not_run": result.count("not_run"),
        "n_failed": result.count("failed"),
        "n_cited": result.count("cited"),
        "n_compared": v.n_computed if v else 0,
        "n_within_noise": v.n_within if v else 0,
        "units": [{"unit": u.unit, "n": u.n, "mean_abs_diff": four_places(u.mean_abs_diff),
                   "max_abs_diff": four_places(u.max_abs_diff), "tolerance": u.tolerance}
                  for u in (v.units if v else ())],
        "mean_abs_diff": four_places(result.mean_abs_diff),
        "max_abs_diff": four_places(result.max_abs_diff),
        "outside_noise": [
            {"row": ln.row, "column": ln.column, "reproduced": four_places(ln.reproduced),
             "paper": ln.paper_text, "diff": four_places(ln.diff), "why": ln.verdict.reason}
            for ln in result.flagged
        ],
        "claims": result.claims,
        "display": {"rows": spec.rows, "columns": spec.columns, "decimals": spec.decimals,
                    "pass_threshold": spec.pass_threshold, "mean_row": spec.mean_row},
        "notes": result.notes,
        "cells": [
            {"row": ln.row, "column": ln.column, "reproduced": ln.reproduced, "status": ln.status,
             "detail": ln.detail, "seeds": None if not ln.seeds else [[k, v] for k, v in sorted(ln.seeds.items())],
             **({"still_learning": list(ln.still_learning)} if ln.still_learning else {})}
            for ln in result.lines
        ],
    }


def write_table(result: TableResult, results_dir: Path) -> dict:
    """Write ``<source>/<table>.{csv,md,json}`` atomically (the JSON last); return their paths. Each must lie
    inside `results_dir` (nlpbench.results.build writes the three together, with any figure, through io.staged)."""
    base = Path(results_dir) / result.spec.source
    paths = {ext: inside(results_dir, base / f"{result.spec.table}.{ext}") for ext in ("csv", "md", "json")}
    csv_text = render_csv(result)
    write_text(paths["csv"], csv_text)
    write_text(paths["md"], render_markdown(result))
    write_json(paths["json"], {**summary(result), "csv_sha256": csv_digest(csv_text)})
    return paths
