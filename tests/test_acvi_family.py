"""The acvi family behind the core: plan per scale, needs-data cells, the claim verdict, bad config, and every
table and output built end to end at the smoke scale on tmp dirs (in-process: every data step, group, target)."""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from nlpbench import config, plan, registry
from nlpbench.acvi import config as ac
from nlpbench.acvi import groups as ag
from nlpbench.data.fetch import FetchError
from nlpbench.family import Paths
from nlpbench.results import build, claims

REPO = Path(__file__).resolve().parents[1]
ACVI_TABLES = [("tolias-thesis", "20"), ("tolias-thesis", "25"), ("tolias-thesis", "26"), ("tolias-thesis", "acvi-qg"),
               ("acvi-paper", "1"), ("acvi-paper", "2"), ("acvi-paper", "3"), ("acvi-paper", "4")]


def load(scale: str, **over) -> dict:
    return registry.load(REPO / "params.yaml", {"scale": scale, **over})


def acvi_groups(params: dict) -> list[str]:
    p = plan.make(params)
    return [g for g in p.groups if p.owner[g] == "acvi"]


def test_the_cpu_scale_trains_only_qg_and_smoke_every_run():
    cpu = acvi_groups(load("cpu"))
    assert len(cpu) == 15 and all(g.startswith("acvi-qg-") for g in cpu)          # 3 attentions x 5 seeds
    smoke = acvi_groups(load("smoke"))
    runs = {g.rsplit("-s", 1)[0] for g in smoke}
    assert {"acvi-cnndm-pg-acvi-t", "acvi-cnndm-pg-struct", "acvi-video-acvi-p", "acvi-video-var",
            "acvi-cnndm-pg-ved", "acvi-video-ved"} <= runs
    assert len(smoke) == 18                             # 6 CNN/DM and 6 video stand-in runs (VED included), 6 QG
    p = plan.make(load("smoke"))
    targets = {k for k, o in p.owner.items() if o == "acvi" and k in p.targets}
    assert {f"{s}/{n}" for s, n in ACVI_TABLES} | {"tolias-thesis/19", "tolias-thesis/acvi-summaries"} <= targets
    assert p.targets["tolias-thesis/acvi-timing"].on_demand and p.owner["tolias-thesis/acvi-timing"] == "timing"


def test_a_changed_setting_is_a_new_run_and_seeds_differ():
    base = load("cpu")
    a = ag.make_run(base, "qg-pg-asa", 0)
    assert ag.make_run(base, "qg-pg-asa", 1).run_id != a.run_id
    assert ag.make_run(load("cpu", **{"acvi.model.kl_weight": 0.5}), "qg-pg-asa", 0).run_id != a.run_id
    assert ag.make_run(load("cpu"), "qg-pg-asa", 0).run_id == a.run_id


def test_bad_run_override_and_unknown_run_are_named():
    with pytest.raises(config.ConfigError, match="acvi.runs.qg-pg-asa.overrides"):
        load("cpu", **{"acvi.runs.qg-pg-asa.overrides": {"model.attentoin": "asa"}})
    with pytest.raises(config.ConfigError, match="unknown run 'nope'"):
        load("cpu", **{"tables.tolias-thesis.25.columns": {"ASA": {"run": "nope"}}})
    with pytest.raises(config.ConfigError, match="acvi.model.attention"):
        load("cpu", **{"acvi.model.attention": "hard"})


def test_cells_without_their_data_say_needs_data_and_how_to_get_it(tmp_path):
    params = load("cpu")
    paths = Paths(tmp_path / "data", tmp_path / "runs", tmp_path / "results")
    fam = registry.get("acvi")
    for step in ac.EXTERNAL:
        fam.prepare(step, params, paths, None)
    parts = fam.table("tolias-thesis", "20", params, paths)
    cells = {(c.row, c.column): c for c in parts.cells}
    acvi = cells[("pointer-generator + ACVI + coverage", "ROUGE / 1")]
    assert acvi.status == "needs_data" and "cs.nyu.edu/~kcho/DMQA" in acvi.detail
    assert cells[("abstractive model*", "ROUGE / 1")].status == "cited"
    assert cells[("lead-3 baseline", "ROUGE / 1")].status == "not_run"            # released scores not there
    duc = {c.row: c for c in fam.table("acvi-paper", "4", params, paths).cells}
    assert duc["ACVI"].status == "needs_data" and "NIST" in duc["ACVI"].detail
    video = fam.table("tolias-thesis", "26", params, paths).cells
    assert all(c.status == "needs_data" and "MSVD" in c.detail for c in video)


