"""Tables 6.2-6.7 from params.yaml: groups of runs, derived data, cells, cited columns, claims and figures
(Shen thesis ch. 6; nlpbench.dmn.experiments). Tables are built from runs written here, so nothing trains."""

from __future__ import annotations

import copy
import csv
import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from nlpbench import config
from nlpbench.data.fetch import FetchError, PreparedDataChanged
from nlpbench.dmn import experiments as dx
from nlpbench.dmn import groups as dg
from nlpbench.family import Paths
from nlpbench.results import build
from nlpbench.results.results_index import write_index
from nlpbench.runtime import io, run_record

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def params() -> dict:
    return config.load(REPO / "params.yaml", {"scale": "cpu"})


def test_runs_shared_between_tables_fall_in_one_group(params):
    groups = dg.all_groups(params)
    by_model_kind = {(g.model, g.kind) for g in groups.values()}
    assert by_model_kind == {("dmn+", "patterns"), ("dmn+", "augmented"), ("modmn+", "patterns"),
                             ("dmn+", "tasks"), ("ff-dmn", "tasks")}
    cols = dg.column_groups(params, "6.3")
    assert cols["Trained Network / 1"]["dmn+"] == dg.column_groups(params, "6.2")["Trained Network / 1"]["dmn+"]
    ens = dg.column_groups(params, "6.7")["Ensemble"]
    assert set(ens) == {"ff-dmn", "dmn+"}                       # eq. 6.20: both members' runs
    assert ens["dmn+"] == dg.column_groups(params, "6.5")["DMN+ (ours)"]["dmn+"]
    assert ens["dmn+"].items == tuple(f"task{t}" for t in range(1, 21))
    # Table 6.4's claim compares with Table 6.2, so its rule waits for the DMN+ pattern runs too
    assert {g.model for g in dg.table_groups(params, "6.4")} == {"modmn+", "dmn+"}


def test_a_runs_model_config_follows_its_settings_never_a_default(params):
    """A DMN+ or MoDMN+ run's config holds the ff-DMN readings it does not read (its settings drop them) at their
    neutral values, as every earlier checkpoint's identity does; an ff-DMN run's holds its settings'."""
    neutral = {k: dg.HASH_NEUTRAL[("model", k)] for k in dg.FF_DMN_ONLY}
    for g in dg.all_groups(params).values():
        cfg = dataclasses.asdict(dx.model_config(g.model, g.settings))
        assert {k: cfg[k] for k in g.settings["model"]} == g.settings["model"]
        if g.model != "ff-dmn":
            assert {k: cfg[k] for k in dg.FF_DMN_ONLY} == neutral
    ff = dx.model_config("ff-dmn", dg.resolved_settings(params, "tasks", "ff-dmn"))
    assert ff.question_in_update is True             # params.yaml's: the reading validation chose (pilot-ffdmn)


def test_columns_whose_overrides_resolve_to_the_same_settings_share_one_group(params):
    p = copy.deepcopy(params)
    columns = p["tables"]["shen-thesis"]["6.5"]["columns"]
    plain = dg.column_groups(p, "6.5")["DMN+ (ours)"]["dmn+"]
    columns["DMN+ (ours)"]["overrides"] = {"model.dim": params["dmn"]["model"]["dim"], "train.lr": 0.001}
    assert dg.column_groups(p, "6.5")["DMN+ (ours)"]["dmn+"] == plain     # the defaults, written out
    assert set(dg.groups_by_id(p)) == set(dg.groups_by_id(params))
    columns["DMN+ (ours)"]["overrides"] = {"train.lr": 0.002}
    assert dg.column_groups(p, "6.5")["DMN+ (ours)"]["dmn+"].group_id != plain.group_id


def test_train_overrides_apply_per_kind_then_per_model():
    cut = {"tasks": {"max_epochs": 3}, "ff-dmn": {"max_epochs": 10, "patience": 3}}
    p = config.load(REPO / "params.yaml", {"scale": "cpu", "dmn": {"train_overrides": cut}})
    tr = {(g.model, g.kind): g.settings["train"] for g in dg.all_groups(p).values()}
    assert tr[("dmn+", "tasks")]["max_epochs"] == 3                       # the kind's cut
    assert tr[("ff-dmn", "tasks")]["max_epochs"] == 10                    # the model's cut wins over the kind's
    assert tr[("ff-dmn", "tasks")]["patience"] == 3 and tr[("dmn+", "tasks")]["patience"] == 20
    assert tr[("dmn+", "patterns")]["max_epochs"] == 256                  # other kinds keep the thesis's
    assert all(t["lr"] == 0.001 for t in tr.values())


@pytest.mark.parametrize("scale", ["paper", "cpu"])
def test_paper_and_cpu_scales_train_the_dmn_family_at_the_thesis_settings(scale):
    """The cpu scale of the DMN tables is the thesis's protocol (up to 256 epochs, patience 20, the
    epoch of lowest validation loss, full stories), not a cut of it."""
    groups = dg.all_groups(config.load(REPO / "params.yaml", {"scale": scale})).values()
    assert {g.kind for g in groups} == {"tasks", "patterns", "augmented"}
    for g in groups:
        t = g.settings["train"]
        assert (t["max_epochs"], t["patience"], t["select_by"]) == (256, 20, "val_loss"), g.group_id
        assert g.settings["data"]["memory_size"] is None, g.group_id


def test_group_ids_follow_the_settings_not_the_notes(params):
    ids = set(dg.groups_by_id(params))
    p = copy.deepcopy(params)
    p["tables"]["shen-thesis"]["6.2"]["notes"] = ["a note"]
    p["tables"]["shen-thesis"]["6.2"]["claims"] = [{"kind": "own_pattern_best", "a": ["Trained Network / 1"],
                                                     "text": "t"}]
    assert set(dg.groups_by_id(p)) == ids
    p["dmn"]["model"]["hops"] = 2
    assert not set(dg.groups_by_id(p)) & ids
    # the augmented data set depends on the augmentation recipe, the pattern data set does not
    q = copy.deepcopy(params)
    q["dmn"]["augment"]["source"] = "pattern1"
    assert set(dg.all_datasets(q)) ^ set(dg.all_datasets(params)) == {
        d for d in set(dg.all_datasets(q)) ^ set(dg.all_datasets(params)) if d.startswith("augmented-")}
    assert len(set(dg.all_datasets(q)) ^ set(dg.all_datasets(params))) == 2


