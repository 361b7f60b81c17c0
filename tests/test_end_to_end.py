"""nlpbench end-to-end: declared tables timed end to end by snakemake in a scratch clone of the commit
(nlpbench.timing.end_to_end), declared in pipeline/end-to-end.yaml (nlpbench.timing.records)."""

import subprocess
from pathlib import Path

import pytest
import yaml
from project_repo import commit_all, project_repo

from nlpbench import config
from nlpbench.runtime import io
from nlpbench.timing import end_to_end, records

REPO = Path(__file__).resolve().parents[1]


def _metrics(root: Path, group: str, run: str, **values) -> None:
    io.write_json(root / group / run / "metrics.json", values)


def test_runs_are_compared_by_their_numbers_not_by_their_times_or_devices(tmp_path):
    theirs, ours = tmp_path / "theirs", tmp_path / "ours"
    _metrics(theirs, "g", "a", test_acc={"S1": 0.5}, group_wall_time_s=10.0, device="cpu (1 threads)")
    _metrics(ours, "g", "a", test_acc={"S1": 0.5}, group_wall_time_s=99.0, device="cuda")
    _metrics(theirs, "g", "b", test_acc={"S1": 0.5}, val_nll={"S1": 0.25})
    _metrics(ours, "g", "b", test_acc={"S1": 0.5}, val_nll={"S1": 0.2500001})
    _metrics(theirs, "g", "c", test_acc={"S1": 0.5})
    _metrics(theirs, "h", "a", point=1.0, group_ms_per_batch=3.0, hop_kernels="eager")   # recorded since ours
    _metrics(ours, "h", "a", point=1.0, group_ms_per_batch=4.0, code_commit="abc")
    _metrics(theirs, "h", "b", point=1.0, status="ok")
    _metrics(ours, "h", "b", point=1.0, status="failed")
    assert end_to_end.compare_runs(theirs, ours) == {
        "g": {"runs": 3, "identical": 1, "differ": 1, "new": 1},
        "h": {"runs": 2, "identical": 1, "differ": 1, "new": 0}}


def test_a_declaration_gives_the_tables_rules_and_bad_names_are_named():
    params = config.load(REPO / "params.yaml")
    measurements = records.load(REPO)
    decl = records.declaration(params, "ch6-five-seeds", measurements)
    command = end_to_end.snakemake_command(decl)
    assert command[:2] == ["table_tolias_thesis_2", "table_tolias_thesis_6"]
    assert command[command.index("--config") + 1] == "memnet={seeds: [0, 1, 2, 3, 4]}"
    with pytest.raises(config.ConfigError, match="ch6-five-seeds"):       # the known ones are listed
        records.declaration(params, "no-such-measurement", measurements)
    dmn = end_to_end.snakemake_command(records.declaration(params, "dmn-thesis-epochs", measurements))
    assert dmn == [f"table_shen_thesis_6_{t}" for t in range(2, 8)] + ["--cores", "2", "--resources", "gpu=1"]
    measurements["ch6-five-seeds"]["tables"].append("99")
    with pytest.raises(config.ConfigError, match=r"end-to-end.yaml: ch6-five-seeds.tables: no table 99"):
        records.declaration(params, "ch6-five-seeds", measurements)
    measurements["ch6-five-seeds"]["tables"].pop()
    measurements["ch6-five-seeds"]["benchmark"] = "dof"                       # an output, not a benchmark
    with pytest.raises(config.ConfigError, match=r"ch6-five-seeds.benchmark: outputs.tolias-thesis.dof is not"):
        records.declaration(params, "ch6-five-seeds", measurements)


def _declare(root: Path, edit) -> Path:
    data = yaml.safe_load((REPO / records.FILE).read_text())
    edit(data)
    (root / records.FILE).parent.mkdir(parents=True, exist_ok=True)
    (root / records.FILE).write_text(yaml.safe_dump(data, sort_keys=False))
    return root


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update({"x; rm -rf y": d["ch6-five-seeds"]}), r"measurement: 'x; rm -rf y' is not a valid name"),
    (lambda d: d["ch6-five-seeds"]["tables"].append("x; rm -rf y"),
     r"ch6-five-seeds.tables.11: 'x; rm -rf y' is not a valid name"),
    (lambda d: d["ch6-five-seeds"]["tables"].append(11), r"ch6-five-seeds.tables.11: 11 is not a valid name"),
    (lambda d: d["ch6-five-seeds"].update(source="../x"), r"ch6-five-seeds.source: '../x' is not a valid name"),
    (lambda d: d["ch6-five-seeds"].update(benchmark="a b"), r"ch6-five-seeds.benchmark: 'a b' is not a valid name"),
    (lambda d: d["ch6-five-seeds"].update(cores=0), r"ch6-five-seeds.cores: 0 is not a positive whole number"),
    (lambda d: d["ch6-five-seeds"].update(cors=2), r"ch6-five-seeds: unknown key cors \(keys: source"),
    (lambda d: d["ch6-five-seeds"].pop("benchmark"), r"ch6-five-seeds: missing benchmark"),
    (lambda d: d["ch6-five-seeds"].update(target_minutes="soon"), r"ch6-five-seeds.target_minutes: 'soon' is not a positive"),
])
def test_a_bad_measurement_declaration_is_refused_naming_the_file_and_key(tmp_path, edit, message):
    root = _declare(tmp_path, edit)
    with pytest.raises(config.ConfigError, match=r"pipeline/end-to-end.yaml: " + message):
        records.load(root)


