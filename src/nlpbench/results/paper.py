"""The numbers the documents printed, read from each table's home.

Every table of the documents has ``pipeline/tables/<source>/<table>.paper.csv`` beside its declaration
(``<table>.yaml``), and ``pipeline/tables/index.csv`` lists them with their captions; see
``pipeline/tables/README.md`` for the labelling conventions.
"""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

PIPELINE = Path(__file__).resolve().parents[3] / "pipeline"    # the repository's declarations (src/ layout)
REFERENCE_DIR = PIPELINE / "tables"

SOURCE_LABELS: dict[str, str] = {
    "tolias-thesis": "Tolias, PhD thesis (2020), seed 000",
    "acvi-paper": "Tolias, Kourouklides & Chatzis, ACVI paper, seed 002",
    "bahuleyan-thesis": "Bahuleyan, MASc thesis (2018), seed 001",
    "shen-thesis": "Shen, PhD thesis, seed 004",
}


def source_label(source: str) -> str:
    """Human-readable name of a source id (the id itself if unknown)."""
    return SOURCE_LABELS.get(source, source)


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


@lru_cache(maxsize=None)
def _index() -> tuple[dict, ...]:
    rows = []
    for r in _read_csv(REFERENCE_DIR / "index.csv"):
        rows.append({**r, "cells": int(r["cells"])})
    return tuple(rows)


@lru_cache(maxsize=None)
def _cells(source: str, table: str) -> tuple[dict, ...]:
    if not any(r["source"] == source and r["table"] == table for r in _index()):
        raise KeyError(f"no reference table {source}/{table}")
    return tuple(_read_csv(paper_file(source, table)))


def paper_file(source: str, table: str, section: str = "tables") -> Path:
    """pipeline/<section>/<source>/<table>.paper.csv: the printed numbers beside the declaration."""
    return PIPELINE / section / source / f"{table}.paper.csv"


def reference_index() -> list[dict]:
    """All result tables, in reference order: source, table, title, kind, cells (int)."""
    return [dict(r) for r in _index()]


def printed_title(source: str, table: str) -> str | None:
    """The title of a table the document printed (the reference index); None for any other."""
    return next((r["title"] for r in _index() if r["source"] == source and r["table"] == table), None)


def reference_cells(source: str, table: str) -> list[dict]:
    """Printed cells of one table, in printed order: row, column, paper (str as printed), note.

    Raises KeyError for a table that is not in the reference index.
    """
    return [dict(r) for r in _cells(source, table)]


def parse_paper(value: str) -> float | None:
    """Printed number -> float ("100" -> 100.0, "13.30" -> 13.3); None for an empty string."""
    value = value.strip()
    return float(value) if value else None
