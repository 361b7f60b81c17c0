"""The GPU check (python -m nlpbench.timing.gpu_check, `bash envs/run.sh gpu-check`), on a CPU: its refusal
without a GPU, the commands it plans, its step time limits and the docs/gpu.md it appends to."""

import errno
import os
import pathlib
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nlpbench import clone, plan, registry
from nlpbench.timing import gpu_check

REPO = Path(__file__).resolve().parents[1]


def test_without_a_cuda_device_it_stops_at_once_with_the_remedy(tmp_path):
    doc = tmp_path / "gpu.md"
    done = subprocess.run([sys.executable, "-m", "nlpbench.timing.gpu_check", "--doc", str(doc)], cwd=REPO,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == ("nlpbench: no CUDA device here: run bash envs/run.sh gpu-check on a machine "
                                   "with a GPU")
    assert not doc.exists()


def test_dry_run_prints_every_familys_smoke_dag_table_2s_two_groups_and_the_gpu_benchmarks(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    assert gpu_check.main(["--dry-run"]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    steps = {name: cmd.split() for name, _, cmd in lines}
    smoke = plan.make(registry.load("params.yaml", {"scale": "smoke", "device": "cuda"}))
    families = {smoke.owner[t.key] for t in smoke.part(study=False)}
    assert {f"smoke {f}" for f in families} <= set(steps) and len(families) == 5
    for f in families:
        assert steps[f"smoke {f}"][-3:] == ["--config", "scale=smoke", "device=cuda"]
        assert ["--resources", "gpu=1"] == steps[f"smoke {f}"][-5:-3]
    memnet = steps["smoke memnet"]
    assert "table_tolias_thesis_2" in memnet and not any(r.startswith("output_") and "timing" in r for r in memnet)
    paper = plan.make(registry.load("params.yaml", {"scale": "paper", "device": "cuda"}))
    groups = paper.targets["tolias-thesis/2"].groups
    assert len(groups) == 2 and all(g.startswith(("memn2n-en-h3", "tmemnn-en-h3")) for g in groups)
    table2 = steps["table 2"]
    assert [a for a in table2 if a.startswith("train_")] == [plan.rule_name("train", g) for g in groups]
    assert table2[-3:] == ["--config", "scale=paper", "device=cuda"]
    benchmarks = {n for n in steps if n.startswith("benchmark ")}
    assert benchmarks == {"benchmark tolias-thesis/timing", "benchmark shen-thesis/squad-timing"}   # not DMN, ACVI
    assert steps["benchmark tolias-thesis/timing"][1] == "output_tolias_thesis_timing"


def _steps():
    return [gpu_check.Step("smoke memnet", "memnet: 18 tables", ["table_tolias_thesis_2", "--cores", "16"], "smoke",
                           outcome="ok", wall_s=61.25),
            gpu_check.Step("table 2", "tolias-thesis/2 at the paper scale", ["train_a"], "table 2", groups=("a",),
                           outcome="stopped at the 150 s of `table 2`", wall_s=150.0, job_s={"a": 42.5})]


def test_docs_gpu_md_gets_a_dated_section_per_run_appended_under_its_header(tmp_path):
    doc = tmp_path / "docs" / "gpu.md"
    facts = {"GPU": "NVIDIA Fake 80GB", "torch": "2.13.0", "CUDA (torch's build)": "13.0"}
    gpu_check.append(doc, gpu_check.section("2030-01-02 03:04 UTC", facts, _steps()))
    first = doc.read_text()
    assert first.startswith("# The GPU check") and gpu_check.NOT_YET not in first
    assert "## 2030-01-02 03:04 UTC" in first and "- GPU: NVIDIA Fake 80GB" in first and "- torch: 2.13.0" in first
    assert "| smoke memnet | memnet: 18 tables | 61.2 s | ok |" in first
    assert "| table 2 | tolias-thesis/2 at the paper scale | 150.0 s | stopped at the 150 s of `table 2` |" in first
    assert "- `a`: 42.5 s" in first and "- `snakemake table_tolias_thesis_2 --cores 16`" in first
    gpu_check.append(doc, gpu_check.section("2030-02-03 04:05 UTC", {**facts, "GPU": "NVIDIA Other"}, _steps()))
    second = doc.read_text()
    assert second.startswith(first) and second.count("# The GPU check") == 1
    assert second.index("## 2030-01-02") < second.index("## 2030-02-03") and "- GPU: NVIDIA Other" in second


def test_the_committed_docs_gpu_md_says_it_has_not_been_run_on_a_gpu_until_it_has():
    text = (REPO / "docs" / "gpu.md").read_text()
    assert text.startswith(gpu_check.HEADER)
    assert (gpu_check.NOT_YET in text) == ("\n## " not in text)


def test_a_write_that_fails_midway_leaves_docs_gpu_md_as_it_was(tmp_path, monkeypatch):
    doc = tmp_path / "gpu.md"
    gpu_check.append(doc, gpu_check.section("2030-01-02 03:04 UTC", {"GPU": "A"}, _steps()))
    before = doc.read_text()
    real = pathlib.Path.write_text

    def half_then_disk_full(self, data, *args, **kwargs):
        real(self, data[: len(data) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device", str(self))

    monkeypatch.setattr(pathlib.Path, "write_text", half_then_disk_full)
    with pytest.raises(OSError):
        gpu_check.append(doc, gpu_check.section("2030-02-03 04:05 UTC", {"GPU": "B"}, _steps()))
    monkeypatch.undo()
    assert doc.read_text() == before and os.listdir(tmp_path) == ["gpu.md"]


def test_a_run_with_a_fake_gpu_records_each_steps_outcome_and_stops_a_step_at_its_limit(tmp_path, monkeypatch):
    """run() on a fake CUDA device, snakemake replaced: each step's outcome and wall time, Table 2's job times
    from the clone's benchmark files, and a step whose share of the time is spent is not run."""
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(gpu_check, "cuda_available", lambda: True)
    monkeypatch.setattr(gpu_check, "machine_facts", lambda: {"GPU": "NVIDIA Fake"})
    monkeypatch.setattr(gpu_check, "STEPS", {"smoke": 3, "table 2": 100, "benchmarks": 100})
    calls = []

    def fake_snakemake(where, env, args, log_path, timeout=None):
        calls.append((args, timeout))
        if any(a.startswith("train_") for a in args):
            for g in plan.make(registry.load("params.yaml", {"scale": "paper"})).targets["tolias-thesis/2"].groups:
                (where / "logs" / "train").mkdir(parents=True, exist_ok=True)
                (where / "logs" / "train" / f"{g}.benchmark.tsv").write_text("s\th:m:s\n12.5\t0:00:12\n")
            return 0
        if "table_acvi_paper_1" in args:      # the first family: uses up the smoke share
            time.sleep(3.1)
            return 124
        return 1 if "output_tolias_thesis_timing" in args else 0

    monkeypatch.setattr(gpu_check, "snakemake", fake_snakemake)
    doc = tmp_path / "gpu.md"
    done = gpu_check.run(REPO, doc, {}, None, log=lambda _: None)
    by_name = {s.name: s for s in done}
    assert by_name["smoke acvi"].outcome == "stopped at the 3 s of `smoke`" and calls[0][1] == 3
    assert by_name["smoke dmn"].outcome.startswith("not run") and by_name["smoke dmn"].wall_s is None
    assert by_name["table 2"].outcome == "ok" and sorted(by_name["table 2"].job_s.values()) == [12.5, 12.5]
    assert by_name["benchmark tolias-thesis/timing"].outcome.startswith("failed (exit 1")
    assert len(calls) == 4                    # acvi's smoke run, Table 2, the two benchmarks
    text = doc.read_text()
    assert "- GPU: NVIDIA Fake" in text and "| smoke dmn |" in text and "12.5 s" in text


def test_a_snakemake_run_past_its_timeout_is_stopped_with_its_jobs(tmp_path):
    (tmp_path / "Snakefile").write_text('rule slow:\n    output: "x"\n    shell: "echo $$ > pid; sleep 120; touch x"\n')
    t0 = time.perf_counter()
    rc = clone.snakemake(tmp_path, {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
                         ["--cores", "1"], tmp_path / "log", timeout=8)
    assert rc == 124 and time.perf_counter() - t0 < 40
    pid = int((tmp_path / "pid").read_text())
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)                       # the job's shell is gone too


def test_an_interrupted_snakemake_run_in_a_clone_is_stopped_with_its_jobs(tmp_path):
    """snakemake runs in a session of its own (so that a timeout can stop its jobs): Ctrl-C of the caller must
    still stop them rather than leave them running."""
    import signal

    def interrupt(*_):
        raise KeyboardInterrupt

    (tmp_path / "Snakefile").write_text('rule slow:\n    output: "x"\n    shell: "echo $$ > pid; sleep 120; touch x"\n')
    old = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.alarm(8)
        with pytest.raises(KeyboardInterrupt):
            clone.snakemake(tmp_path, {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"},
                            ["--cores", "1"], tmp_path / "log")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    pid = int((tmp_path / "pid").read_text())
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
