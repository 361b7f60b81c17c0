"""Progress lines, the measured costs file and the plan's ETA (nlpbench status, the Snakefile's onstart)."""

from pathlib import Path

import pytest

from nlpbench import config, plan, status
from nlpbench.family import TrainGroup
from nlpbench.runtime.progress import Progress, duration

REPO = Path(__file__).resolve().parents[1]


def test_progress_lines_count_epochs_and_project_the_rest(monkeypatch):
    clock = iter([0.0, 60.0, 60.0])
    monkeypatch.setattr("nlpbench.runtime.progress.time.perf_counter", lambda: next(clock))
    p = Progress(total=10, start=4)            # a resumed run: 4 epochs were done before this process
    assert p.line(6) == "epoch 6/10, elapsed 1m00s, remaining ~2m00s"       # 30 s an epoch, 4 left
    assert p.line(4, at_most=True).endswith("remaining ?")
    assert duration(3725) == "1h02m" and duration(59.6) == "1m00s"


def test_the_committed_costs_cover_the_cpu_and_smoke_scales():
    costs = status.read_costs(REPO / "results" / "costs.tsv")
    for scale in ("cpu", "smoke"):
        p = plan.make(config.load(REPO / "params.yaml", {"scale": scale}))
        est = status.estimate(p, list(p.groups), scale, costs)
        assert est.unknown == 0 and est.measured >= len(p.groups) // 2 and est.seconds > 0


def test_estimates_use_measured_groups_then_their_family_median(tmp_path):
    p = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    memnet = [g for g in p.groups if p.owner[g] == "memnet"][:3]
    dmn = [g for g in p.groups if p.owner[g] == "dmn"][:1]
    costs = {memnet[0]: {"group": memnet[0], "family": "memnet", "scale": "smoke", "seconds": 10.0},
             memnet[1]: {"group": memnet[1], "family": "memnet", "scale": "smoke", "seconds": 30.0}}
    est = status.estimate(p, memnet + dmn, "smoke", costs)
    assert (est.measured, est.estimated, est.unknown) == (2, 1, 1)
    assert est.seconds == 10 + 30 + 20                      # the third memnet group: the median of the two
    assert est.wall(2) == 30 and est.wall(10) == 30          # never less than the longest group


def test_training_jobs_are_scheduled_longest_expected_first():
    p = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    memnet = [g for g in p.groups if p.owner[g] == "memnet"][:3]
    dmn = [g for g in p.groups if p.owner[g] == "dmn"][:2]
    costs = {memnet[0]: {"group": memnet[0], "family": "memnet", "scale": "smoke", "seconds": 10.0},
             memnet[1]: {"group": memnet[1], "family": "memnet", "scale": "smoke", "seconds": 500.0},
             dmn[0]: {"group": dmn[0], "family": "dmn", "scale": "smoke", "seconds": 100.0},
             "other": {"group": "other", "family": "dmn", "scale": "cpu", "seconds": 9999.0}}   # another scale
    prio = status.longest_first(p, "smoke", costs)
    assert sorted(prio.values()) == list(range(len(p.groups)))          # one rank per training job
    assert prio[memnet[1]] > prio[dmn[0]] > prio[memnet[0]]              # measured: 500 s > 100 s > 10 s
    assert prio[memnet[1]] > prio[memnet[2]] > prio[memnet[0]]           # unmeasured: its family's median, 255 s
    text = (REPO / "pipeline" / "train.smk").read_text()
    assert "priority: TRAIN_PRIORITY[_group.id]" in text                # the training rule uses them


def test_costs_refresh_from_benchmark_files_and_bad_lines_are_named(tmp_path):
    p = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    gid = next(iter(p.groups))
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / f"{gid}.benchmark.tsv").write_text("s\th:m:s\tmax_rss\n42.5\t0:00:42\t100\n")
    out = tmp_path / "costs.tsv"
    assert status.refresh_costs(p, "smoke", "cpu", logs, out) == 1
    row = status.read_costs(out)[gid]
    assert row["seconds"] == 42.5 and row["family"] == p.owner[gid] and row["scale"] == "smoke"
    # a second refresh from another process (another device label) leaves an unchanged measurement as it was
    assert status.refresh_costs(p, "smoke", "cpu (x86_64, 2 threads)", logs, out) == 0
    assert status.read_costs(out)[gid]["device"] == "cpu"
    out.write_text(out.read_text().replace("42.5", "fast"))
    with pytest.raises(ValueError, match=r"costs.tsv, line 2: seconds"):
        status.read_costs(out)