def test_bad_declarations_are_named(params):
    p = copy.deepcopy(params)
    p["tables"]["shen-thesis"]["6.2"]["columns"]["Trained Network / 1"]["data"] = "task"
    with pytest.raises(config.ConfigError, match="Trained Network / 1: data 'task' needs task rows"):
        dg.all_groups(p)
    with pytest.raises(config.ConfigError, match=r"(?s)pipeline/tables/shen-thesis/6\.2\.yaml.*columns\.x\.data.*pattern7"):
        config.load(REPO / "params.yaml", {"tables.shen-thesis.6.2": {
            "family": "dmn", "rows": "patterns", "columns": {"x": {"model": "dmn+", "data": "pattern7"}}}})
    with pytest.raises(config.ConfigError, match="unknown key 'dmn.model.size'"):
        config.load(REPO / "params.yaml", {"dmn.model.size": 3})


def _build(params: dict, table: str, runs: Path, results: Path, data: Path) -> dict:
    """The table as the pipeline builds it: the family's cells, written by the core (nlpbench.results.build)."""
    return build.table(params, "shen-thesis", table, Paths(data=data, runs=runs, results=results))


# -- tables from runs written here ----------------------------------------------------------------------------

def _write_run(group, runs_root: Path, item: str, seed: int, test_acc: dict, val_acc: float = 0.5) -> None:
    io.write_json(group.run_dir(runs_root, item, seed) / "metrics.json", {
        "run_id": f"{group.group_id}/{item}-seed{seed}", "status": "ok", "model": group.model, "item": item,
        "seed": seed, "epochs": 7, "best_epoch": 5, "val_loss": 1.0, "val_acc": val_acc, "test_acc": test_acc,
        "sizes": {"train": 1200}, "device": "cpu (test)", "train_wall_time_s": 60.0})


def _write_group(group, runs_root: Path) -> None:
    """Each item's job summary (what the pipeline's job writes last)."""
    for item in group.items:
        io.write_json(dg.job_done(group, item, runs_root), {"group": group.group_id, "item": item,
                                                            "wall_time_s": 60.0})


def test_pattern_tables_read_each_networks_test_patterns_and_judge_the_claims(params, tmp_path):
    runs, results = tmp_path / "runs", tmp_path / "results"
    dmn = dg.column_groups(params, "6.2")["Trained Network / 1"]["dmn+"]
    modmn = dg.column_groups(params, "6.4")["Trained pattern / 1"]["modmn+"]
    aug = dg.column_groups(params, "6.3")["Trained Network / augmented"]["dmn+"]
    for k in range(1, 7):
        # DMN+ network k: 80% on its own pattern, 40% elsewhere; network 5 is best on pattern 2 instead
        own = 2 if k == 5 else k
        _write_run(dmn, runs, f"pattern{k}", 0, {f"pattern{j}": 0.8 if j == own else 0.4 for j in range(1, 7)})
        _write_run(modmn, runs, f"pattern{k}", 0, {f"pattern{j}": 0.55 + 0.01 * (j == k) for j in range(1, 7)})
    _write_run(aug, runs, "augmented", 0, {f"pattern{j}": 0.6 for j in range(1, 7)})
    for g in (dmn, modmn, aug):
        _write_group(g, runs)

    paths = _build(params, "6.2", runs, results, tmp_path)
    with open(paths["csv"], newline="") as f:
        cells = {(r["row"], r["column"]): r for r in csv.DictReader(f)}
    assert cells[("3", "Trained Network / 3")]["reproduced"] == "80"
    assert cells[("1", "Trained Network / 3")]["reproduced"] == "40"
    assert cells[("1", "Trained Network / 1")]["paper"] == "73.3"
    assert float(cells[("1", "Trained Network / 1")]["diff"]) == pytest.approx(80 - 73.3)
    md = Path(paths["md"]).read_text()
    assert "in our numbers it does not hold: 5 of 6 networks score best on their own pattern (not network 5: 40.0 on " \
           "its own pattern, 80.0 on pattern 2)" in md
    assert "in the thesis's numbers it does not hold: 5 of 6 networks score best on their own pattern (not network " \
           "5: 64.7" in md   # the thesis's own numbers
    assert "Scale `cpu`: the thesis's settings (readings below), no cuts." in md
    assert Path(paths["figure"]).name == "fig6.3.png" and Path(paths["figure"]).stat().st_size > 5000

    md3 = Path(_build(params, "6.3", runs, results, tmp_path)["md"]).read_text()
    assert "the augmented network performs more or less equally on all test patterns; Trained Network / augmented against" \
           not in md3             # a list of columns on one side: no "a against b"
    assert "all test patterns): in our numbers it holds: spread (max - min over the 6 rows) 0.0 points" in md3
    md4 = Path(_build(params, "6.4", runs, results, tmp_path)["md"]).read_text()
    assert "MoDMN+ reduces the variation across test patterns (against DMN+, Table 6.2)): in our numbers it holds: mean " \
           "spread (max - min over the rows) 1.0 points here against 40.0 in Table 6.2" in md4
    sidecar = io.read_json(results / "shen-thesis" / "fig6.8.output.json")
    assert sidecar["kind"] == "figure" and sidecar["status"] == "generated" and "6.4.csv" in sidecar["files"]
    write_index(results)                                   # as the pipeline's index rule does
    readme = (results / "README.md").read_text()
    assert "fig6.8.png" in readme and "6.4" in readme


