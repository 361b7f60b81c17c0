"""A training job's time over its attempts (nlpbench.job_clock): a killed job resumed goes on counting, a finished
one starts again, `nlpbench costs` takes the clock where the benchmark timed only the last attempt."""

import json
import time
from pathlib import Path

import pytest

from nlpbench import config, job_clock, plan, status
from nlpbench.job_clock import JobClock

REPO = Path(__file__).resolve().parents[1]


def test_an_unfinished_attempt_is_carried_into_the_next(tmp_path):
    clock = tmp_path / "logs" / "job.clock.json"
    clock.parent.mkdir()
    clock.write_text(json.dumps({"seconds": 240.0, "finished": False}))     # an attempt killed after 4 minutes
    with JobClock(clock):
        pass
    state = json.loads(clock.read_text())
    assert state["finished"] is True and 240.0 <= state["seconds"] < 300.0


def test_a_finished_job_is_timed_afresh_and_a_failed_attempt_stays_open(tmp_path):
    clock = tmp_path / "job.clock.json"
    clock.write_text(json.dumps({"seconds": 900.0, "finished": True}))
    with pytest.raises(RuntimeError):
        with JobClock(clock):
            raise RuntimeError("out of memory")
    state = json.loads(clock.read_text())
    assert state["seconds"] < 60.0 and state["finished"] is False           # 900 s belonged to the finished run
    assert job_clock.spent_before(clock) == state["seconds"]                # the next attempt goes on from here


def test_the_clock_is_written_while_the_job_runs(tmp_path):
    clock = tmp_path / "job.clock.json"
    clock.write_text(json.dumps({"seconds": 10.0, "finished": False}))
    with JobClock(clock, every=0.01):
        before = json.loads(clock.read_text())                              # written on entry ...
        deadline = time.monotonic() + 10
        while json.loads(clock.read_text()) == before and time.monotonic() < deadline:
            time.sleep(0.01)
        running = json.loads(clock.read_text())                             # ... and again while it runs
    assert running != before and running["finished"] is False and running["seconds"] >= 10.0


def test_a_clock_of_another_form_is_named(tmp_path):
    clock = tmp_path / "job.clock.json"
    clock.write_text('{"elapsed": 3}')
    with pytest.raises(ValueError, match=r"job.clock.json: not a job clock"):
        with JobClock(clock):
            pass


def test_costs_take_the_clock_of_a_resumed_job_and_the_benchmark_otherwise(tmp_path):
    p = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    resumed, whole = list(p.groups)[:2]
    logs = tmp_path / "logs"
    logs.mkdir()
    for gid in (resumed, whole):
        (logs / f"{gid}.benchmark.tsv").write_text("s\th:m:s\tmax_rss\n13.3\t0:00:13\t400\n")
    (logs / f"{resumed}.clock.json").write_text(json.dumps({"seconds": 1345.7, "finished": True}))
    (logs / f"{whole}.clock.json").write_text(json.dumps({"seconds": 14.1, "finished": True}))  # start and exit
    out = tmp_path / "costs.tsv"
    assert status.refresh_costs(p, "smoke", "cpu", logs, out) == 2
    costs = status.read_costs(out)
    assert costs[resumed]["seconds"] == 1345.7 and "resumed" in costs[resumed]["source"]
    assert costs[whole]["seconds"] == 13.3 and costs[whole]["source"] == "benchmark file of a pipeline run"
    # the timing benchmarks read a job's time the same way
    assert status.job_seconds(logs, resumed) == 1345.7 and status.job_seconds(logs, whole) == 13.3


def test_runs_taken_over_count_in_the_job_s_cost(tmp_path):
    """A job that took finished runs over from another group spent seconds; a fresh clone trains those runs, so
    the group's cost is the job's time plus theirs."""
    p = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    gid = next(iter(p.groups))
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / f"{gid}.benchmark.tsv").write_text("s\th:m:s\tmax_rss\n2.1\t0:00:02\t400\n")
    with JobClock(job_clock.clock_path(logs, gid)) as clock:
        clock.take_over(600.0)
        clock.take_over(None)                       # a family that took nothing over
    state = job_clock.recorded(job_clock.clock_path(logs, gid))
    assert state.finished and state.taken_over == 600.0 and state.total == state.seconds + 600.0
    assert job_clock.spent_before(job_clock.clock_path(logs, gid)) == 0.0       # finished: the next starts afresh
    seconds, _, source = status.job_measurement(logs, gid)
    assert seconds == state.total and "took over" in source


def test_nlpbench_train_keeps_its_clock_beside_the_rules_benchmark_file(tmp_path, monkeypatch):
    """The rule's command names no clock (a changed command would make Snakemake rerun every job it ran before):
    `nlpbench train` keeps it where the rule writes its benchmark file, and --again starts it afresh."""
    from nlpbench import cli, registry
    text = (REPO / "pipeline" / "train.smk").read_text()
    assert f'f"{job_clock.TRAIN_LOGS.as_posix()}/{{_group.id}}.benchmark.tsv"' in text and "clock" not in text

    p = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    group = next(iter(p.groups))

    def train(group, params, paths, device):      # the clock runs while the family trains
        assert json.loads(job_clock.clock_path(tmp_path / "logs", group).read_text())["finished"] is False
        return 42.0                                 # seconds of runs it took over
    family = registry.get(p.owner[group])
    monkeypatch.setattr(family, "train", train)
    monkeypatch.setattr(family, "retrain", train, raising=False)
    cli.main(["--params", str(REPO / "params.yaml"), "--set", "scale=smoke", "--runs", str(tmp_path / "runs"),
              "train", group, "--logs", str(tmp_path / "logs")])
    clock = job_clock.clock_path(tmp_path / "logs", group)
    assert json.loads(clock.read_text())["finished"] is True
    assert json.loads(clock.read_text())["taken_over_s"] == 42.0
    clock.write_text(json.dumps({"seconds": 5000.0, "finished": False}))
    cli.main(["--params", str(REPO / "params.yaml"), "--set", "scale=smoke", "--runs", str(tmp_path / "runs"),
              "train", group, "--again", "--logs", str(tmp_path / "logs")])
    assert json.loads(clock.read_text())["seconds"] < 60.0