def test_the_benchmarks_cite_the_records_that_name_them():
    measurements = records.load(REPO)
    assert records.record_files("tolias-thesis", "timing", measurements) == (
        "tolias-thesis/end-to-end-ch6-five-seeds.json",)
    assert records.record_files("shen-thesis", "squad-timing", measurements) == ()
    assert records.load(REPO / "no-such-checkout") == {}                      # no file: nothing declared


def test_a_benchmark_shows_a_measurement_or_says_there_is_none():
    assert [r[1] for r in records.rows("ch6-five-seeds", None)] == ["not measured yet"]
    record = {"tables": ["2", "13"], "commit": "0123456789", "started": "2026-11-27 10:30 UTC", "load_at_start": 0.5,
              "config": {"memnet": {"seeds": [0, 1]}}, "cores": 2, "target_minutes": 60, "wall_time_s": 4734.0,
              "job_seconds": {"a": 6000.0, "b": 3438.0},
              "runs_compared_with_checkout": {"a": {"runs": 3, "identical": 3, "differ": 0, "new": 0},
                                              "b": {"runs": 2, "identical": 0, "differ": 1, "new": 1}}}
    wall, jobs, runs = records.rows("ch6-five-seeds", record)
    assert wall[2:5] == (78.9, 60, "min") and "clean clone of 0123456" in wall[0]
    assert jobs[2] == 157.3 and "2 jobs, each timed" in jobs[5] and "78.7 min" in jobs[5]
    assert runs[2] == 3 and runs[5] == "of 5 trained; 1 with other numbers, 1 with no run here"


def _project_repo(path: Path) -> Path:
    """This checkout as a git repository with one small measurement declared: Table 2 at the smoke scale."""
    repo = project_repo(path, lambda params: None)
    _declare(repo, lambda d: d.update({"smoke-2": {
        "source": "tolias-thesis", "tables": ["2"], "benchmark": "timing", "cores": 2, "target_minutes": 1,
        "config": {"scale": "smoke", "memnet": {"model": {"posterior_kernels": "eager"}}}}}))  # eager: no kernels
    commit_all(repo, "declare smoke-2")
    return repo


@pytest.mark.slow
def test_a_measurement_builds_its_tables_in_a_clone_and_a_second_one_retrains_the_same_numbers(
        tmp_path, mirror_dir, monkeypatch):
    repo = _project_repo(tmp_path / "repo")
    monkeypatch.setenv("NLPBENCH_MIRROR", str(mirror_dir))
    params = config.load(repo / "params.yaml")
    first_runs = tmp_path / "first-runs"
    path = end_to_end.measure(params, "smoke-2", repo, tmp_path / "results", tmp_path / "none", tmp_path / "logs",
                              keep_runs=first_runs, log=lambda s: None)
    first = io.read_json(path)
    assert path == tmp_path / "results" / "tolias-thesis" / "end-to-end-smoke-2.json"
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert first["commit"] == commit.strip() and not first["uncommitted_changes_left_out"]
    assert first["wall_time_s"] > 0 and len(first["job_seconds"]) == 2          # Table 2's MemN2N and t-MEM-NN
    assert all(s > 0 for s in first["job_seconds"].values())
    compared = first["runs_compared_with_checkout"]
    assert set(compared) == set(first["job_seconds"])
    assert all(c["new"] == c["runs"] == 2 for c in compared.values())          # tasks 1 and 20 at the smoke scale
    assert (first_runs / next(iter(compared)) / "group.json").exists()         # the kept runs
    kept_logs = tmp_path / "logs" / "end-to-end" / "smoke-2" / "train"           # and the training jobs' logs
    assert first["training_logs"] == str(kept_logs)
    assert sorted(p.name for p in kept_logs.glob("*.benchmark.tsv")) == sorted(
        f"{g}.benchmark.tsv" for g in first["job_seconds"])
    # a second clean clone, in a new process, against the first one's runs: every number the same
    second = io.read_json(end_to_end.measure(params, "smoke-2", repo, tmp_path / "results", first_runs,
                                             tmp_path / "logs", log=lambda s: None))
    assert all(c["identical"] == c["runs"] == 2 for c in second["runs_compared_with_checkout"].values())
    # the first clone's kept runs compared again, with themselves: identical, the timings as measured
    again = io.read_json(end_to_end.compare_again(params, "smoke-2", first_runs, tmp_path / "results", first_runs,
                                                  log=lambda s: None, repo=repo))
    assert again["wall_time_s"] == second["wall_time_s"] and "compared_again" in again
    assert all(c["identical"] == c["runs"] == 2 for c in again["runs_compared_with_checkout"].values())