def test_task_tables_have_cited_columns_an_ensemble_and_needs_data(params, tmp_path):
    runs, results = tmp_path / "runs", tmp_path / "results"
    cols = dg.column_groups(params, "6.7")
    ff, dmn = cols["Ensemble"]["ff-dmn"], cols["Ensemble"]["dmn+"]
    gold = torch.tensor([0, 1, 2, 0])
    # ff-DMN is right on questions 0 and 1, DMN+ on 0 and 2; on question 3 only the average is right
    p_ff = torch.tensor([[0.9, 0.1, 0.0], [0.1, 0.9, 0.0], [0.6, 0.4, 0.0], [0.45, 0.55, 0.0]])
    p_dmn = torch.tensor([[0.8, 0.0, 0.2], [0.0, 0.3, 0.7], [0.0, 0.1, 0.9], [0.45, 0.0, 0.55]])
    for task in range(1, 21):
        if task == 3:
            for g in (ff, dmn):
                io.write_json(g.run_dir(runs, "task3", 0) / "metrics.json",
                              {"status": "needs_data", "seed": 0, "detail": "qa3 train file missing"})
            continue
        for g, p in ((ff, p_ff), (dmn, p_dmn)):
            acc = float((p.argmax(-1) == gold).float().mean())
            _write_run(g, runs, f"task{task}", 0, {"test": acc})
            torch.save({"answers": ["a", "b", "c"], "probs": {"test": p}, "gold": {"test": gold}},
                       g.run_dir(runs, f"task{task}", 0) / "test_probs.pt")
    for g in (ff, dmn):
        _write_group(g, runs)
    paths = _build(params, "6.7", runs, results, tmp_path)
    with open(paths["csv"], newline="") as f:
        cells = {(r["row"], r["column"]): r for r in csv.DictReader(f)}
    # eq. 6.21 over (P_ff + P_dmn) / 2 answers all four (each member only two)
    assert float(cells[("1", "Ensemble")]["reproduced"]) == pytest.approx(100.0)
    assert float(cells[("1", "DMN+ (ours)")]["reproduced"]) == pytest.approx(50.0)
    assert cells[("1", "LSTM")]["status"] == "cited" and cells[("1", "LSTM")]["paper"] == "50.0"
    assert cells[("1", "LSTM")]["reproduced"] == "" and "cited" in cells[("1", "LSTM")]["note"]
    assert cells[("3", "Ensemble")]["status"] == "needs_data"
    assert cells[("mean", "Ensemble")]["note"] == "over 19 of 20 rows"
    summary = io.read_json(paths["json"])
    assert summary["status"] == "reproduced (20 of 21 cells)" and summary["n_cited"] == 21 * 5   # task 3 needs data
    md = Path(paths["md"]).read_text()
    assert "| cited (not run) | 50.0 (cited) |" in md
    assert "Ensemble passes (>= 95%) 19 of 19 tasks" in md and "Ensemble passes (>= 95%) 20 of 20 tasks" in md
    assert "in our numbers it holds: over tasks" in md          # a verdict, not only a label

    # Table 6.5 reads the same runs; a missing run is 'not run', never a number
    (ff.run_dir(runs, "task4", 0) / "metrics.json").unlink()
    with open(_build(params, "6.5", runs, results, tmp_path)["csv"], newline="") as f:
        cells5 = {(r["row"], r["column"]): r for r in csv.DictReader(f)}
    assert cells5[("4", "ff-DMN")]["status"] == "not_run" and cells5[("4", "ff-DMN")]["reproduced"] == ""
    assert cells5[("5", "ff-DMN")]["paper"] == "92.7" and cells5[("5", "DMN+ (ours)")]["paper"] == ""


def test_derived_data_rule_writes_the_patterns_from_real_data(params, babi_root, tmp_path):
    pid = next(d for d in dg.all_datasets(params) if d.startswith("patterns-"))
    manifest = io.read_json(dx.make_dataset(pid, params, babi_root, tmp_path, log=lambda s: None))
    assert {k: v["n"] for k, v in manifest["splits"].items() if k.startswith("pattern2")} == {
        "pattern2_train": 1200, "pattern2_val": 133, "pattern2_test": 333}
    # the natural order of the file is mostly F2, F3, F1: why the patterns are constructed
    hist = manifest["params"]["natural_pattern_histogram"]
    assert sum(hist.values()) == 10000 and max(hist, key=hist.get) == "4"
    with pytest.raises(config.ConfigError, match="unknown DMN data set 'patterns-nope'"):
        dx.make_dataset("patterns-nope", params, babi_root, tmp_path)


def test_no_derived_data_from_an_empty_babi_file(params, tmp_path):
    """An empty task-16 file derives nothing and writes no manifest (the data step's "done")."""
    pid = next(d for d in dg.all_datasets(params) if d.startswith("patterns-"))
    variant = dg.all_datasets(params)[pid][1]["patterns"]["variant"]
    babi_dir = tmp_path / "babi" / variant
    babi_dir.mkdir(parents=True)
    for split in ("train", "test"):
        (babi_dir / f"qa16_basic-induction_{split}.txt").write_text("")
    with pytest.raises(FetchError, match="qa16_basic-induction_train.txt: no questions"):
        dx.make_dataset(pid, params, tmp_path / "babi", tmp_path / "dmn", log=lambda s: None)
    assert not (tmp_path / "dmn" / pid / "manifest.json").exists()


def test_timing_benchmark_reads_the_pipelines_job_times_and_epochs(params, tmp_path):
    """timing.dmn: each group's job minutes from its benchmark file, the epochs its runs trained before early
    stopping, and the two-core wall-time bound, rendered beside the step timings; a group never timed says so."""
    from nlpbench.timing import dmn as bench
    logs, runs = tmp_path / "logs", tmp_path / "runs"
    tasks = dg.column_groups(params, "6.5")["DMN+ (ours)"]["dmn+"]
    logs.mkdir()
    for item, seconds in (("task1", 1200.0), ("task2", 2400.0)):             # one benchmark file per job
        (logs / f"{dg.job_id(tasks, item)}.benchmark.tsv").write_text(f"s\th:m:s\n{seconds}\t0:20:00\n")
    for epochs, best, item in ((23, 3, "task1"), (61, 41, "task2"), (40, 20, "task4")):
        io.write_json(runs / tasks.group_id / f"{item}-seed0" / "metrics.json",
                      {"status": "ok", "epochs": epochs, "best_epoch": best})
    costs = {c["group"]: c for c in bench.pipeline_costs(params, logs, runs)}
    mine = costs[tasks.group_id]
    assert mine["seconds"] == 3600.0 and mine["jobs_timed"] == 2 and mine["longest"] == 2400.0
    assert mine["trained"] == 3 and mine["epochs"] == [23, 40, 61]
    assert all(c["seconds"] is None for g, c in costs.items() if g != tasks.group_id)
    steps = [{"task": 1, "model": "dmn+", "ours": 20.0, "plain": 50.0, "batches": 63, "longest": 10,
              "mean_facts": 6.0}]
    md, csv_text = bench.render(steps, list(costs.values()), {"device": "cpu"}, ["a note"])
    assert "| dmn+ task 1: ours / plain | 20 | ms | plain 50.0 ms, x2.50;" in md
    assert "epochs trained min / median / max 23 / 40 / 61; selected epoch 3 / 20 / 41" in md
    assert "| wall time on two cores, at least | 40 | min |" in md          # the longest job (40 min) or half of 60
    assert "not timed" in md and "dmn+,one epoch" not in csv_text
    # the DMN tables' end-to-end measurement beside them: its record, or a row saying there is none yet
    record = {"tables": ["6.2", "6.5"], "commit": "0123456789", "started": "2026-11-27 13:30 UTC", "load_at_start": 1.0,
              "config": {}, "cores": 2, "target_minutes": 120, "wall_time_s": 5010.0, "job_seconds": {"a": 9870.0},
              "runs_compared_with_checkout": {"a": {"runs": 4, "identical": 1, "differ": 0, "new": 3}}}
    md, csv_text = bench.render(steps, list(costs.values()), {"device": "cpu"}, ["a note"],
                                {"dmn-thesis-epochs": record, "another": None})
    assert "## Measured end to end: `nlpbench end-to-end dmn-thesis-epochs` (Tables 6.2, 6.5," in md
    assert "| wall time, 2 jobs side by side | 83.5 | min | snakemake --config none; the declared target: 120 min |" in md
    assert "| training jobs | 164.5 | min | 1 job, each timed by its `benchmark:` file; over 2 cores 82.2 min |" in md
    assert "| runs with exactly the numbers of this checkout's run of the same id | 1 | runs | of 4 trained;" in md
    assert "end-to-end another`\n" in md and "| not measured yet | not timed | min |" in md


