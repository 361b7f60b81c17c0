"""Claim lines of the ch. 6 tables and the validation-only reading pilots."""

from pathlib import Path

import pytest

from nlpbench import config, io
from nlpbench.memnet import claims
from nlpbench.memnet.experiments import table_parts
from nlpbench.memnet.groups import declaration_groups

REPO = Path(__file__).resolve().parents[1]


def test_claim_lines_judge_our_cells_and_the_printed_ones():
    ours = {("2", "1", "a"): 100.0, ("2", "2", "a"): 96.0, ("2", "1", "b"): 99.0, ("2", "2", "b"): 50.0,
            ("6", "1", "a"): 97.0, ("6", "2", "a"): 40.0}
    printed = {("2", "1", "a"): 100.0, ("2", "2", "a"): 90.0, ("2", "1", "b"): 100.0, ("2", "2", "b"): 95.0}
    lines = claims.claim_lines([{"kind": "more_passes", "a": "a", "b": "b", "text": "a passes more"},
                                {"kind": "higher_mean", "a": "2:a", "b": "a", "text": "more hops"}],
                               "tolias-thesis", "2", ours, printed)
    assert "in our numbers it holds: 2 tasks pass (1 2) against 1 (1)" in lines[0]
    assert "in the thesis's numbers it does not hold: 1 tasks pass (1) against 2 (1 2)" in lines[0]
    lines = claims.claim_lines([{"kind": "higher_mean", "a": "2:a", "b": "a", "text": "more hops"}],
                               "tolias-thesis", "6", ours, printed)
    assert "a (Table 2) against a" in lines[0] and "holds: mean 98.0 against 68.5" in lines[0]
    assert "thesis" not in lines[0].split(";", 1)[1]          # no printed cells of Table 6 given: judged once


def test_table_2s_claim_holds_in_the_thesiss_own_numbers():
    """The printed Table 2 says what §6.4.2 says: t-MEM-NN (S = 10) passes 95% on more tasks than MemN2N."""
    grid = {("2", r, c): v for (r, c), v in claims.paper_grid("tolias-thesis", "2").items()}
    line = claims.claim_lines([{"kind": "more_passes", "a": "t-MEM-NN / 10 samples", "b": "Baseline / MemN2N",
                                "text": "x"}], "tolias-thesis", "2", {}, grid)[0]
    assert "in the thesis's numbers it holds: 9 tasks pass" in line and "against 5" in line


def test_a_pilot_table_reports_mean_validation_accuracy_and_never_reads_test(tmp_path):
    params = config.load(REPO / "params.yaml", {"scale": "cpu"})
    d = config.declaration(params, "tables", "tolias-thesis", "pilot-task15")
    groups = declaration_groups(params, d)
    for group in groups.values():
        for task in group.tasks:
            for seed in group.seeds:
                key = "S10" if group.model == "tmemnn" else "point"
                io.write_json(group.run_dir(tmp_path, task, seed) / "metrics.json",
                              {"status": "ok", "seed": seed, "val_acc": {key: 0.5 + 0.1 * seed},
                               "test_acc": {key: 0.01 * (seed + task)}})
    parts = table_parts(params, d, tmp_path)
    assert all(c.reproduced == pytest.approx(60.0) for c in parts.cells)      # mean of 50, 60, 70: validation only
    assert all("per seed 50.0, 60.0, 70.0" in c.detail for c in parts.cells)
