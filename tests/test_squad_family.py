"""The squad family behind the interface: params.yaml's squad section and nine tables, the configurations they
share, cells read as max over seeds, claims against the seed spread, bad declarations named, and the smoke scale
end to end (data, vectors, every group, every table and figure) on temporary folders."""

import csv
import json
from pathlib import Path

import pytest
import torch

from nlpbench import config, plan, registry
from nlpbench.config import ConfigError
from nlpbench.family import Paths
from nlpbench.results import build
from nlpbench.results.cells import TableCells
from nlpbench.squad import experiments as x
from nlpbench.squad import groups as sg

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parents[1]
TABLES = ("3.1", "4.2", "4.3", "4.4", "5.2", "5.3", "5.4", "5.5", "A.1")


def load(scale: str, overrides: dict | None = None) -> dict:
    return registry.load(REPO / "params.yaml", {"scale": scale, **(overrides or {})})


def test_the_family_is_wired_with_nine_tables_and_shared_configurations():
    params = load("paper")
    assert registry.get("squad").name == "squad"
    assert tuple(sg.tables_of(params)) == TABLES
    configs = sg.all_configs(params)
    # 22 (Table 4.2) + 2 T-trilinear + RIG_2/4/5 + RIG_6 + proposed + 6 revised dims + 4 appendix A + DCN's = 40,
    # and Table 4.4's BiDAF, DCN and QANet, each with its own similarity and with T-trilinear
    assert len(configs) == 46
    gid = lambda sim, out, ps=None, rd=None: sg.group_id(params, sg.Config(sim, out, ps, rd))  # noqa: E731
    # RIG_1 / RIG_3 of Table 5.2 are the trilinear O_1 / O_2 runs of Table 4.2, SAN's is general-3 O_1
    groups = {name: set(registry.get("squad").targets(params)[i].groups) for i, name in enumerate(TABLES)}
    assert gid("trilinear", "O_1") in groups["4.2"] & groups["5.2"] & groups["4.3"]
    assert gid("general-3", "O_1") in groups["3.1"] & groups["4.2"]
    assert gid("trilinear", "revised", "second", 6) in groups["5.4"] & groups["5.5"]
    full = {gid: c for gid, c in configs.items() if c.model != "baseline"}
    assert groups["4.4"] == set(full) and {(c.model, c.similarity) for c in full.values()} == {
        ("bidaf", "trilinear"), ("bidaf", "T-trilinear"), ("dcn", "dot-product"), ("dcn", "T-trilinear"),
        ("qanet", "trilinear"), ("qanet", "T-trilinear")}
    assert all(g.startswith(("squad-bidaf-", "squad-dcn-", "squad-qanet-")) for g in full)
    # a model's own sizes are in its group's settings, so a scale that shrinks them gives other runs
    bidaf = sg.Config("trilinear", None, None, None, "bidaf")
    assert sg.group_id(params, bidaf) != sg.group_id(load("paper", {"squad.full_models.bidaf.model.hidden": 8}), bidaf)
    assert sg.group_settings(params, bidaf)["train"]["epochs"] == 12       # BiDAF's own 12 epochs
    assert len(plan.make(params).groups) >= 40
    # the scales change the settings, hence the ids; five seeds at paper, three at cpu
    assert sg.group_id(load("smoke"), sg.Config("trilinear", "O_1", None, None)) != gid("trilinear", "O_1")
    assert params["squad"]["seeds"] == [0, 1, 2, 3, 4] and load("cpu")["squad"]["seeds"] == [0, 1, 2]


