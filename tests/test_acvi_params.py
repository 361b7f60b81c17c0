"""params.yaml's acvi section: at the paper scale the schedule is Table 19, every run builds its configs, and every
printed cell of the seven tables has its row and column in the declarations (labels of the reference CSVs)."""

from __future__ import annotations

import csv
from pathlib import Path

from nlpbench import config
from nlpbench.acvi import groups as ag
from nlpbench.acvi.experiments import train_config
from nlpbench.acvi.train import THESIS_PHASES
from nlpbench.results.paper import paper_file

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "src" / "nlpbench"


def reference_labels(doc: str, table: str) -> tuple[set, set]:
    with open(paper_file(doc, table), newline="") as f:
        rows = list(csv.DictReader(f))
    return {r["row"] for r in rows}, {r["column"] for r in rows}


def test_every_printed_cell_has_its_row_and_column():
    params = config.load(REPO / "params.yaml", {"scale": "paper"})
    for doc, tables in (("tolias-thesis", ("20", "25", "26")), ("acvi-paper", ("1", "2", "3", "4"))):
        for t in tables:
            decl = params["tables"][doc][t]
            rows, cols = reference_labels(doc, t)
            assert decl["family"] == "acvi"
            assert rows == set(decl["rows"]), (doc, t)
            assert cols <= set(decl["columns"]), (doc, t)
            extra = set(decl["columns"]) - cols        # only the labelled released-output reference point
            assert all("released outputs" in c for c in extra), (doc, t, extra)


def test_the_paper_scale_runs_table_19_and_every_run_builds():
    params = config.load(REPO / "params.yaml", {"scale": "paper"})
    for name, spec in params["acvi"]["runs"].items():
        run = ag.make_run(params, name)
        if spec["task"] == "cnndm":
            cfg = train_config(run, "cuda")
            assert cfg.phases == [list(p) for p in THESIS_PHASES] and cfg.total_iters == 253_000
            assert cfg.model.emb_dim == 128 and cfg.model.hidden_dim == 256 and cfg.beam_width == 5
        if spec["task"] == "video":
            assert run.settings["model"]["hidden_dim"] == 1000 and run.settings["video"]["frames"] == 24
            assert run.settings["model"]["pointer"] is False
    assert ag.make_run(params, "cnndm-pg-acvi-p").settings["model"]["attention"] == "acvi_paper"