def test_timing_benchmark_times_both_forward_passes_on_one_trainer_each(babi_root):
    """bench.step_ms runs real training steps with either forward pass (the weights move)."""
    from nlpbench.data.babi import load_task, train_val_split
    from nlpbench.timing import dmn as bench
    from nlpbench.dmn.model import DMNConfig
    from nlpbench.dmn.train import DMNTrainConfig, DMNTrainer, build_data
    train, test = load_task(babi_root, "en", 2)
    tr, va = train_val_split(train[:300], 60, 0)
    data = build_data({"train": tr, "val": va, "test": test[:50]})
    for plain in (False, True):
        t = DMNTrainer(DMNConfig(0, 0, dim=8), DMNTrainConfig(batch_size=32), data, 0, log=lambda _: None)
        before = t.model.answer.weight.detach().clone()
        assert bench.step_ms(t, plain, 2) > 0
        assert not torch.equal(before, t.model.answer.weight)


def test_timing_benchmark_times_runs_alone_and_in_one_pass_and_shows_the_ratio(babi_root):
    """bench._alone_and_together_ms trains both ways (the weights of both move); render shows each row with its
    ratio and projects the pipeline's job time from the ratio of each group's model."""
    from nlpbench.data.babi import load_task, train_val_split
    from nlpbench.timing import dmn as bench
    from nlpbench.dmn.model import DMNConfig
    from nlpbench.dmn.train import DMNTrainConfig, DMNTrainer, build_data
    train, test = load_task(babi_root, "en", 2)
    tr, va = train_val_split(train[:300], 60, 0)
    data = build_data({"train": tr, "val": va, "test": test[:50]})
    trainers = [DMNTrainer(DMNConfig(0, 0, dim=8), DMNTrainConfig(batch_size=32), data, s, log=lambda _: None)
                for s in (0, 1)]
    before = [t.model.answer.weight.detach().clone() for t in trainers]
    alone, together = bench._alone_and_together_ms(trainers, 2)
    assert alone > 0 and together > 0
    assert all(not torch.equal(b, t.model.answer.weight) for b, t in zip(before, trainers))
    rows = [{"model": "dmn+", "what": "the 5 seeds of task 1", "runs": 5, "alone": 30.0, "together": 20.0}]
    costs = [{"group": "g", "model": "dmn+", "kind": "tasks", "runs": 5, "trained": 5, "seconds": 600.0, "jobs": 1,
              "jobs_timed": 1, "longest": 600.0, "epochs": [30], "best": [10]}]
    md, csv_text = bench.render([], costs, {"device": "cpu"}, [], None, rows)
    assert "dmn+, the 5 seeds of task 1: alone / together | 20 | ms | alone 30.0 ms: x1.50 per run" in md
    assert "the same jobs with each item's seeds in one pass, projected\",6.66667,min" in csv_text


def test_the_dmn_timing_benchmark_is_an_on_demand_target_of_the_timing_package(params):
    from nlpbench import plan
    p = plan.make(params)
    t = p.targets["shen-thesis/dmn-timing"]
    assert t.on_demand and t.groups == () and t.needs == ("babi",) and p.owner[t.key] == "timing"


def test_each_item_of_a_group_is_a_pipeline_job_of_its_own(params):
    """One job per (group, item): the scheduler keeps both cores busy to the end; a table waits for the
    jobs of every item of its groups; a job's marker sits in its group's folder beside the runs."""
    from nlpbench import plan
    p = plan.make(params)
    jobs = dg.jobs(params)
    assert len(jobs) == sum(len(g.items) for g in dg.all_groups(params).values())
    assert {j for j in p.groups if p.owner[j] == "dmn"} == set(jobs)
    g, item = jobs[next(j for j in jobs if j.endswith(".task5"))]
    assert g.model in ("dmn+", "ff-dmn") and item == "task5"
    assert Path(p.groups[dg.job_id(g, item)].done).parent == Path("runs") / g.group_id
    t65 = p.targets["shen-thesis/6.5"]
    assert set(t65.groups) == {dg.job_id(g, i) for g in dg.table_groups(params, "6.5") for i in g.items}


def test_a_job_trains_its_item_only_and_writes_its_marker_last(params, tmp_path, monkeypatch):
    trained = []
    monkeypatch.setattr(dx, "train_run", lambda g, item, seed, *a, **k: trained.append((item, seed)) or
                        {"status": "ok", "train_wall_time_s": 2.0})
    g = dg.column_groups(params, "6.5")["DMN+ (ours)"]["dmn+"]
    summary = dx.train_item(g, "task4", tmp_path / "babi", tmp_path / "dmn", tmp_path / "runs")
    assert trained == [("task4", s) for s in g.seeds]
    assert io.read_json(dg.job_done(g, "task4", tmp_path / "runs")) == summary
    assert summary["wall_time_s"] == 2.0 * len(g.seeds)


def _finished_run(run: Path, group, item: str, seed: int, settings: dict, device: str) -> None:
    """A finished run's files as train_run writes them."""
    run.mkdir(parents=True)
    for name in dx.RUN_FILES:
        (run / name).write_bytes(name.encode())
    io.write_json(run / "config.json", {"group": run.parent.name, "model": group.model, "kind": group.kind,
                                        "item": item, "seed": seed, "settings": settings})
    run_record.finish(run, dx.RECORDED, {"run_id": f"{run.parent.name}/{run.name}", "status": "ok", "seed": seed,
                                         "item": item, "val_acc": 0.9, "test_acc": {"test": 0.8},
                                         "train_wall_time_s": 60.0, "device": device})


