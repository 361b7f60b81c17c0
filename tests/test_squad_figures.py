"""Figure 4.2 (histograms of S) and the loss curves of Figures 4.4, 5.2 and A.1 (squad.figures): a trained run
records every batch loss, the histogram's data is the similarity's output on the sample, the loss curves have one
series per configuration and seed, and the declarations are checked. The smoke scale builds all four end to end
in test_squad_family's slow test."""

import csv
import json
from pathlib import Path

import pytest
import torch

from nlpbench import config, plan, registry
from nlpbench.config import ConfigError
from nlpbench.family import Paths
from nlpbench.results import build
from nlpbench.squad import figures
from nlpbench.squad import groups as sg
from nlpbench.squad.model import ModelConfig
from nlpbench.squad.train import TrainConfig, encode, load_trained, run
from squad_synthetic import marker_task

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parents[1]
FIGURES = ("fig4.2", "fig4.4", "fig5.2-loss", "figA.1-loss")


def load(scale: str, overrides: dict | None = None) -> dict:
    return registry.load(REPO / "params.yaml", {"scale": scale, **(overrides or {})})


def test_a_run_records_every_steps_loss_and_the_ids_do_not_change(tmp_path):
    train, test, emb, vocab = marker_task(95, 10, seed=0)
    cfg = TrainConfig(model=ModelConfig(hidden=4, embed_adjust=8, similarity="cosine", output="O_1"), epochs=2,
                      batch_size=20, loss_log_every=3)
    run(cfg, train, test, emb, vocab, tmp_path / "run", log=lambda s: None)
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    steps = history["epochs"][-1]["steps"]
    assert steps == 2 * 5 and len(history["step_loss"]) == steps          # 95 examples, batches of 20: 5 a epoch
    assert [s for s, _ in history["loss_log"]] == [3, 6, 9]
    assert all(history["step_loss"][s - 1] == v for s, v in history["loss_log"])
    assert "step_loss" not in cfg.to_dict()          # recording is not a setting: the run and group ids keep
    # the histogram's scores are the model's S on the sample: cosine in [-1, 1], one per (i, j) pair
    model, _ = load_trained(tmp_path / "run", emb)
    items = encode(test, {w: i for i, w in enumerate(vocab)}, 100, 10**9, False)[:3]
    scores = figures.similarity_scores(model, items)
    assert len(scores) == sum(len(it["passage"]) * len(it["question"]) for it in items)
    assert scores.min() >= -1 - 1e-5 and scores.max() <= 1 + 1e-5


def test_block_means_keep_the_last_short_block():
    assert figures.block_means([1.0, 2.0, 3.0, 4.0, 5.0], 2) == [1.5, 3.5, 5.0]
    assert figures.block_means([2.0], 10) == [2.0]


def _fake_history(runs: Path, params: dict, cfg: sg.Config, losses: dict[int, list[float]]) -> None:
    for seed, values in losses.items():
        d = runs / sg.group_id(params, cfg) / f"seed{seed}"
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps({"em": 1.0, "f1": 2.0}))
        (d / "history.json").write_text(json.dumps({"step_loss": values, "loss_log": [], "epochs": []}))


def test_loss_curves_have_a_series_per_configuration_and_seed(tmp_path):
    params = load("paper")
    decl = params["outputs"]["shen-thesis"]["fig4.4"]
    tri, t_tri = sg.Config("trilinear", "O_1", None, None), sg.Config("T-trilinear", "O_1", None, None)
    _fake_history(tmp_path, params, tri, {0: [float(v) for v in range(100, 0, -1)], 3: [1.0] * 100})
    _fake_history(tmp_path, params, t_tri, {1: [2.0] * 120})
    lines = figures.loss_curve_data(params, decl, tmp_path)
    assert [(ln["panel"], ln["label"]) for ln in lines] == [
        (p, r) for p in ("O_1", "O_2") for r in ("trilinear", "FNN", "concat-FNN", "general-3", "T-trilinear")]
    by = {(ln["panel"], ln["label"]): ln for ln in lines}
    t = by[("O_1", "trilinear")]
    assert {s: len(v) for s, v in t["seeds"].items()} == {0: 100, 3: 100}     # the recorded length, every seed
    assert t["block"] == 3 and len(t["mean"]) == 34 and t["steps"][-1] == 100   # ceil(100 / 40) steps a point
    assert t["mean"][0] == pytest.approx((100 + 99 + 98 + 1 + 1 + 1) / 6) and t["high"][0] == 99.0
    assert set(by[("O_1", "T-trilinear")]["seeds"]) == {1} and not by[("O_1", "FNN")]["seeds"]
    assert not by[("O_2", "trilinear")]["seeds"]                               # O_2 is another configuration
    png, table, _ = build.output(params, "shen-thesis", "fig4.4", Paths(tmp_path, tmp_path, tmp_path / "results"))
    rows = list(csv.DictReader(open(table, newline="")))
    assert {(r["line"], r["seed"]) for r in rows} == {("trilinear", "0"), ("trilinear", "3"), ("trilinear", "mean"),
                                                      ("T-trilinear", "1"), ("T-trilinear", "mean")}
    side = json.loads((tmp_path / "results" / "shen-thesis" / "fig4.4.output.json").read_text())
    assert side["kind"] == "figure" and side["status"] == "2 of 10 lines drawn" and "mean over its seeds" in side["note"]