def test_the_cpu_scale_trains_only_the_rows_its_claims_can_test():
    params = load("cpu")
    configs = sg.all_configs(params)
    assert {(c.similarity, c.output) for c in configs.values()} == {
        (s, o) for s in ("bilinear", "trilinear", "cosine") for o in ("O_1", "O_2")} | {
        ("trilinear", "A1-O_1"), ("trilinear", "A1-O_2")}      # appendix A's two summaries under each formation
    assert len(configs) == 6 + 4
    from nlpbench.timing.squad import configurations_at         # the timing benchmark counts each scale's own runs
    assert (configurations_at(params, "baseline"), configurations_at(load("paper"), "baseline")) == (10, 40)
    assert set(plan.make(params).groups) >= set(configs)
    cells = {(r, c): (part, cfg) for r, c, part, cfg in sg.cells_of(params, "4.2")}
    assert cells[("trilinear", "O_1 / EM")][1] == sg.Config("trilinear", "O_1", None, None)
    part, cfg = cells[("FNN", "O_2 / F1")]
    assert cfg is None and part["paper_only"]
    built, _ = x.table_cells(params, "4.2", Path("/nonexistent-runs"))
    by_key = {(c.row, c.column): c.status for c in built}
    assert by_key[("FNN", "O_1 / EM")] == "paper_only" and by_key[("cosine", "O_1 / EM")] == "not_run"
    # the loss curves draw only what this scale trains; a trained_rows naming no row is an error naming the table
    assert [label for _, label, _ in sg.loss_lines(params, params["outputs"]["shen-thesis"]["fig4.4"], "o")] == \
        ["trilinear", "trilinear"]
    with pytest.raises(ConfigError, match=r"pipeline/tables/shen-thesis/4\.2\.yaml: trained_rows: no row 'bilineer'"):
        load("cpu", {"tables.shen-thesis.4.2.trained_rows": ["bilineer"]})


def test_the_heatmaps_train_their_own_configurations_when_no_table_does():
    params = load("smoke")
    params["tables"]["shen-thesis"] = {"5.4": params["tables"]["shen-thesis"]["5.4"]}   # no O_1 / O_2 table left
    params["outputs"]["shen-thesis"] = {k: v for k, v in params["outputs"]["shen-thesis"].items()
                                        if v.get("kind") != "loss_curves"}                   # they name those tables
    gid = sg.group_id(params, sg.Config("T-trilinear", "O_2", None, None))
    assert gid in sg.all_configs(params) and gid in plan.make(params).groups
    target = plan.make(params).targets["shen-thesis/4.6"]
    assert gid in target.groups and len(target.groups) == 6


def test_bad_declarations_name_the_table_and_key():
    with pytest.raises(ConfigError, match=r"pipeline/tables/shen-thesis/4\.3\.yaml: row 'trilinearr'.*unknown similarity"):
        load("smoke", {"tables.shen-thesis.4.3.rows": ["trilinearr"]})
    with pytest.raises(ConfigError, match=r"shen-thesis/4\.2\.yaml: claims\.0\.rows: Table 4.2 has no row 'nope'"):
        load("smoke", {"tables.shen-thesis.4.2.claims": [
            {"kind": "above", "rows": ["nope", "trilinear"], "columns": ["O_1 / EM"], "text": "t"}]})
    with pytest.raises(ConfigError, match=r"squad.train.optimizer"):
        load("smoke", {"squad.train.optimizer": "sgd"})


def _fake_run(runs: Path, params: dict, cfg: sg.Config, em: dict[int, float],
              chosen: dict[int, int] | None = None, epochs: int = 10) -> None:
    """Runs of `cfg` with these test EMs; `chosen`: seed -> the epoch validation chose of `epochs` validated."""
    for seed, value in em.items():
        d = runs / sg.group_id(params, cfg) / f"seed{seed}"
        d.mkdir(parents=True)
        metrics = {"em": value, "f1": value + 10, "device": "cpu"}
        if chosen and seed in chosen:
            metrics.update(selected_by="valid_em", epoch=chosen[seed],
                           valid=[{"epoch": e, "em": e, "f1": e} for e in range(1, epochs + 1)])
        (d / "metrics.json").write_text(json.dumps(metrics))