def test_the_report_names_scale_device_families_and_an_eta(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    text = status.report(params, plan.make(params), "cpu", cores=2)
    assert "scale smoke, device cpu, 2 training job(s) at a time" in text
    for fam in ("memnet", "dmn", "textgen", "squad", "acvi"):
        assert f"  {fam} " in text
    assert "  timing " not in text       # on-demand benchmarks only: nothing `all` builds, no row of its own
    assert "training left: 146 groups (acvi 18, dmn 20, memnet 58, squad 46, textgen 4), estimated" in text
    assert "tolias-thesis/2 " in text
    rows = text.split("per table (groups trained / read):\n")[1].splitlines()
    assert len({row.index("/", row.index(" ", 4)) for row in rows}) == 1   # the counts line up under long names
    dmn = [g for g in plan.make(params).groups if g.startswith("dmn-")]
    part = status.report(params, plan.make(params), "cpu", cores=2, per_table=False, this_run=dmn)
    assert "this run trains: 20 groups (dmn 20), estimated" in part
    paper = config.load(REPO / "params.yaml", {"scale": "paper"})
    assert "the paper scale on a CPU" in status.report(paper, plan.make(paper), "cpu", cores=2, per_table=False)


def test_costs_label_the_training_jobs_threads_not_the_refreshing_process(tmp_path, monkeypatch):
    """`nlpbench costs` (run by hand, or by the pipeline's onsuccess with the jobs' thread count) names the thread
    count the training jobs ran with: one a job on a CPU, whatever torch's default is in the refreshing process."""
    import torch
    from nlpbench import cli
    p = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    gid = next(iter(p.groups))
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / f"{gid}.benchmark.tsv").write_text("s\th:m:s\tmax_rss\n42.5\t0:00:42\t100\n")
    monkeypatch.chdir(tmp_path)             # results/smoke/costs.tsv is written under the working directory
    monkeypatch.setattr(torch, "get_num_threads", lambda: 7)
    cli.main(["--params", str(REPO / "params.yaml"), "--set", "scale=smoke", "--set", "device=cpu",
              "costs", "--logs", str(logs)])
    assert status.read_costs(tmp_path / "results/smoke/costs.tsv")[gid]["device"].endswith(", 1 threads)")
    assert not (tmp_path / status.COSTS).exists()         # a trial scale leaves the committed costs alone
    assert "costs --threads {TRAIN_THREADS:q}" in (REPO / "Snakefile").read_text()


def _plan(runs: dict[str, int]) -> plan.Plan:
    groups = {gid: TrainGroup(gid, f"runs/{gid}/done", runs=n) for gid, n in runs.items()}
    return plan.Plan(data={}, groups=groups, targets={}, owner={gid: "dmn" for gid in groups})


def _row(gid: str, seconds: float, runs: int | None) -> dict:
    return {"group": gid, "family": "dmn", "scale": "cpu", "seconds": seconds, "runs": runs}


def test_a_job_of_several_seeds_is_estimated_per_run_of_its_family():
    p = _plan({"one": 1, "five": 5, "new-five": 5, "new-one": 1})
    costs = {"one": _row("one", 100.0, 1), "five": _row("five", 1000.0, 5)}     # 100 and 200 s a run
    expected = status.expected_seconds(p, "cpu", costs)
    assert expected["new-five"] == (5 * 150.0, "estimated") and expected["new-one"] == (150.0, "estimated")
    assert expected["five"] == (1000.0, "measured")
    # rows that do not say their runs (written before they were recorded): the median job, as before
    for row in costs.values():
        row["runs"] = None
    assert status.expected_seconds(p, "cpu", costs)["new-five"] == (550.0, "estimated")


def test_dmn_and_squad_jobs_train_their_seeds_one_after_another_and_say_so():
    params = config.load(REPO / "params.yaml", {"scale": "cpu"})
    p = plan.make(params)
    runs = {g.runs for gid, g in p.groups.items() if p.owner[gid] == "dmn" and ".pattern" in gid}
    assert runs == {len(params["dmn"]["seeds_by_kind"]["patterns"])} and runs != {1}
    runs = {g.runs for gid, g in p.groups.items() if p.owner[gid] == "squad"}
    assert runs == {len(params["squad"]["seeds"])} and runs != {1}
    assert {g.runs for gid, g in p.groups.items() if p.owner[gid] in ("memnet", "textgen", "acvi")} == {1}


