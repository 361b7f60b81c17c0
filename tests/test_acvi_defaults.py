"""The draft params section parses, its schedule is Table 19, and every table's rows and columns are exactly the
labels of the packaged reference CSVs (so the lead can wire it without renaming)."""

from __future__ import annotations

import csv
from pathlib import Path

import yaml

from nlpbench.acvi.model import ModelConfig
from nlpbench.acvi.train import THESIS_PHASES, TrainConfig

PKG = Path(__file__).resolve().parents[1] / "src" / "nlpbench"
DEFAULTS = yaml.safe_load((PKG / "acvi" / "defaults.yaml").read_text())


def reference_labels(doc: str, table: str) -> tuple[set, set]:
    with open(PKG / "reference" / doc / f"{table}.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return {r["row"] for r in rows}, {r["column"] for r in rows}


def test_table_labels_match_reference_csvs():
    for doc, tables in (("tolias-thesis", ("20", "25", "26")), ("acvi-paper", ("1", "2", "3", "4"))):
        for t in tables:
            decl = DEFAULTS["tables"][doc][t]
            rows, cols = reference_labels(doc, t)
            assert set(decl["rows"]) == rows, (doc, t)
            assert set(decl["columns"]) == cols, (doc, t)
            assert decl["family"] == "acvi"


def test_defaults_build_configs():
    acvi = DEFAULTS["acvi"]
    cfg = TrainConfig.from_dict({**acvi["train"], "model": ModelConfig(**acvi["model"])})
    assert cfg.phases == [list(p) for p in THESIS_PHASES] and cfg.total_iters == 253_000
    for name, run in acvi["runs"].items():
        merged = {**acvi["model"], **run.get("model", {})}
        ModelConfig(**merged)
        assert run["task"] in ("cnndm", "qg"), name