def test_a_loss_figure_with_every_line_at_the_paper_scale_only_says_so_without_a_warning(tmp_path, recwarn):
    """Figure A.1's loss curves where Table A.1 trains no row (every cell paper scale only): no line, and no legend
    to warn about."""
    params = load("cpu")
    params["tables"]["shen-thesis"]["A.1"]["trained_rows"] = []          # as a scale that trains none of its rows
    decl = params["outputs"]["shen-thesis"]["figA.1-loss"]
    assert figures.loss_curve_data(params, decl, tmp_path) == []
    build.output(params, "shen-thesis", "figA.1-loss", Paths(tmp_path, tmp_path, tmp_path / "results"))
    assert not [w for w in recwarn if "legend" in str(w.message)]
    side = json.loads((tmp_path / "results" / "shen-thesis" / "figA.1-loss.output.json").read_text())
    assert side["status"] == "0 of 0 lines drawn"


def test_the_figures_read_the_tables_runs_and_bad_declarations_are_named():
    params = load("paper")
    targets = plan.make(params).targets
    gid = lambda sim, out, ps=None, rd=None: sg.group_id(params, sg.Config(sim, out, ps, rd))  # noqa: E731
    assert all(f"shen-thesis/{name}" in targets for name in FIGURES)
    assert set(targets["shen-thesis/fig4.2"].groups) == {gid(s, o) for s in ("dot-product", "scaled dot-product",
                                                                             "cosine") for o in ("O_1", "O_2")}
    assert set(targets["shen-thesis/fig4.4"].groups) == set(targets["shen-thesis/4.3"].groups)
    assert len(targets["shen-thesis/fig5.2-loss"].groups) == 8
    assert gid("trilinear", "O_1") in targets["shen-thesis/fig5.2-loss"].groups           # RIG_1
    assert set(targets["shen-thesis/figA.1-loss"].groups) == set(targets["shen-thesis/A.1"].groups)
    assert targets["shen-thesis/fig4.2"].files == ("shen-thesis/fig4.2.png", "shen-thesis/fig4.2.csv")
    all_groups = set(sg.all_configs(params))
    assert all(set(targets[f"shen-thesis/{n}"].groups) <= all_groups for n in FIGURES)   # no training of their own
    with pytest.raises(ConfigError, match=r"shen-thesis/fig4\.4\.yaml: panels\.O_1: table 4.3 has no cell \('nope', 'O_1 / EM'\)"):
        load("smoke", {"outputs.shen-thesis.fig4.4.panels": {"O_1": [{"table": "4.3", "rows": ["nope"],
                                                                          "columns": ["O_1 / EM"]}]}})
    with pytest.raises(ConfigError, match=r"shen-thesis/fig4\.4\.yaml: panels\.O_2: unknown squad table '9.9'"):
        load("smoke", {"outputs.shen-thesis.fig4.4.panels": {"O_2": [{"table": "9.9", "columns": ["EM"]}]}})
    with pytest.raises(ConfigError, match=r"shen-thesis/fig4\.2\.yaml: unknown output 'O_9'"):
        load("smoke", {"outputs.shen-thesis.fig4.2.outputs": ["O_9"]})


def test_a_histogram_of_no_questions_is_rejected_naming_the_key():
    with pytest.raises(ConfigError, match=r"shen-thesis/fig4\.2\.yaml \(scale cpu, with overrides\): invalid parameters\n  questions: 0"):
        load("cpu", {"outputs.shen-thesis.fig4.2.questions": 0})


def test_the_heatmaps_register_their_figure_with_the_results_index(tmp_path, monkeypatch):
    """Figure 4.6 is listed by the index under its output, as the other figures are (here from stand-in models)."""
    from nlpbench.squad import data as squad_data
    from nlpbench.squad import experiments as x

    params = load("smoke")
    decl = params["outputs"]["shen-thesis"]["4.6"]
    passage, question = ["the", "game", "was", "played", "on", "sunday", "."], ["what", "day", "was", "it", "?"]
    built = {"contexts": [{"tokens": passage}], "examples": [
        {"question": decl["question"], "question_tokens": question, "context": 0, "span": [5, 5],
         "answers": ["sunday"]}]}
    monkeypatch.setattr(squad_data, "load_prepared", lambda ddir, part: built)
    monkeypatch.setattr(x, "load_vectors", lambda params, root: (sorted(set(passage + question)), None))

    def model(p, q):
        return {"S": torch.rand(1, p.shape[1], q.shape[1])}
    monkeypatch.setattr(x, "load_best_seed", lambda params, cfg, *rest: None if cfg.similarity == "general-3"
                        else (model, 1, 12.5))
    out, sidecar = build.output(params, "shen-thesis", "4.6", Paths(tmp_path, tmp_path, tmp_path / "results"))
    assert sidecar == tmp_path / "results" / "shen-thesis" / "4.6.output.json"
    side = json.loads(sidecar.read_text())
    assert side["files"] == [out.name] == ["fig4.6.png"] and side["kind"] == "figure" and side["scale"] == "smoke"
    assert side["status"] == "4 of 6 configurations drawn" and side["note"] == "a test question at scale smoke"