def test_a_run_another_group_finished_with_the_same_configuration_is_taken_over_not_trained(params, tmp_path,
                                                                                           monkeypatch):
    """A group that differs from another only in its seeds (a table given five seeds, a pilot's runs) takes over
    the runs they share: same model, data, item, seed and settings on a device of the same label."""
    from nlpbench.runtime.provenance import device_label
    trained = []
    monkeypatch.setattr(dx, "train_run", lambda g, item, seed, *a, **k: trained.append(seed) or
                        {"status": "ok", "train_wall_time_s": 2.0})
    g = dg.column_groups(params, "6.5")["DMN+ (ours)"]["dmn+"]
    g = dataclasses.replace(g, seeds=(0, 1, 2))
    runs = tmp_path / "runs"
    settings = json.loads(json.dumps(g.settings))        # as config.json holds them
    _finished_run(runs / "dmn-dmnplus-tasks-d80-pilot" / "task4-seed0", g, "task4", 0, settings, device_label("cpu"))
    other_lr = copy.deepcopy(settings)
    other_lr["train"]["lr"] = 0.01
    _finished_run(runs / "dmn-dmnplus-tasks-d80-lr" / "task4-seed1", g, "task4", 1, other_lr, device_label("cpu"))
    _finished_run(runs / "dmn-dmnplus-tasks-d80-gpu" / "task4-seed2", g, "task4", 2, settings, "cuda (H200)")
    summary = dx.train_item(g, "task4", tmp_path / "babi", tmp_path / "dmn", runs)
    assert trained == [1, 2]                        # another lr, another device: trained here
    mine = g.run_dir(runs, "task4", 0)
    metrics = io.read_json(mine / "metrics.json")
    assert metrics["run_id"] == f"{g.group_id}/task4-seed0"
    assert metrics["adopted_from"] == "dmn-dmnplus-tasks-d80-pilot/task4-seed0" and metrics["test_acc"] == {"test": 0.8}
    assert io.read_json(mine / "config.json")["group"] == g.group_id
    assert all((mine / name).read_bytes() == name.encode() for name in dx.RUN_FILES)
    assert summary["trained_now"] == 2 and summary["wall_time_s"] == 60.0 + 2 * 2.0
    assert summary["taken_over_s"] == 60.0          # a fresh clone trains it: part of the group's cost
    # the job resumed after the take-over still counts it
    assert dx.train_item(g, "task4", tmp_path / "babi", tmp_path / "dmn", runs)["taken_over_s"] == 60.0


@pytest.fixture(scope="module")
def smoke_twins(babi_root, tmp_path_factory) -> tuple:
    """A DMN+ run on task 1 really trained at the smoke scale by a pilot group, and a table group with the same
    configuration that has not trained it: (pilot, table group, runs folder to copy, the pilot's run)."""
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    table = dataclasses.replace(dg.column_groups(params, "6.5")["DMN+ (ours)"]["dmn+"], seeds=(0,))
    pilot = dataclasses.replace(table, group_id="dmn-dmnplus-tasks-pilot")
    runs = tmp_path_factory.mktemp("dmn_twins") / "runs"
    dx.train_run(pilot, "task1", 0, babi_root, runs.parent / "dmn", runs, log=lambda _: None)
    return pilot, table, runs, pilot.run_dir(runs, "task1", 0)


def test_a_finished_run_records_every_file_and_is_taken_over_as_recorded(smoke_twins, babi_root, tmp_path):
    pilot, table, runs, twin = smoke_twins
    record = io.read_json(twin / run_record.RECORD)["files"]
    assert set(record) == {"model.pt", "test_probs.pt", "history.json", "config.json", "metrics.json"}
    assert record["metrics.json"]["bytes"] == (twin / "metrics.json").stat().st_size
    shutil.copytree(runs, tmp_path / "runs")
    lines = []
    summary = dx.train_item(table, "task1", babi_root, tmp_path / "dmn", tmp_path / "runs", log=lines.append)
    assert summary["trained_now"] == 0 and len(lines) == 1 and "taken over, not trained" in lines[0]
    mine = table.run_dir(tmp_path / "runs", "task1", 0)
    assert run_record.verify(mine, dx.RECORDED)             # the copy has a record of its own, checked as such
    metrics = dx.read_run(table, "task1", 0, tmp_path / "runs")
    assert metrics["adopted_from"] == f"{pilot.group_id}/task1-seed0"
    assert metrics["test_acc"] == io.read_json(twin / "metrics.json")["test_acc"]


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _edit_accuracies(path: Path) -> None:
    metrics = io.read_json(path)
    io.write_json(path, {**metrics, "val_acc": 0.999, "test_acc": {k: 0.999 for k in metrics["test_acc"]}})