def _fake_metrics(params: dict, runs_root: Path, name: str, values: list[float]) -> None:
    for seed, v in enumerate(values):
        d = ag.make_run(params, name, seed).run_dir(runs_root)
        d.mkdir(parents=True)
        (d / "metrics.json").write_text(json.dumps({"rougeL": v, "rouge2": v / 2, "bleu4": 1.0}))


@pytest.mark.parametrize("acvi, asa, verdict", [([30, 31, 32, 31, 30], [20, 21, 22, 21, 20], "holds"),
                                               ([20, 25, 30, 22, 28], [21, 26, 29, 23, 27],
                                                "does not hold (within the seed spread)"),
                                               ([10, 11, 10, 11, 10], [20, 21, 20, 21, 20], "is reversed")])
def test_the_addition_claim_is_judged_against_the_seed_spread(tmp_path, acvi, asa, verdict):
    params = load("cpu")
    _fake_metrics(params, tmp_path, "qg-pg-acvi-t", acvi)
    _fake_metrics(params, tmp_path, "qg-pg-asa", asa)
    paths = Paths(tmp_path, tmp_path, tmp_path)
    parts = registry.get("acvi").table("tolias-thesis", "acvi-qg", params, paths)
    d = config.declaration(params, "tables", "tolias-thesis", "acvi-qg")
    cells = build.table_cells(params, d, parts, paths)
    lines = [c["sentence"] for c in claims.judged(d.decl["claims"], d.name, cells, "differs")]
    assert any(f"Claim (ACVI beats ASA; ROUGE-L): in our numbers it {verdict}: " in n for n in lines), lines
    cells = {(c.row, c.column): c for c in parts.cells}
    assert cells[("PG + coverage: ASA", "ROUGE-L")].reproduced == pytest.approx(statistics.fmean(asa))
    assert cells[("PG + coverage: ASA", "ROUGE-L sd")].reproduced == pytest.approx(statistics.stdev(asa))
    if verdict == "holds":   # worked by hand: sds 0.837 both, difference 10 > 0.837
        assert cells[("PG + coverage: ACVI (thesis)", "ROUGE-L sd")].reproduced == pytest.approx(0.83666, abs=1e-4)


@pytest.mark.slow
def test_every_acvi_table_and_output_builds_at_smoke(tmp_path, mirror_dir, monkeypatch):
    """Every data step, group and target of the family at the smoke scale, in-process (about a minute)."""
    import torch
    torch.set_num_threads(1)
    monkeypatch.chdir(tmp_path)
    params = load("smoke")
    paths = Paths(tmp_path / "data", tmp_path / "runs", tmp_path / "results")
    p = plan.make(params)
    fam = registry.get("acvi")
    done: set[str] = set()
    steps = [s for s in p.data.values() if p.owner[s.id] == "acvi"]
    while len(done) < len(steps):
        for s in steps:
            if s.id not in done and set(s.needs) <= done:
                fam.prepare(s.id, params, paths, str(mirror_dir))
                assert (tmp_path / s.output).exists(), s.id
                done.add(s.id)
    for g in acvi_groups(params):
        fam.train(g, params, paths, "cpu")
        assert (tmp_path / p.groups[g].done).exists()
    for source, name in ACVI_TABLES:
        out = build.table(params, source, name, paths)
        assert out["md"].exists()
    for name in ("19", "acvi-summaries"):
        build.output(params, "tolias-thesis", name, paths)
    with open(paths.results / "tolias-thesis" / "20.csv", newline="") as f:
        rows = {(r["row"], r["column"]): r for r in csv.DictReader(f)}
    lead = rows[("lead-3 baseline", "ROUGE / 1")]
    assert lead["status"] == "ok" and 20 < float(lead["reproduced"]) < 60 and lead["paper"] == "40.34"
    assert rows[("pointer-generator + ACVI + coverage", "ROUGE / 1")]["status"] == "ok"    # stand-in run
    qg = (paths.results / "tolias-thesis" / "acvi-qg.md").read_text()
    assert "addition" in qg and "ACVI beats ASA" in qg
    assert "| 1 | 0-16 | 30 | 12 |" in (paths.results / "tolias-thesis" / "19.md").read_text()
    assert "Reference:" in (paths.results / "tolias-thesis" / "acvi-summaries.md").read_text()
    for name, ved, acvi in (("1", "pointer-generator + coverage: VED", "pointer-generator + coverage: ACVI"),
                            ("3", "VED", "ACVI")):                                   # VED trains on the stand-ins
        with open(paths.results / "acvi-paper" / f"{name}.csv", newline="") as f:
            cells = {(r["row"], r["column"]): r["status"] for r in csv.DictReader(f)}
        ved_cells = {c: st for (r, c), st in cells.items() if r == ved}
        assert ved_cells == {c: st for (r, c), st in cells.items() if r == acvi}
        assert "ok" in ved_cells.values()
    video = json.loads((paths.results / "tolias-thesis" / "26.json").read_text())
    assert video["n_ok"] == 8


