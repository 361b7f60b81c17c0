"""The product speaks to its user: no internal issue numbers, work-log counters or references to the unshipped
specifications in src/, params.yaml, README.md, docs/, pipeline/, results/, tests/ or the pipeline's entry points
(CHANGELOG.md is the history and is not searched; this file names the patterns it looks for). Provenance in a table's header (a run's commit, date and device) is a fact about the run and stays."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEARCHED = ["src", "params.yaml", "README.md", "docs", "pipeline", "results", "tests", "Snakefile", "dvc.yaml",
            "envs", ".ci", "pyproject.toml"]
NOT_SEARCHED = {Path(__file__).resolve()}      # its own examples of what the patterns find
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".csv", ".tsv", ".json", ".txt", ".smk", ".toml", ".sh", ""}

# Each pattern names what it finds. Word-bounded and case-insensitive, so that "tissue 3", "nonstop 2", a `spec`
# variable or a commit hash such as "#3f2a" in a provenance line do not match.
HISTORY = {
    "issue number": re.compile(r"\bissues?\s*(?:no\.?\s*)?#?\s*\d+\b", re.I),
    "work-log stop": re.compile(r"\bstops?\s*#?\s*\d+\b(?!\s*(?:%|epochs?|steps?|iterations?|tokens?|words?|s\b))", re.I),
    "GitHub-style reference": re.compile(r"(?:\(|\b(?:PR|pull request|see)\s*)#\d+\b", re.I),
    "unshipped spec reference": re.compile(
        r"\bspec(?:'s)?\s*(?:§|`?seed-|reading\b|ambiguity\b|[A-D]-?\d)|\bthe spec(?:'s)?\b", re.I),
}


def searched_files() -> list[Path]:
    files = []
    for name in SEARCHED:
        path = REPO / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix in TEXT_SUFFIXES
                      and "__pycache__" not in p.parts and p.resolve() not in NOT_SEARCHED]
    return files


def history_hits(text: str) -> list[tuple[int, str, str]]:
    """(line number, what, the matched text) of every history reference in `text`."""
    return [(n, what, m.group(0)) for n, line in enumerate(text.splitlines(), 1)
            for what, rx in HISTORY.items() for m in rx.finditer(line)]


def test_patterns_find_history_and_spare_facts():
    found = [what for _, what, _ in history_hits(
        "as issue 16 asks\nissues 5 and 7\nsince stop 26\nspec §3.2\n(spec seed-001 §3)\nspec A-11\n"
        "the spec's reading\n[D, spec §1.1]\nfixed in (#12)\nIssue #4")]
    assert found.count("issue number") == 3 and found.count("work-log stop") == 1
    assert found.count("unshipped spec reference") == 5 and found.count("GitHub-style reference") == 1
    facts = ("commit 3f2a9c1, 2026-11-27, NVIDIA H100\nspec = tables.TableSpec(...)\nfor name, spec in runs\n"
             "#1 trilinear (Table 4.1)\nearly stop 20 epochs after\nstops 5 s later\ntissue 3\n§3.2 of the thesis\n"
             "a repeated (row, column) gets a #2, #3")
    assert history_hits(facts) == []


def test_no_history_in_the_product():
    hits = [f"{p.relative_to(REPO)}:{n}: {what}: {text!r}"
            for p in searched_files()
            for n, what, text in history_hits(p.read_text(errors="replace"))]
    assert not hits, f"{len(hits)} internal history reference(s); say it for a user or cite the document:\n" + "\n".join(hits)