def test_a_cell_is_the_max_over_seeds_and_keeps_every_seed(tmp_path):
    params = load("paper")
    tri, bil = sg.Config("trilinear", "O_1", None, None), sg.Config("bilinear", "O_1", None, None)
    _fake_run(tmp_path, params, tri, {0: 10.0, 1: 14.0, 2: 12.0, 3: 11.0})
    cells, per_seed = x.table_cells(params, "4.2", tmp_path)
    by = {(c.row, c.column): c for c in cells}
    assert by[("trilinear", "O_1 / EM")].reproduced == 14.0 and by[("trilinear", "O_1 / F1")].reproduced == 24.0
    assert "1: 14.00" in by[("trilinear", "O_1 / EM")].detail and "only 4 of 5 seeds" in by[("trilinear", "O_1 / EM")].detail
    assert by[("bilinear", "O_1 / EM")].status == "not_run"
    assert per_seed[("trilinear", "O_1 / EM")] == {0: 10.0, 1: 14.0, 2: 12.0, 3: 11.0}
    cited, _ = x.table_cells(params, "3.1", tmp_path)
    assert {c.status for c in cited if c.column.startswith("Original")} == {"cited"}
    assert bil not in sg.table_configs(params, "4.3")


def _claim_notes(params: dict, name: str, per_seed: dict, declared: list[dict] | None = None) -> list[str]:
    """The core's claim lines for table `name` (its own claims, or `declared`) judged on these per-seed values
    {(row, column): {seed: value}}."""
    from nlpbench.results import claims, tables
    decl = params["tables"]["shen-thesis"][name]
    cells = TableCells("shen-thesis")
    cells.add(name, x.row_names(decl), list(decl["columns"]),
              [tables.Cell(r, c, max(v.values()), seeds=v) for (r, c), v in per_seed.items()])
    return claims.lines(declared if declared is not None else decl.get("claims") or [], name, cells)


T_ABOVE = [{"kind": "above", "rows": ["T-trilinear", "trilinear"], "text": "T-trilinear above trilinear",
            "columns": ["O_1 / EM", "O_1 / F1", "O_2 / EM", "O_2 / F1"]}]
ORDER = [{"kind": "order", "rows": ["RIG_1", "RIG_2", "RIG_3", "RIG_4", "RIG_5"], "columns": ["EM", "F1"],
          "text": "RIG_1 < RIG_2 < RIG_3 < RIG_4 < RIG_5"}]


def test_claims_say_whether_the_difference_exceeds_the_seed_spread():
    params = load("paper")
    clear = {("T-trilinear", c): {s: 20.0 + s * 0.1 for s in range(5)} for c in ("O_1 / EM", "O_2 / EM")}
    clear.update({("trilinear", c): {s: 10.0 + s * 0.1 for s in range(5)} for c in ("O_1 / EM", "O_2 / EM")})
    text = " ".join(_claim_notes(params, "4.3", clear, T_ABOVE))
    assert "O_1 / EM): in our numbers it holds, and the difference is larger than the seed spread" in text
    assert "T-trilinear ahead in 5 of 5 paired seeds" in text
    assert "O_1 / F1): no cells to judge yet" in text
    noisy = {k: {s: (v + (8.0 if s % 2 else -8.0)) if k[0] == "trilinear" else v for s, v in vals.items()}
             for k, vals in clear.items()}
    noisy[("trilinear", "O_1 / EM")] = {0: 2.0, 1: 20.0, 2: 3.0, 3: 19.0, 4: 18.0}   # mean 12.4, SD 8.9
    assert "O_1 / EM): in our numbers it holds, but not beyond the seed spread" in " ".join(_claim_notes(params, "4.3", noisy, T_ABOVE))
    order = {(r, "EM"): {s: v + s for s in range(5)} for r, v in
             (("RIG_1", 5.0), ("RIG_2", 4.0), ("RIG_3", 6.0), ("RIG_4", 7.0), ("RIG_5", 8.0))}
    notes = " ".join(_claim_notes(params, "5.2", order, ORDER))
    assert "EM): in our numbers it does not hold: our order, lowest first (reported cells): RIG_2 < RIG_1 < RIG_3 < " \
           "RIG_4 < RIG_5" in notes