def test_supplying_the_cnndm_stories_makes_the_cnndm_runs_trainable(tmp_path):
    params = load("cpu", **{"acvi.data.cnndm_dir": str(tmp_path)})
    p = plan.make(params)
    cnndm = [g for g in acvi_groups(params) if g.startswith("acvi-cnndm-")]
    assert len(cnndm) == 6 and all(p.groups[g].needs == ("acvi-cnndm-full",) for g in cnndm)
    assert not any(g.startswith("acvi-video-") for g in acvi_groups(params))          # MSVD: still needs data
    # a directory the user named without the stories fails its data step, naming the layout it expected
    fam = registry.get("acvi")
    with pytest.raises(FetchError, match=rf"acvi.data.cnndm_dir = {tmp_path} lacks cnn/stories/, dailymail/stories/: "
                                         r"expected a directory holding cnn/stories/\*.story"):
        fam.prepare("acvi-cnndm-full", params, Paths(tmp_path / "d", tmp_path / "r", tmp_path / "o"), None)


def test_the_benchmark_times_each_attention_and_projects_the_schedule(tmp_path):
    import torch
    torch.set_num_threads(1)
    params = load("smoke")
    params["outputs"]["tolias-thesis"]["acvi-timing"].update(steps=1, articles=1)
    md, csv_path, sidecar = build.output(params, "tolias-thesis", "acvi-timing",
                                         Paths(tmp_path / "data", tmp_path / "runs", tmp_path / "results"))
    assert json.loads(sidecar.read_text())["files"] == [md.name, csv_path.name] == ["acvi-timing.md", "acvi-timing.csv"]
    rows = list(csv.DictReader(csv_path.open()))
    assert {r["attention"] for r in rows} == {"asa", "acvi_thesis", "acvi_paper"}
    assert all(float(r["sec_per_iter"]) > 0 for r in rows)
    assert "projected training hours" in md.read_text()


def test_the_benchmark_note_says_whose_hours_it_projects():
    """On a GPU the note said 'on a CPU it is not a GPU-hours figure' (seen on an H100): it names the device now."""
    from nlpbench.timing.acvi import projection_note
    train = {"phases": [[10, 10, 10], [250_000, 400, 100]], "coverage_iters": 3_000}
    assert "(250,000 + 3,000 coverage)" in projection_note(train, "cpu")
    assert "not a GPU-hours figure" in projection_note(train, "cpu")
    assert "hours are this GPU's" in projection_note(train, "cuda")
    assert "CPU" not in projection_note(train, "cuda")


def test_a_claim_naming_no_row_is_named():
    bad = [{"kind": "above_spread", "rows": ["PG + coverage: ACVI", "PG + coverage: ASA"], "columns": ["ROUGE-L"],
            "text": "x"}]
    with pytest.raises(config.ConfigError, match=r"tolias-thesis/acvi-qg\.yaml: claims\.0\.rows: Table acvi-qg has no row 'PG \+ coverage: ACVI'"):
        load("cpu", **{"tables.tolias-thesis.acvi-qg.claims": bad})
