"""A training job's time over its attempts (nlpbench.runtime.job_clock): a killed job resumed goes on counting, a finished
one starts again, `nlpbench costs` takes the clock where the benchmark timed only the last attempt."""

import json
import time
from pathlib import Path

import pytest

from nlpbench import config, plan, status
from nlpbench.runtime import io, job_clock
from nlpbench.runtime.job_clock import JobClock

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


NOT_A_CLOCK = {        # the text of a clock file that is not one, and what its one-line message names
    "negative": ('{"seconds": -5, "finished": false}', "'seconds' -5 is not from 0"),
    "beyond a year": ('{"seconds": 1e308, "finished": false}', "'seconds' 1e+308 is not from 0"),
    "infinite": ('{"seconds": Infinity, "finished": false}', "'seconds' inf is not from 0"),
    "not a number": ('{"seconds": NaN, "finished": false}', "'seconds' nan is not from 0"),
    "a string": ('{"seconds": "240", "finished": false}', "'seconds' '240' is not a number"),
    "a bool": ('{"seconds": true, "finished": false}', "'seconds' True is not a number"),
    "finished no": ('{"seconds": 240, "finished": "no"}', "'finished' is 'no', not true or false"),
    "taken over": ('{"seconds": 240, "finished": false, "taken_over_s": -Infinity}', "'taken_over_s' -inf"),
    "another form": ('{"elapsed": 3}', "no 'seconds'"),
    "a list": ("[240, false]", "a JSON list, not an object"),
    "not JSON": ('{"seconds": 24', "unreadable: not valid JSON (line 1, column 15: Expecting"),
}


@pytest.mark.parametrize("text, named", NOT_A_CLOCK.values(), ids=NOT_A_CLOCK.keys())
def test_a_clock_that_is_not_one_is_named_in_one_line_and_started_again(tmp_path, text, named):
    clock = tmp_path / "job.clock.json"
    clock.write_text(text)
    with pytest.raises(ValueError) as caught:
        job_clock.recorded(clock)
    message = str(caught.value)
    assert message.startswith(f"{clock}: not a job clock (") and named in message and "\n" not in message
    with pytest.warns(UserWarning) as said:
        with JobClock(clock):
            pass
    assert len(said) == 1 and str(said[0].message) == f"{message}; the clock starts again from zero"
    state = json.loads(clock.read_text())          # rewritten as strict JSON, from zero
    assert state["finished"] is True and 0 <= state["seconds"] < 60


def test_a_clock_is_written_as_strict_json_and_nonsense_taken_over_is_not_counted(tmp_path):
    clock = tmp_path / "job.clock.json"
    with pytest.warns(UserWarning) as said:
        with JobClock(clock) as timed:
            timed.take_over(30.0)
            timed.take_over(float("inf"))
            timed.take_over(float("nan"))
            timed.take_over(-1.0)
    assert [str(w.message) for w in said] == [
        f"{clock}: taken-over training seconds not counted: {value} is not from 0 to 31622400 seconds (a year)"
        for value in ("inf", "nan", "-1.0")]
    text = clock.read_text()
    assert "Infinity" not in text and "NaN" not in text
    assert json.loads(text)["taken_over_s"] == 30.0
    with pytest.raises(ValueError, match="not JSON compliant"):
        io.write_json(tmp_path / "x.json", {"seconds": float("inf")}, allow_nan=False)
    assert not (tmp_path / "x.json").exists()


def test_costs_never_take_a_clock_that_is_not_one(tmp_path):
    """A damaged clock beside a benchmark: the benchmark's seconds go into costs.tsv, never an infinity."""
    p = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    infinite, nonsense, bad_benchmark = list(p.groups)[:3]
    logs = tmp_path / "logs"
    logs.mkdir()
    for gid in (infinite, nonsense):
        (logs / f"{gid}.benchmark.tsv").write_text("s\th:m:s\tmax_rss\n13.3\t0:00:13\t400\n")
    (logs / f"{infinite}.clock.json").write_text('{"seconds": Infinity, "finished": true}')
    (logs / f"{nonsense}.clock.json").write_text('{"seconds": 1345.7, "finished": "no"}')
    (logs / f"{bad_benchmark}.benchmark.tsv").write_text("s\th:m:s\tmax_rss\ninf\t0:00:13\tinf\n")
    out = tmp_path / "costs.tsv"
    with pytest.warns(UserWarning) as said:
        assert status.refresh_costs(p, "smoke", "cpu", logs, out) == 2
    messages = {str(w.message).split(":", 1)[0]: str(w.message) for w in said}
    assert len(said) == 3 and sorted(messages) == sorted(
        f"{logs / name}" for name in (f"{bad_benchmark}.benchmark.tsv, line 2", f"{infinite}.clock.json",
                                      f"{nonsense}.clock.json"))
    assert messages[f"{logs / bad_benchmark}.benchmark.tsv, line 2"].endswith(
        "'s' inf is not from 0 to 31622400 seconds (a year); the job counts as not measured")
    assert "'seconds' inf is not from 0" in messages[f"{logs / infinite}.clock.json"]
    assert "'finished' is 'no'" in messages[f"{logs / nonsense}.clock.json"]
    assert all(messages[f"{logs / gid}.clock.json"].endswith("; its benchmark's time stands for the job")
               for gid in (infinite, nonsense))
    text = out.read_text()
    assert "inf" not in text and "nan" not in text
    costs = status.read_costs(out)
    assert costs[infinite]["seconds"] == costs[nonsense]["seconds"] == 13.3 and bad_benchmark not in costs
    out.write_text(text.replace("\t13.3\t", "\tinf\t", 1))          # a hand-edited costs.tsv is refused by line
    with pytest.raises(ValueError, match=r"costs.tsv, line 2: seconds must be from 0 to a year"):
        status.read_costs(out)


def test_nlpbench_train_names_a_bad_clock_in_one_line_and_trains(tmp_path, monkeypatch, capsys):
    from nlpbench import cli, registry
    p = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    group = next(iter(p.groups))
    trained = []
    monkeypatch.setattr(registry.get(p.owner[group]), "train", lambda group, *_: trained.append(group))
    clock = job_clock.clock_path(tmp_path / "logs", group)
    clock.parent.mkdir()
    clock.write_text('{"seconds": NaN, "finished": "no"}')
    assert cli.main(["--params", str(REPO / "params.yaml"), "--set", "scale=smoke", "--runs", str(tmp_path / "runs"),
                     "train", group, "--logs", str(tmp_path / "logs")]) == 0
    assert trained == [group]
    assert capsys.readouterr().err.splitlines() == [
        f"nlpbench: warning: {clock}: not a job clock ('finished' is 'no', not true or false; expected "
        '{"seconds": number, "finished": true or false}); the clock starts again from zero']
    assert job_clock.recorded(clock).finished


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