@pytest.mark.slow
def test_the_smoke_scale_builds_every_table_end_to_end(tmp_path, mirror_dir):
    params = load("smoke")
    paths = Paths(tmp_path / "data", tmp_path / "runs", tmp_path / "results")
    fam = registry.get("squad")
    steps = {s.id: s for s in fam.data_steps(params)}
    for step in ("squad", "squad-vectors"):
        fam.prepare(step, params, paths, str(mirror_dir))
        assert (tmp_path / steps[step].output).is_file()          # the step's marker, relative to the repository
    status = json.loads((x.data_dir(params, paths.data) / "STATUS.json").read_text())
    assert not set(status["split"]["train_titles"]) & set(status["split"]["test_titles"])
    for group in fam.groups(params):
        fam.train(group.id, params, paths, "cpu")
        assert (tmp_path / group.done).is_file()
    for name in TABLES:
        out = build.table(params, "shen-thesis", name, paths)
        summary = json.loads(out["json"].read_text())
        with open(out["csv"], newline="") as f:
            rows = list(csv.DictReader(f))
        md = out["md"].read_text()
        assert "Scale `smoke`" in md and "GloVe 6B-50d" in md and "first occurrence" in md
        if name == "4.4":      # every cell is a run of ours; the reference keeps the published originals beside
            assert summary["n_cited"] == 0 and len(rows) == 12
            assert {r["paper"] for r in rows if r["row"] == "BiDAF"} == {"67.7", "77.3", "68.5", "77.9"}
            assert "Claim (§4.3: T-trilinear improves each model (EM)): unresolved in the document: in the " \
                   "thesis's numbers, T-trilinear / EM against Original similarity function / EM: BiDAF 68.5 " \
                   "against 67.7 (+0.8), DCN 65.7 against 65.4 (+0.3), QANet 74.9 against 73.6 (+1.3)" in md
            assert "BiDAF (squad.full_models" in md
        ok = [r for r in rows if r["status"] == "ok"]
        assert ok and all(0 <= float(r["reproduced"]) <= 100 for r in ok)
        assert all("max over seeds (0: " in r["note"] and ", 1: " in r["note"] for r in ok)
        assert "Claim (" in md
        if "figure" in out:
            assert out["figure"].stat().st_size > 5000
    cited = {r["row"]: r for r in csv.DictReader(open(paths.results / "shen-thesis" / "3.1.csv", newline=""))
             if r["column"] == "Original Model / EM"}
    assert cited["SAN"]["paper"] == "76.2" and cited["SAN"]["status"] == "cited"
    heatmap = build.output(params, "shen-thesis", "4.6", paths)[0]     # Figures 4.5/4.6 from the best seeds
    assert heatmap == paths.results / "shen-thesis" / "fig4.6.png" and heatmap.stat().st_size > 5000
    # Figure 4.2 (histograms of S) and the loss curves of Figures 4.4, 5.2 and A.1, from the same runs
    png, table, _ = build.output(params, "shen-thesis", "fig4.2", paths)
    assert png.stat().st_size > 5000 and table == paths.results / "shen-thesis" / "fig4.2.csv"
    bars = list(csv.DictReader(open(table, newline="")))
    assert {(r["output"], r["similarity"]) for r in bars} == {
        (o, s) for o in ("O_1", "O_2") for s in ("dot-product", "scaled dot-product", "cosine")}
    counts = {}
    for r in bars:
        counts[(r["output"], r["similarity"])] = counts.get((r["output"], r["similarity"]), 0) + int(r["count"])
    assert len(set(counts.values())) == 1          # the same sample: every model scores the same (i, j) pairs
    cosine = [r for r in bars if r["similarity"] == "cosine" and int(r["count"])]
    assert -1 - 1e-4 <= min(float(r["bin_left"]) for r in cosine) and max(float(r["bin_right"]) for r in cosine) <= 1 + 1e-4
    for name, n_lines in (("fig4.4", 10), ("fig5.2-loss", 8), ("figA.1-loss", 8)):
        png, table, _ = build.output(params, "shen-thesis", name, paths)
        assert png.stat().st_size > 5000
        rows = list(csv.DictReader(open(table, newline="")))
        assert len({(r["panel"], r["line"]) for r in rows}) == n_lines
        assert {r["seed"] for r in rows} == {"0", "1", "mean"}
    # the timing benchmark times each model it names
    params["outputs"]["shen-thesis"]["squad-timing"].update(steps=1, scales=["smoke"],
                                                            models=["baseline", "bidaf", "dcn", "qanet"])
    bench = build.output(params, "shen-thesis", "squad-timing", paths)[0].read_text()
    assert all(f"| {m} | smoke |" in bench for m in ("baseline", "bidaf", "dcn", "qanet"))
    record = json.loads((paths.results / "shen-thesis" / "squad-timing.output.json").read_text())
    assert record["kind"] == "benchmark" and record["files"] == ["squad-timing.md"]   # the index lists it
    # its epoch counts the questions a run trains on (those the passage cut keeps), as the runs record them
    row = next(line for line in bench.splitlines() if line.startswith("| baseline | smoke |"))
    gid = sg.group_id(params, sg.Config("trilinear", "RIG_4", "second", None))
    trained = json.loads((paths.runs / gid / f"seed{params['squad']['seeds'][0]}" / "metrics.json").read_text())
    assert int(row.split("|")[11]) == trained["n_train"]
    # and it bounds what running a configuration's seeds together could save: their batches in one step
    k = len(params["squad"]["seeds"])
    assert f"({k} x " in row.split("|")[14] and float(row.split("|")[15].strip().lstrip("x")) > 0
    # same seed, same numbers: one group trained again into a fresh folder
    again = Paths(paths.data, tmp_path / "runs2", paths.results)
    fam.train(gid, params, again, "cpu")
    for seed in params["squad"]["seeds"]:
        a = json.loads((paths.runs / gid / f"seed{seed}" / "metrics.json").read_text())
        b = json.loads((again.runs / gid / f"seed{seed}" / "metrics.json").read_text())
        assert (a["em"], a["f1"], a["per_epoch"]) == (b["em"], b["f1"], b["per_epoch"])


