"""The results overview: ``results/index.csv`` and ``results/README.md``.

Two kinds of entries: the result tables of the reference index (one row each, built or not), and every other
output a pipeline rule registers with `register_output` (qualitative tables, figures, transcripts, additions
the documents never ran, benchmarks): a sidecar ``results/<source>/<name>.output.json`` names its kind,
status and files, and the README lists it under its source.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from nlpbench.config import read_yaml
from nlpbench.family import drawn_figures
from nlpbench.results.claims import VERDICTS, sentence_body
from nlpbench.results.judging import ADDITION, in_unit, points_alone, status_kind
from nlpbench.results.paper import REFERENCE_DIR, reference_index, source_label
from nlpbench.results.tables import TABLE_STATUSES
from nlpbench.runtime.io import read_json, write_json, write_text

INDEX_COLUMNS = ["source", "table", "title", "status", "path"]
CLAIM_COLUMNS = ["source", "table", "claim", "subject", "verdict", "sentence", "evidence"]
# what a claim's verdict rests on: a table of the document, an addition of ours that stands in for one of the
# document's claims (its `proxy_for`), or a measurement (a benchmark, the fitted dofs)
EVIDENCE = {"table": "the document's table", "proxy": "proxy: an addition", "output": "a measurement"}
PROXY_KINDS = ("addition", "study")
NOT_BUILT = "not yet implemented"
OUTPUT_SUFFIX = ".output.json"
OUTPUT_KINDS = ("qualitative table", "figure", "transcript", "addition", "study", "benchmark", "summary")


def register_output(results_dir: str | Path, source: str, name: str, title: str, kind: str, files: list[str],
                    status: str, scale: str, note: str = "") -> Path:
    """Record an output that is not a reference result table, so the index lists it.

    `files` are paths relative to ``results/<source>/``; `status` is a short free text ("generated", "not run
    at this scale", "reproduced", ...); `scale` is the params.yaml scale it was built at."""
    if kind not in OUTPUT_KINDS:
        raise ValueError(f"register_output: unknown kind {kind!r} (expected one of {', '.join(OUTPUT_KINDS)})")
    path = Path(results_dir) / source / f"{name}{OUTPUT_SUFFIX}"
    write_json(path, {"source": source, "name": name, "title": title, "kind": kind, "files": list(files),
                      "status": status, "scale": scale, "note": note})
    return path


def _load_outputs(results_dir: Path) -> list[dict]:
    """Every registered output under results_dir, by source then name."""
    out = []
    for path in sorted(results_dir.glob(f"*/*{OUTPUT_SUFFIX}")):
        try:
            out.append(read_json(path))
        except (OSError, ValueError) as e:
            raise ValueError(f"{path}: unreadable output sidecar ({e})") from None
    return out

INTRO = """\
# Reproduced result tables

What the four documents with result tables claim, judged on our numbers, then every table beside the numbers the
document printed (Seed 003, a tutorial, has none). A verdict is *holds*, *holds within noise* (the direction holds
but not beyond our seed spread, or the selected cells and most of our seeds' own cells disagree, either way round),
*does not hold*, *reversed*, *unresolved in the document* (the document's own numbers cannot decide it: a gap inside
its own run-to-run spread or its best-of-N protocol), *untestable at this scale* (the table's scale is not
comparable with the document's) or *needs data*. A claim marked *proxy for* is judged on an addition of ours that
stands in for one of the document's claims (another task or data set, where the document's own cannot be run
here): evidence about the method, not a reproduction of the document's table. `claims.csv` holds the same, its
`evidence` column saying which.
"""

TABLES_INTRO = """\
Each table regenerates a result table of one of the documents. Every reproduced cell is printed next to the number
the document printed ("paper"), from the checked transcription beside the table's declaration
(`pipeline/tables/<source>/<table>.paper.csv`); Δ = reproduced − paper, in the cell's unit. Paper cells marked
*cited* were copied by the document from other work. The scale, commit, device and configuration of each run are
recorded at the top of its table.

A cell is *within noise* when |Δ| is at most the unit's ε, or the printed value lies inside the range of our seeds
widened by its rounding (ε: 3 points for accuracies and other percentages, 0.03 for scores in 0-1, 0.1 nat, half a
round; `src/nlpbench/results/judging.py` says how each was chosen); twice the SD over our seeds does not count on its own,
since one failed seed inflates it. A value with a range beside it is the seed the table selects and the range of
all our seeds. Status of a table:

* **reproduced**: at least 90 % of its compared cells are within noise, the mean |Δ| of each unit is within that
  unit's tolerance (5 points, 0.05, 0.2 nat, one round) and every claim cell (a cell one of its claims compares)
  is within noise;
* **reproduced (k of n cells)**: the same over the k cells computed here, the others needing data or not run at
  this scale;
* **reproduced except claim cells (...)**: the same, but the claim cells it names are outside noise;
* **metric check**: every compared cell re-scores released outputs (a published system's, or lead-3) with our
  metric code and meets the first two tests: a check of our metrics, not of a training;
* **differs**: values exist but do not meet that;
* **not comparable at this scale**: the scale changes the data or the model size by design (the table says how);
  its numbers and its claims' verdicts are still shown;
* **needs data**: no cell has a value, and some need a data set that is not available here;
* **not yet implemented**: no cell has a reproduced value yet;
* **addition (no paper numbers)**: a table the documents argue for but never ran (nothing to compare with).

Mean |Δ| is given per unit, in that unit. Below each document's result tables, "other outputs" lists what else the
pipeline generates for it: the qualitative tables and transcripts (regenerated by the trained models, compared with
the printed ones in their notes), figures, additions and benchmarks, each with the scale it was built at.
"""


def _load_sidecars(results_dir: Path) -> list[tuple[dict, dict | None]]:
    """(reference index row, sidecar or None) for every table, in reference order."""
    out = []
    for ref in reference_index():
        path = results_dir / ref["source"] / f"{ref['table']}.json"
        out.append((ref, read_json(path) if path.exists() else None))
    return out


def _table_figures(results_dir: Path, source: str, table: str) -> list[str]:
    """The figure a table's home declares (`figure:`), where it was drawn beside the table."""
    home = REFERENCE_DIR / source / f"{table}.yaml"
    decl = read_yaml(home.read_text(encoding="utf-8"), str(home)) if home.exists() else None
    return drawn_figures(decl, results_dir / source) if isinstance(decl, dict) else []


def _figures(results_dir: Path, entries: list[tuple[dict, dict | None]], outputs: list[dict]) -> dict:
    """Where each figure under results/<source>/ is linked: (source, table) -> the figures of a built table;
    (source, None) -> those neither a table nor a registered output lists (an output drawn before its rule
    registered it), so that the index links every figure the pipeline wrote."""
    out: dict = {(ref["source"], ref["table"]): _table_figures(results_dir, ref["source"], ref["table"])
                 for ref, side in entries if side}
    for source in dict.fromkeys(ref["source"] for ref, _ in entries):
        listed = {f for (s, _), files in out.items() if s == source for f in files} | \
            {f for o in outputs if o["source"] == source for f in o["files"]}
        out[(source, None)] = sorted(p.name for p in (results_dir / source).glob("*.png") if p.name not in listed)
    return out


def _index_csv(entries: list[tuple[dict, dict | None]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(INDEX_COLUMNS)
    for ref, side in entries:
        status = side["status"] if side else NOT_BUILT
        path = f"{ref['source']}/{ref['table']}.csv" if side else ""
        w.writerow([ref["source"], ref["table"], ref["title"], status, path])
    return buf.getvalue()


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _mean_diffs(side: dict) -> str:
    """Mean |Δ| per unit, each in its unit ("2.55" for points alone; "0.04 · 0.31 nats" where units mix)."""
    units = side.get("units")
    if units is None:                  # a sidecar written before the units were stored
        mad = side.get("mean_abs_diff")
        return "" if mad is None else f"{mad:.2f}"
    if points_alone([u["unit"] for u in units]):
        return f"{units[0]['mean_abs_diff']:.2f}"
    return " · ".join(in_unit(u["mean_abs_diff"], u["unit"]) for u in units)


MEASURED_ON = "measured on "     # a benchmark's status: "measured on <device>" (nlpbench.timing)


MEASURED_EVIDENCE = f"{EVIDENCE['output']} on "


def output_evidence(o: dict) -> str:
    """"a measurement", naming the device a benchmark's figures were measured on (its status), since a timing
    claim holds or not on one machine."""
    status = o.get("status") or ""
    if o.get("kind") == "benchmark" and status.startswith(MEASURED_ON):
        return MEASURED_EVIDENCE + status.removeprefix(MEASURED_ON)
    return EVIDENCE["output"]


def measured_device(row: dict) -> str | None:
    """The device a claim's evidence was measured on (output_evidence), or None."""
    evidence = row.get("evidence") or ""
    return evidence.removeprefix(MEASURED_EVIDENCE) if evidence.startswith(MEASURED_EVIDENCE) else None


def claim_rows(entries: list[tuple[dict, dict | None]], outputs: list[dict], results_dir: Path) -> list[dict]:
    """Every judged claim of the documents' tables, in the tables' order; then those of the additions that stand in
    for one of the documents' claims (a claim with `proxy_for`), marked as proxies; then those of the outputs that
    measure one (a benchmark, the fitted dofs) (results/claims.csv)."""
    proxies = []
    for o in outputs:
        side = results_dir / o["source"] / f"{o['name']}.json"
        if o["kind"] in PROXY_KINDS and side.is_file():
            proxies += [{"source": o["source"], **c, "evidence": EVIDENCE["proxy"]}
                        for c in read_json(side).get("claims") or [] if c.get("proxy_for")]
    return ([{"source": ref["source"], **c, "evidence": EVIDENCE["table"]}
             for ref, side in entries if side for c in side.get("claims") or []]
            + proxies
            + [{"source": o["source"], **c, "evidence": output_evidence(o)} for o in outputs
               for c in o.get("claims") or []])


def _claims_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, CLAIM_COLUMNS, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _tally(rows: list[dict]) -> str:
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    return ", ".join(f"{n} {v}" for v, n in counts.items() if n)


def _registers(rows: list[dict], sources: list[str]) -> list[str]:
    out = ["## The documents' claims", ""]
    out.append(f"{len(rows)} claims judged: {_tally(rows) or 'none yet'}.")
    for source in sources:
        mine = [r for r in rows if r["source"] == source]
        if not mine:
            continue
        out += ["", f"### {source_label(source)}: {_tally(mine)}", ""]
        out.append("| Table | Claim | Verdict | Our numbers (and the document's) |")
        out.append("|---|---|---|---|")
        for r in mine:
            claim = r["claim"] + (f" ({r['subject']})" if r["subject"] else "")
            if r.get("proxy_for"):
                claim = f"*proxy for* {r['proxy_for']}: {claim}"
            body = sentence_body(r)
            if measured_device(r):                                # a timing claim holds on one machine: name it
                body += f" Measured on {measured_device(r)}."
            out.append(f"| [{r['table']}]({source}/{r['table']}.md) | {_cell(claim)} | **{r['verdict']}** "
                       f"| {_cell(body)} |")
    return out


def _readme(entries: list[tuple[dict, dict | None]], outputs: list[dict], figures: dict, claims: list[dict]) -> str:
    counts: dict[str, int] = {}
    for _, side in entries:
        kind = status_kind(side["status"] if side else NOT_BUILT)
        counts[kind] = counts.get(kind, 0) + 1
    unknown = sorted({o["source"] for o in outputs} - {ref["source"] for ref, _ in entries})
    if unknown:
        raise ValueError(f"results/: outputs registered under unknown source(s) {', '.join(unknown)}")
    sources = list(dict.fromkeys(ref["source"] for ref, _ in entries))
    out = [INTRO]
    out += _registers(claims, sources)
    out += ["", "## The tables", "", TABLES_INTRO]
    out.append(f"{len(entries)} tables: " + ", ".join(f"{counts.get(s, 0)} {s}" for s in TABLE_STATUSES
                                                      if s != ADDITION) + ".")
    for source in sources:
        out += ["", f"### {source_label(source)}", ""]
        out.append("| Table | Title | Status | Cells within noise / compared | Mean \\|Δ\\| | Files |")
        out.append("|---|---|---|---:|---:|---|")
        for ref, side in entries:
            if ref["source"] != source:
                continue
            stem = f"{source}/{ref['table']}"
            if side:
                ok = f"{side['n_within_noise']} / {side['n_compared']}" if "n_compared" in side else \
                    f"– / {side['n_cells']}"
                files = " · ".join([f"[md]({stem}.md)", f"[csv]({stem}.csv)"]
                                   + [f"[png]({source}/{f})" for f in figures[(source, ref["table"])]])
                status = side["status"]
                mad = _mean_diffs(side)
            else:
                ok, mad, files, status = f"– / {ref['cells']}", "", "", NOT_BUILT
            out.append(f"| {ref['table']} | {_cell(ref['title'])} | {status} | {ok} | {mad} | {files} |")
        extra = [o for o in outputs if o["source"] == source]
        if extra or figures[(source, None)]:
            out += ["", "Other outputs (qualitative tables, figures, additions, benchmarks):", ""]
            out.append("| Output | Title | Kind | Status | Scale | Files |")
            out.append("|---|---|---|---|---|---|")
            for o in extra:
                files = " · ".join(f"[{Path(f).suffix.lstrip('.') or f}]({source}/{f})" for f in o["files"])
                status = o["status"] + (f" ({_cell(o['note'])})" if o.get("note") else "")
                out.append(f"| {o['name']} | {_cell(o['title'])} | {o['kind']} | {_cell(status)} | {o['scale']} "
                           f"| {files} |")
            for f in figures[(source, None)]:
                out.append(f"| {Path(f).stem} | (not registered by the rule that drew it: rebuilding its output "
                           f"describes it) | figure | drawn |  | [png]({source}/{f}) |")
    return "\n".join(out) + "\n"


def write_index(results_dir: Path) -> None:
    """Write ``results/index.csv`` (one row per reference table), ``results/claims.csv`` (every judged claim of the
    documents' tables) and ``results/README.md`` (the claims registers, then the tables) atomically."""
    results_dir = Path(results_dir)
    entries = _load_sidecars(results_dir)
    write_text(results_dir / "index.csv", _index_csv(entries))
    outputs = _load_outputs(results_dir)
    claims = claim_rows(entries, outputs, results_dir)
    write_text(results_dir / "claims.csv", _claims_csv(claims))
    write_text(results_dir / "README.md", _readme(entries, outputs, _figures(results_dir, entries, outputs), claims))
