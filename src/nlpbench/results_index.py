"""The results overview: ``results/index.csv`` and ``results/README.md`` over all reference tables."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from nlpbench.io import read_json, write_text
from nlpbench.paper import reference_index, source_label
from nlpbench.tables import TABLE_STATUSES

INDEX_COLUMNS = ["source", "table", "title", "status", "path"]
NOT_BUILT = "not yet implemented"

INTRO = """\
# Reproduced result tables

Each table below regenerates a result table of one of the source documents. Every reproduced cell is printed
next to the number the document printed ("paper"), which comes from the checked transcription packaged in
`nlpbench/reference/`; Δ = reproduced − paper, in the document's unit (mostly percentages). Paper cells marked
*cited* were copied by the document from other work. The scale, commit, device and configuration of each run
are recorded at the top of its table.

Seed 003 (a tutorial) has no result tables, so four of the five documents appear here.

Status of a table:

* **reproduced**: every cell has a value, the mean |Δ| is within the table's tolerance, and no cell is more
  than the table's flag threshold (usually 10 points) off;
* **differs**: values exist but are not within that (or some cells were not run or failed);
* **needs data**: at least one cell needs a data set that is not available here;
* **not yet implemented**: no cell has a reproduced value yet.
"""


def _load_sidecars(results_dir: Path) -> list[tuple[dict, dict | None]]:
    """(reference index row, sidecar or None) for every table, in reference order."""
    out = []
    for ref in reference_index():
        path = results_dir / ref["source"] / f"{ref['table']}.json"
        out.append((ref, read_json(path) if path.exists() else None))
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


def _readme(entries: list[tuple[dict, dict | None]]) -> str:
    counts = {s: 0 for s in TABLE_STATUSES}
    for _, side in entries:
        status = side["status"] if side else NOT_BUILT
        counts[status] = counts.get(status, 0) + 1
    out = [INTRO]
    out.append(f"{len(entries)} tables: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + ".")
    for source in dict.fromkeys(ref["source"] for ref, _ in entries):
        out += ["", f"## {source_label(source)}", ""]
        out.append("| Table | Title | Status | Cells ok / total | Mean \\|Δ\\| | Files |")
        out.append("|---|---|---|---:|---:|---|")
        for ref, side in entries:
            if ref["source"] != source:
                continue
            stem = f"{source}/{ref['table']}"
            if side:
                ok = f"{side['n_ok']} / {side['n_cells']}"
                mad = side.get("mean_abs_diff")
                mad = "" if mad is None else f"{mad:.2f}"
                files = f"[md]({stem}.md) · [csv]({stem}.csv)"
                status = side["status"]
            else:
                ok, mad, files, status = f"– / {ref['cells']}", "", "", NOT_BUILT
            out.append(f"| {ref['table']} | {_cell(ref['title'])} | {status} | {ok} | {mad} | {files} |")
    return "\n".join(out) + "\n"


def write_index(results_dir: Path) -> None:
    """Write ``results/index.csv`` (one row per reference table) and ``results/README.md`` atomically."""
    results_dir = Path(results_dir)
    entries = _load_sidecars(results_dir)
    write_text(results_dir / "index.csv", _index_csv(entries))
    write_text(results_dir / "README.md", _readme(entries))