def test_the_optimizer_is_a_named_choice():
    from nlpbench.squad.model import ModelConfig
    from nlpbench.squad.train import TrainConfig, make_optimizer

    params = [torch.nn.Parameter(torch.zeros(2))]
    assert isinstance(make_optimizer(TrainConfig(), params), torch.optim.Adadelta)      # the thesis's
    assert isinstance(make_optimizer(TrainConfig(optimizer="adam", lr=0.005), params), torch.optim.Adam)
    with pytest.raises(ValueError, match="optimizer must be one of"):
        make_optimizer(TrainConfig(model=ModelConfig(), optimizer="sgd"), params)


def test_the_resolution_note_says_when_the_seeds_swamp_the_configurations():
    noisy = {("a", "O_1 / EM"): {0: 1.0, 1: 3.0, 2: 2.0}, ("b", "O_1 / EM"): {0: 1.5, 1: 3.5, 2: 2.0},
             ("b", "O_1 / F1"): {0: 50.0, 1: 0.0, 2: 9.0}}
    assert "does not separate its configurations" in x.resolution_note(noisy)[0]
    clear = {("a", "EM"): {0: 10.0, 1: 10.5}, ("b", "EM"): {0: 30.0, 1: 30.5}}
    note = x.resolution_note(clear)[0]
    assert "span 20.00 points, larger than" in note and "does not separate" not in note
    assert x.resolution_note({("a", "EM"): {0: 1.0, 1: 2.0}}) == []
    best_claim = [{"kind": "best", "rows": ["1:1", "5:6", "2:3", "1:2", "1:3", "1:6"], "columns": ["EM"],
                   "text": "2:3 is best by EM"}]
    best = {(r, "EM"): {0: 5.0, 1: 4.0} for r in ("1:1", "5:6", "1:2", "1:3", "1:6")}
    best[("2:3", "EM")] = {0: 5.5, 1: 4.1}
    assert "EM): in our numbers it holds, but its lead is not beyond the seed spread" in " ".join(_claim_notes(load("paper"), "5.5", best, best_claim))
    best[("2:3", "EM")] = {0: 9.0, 1: 9.1}
    assert "EM): in our numbers it holds, and its lead is larger than the seed spread" in " ".join(_claim_notes(load("paper"), "5.5", best, best_claim))
    tie = {(r, "EM"): {0: 5.0, 1: 4.0} for r in ("1:1", "5:6", "2:3", "1:2", "1:3", "1:6")}
    assert "EM): in our numbers it is not decided (the reported cells tie 1:1 with 5:6, 2:3" in " ".join(_claim_notes(load("paper"), "5.5", tie, best_claim))