DAMAGE = {   # what is done to the twin, the file it is done to, what the line says of it
    "malformed metrics.json": (lambda p: p.write_text('{"status": "ok", '), "metrics.json", "was changed after"),
    "truncated model.pt": (_truncate, "model.pt", "was changed after its run wrote it (now "),
    "edited accuracies": (_edit_accuracies, "metrics.json", "was changed after its run wrote it"),
    "no record (an older nlpbench)": (Path.unlink, run_record.RECORD, "so its files cannot be verified"),
    "malformed record": (lambda p: p.write_text("[1"), run_record.RECORD, "is not the record of its run's files"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_twin_whose_files_fail_their_check_is_passed_over_in_one_line_and_trained_here(smoke_twins, tmp_path,
                                                                                       monkeypatch, damage):
    pilot, table, runs, _ = smoke_twins
    shutil.copytree(runs, tmp_path / "runs")
    twin = pilot.run_dir(tmp_path / "runs", "task1", 0)
    how, name, why = DAMAGE[damage]
    how(twin / name)
    trained, lines = [], []
    monkeypatch.setattr(dx, "train_run", lambda g, item, seed, *a, **k: trained.append(seed) or
                        {"status": "ok", "train_wall_time_s": 2.0})
    summary = dx.train_item(table, "task1", tmp_path / "babi", tmp_path / "dmn", tmp_path / "runs", log=lines.append)
    assert trained == [0] and summary["taken_over_s"] == 0
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert f"the finished run {pilot.group_id}/task1-seed0 is not taken over: " in lines[0]
    assert str(twin / name) in lines[0] and why in lines[0] and lines[0].endswith("trained here instead")
    assert not (table.run_dir(tmp_path / "runs", "task1", 0) / "metrics.json").exists()


def test_a_runs_own_edited_files_stop_its_job_and_its_table_naming_the_file(smoke_twins, tmp_path):
    """The check the take-over uses is the one a run's own files get when its group reads them: a finished run
    whose metrics or model changed after it was written is not counted as done, nor read into a table."""
    pilot, _, runs, _ = smoke_twins
    shutil.copytree(runs, tmp_path / "runs")
    run = pilot.run_dir(tmp_path / "runs", "task1", 0)
    assert dx.read_run(pilot, "task1", 0, tmp_path / "runs")["status"] == "ok"
    _edit_accuracies(run / "metrics.json")
    remedy = f"delete {run} and train it again (nlpbench train {dg.job_id(pilot, 'task1')})"
    for read in (lambda: dx.train_item(pilot, "task1", tmp_path / "babi", tmp_path / "dmn", tmp_path / "runs"),
                 lambda: dx._read_metrics(pilot, tmp_path / "runs", "task1")):
        with pytest.raises(PreparedDataChanged) as e:
            read()
        message = str(e.value)
        assert message.startswith(f"{run / 'metrics.json'} was changed after its run wrote it (") and "\n" not in message
        assert f"{run_record.RECORD} records" in message and message.endswith(f"; {remedy}"), message
    (run / run_record.RECORD).unlink()                 # a run finished by an older nlpbench: read as it is
    assert dx.read_run(pilot, "task1", 0, tmp_path / "runs")["val_acc"] == 0.999


# -- seeds: five for the pattern and augmented networks, every seed's value in a cell ---------------------------

CPU = {"scale": "cpu"}      # its default: five seeds for the 13 networks of Tables 6.2-6.4
FIVE = (0, 1, 2, 3, 4)


def test_seeds_by_kind_gives_every_network_its_own_seeds_and_one_seed_gives_the_earlier_ids_back(params):
    """dmn.seeds_by_kind gives the 12 pattern networks, the augmented network and the task networks of Tables
    6.5-6.7 their own seeds (five: our seed spread, the committed tables). One seed everywhere (no seeds_by_kind)
    gives the one-seed ids of earlier tables back, whose runs the five-seed groups take over as their seed 0."""
    five = params
    groups = dg.all_groups(five)
    seeds = {(g.model, g.kind): g.seeds for g in groups.values() if g.group_id in
             {x.group_id for t in ("6.2", "6.3", "6.4", "6.5", "6.6", "6.7") for x in dg.table_groups(five, t)}}
    assert seeds == {("dmn+", "patterns"): FIVE, ("dmn+", "augmented"): FIVE,
                     ("modmn+", "patterns"): FIVE, ("dmn+", "tasks"): FIVE, ("ff-dmn", "tasks"): FIVE}
    one_seed = copy.deepcopy(five)
    del one_seed["dmn"]["seeds_by_kind"]                       # as before the key existed: dmn.seeds for all
    before = {(g.model, g.kind): g.group_id for g in dg.all_groups(one_seed).values()}
    after = {(g.model, g.kind): g.group_id for g in groups.values() if g.seeds in ((0,), FIVE)}
    assert before[("dmn+", "patterns")] == "dmn-dmnplus-patterns-d80-f2dea72eae"     # the one-seed tables' ids
    assert before[("dmn+", "augmented")] == "dmn-dmnplus-augmented-d80-ad4e0bf3f1"
    for key in (("dmn+", "patterns"), ("modmn+", "patterns"), ("dmn+", "augmented")):
        assert after[key] != before[key]
    # Table 6.5's task groups: the one-seed ids of the earlier tables, new ids with five seeds
    def table_65(p):
        return {model: g.group_id for col in dg.column_groups(p, "6.5").values() for model, g in col.items()}
    assert table_65(one_seed) == {"dmn+": "dmn-dmnplus-tasks-d80-d460583f1e", "ff-dmn": "dmn-ffdmn-tasks-d80-184caed948"}
    assert not set(table_65(five).values()) & set(table_65(one_seed).values())
    # a table's own seeds win over the kind's; `tasks: null` is dmn.seeds
    p = config.load(REPO / "params.yaml", {"scale": "cpu", "dmn.seeds": [3], "dmn.seeds_by_kind.patterns": [7, 8],
                                                  "dmn.seeds_by_kind.tasks": None})
    p["tables"]["shen-thesis"]["6.4"]["seeds"] = [9]
    assert dg.column_groups(p, "6.2")["Trained Network / 1"]["dmn+"].seeds == (7, 8)
    assert dg.column_groups(p, "6.4")["Trained pattern / 1"]["modmn+"].seeds == (9,)
    assert dg.column_groups(p, "6.5")["ff-DMN"]["ff-dmn"].seeds == (3,)


def test_a_pattern_cell_is_the_seed_validation_picks_and_carries_every_seeds_value(tmp_path):
    params = config.load(REPO / "params.yaml", CPU)
    runs, results = tmp_path / "runs", tmp_path / "results"
    dmn = dg.column_groups(params, "6.2")["Trained Network / 1"]["dmn+"]
    assert dmn.seeds == (0, 1, 2, 3, 4)
    # three of the five seeds have finished: seed 1 has the highest validation accuracy, seed 2 the best test
    for seed, val, own in ((0, 0.60, 0.70), (1, 0.75, 0.66), (2, 0.50, 0.90)):
        _write_run(dmn, runs, "pattern1", seed, {f"pattern{j}": own if j == 1 else 0.4 for j in range(1, 7)},
                   val_acc=val)
    _write_group(dmn, runs)
    paths = _build(params, "6.2", runs, results, tmp_path)
    with open(paths["csv"], newline="") as f:
        cells = {(r["row"], r["column"]): r for r in csv.DictReader(f)}
    cell = cells[("1", "Trained Network / 1")]
    assert float(cell["reproduced"]) == pytest.approx(66.0)          # seed 1's, never the best test value
    assert cell["seeds"] == "0:70 1:66 2:90"
    assert cell["note"].startswith("seed 1 of 3 (the highest validation accuracy, 75.0), epoch 5 of 7")
    stored = {c["row"] + "|" + c["column"]: c for c in io.read_json(paths["json"])["cells"]}
    assert stored["1|Trained Network / 1"]["seeds"] == [[0, 70.0], [1, 66.0], [2, 90.0]]
    md = Path(paths["md"]).read_text()
    assert "66.0 (66.0–90.0)" in md                                   # the value and our seeds' range
    assert ("Seeds: each cell is the run of the seed with the highest validation accuracy (never test), judged "
            "against the spread of all our seeds; the range beside a value spans our 3 seeds.") in md
    assert ("Over the 6 cells with several seeds the range is 0.0 points wide at the median and 24.0 at the widest "
            "(Trained Network / 1, test pattern 1).") in md and "seeds [0, 1, 2, 3, 4]" in md


def test_the_ensemble_carries_a_value_per_seed_both_members_trained(tmp_path):
    p = config.load(REPO / "params.yaml", {"scale": "cpu", "dmn.seeds": [0, 1]})
    runs, results = tmp_path / "runs", tmp_path / "results"
    cols = dg.column_groups(p, "6.7")
    ff, dmn = cols["Ensemble"]["ff-dmn"], cols["Ensemble"]["dmn+"]
    gold = torch.tensor([0, 1])
    probs = {0: torch.tensor([[0.9, 0.1], [0.6, 0.4]]), 1: torch.tensor([[0.4, 0.6], [0.2, 0.8]])}
    for g in (ff, dmn):
        for seed in (0, 1):                     # seed 0: each member right once, the average too; seed 1: both
            p_seed = probs[seed] if g is ff or seed == 1 else torch.tensor([[0.7, 0.3], [0.3, 0.7]])
            _write_run(g, runs, "task1", seed, {"test": float((p_seed.argmax(-1) == gold).float().mean())},
                       val_acc=0.5 + 0.1 * seed)
            torch.save({"answers": ["a", "b"], "probs": {"test": p_seed}, "gold": {"test": gold}},
                       g.run_dir(runs, "task1", seed) / "test_probs.pt")
    paths = _build(p, "6.7", runs, results, tmp_path)
    stored = {c["row"] + "|" + c["column"]: c for c in io.read_json(paths["json"])["cells"]}
    ens = stored["1|Ensemble"]
    assert ens["seeds"] == [[0, 100.0], [1, 50.0]] and ens["reproduced"] == pytest.approx(50.0)   # seed 1 chosen
    assert "ff-DMN seed 1, DMN+ seed 1" in ens["detail"]
    # the printed mean row carries each seed's own mean, so it is judged against our spread, and so is the claim
    assert stored["mean|Ensemble"]["seeds"] == [[0, 100.0], [1, 50.0]]
    assert stored["mean|DMN+ (ours)"]["seeds"] == [[0, 100.0], [1, 50.0]]
    assert "each seed's own mean over the rows" in stored["mean|DMN+ (ours)"]["detail"]
    assert "The mean row is the mean of the cells above it; the range beside it is that of each seed's own mean" \
        in Path(paths["md"]).read_text()
    claim = io.read_json(paths["json"])["claims"][0]["sentence"]
    assert "it holds on 0 of our 2 seeds, each judged on its own cells" in claim



def test_the_ensemble_reports_the_seed_its_two_runs_validate_best_so_its_value_lies_in_its_range(tmp_path):
    """Each member's own best seed by validation may differ (here ff-DMN 0, DMN+ 1): the ensemble of that cross
    pair is none of the per-seed ensembles the range shows. The reported seed is the one whose two runs have the
    highest mean validation accuracy (seed 0: 0.7 against 0.55)."""
    p = config.load(REPO / "params.yaml", {"scale": "cpu", "dmn.seeds": [0, 1]})
    runs, results = tmp_path / "runs", tmp_path / "results"
    cols = dg.column_groups(p, "6.7")
    ff, dmn = cols["Ensemble"]["ff-dmn"], cols["Ensemble"]["dmn+"]
    gold = torch.tensor([0, 1, 0, 1])
    right, wrong = torch.tensor([[0.9, 0.1], [0.1, 0.9]]), torch.tensor([[0.1, 0.9], [0.9, 0.1]])
    half, weakly_wrong = torch.tensor([[0.6, 0.4], [0.4, 0.6]]), torch.tensor([[0.4, 0.6], [0.6, 0.4]])
    probs = {("ff", 0): torch.cat([right, wrong]), ("ff", 1): torch.cat([weakly_wrong, weakly_wrong]),
             ("dmn", 0): torch.cat([half, half]), ("dmn", 1): torch.cat([right, right])}
    val = {("ff", 0): 0.9, ("ff", 1): 0.5, ("dmn", 0): 0.5, ("dmn", 1): 0.6}
    for (name, seed), p_seed in probs.items():
        g = ff if name == "ff" else dmn
        _write_run(g, runs, "task1", seed, {"test": float((p_seed.argmax(-1) == gold).float().mean())},
                   val_acc=val[(name, seed)])
        torch.save({"answers": ["a", "b"], "probs": {"test": p_seed}, "gold": {"test": gold}},
                   g.run_dir(runs, "task1", seed) / "test_probs.pt")
    paths = _build(p, "6.7", runs, results, tmp_path)
    stored = {c["row"] + "|" + c["column"]: c for c in io.read_json(paths["json"])["cells"]}
    ens = stored["1|Ensemble"]
    assert ens["seeds"] == [[0, 50.0], [1, 100.0]]
    assert ens["reproduced"] == pytest.approx(50.0)        # seed 0 (not the best test); the cross pair gives 75
    assert "ff-DMN seed 0, DMN+ seed 0" in ens["detail"]

# -- ff-DMN's readings: keys that leave the ids alone at their defaults ------------------------------------------

def test_ff_dmn_readings_leave_every_id_alone_at_their_neutral_values_and_change_only_ff_dmn_groups(params):
    documents = copy.deepcopy(params)               # Tables 6.2-6.7 (the pilot sets the keys in its columns)
    del documents["tables"]["shen-thesis"]["pilot-ffdmn"]
    neutral = copy.deepcopy(documents)              # every reading key at the value the runs had before it existed
    for (section, key), value in dg.HASH_NEUTRAL.items():
        if section == "model":
            neutral["dmn"]["model"][key] = value
    old = copy.deepcopy(neutral)                    # the configuration before the keys existed
    for key in dg.FF_DMN_ONLY:
        del old["dmn"]["model"][key]
    assert set(dg.groups_by_id(old)) == set(dg.groups_by_id(neutral))
    for key, value in (("ffn_layers", 2), ("ffn_activation", "tanh"), ("question_in_update", True)):
        p = copy.deepcopy(neutral)
        p["dmn"]["model"][key] = value
        changed = set(dg.groups_by_id(p)) ^ set(dg.groups_by_id(neutral))
        assert changed and all(gid.startswith("dmn-ffdmn-") for gid in changed), key
        assert set(dg.all_datasets(p)) == set(dg.all_datasets(neutral))
    # the default (the question in the update, chosen by the pilot) moves the ff-DMN groups only
    changed = set(dg.groups_by_id(documents)) ^ set(dg.groups_by_id(neutral))
    assert changed and all(gid.startswith("dmn-ffdmn-") for gid in changed)
    g = dg.column_groups(params, "6.5")["DMN+ (ours)"]["dmn+"]
    assert not set(dg.FF_DMN_ONLY) & set(g.settings["model"])        # DMN+ runs do not read them


# -- the reading pilot: validation accuracy, mean over seeds ----------------------------------------------------

def test_the_ff_dmn_pilot_reads_mean_validation_accuracy_over_five_seeds_never_test(params, tmp_path):
    from nlpbench import plan
    runs, results = tmp_path / "runs", tmp_path / "results"
    decl = dg.dmn_tables(params)["pilot-ffdmn"]
    assert decl["study"] and plan.make(params).targets["shen-thesis/pilot-ffdmn"].study
    cols = dg.column_groups(params, "pilot-ffdmn")
    groups = {name: members["ff-dmn"] for name, members in cols.items()}
    assert list(groups) == ["c^i alone in the update", "Two-layer FNNs", "Question in the update"]
    for g in groups.values():
        assert g.seeds == (0, 1, 2, 3, 4) and {"task16", "task17", "task19"} <= set(g.items)
    table65 = dg.column_groups(params, "6.5")["ff-DMN"]["ff-dmn"]
    # the chosen reading is Table 6.5's ff-DMN configuration, also at five seeds: one group, the same runs
    assert groups["Question in the update"].group_id == table65.group_id
    assert groups["Two-layer FNNs"].items == groups["c^i alone in the update"].items == ("task16", "task17", "task19")
    assert groups["Two-layer FNNs"].settings["model"]["ffn_layers"] == 2
    for name in ("c^i alone in the update", "Two-layer FNNs"):              # each column says its reading
        assert groups[name].settings["model"]["question_in_update"] is False
    for k, g in enumerate(groups.values()):
        for task in (16, 17, 19):
            for seed in range(5):          # test accuracy 0.99 everywhere: a cell that read it would show 99
                _write_run(g, runs, f"task{task}", seed, {"test": 0.99}, val_acc=0.5 + 0.1 * k + 0.01 * seed)
        _write_group(g, runs)
    paths = _build(params, "pilot-ffdmn", runs, results, tmp_path)
    with open(paths["csv"], newline="") as f:
        cells = {(r["row"], r["column"]): r for r in csv.DictReader(f)}
    assert float(cells[("16", "c^i alone in the update")]["reproduced"]) == pytest.approx(52.0)     # mean of 50..54
    assert float(cells[("19", "Question in the update")]["reproduced"]) == pytest.approx(72.0)
    assert cells[("17", "Two-layer FNNs")]["seeds"] == "0:60 1:61 2:62 3:63 4:64"
    assert cells[("mean", "Two-layer FNNs")]["seeds"] == "0:60 1:61 2:62 3:63 4:64"
    assert float(cells[("mean", "Two-layer FNNs")]["reproduced"]) == pytest.approx(62.0)
    assert "test never read" in cells[("16", "c^i alone in the update")]["note"]
    md = Path(paths["md"]).read_text()
    assert "Reading pilot (addition): ff-DMN validation accuracy" in md and "passes (>= 95%)" not in md
    assert "every seed counts: a cell is their mean validation accuracy; test accuracy is never read" in md
    # its provenance counts the runs it reads: three tasks of the 20-task group it shares with Table 6.5
    assert "9.0 min for the 45 runs of 3 groups this table reads" in md
    assert ("Two-layer FNNs: `model.ffn_layers` = 2, `model.question_in_update` = False; "
            "Question in the update: `model.question_in_update` = True.") in md
    assert "99" not in "".join(cells[(r, c)]["reproduced"] for r in ("16", "17", "19", "mean") for c in groups)


def test_a_validation_report_needs_task_rows_and_a_single_model(params):
    p = copy.deepcopy(params)
    p["tables"]["shen-thesis"]["6.2"]["report"] = "validation"
    with pytest.raises(config.ConfigError, match=r"shen-thesis/6\.2\.yaml: columns\.Trained Network / 1: report: validation reads"):
        dg.all_groups(p)
    p = copy.deepcopy(params)
    p["tables"]["shen-thesis"]["6.7"]["report"] = "validation"
    with pytest.raises(config.ConfigError, match=r"shen-thesis/6\.7\.yaml: columns\.Ensemble: report: validation reads"):
        dg.all_groups(p)
    with pytest.raises(config.ConfigError, match="report"):
        config.load(REPO / "params.yaml", {"tables.shen-thesis.pilot-ffdmn.report": "best"})


def test_the_reading_note_says_a_story_is_not_capped_in_words_not_as_none(params):
    groups = dg.table_groups(params, "6.5")
    text = " ".join(dx.reading_notes(params, groups))
    assert "no cap on a story's facts" in text and "None" not in text
    capped = copy.deepcopy(params)
    capped["dmn"]["data"]["memory_size"] = 50
    assert "a story's 50 most recent facts kept" in " ".join(dx.reading_notes(capped, groups))


def test_a_job_trains_its_seeds_in_one_pass_to_the_files_and_numbers_of_runs_trained_alone(babi_root, tmp_path):
    """dmn.execution grouped: the job's two seeds train together and each run writes the files, the record and the
    metrics a run trained alone writes, with the same selected epoch and accuracies (up to float summation order);
    the summary comes last as ever."""
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    g = dataclasses.replace(dg.column_groups(params, "6.5")["DMN+ (ours)"]["dmn+"], seeds=(0, 1))
    alone = dx.train_item(g, "task1", babi_root, tmp_path / "dmn", tmp_path / "alone", log=lambda _: None)
    lines = []
    together = dx.train_item(g, "task1", babi_root, tmp_path / "dmn", tmp_path / "together", log=lines.append,
                             together=True)
    assert any("seeds 0, 1 trained together in one pass" in line for line in lines)
    assert alone["runs"] == together["runs"] == {"task1-seed0": "ok", "task1-seed1": "ok"}
    for seed in (0, 1):
        a, b = (dx.read_run(g, "task1", seed, tmp_path / root) for root in ("alone", "together"))
        assert run_record.verify(g.run_dir(tmp_path / "together", "task1", seed), dx.RECORDED)
        assert b["runs_in_pass"] == 2 and "runs_in_pass" not in a
        assert (a["epochs"], a["best_epoch"]) == (b["epochs"], b["best_epoch"])
        assert b["val_loss"] == pytest.approx(a["val_loss"], rel=1e-4)
        assert b["test_acc"]["test"] == pytest.approx(a["test_acc"]["test"], abs=0.002)
        assert not (g.run_dir(tmp_path / "together", "task1", seed) / "checkpoint.pt").exists()
    assert dg.job_done(g, "task1", tmp_path / "together").is_file()


def test_the_execution_key_decides_where_seeds_share_a_pass_and_names_a_bad_value():
    assert dx.seeds_together("auto", "cuda") and not dx.seeds_together("auto", "cpu")
    assert dx.seeds_together("grouped", "cpu") and not dx.seeds_together("alone", "cuda:0")
    with pytest.raises(config.ConfigError, match="dmn.execution: unknown value 'fast'"):
        dx.seeds_together("fast", "cpu")


def test_the_execution_key_stays_out_of_every_group_id(params):
    ids = sorted(g.group_id for g in dg.all_groups(params).values())
    for execution in ("grouped", "alone"):
        other = config.load(REPO / "params.yaml", {"scale": "cpu", "dmn.execution": execution})
        assert sorted(g.group_id for g in dg.all_groups(other).values()) == ids