def test_costs_refresh_records_runs_and_fills_them_in_for_rows_written_without(tmp_path):
    p = _plan({"five": 5, "one": 1})
    out = tmp_path / "costs.tsv"
    out.write_text("group\tfamily\tscale\tseconds\tpeak_mb\tdevice\tmeasured\tsource\n"      # the older layout
                   "five\tdmn\tcpu\t1000.0\t\tcpu\t2026-11-01\tbenchmark\n"
                   "gone\tdmn\tcpu\t50.0\t\tcpu\t2026-11-01\tbenchmark\n")
    assert status.read_costs(out)["five"]["runs"] is None
    assert status.refresh_costs(p, "cpu", "cpu", tmp_path / "no-logs", out) == 1
    rows = status.read_costs(out)
    assert (rows["five"]["runs"], rows["gone"]["runs"]) == (5, None)     # a group out of the plan: unknown
    assert rows["five"]["seconds"] == 1000.0 and rows["five"]["device"] == "cpu"
    assert status.refresh_costs(p, "cpu", "cpu", tmp_path / "no-logs", out) == 0
    out.write_text(out.read_text().replace("\t1000.0\t5\t", "\t1000.0\t1\t"))    # a wrong count: the plan's wins
    assert status.refresh_costs(p, "cpu", "cpu", tmp_path / "no-logs", out) == 1
    assert status.read_costs(out)["five"]["runs"] == 5
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "one.benchmark.tsv").write_text("s\th:m:s\tmax_rss\n42.5\t0:00:42\t100\n")
    assert status.refresh_costs(p, "cpu", "cpu", tmp_path / "logs", out) == 1
    assert status.read_costs(out)["one"]["runs"] == 1
    out.write_text(out.read_text().replace("\t42.5\t1\t", "\t42.5\t0\t"))
    with pytest.raises(ValueError, match=r"costs.tsv, line \d: runs must be at least 1"):
        status.read_costs(out)


def test_a_job_never_measured_is_estimated_from_jobs_of_its_model_data_and_item_first():
    old, new = "dmn-dmnplus-tasks-d80-0123456789", "dmn-dmnplus-tasks-d80-abcdef0123"
    assert status.job_kind(f"{old}.task2") == status.job_kind(f"{new}.task2") == "dmn-dmnplus-tasks-d80.task2"
    assert status.job_kind("squad-trilinear-o2-0123456789") == "squad-trilinear-o2"
    assert status.job_kind("no-digest-here") is None
    p = _plan({f"{new}.task2": 5, f"{new}.task3": 5})
    costs = {f"{old}.task2": _row(f"{old}.task2", 2000.0, 1), f"{old}.task1": _row(f"{old}.task1", 100.0, 1),
             "dmn-ffdmn-patterns-d80-0123456789.pattern1": _row("x", 50.0, 5)}
    expected = status.expected_seconds(p, "cpu", costs)
    assert expected[f"{new}.task2"] == (5 * 2000.0, "estimated")          # the same task, one seed measured
    assert expected[f"{new}.task3"] == (5 * 100.0, "estimated")           # no task 3 yet: the family's median run


def test_a_table_built_before_its_runs_changed_is_not_reported_built(monkeypatch):
    monkeypatch.chdir(REPO)
    params = config.load(REPO / "params.yaml", {"scale": "smoke"})
    p = plan.make(params)
    table = p.targets["shen-thesis/6.5"]
    missing = table.groups[0]
    marker = p.marker(table, "smoke")
    monkeypatch.setattr(status, "is_done", lambda path: path == marker or path != p.groups[missing].done)
    line = next(row for row in status.report(params, p, "cpu", cores=2).splitlines()
                if row.strip().startswith("shen-thesis/6.5 "))
    assert "of training left (an earlier build stands until then)" in line and not line.endswith(" built")
    assert not status.is_current(p, table, "smoke")
    monkeypatch.setattr(status, "is_done", lambda path: True)
    assert status.is_current(p, table, "smoke")