def test_a_claim_the_thesiss_own_numbers_cannot_decide_is_unresolved_and_says_why():
    params = load("cpu")
    per_seed = {(r, c): {0: v, 1: v + 1, 2: v + 2} for r, v in (("trilinear", 30.0), ("bilinear", 20.0),
                                                                ("cosine", 25.0)) for c in ("O_1 / EM", "O_2 / EM")}
    text = " ".join(_claim_notes(params, "4.2", per_seed))
    assert "Claim (§4.2: scaling does not help dot-product): unresolved in the document: in the thesis's numbers, " \
           "O_1 / EM: dot-product 63.8 against scaled dot-product 63.3 (+0.5); O_2 / EM: dot-product 64.2 against " \
           "scaled dot-product 63.5 (+0.7); the thesis prints the best of five training runs (§4.2)" in text
    assert "trilinear far above bilinear" in text and "in our numbers it holds" in text


def test_at_cpu_table_4_2_judges_its_claims_though_its_level_is_not_the_thesiss(tmp_path):
    """not_comparable with claims_testable: the table's status stays 'not comparable', its large-gap claims are
    judged on our cells, its sub-point claims are unresolved in the thesis with its numbers and the reason, and rows
    it does not train read 'paper scale only'."""
    params = load("cpu")
    for sim, base in (("trilinear", 30.0), ("bilinear", 20.0), ("cosine", 22.0)):
        for out, lift in (("O_1", 0.0), ("O_2", 5.0)):
            _fake_run(tmp_path / "runs", params, sg.Config(sim, out, None, None),
                      {0: base + lift, 1: base + lift + 0.5, 2: base + lift + 1.0})
    paths = Paths(tmp_path / "data", tmp_path / "runs", tmp_path / "results")
    out = build.table(params, "shen-thesis", "4.2", paths)
    side = json.loads(out["json"].read_text())
    md = out["md"].read_text()
    assert side["status"] == "not comparable at this scale"
    verdicts = {(c["claim"], c["subject"]): c["verdict"] for c in side["claims"]}
    assert verdicts[("§4.2: trilinear far above bilinear (+14.5 EM under O_1, +6.9 under O_2)", "O_1 / EM")] == "holds"
    assert verdicts[("§4.2: O_2 beats O_1 for every function but general-2", "")] == "unresolved in the document"
    sentence = next(c["sentence"] for c in side["claims"] if c["claim"] == "§4.2: scaling does not help dot-product")
    assert "in the thesis's numbers, O_1 / EM: dot-product 63.8 against scaled dot-product 63.3 (+0.5)" in sentence
    assert "best of five training runs (§4.2)" in sentence
    rows = list(csv.DictReader(open(out["csv"], newline="")))
    assert {r["status"] for r in rows if r["row"] == "FNN"} == {"paper_only"} and "paper scale only" in md


def test_a_run_stopped_while_still_learning_is_one_whose_chosen_epoch_is_in_the_last_tenth():
    from nlpbench.results import claims
    assert claims.still_learning(10, 10) and not claims.still_learning(9, 10)
    assert claims.still_learning(19, 20) and claims.still_learning(20, 20) and not claims.still_learning(18, 20)
    assert claims.still_learning(1, 1) and not claims.still_learning(1, 2)


def test_a_claim_judged_at_a_scale_not_the_thesiss_waits_for_runs_that_converged(tmp_path):
    """claims_testable judges orderings between our own cells only where their runs converged: a claim whose cells
    come from a run that validation picked at its last epoch (still learning) is untestable, naming the cells and
    seeds, and the table's JSON keeps which seeds, so that `nlpbench judge` reaches the same verdict."""
    from nlpbench.results import rejudge
    params = load("cpu")
    for sim, base in (("trilinear", 30.0), ("bilinear", 20.0), ("cosine", 22.0)):
        for out, lift in (("O_1", 0.0), ("O_2", 5.0)):
            still = sim == "bilinear" and out == "O_2"
            _fake_run(tmp_path / "runs", params, sg.Config(sim, out, None, None),
                      {0: base + lift, 1: base + lift + 0.5, 2: base + lift + 1.0},
                      chosen={0: 7, 1: 10 if still else 8, 2: 6})
    paths = Paths(tmp_path / "data", tmp_path / "runs", tmp_path / "results")
    out = build.table(params, "shen-thesis", "4.2", paths)
    side = json.loads(out["json"].read_text())
    claim = "§4.2: trilinear far above bilinear (+14.5 EM under O_1, +6.9 under O_2)"
    by = {(c["claim"], c["subject"]): c for c in side["claims"]}
    assert by[(claim, "O_1 / EM")]["verdict"] == "holds"
    assert by[(claim, "O_2 / EM")]["verdict"] == "untestable at this scale"
    assert "the runs had not converged (validation chose an epoch among the last tenth of those trained) in " \
           "bilinear: O_2 / EM (seed 1)." in by[(claim, "O_2 / EM")]["sentence"]
    assert "in our numbers it holds" in by[(claim, "O_2 / EM")]["sentence"]      # what the cells say so far
    cell = next(c for c in side["cells"] if (c["row"], c["column"]) == ("bilinear", "O_2 / EM"))
    assert cell["still_learning"] == [1]
    assert "still_learning" not in next(c for c in side["cells"] if (c["row"], c["column"]) == ("trilinear", "O_2 / EM"))
    rejudge.judge_all(REPO / "params.yaml", params, paths.results, ["shen-thesis/4.2"])
    assert json.loads(out["json"].read_text())["claims"] == side["claims"]


def test_a_tables_own_training_settings_reach_its_runs_and_no_other_tables():
    """A table's `train` (say A.1 trained until validation says its runs converged): its configurations train with
    its epochs, patience and min_epochs, under their own group ids; every other table's runs keep squad.train; a
    bad key or a patience without validation articles is named with the table's file."""
    own = {"epochs": 30, "patience": 3, "min_epochs": 10}
    params = with_table_train(load("cpu"), "A.1", own)
    a1 = sg.table_configs(params, "A.1")
    assert len(a1) == 4 and all(dict(c.train) == own for c in a1)
    for c in a1:
        settings = sg.group_settings(params, c)["train"]
        assert (settings["epochs"], settings["patience"], settings["min_epochs"], settings["valid_articles"]) == (
            30, 3, 10, 6)
    plain = load("cpu")                                                   # the same cells without the table's train
    assert {sg.group_id(plain, c) for c in sg.table_configs(plain, "A.1")}.isdisjoint(
        sg.group_id(params, c) for c in a1)
    others = {g: c for g, c in sg.all_configs(params).items() if c not in a1}
    assert others == {g: c for g, c in sg.all_configs(plain).items() if not c.output.startswith("A1")}
    assert all(c.train == () and sg.group_settings(params, c)["train"]["patience"] is None
               and sg.group_settings(params, c)["train"]["epochs"] == 10 for c in others.values())
    note = x.table_train_note(params, "A.1")
    assert len(note) == 1 and "stops once 3 epochs pass without a higher validation EM" in note[0]
    assert "never before epoch 10" in note[0] and x.table_train_note(params, "4.2") == []
    sg.check(params)
    with pytest.raises(ConfigError, match=r"shen-thesis/A\.1\.yaml.*train.*unknown key.*'lr'"):
        sg.check(with_table_train(params, "A.1", {"lr": 0.1}))
    with pytest.raises(ConfigError, match=r"shen-thesis/A\.1\.yaml.*valid_articles"):
        sg.check(with_table_train(params, "A.1", {"patience": 3, "valid_articles": 0}))


def with_table_train(params: dict, name: str, train: dict) -> dict:
    """params with table `name` declaring its own `train` (as its home's by_scale would, once resolved)."""
    import copy
    out = copy.deepcopy(params)
    out["tables"]["shen-thesis"][name]["train"] = train
    return out
