"""nlpbench verify: committed tables retrained in a scratch clone of HEAD and compared cell by cell."""

import contextlib
import csv
import io as io_
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from project_repo import commit_all, edit_params, project_repo

from nlpbench import cli, clone, config, verify
from nlpbench.runtime import io

REPO = Path(__file__).resolve().parents[1]


def _csv(*cells: tuple[str, str, str]) -> str:
    """A table's CSV as tables.render_csv writes it, with these (row, column, reproduced) cells."""
    buf = io_.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["row", "column", "reproduced", "paper", "diff", "status", "note"])
    out.writerows([r, c, v, "50.0", "", "ok", "seed 0, epoch 3"] for r, c, v in cells)
    return buf.getvalue()


def test_a_changed_cell_is_reported_and_an_equal_one_is_not():
    committed = _csv(("1", "MemN2N", "99.9"), ("2", "MemN2N", "43.5435"), ("3", "MemN2N", ""), ("4", "a, b", "1"))
    rebuilt = _csv(("1", "MemN2N", "99.9"), ("2", "MemN2N", "39.3393"), ("3", "MemN2N", ""), ("4", "a, b", "1"),
                   ("5", "MemN2N", "7"))
    n, diffs = verify.compare("t/2", committed, rebuilt)
    assert n == 5
    assert [(d.row, d.column, d.committed, d.rebuilt) for d in diffs] == [
        ("2", "MemN2N", "43.5435", "39.3393"), ("5", "MemN2N", "(none)", "7")]
    assert diffs[0].delta == pytest.approx(-4.2042) and diffs[1].delta is None
    assert diffs[0].line() == "t/2  row '2'  column 'MemN2N': committed 43.5435, rebuilt 39.3393  Δ -4.2042"
    # a tolerance lets numbers that close agree, never a missing or an emptied cell
    emptied = _csv(("1", "MemN2N", ""), ("2", "MemN2N", "39.3393"))
    assert verify.compare("t/2", committed, emptied, tolerance=5)[1] == [
        verify.Difference("t/2", "1", "MemN2N", "99.9", ""), verify.Difference("t/2", "3", "MemN2N", "", "(none)"),
        verify.Difference("t/2", "4", "a, b", "1", "(none)")]
    assert verify.compare("t/2", committed, committed.replace("43.5435", "43.5436"), tolerance=1e-3)[1] == []
    assert len(verify.compare("t/2", committed, committed.replace("43.5435", "43.5436"))[1]) == 1   # exact


def test_exit_status_is_0_when_every_cell_agrees_and_1_when_one_differs():
    committed = {"t/2": _csv(("1", "MemN2N", "99.9"), ("2", "MemN2N", "43.5435"))}
    lines = []
    assert verify.report(committed, dict(committed), 0.0, "abc1234", 60.0, lines.append) == 0
    assert lines == ["verify: 1 table(s), 2 cells, 0 differ; rebuilt at abc1234 in 1.0 min"]
    lines.clear()
    rebuilt = {"t/2": committed["t/2"].replace("43.5435", "39.3393")}
    assert verify.report(committed, rebuilt, 0.0, "abc1234", 60.0, lines.append) == 1
    assert lines[0].startswith("t/2  row '2'") and lines[-1].startswith("verify: 1 table(s), 2 cells, 1 differ (max")
    assert verify.report(committed, rebuilt, 5.0, "abc1234", 60.0, lines.append) == 0


def _candidates(**seconds_by_family) -> dict:
    return {f"{fam}/{i}": verify.Candidate(f"{fam}/{i}", fam, "cpu", True, ("g",), s)
            for fam, secs in seconds_by_family.items() for i, s in enumerate(secs)}


def test_a_sample_is_seeded_spread_over_families_and_leaves_out_costly_tables():
    cands = _candidates(memnet=[60, 120, 5000], dmn=[100, 200], squad=[9000])
    picked = verify.sample(cands, 3, seed=1, max_seconds=600)
    assert picked == verify.sample(cands, 3, seed=1, max_seconds=600)            # the seed decides
    assert {c.family for c in picked[:2]} == {"memnet", "dmn"}                    # one of each family first
    assert all(c.seconds <= 600 for c in picked) and len(picked) == 3
    assert len(verify.sample(cands, 10, seed=1, max_seconds=600)) == 4          # all there are
    with pytest.raises(config.ConfigError, match="--max-minutes"):
        verify.sample(cands, 1, seed=0, max_seconds=10)
    with pytest.raises(config.ConfigError, match="shen-thesis/6.2"):              # a name that is not one
        verify.choose(cands, ["memnet/0", "shen-thesis/6.2"], None, 0, 15)
    with pytest.raises(config.ConfigError, match="--sample N"):
        verify.choose(cands, [], None, 0, 15)


def test_the_committed_tables_are_the_ones_that_read_training_groups_at_their_scale():
    repo = Path(__file__).resolve().parents[1]
    cands = verify.candidates(repo / "results", lambda s: config.load(repo / "params.yaml", {"scale": s}),
                              ["paper", "cpu", "smoke"])
    dmn = cands["shen-thesis/6.2"]
    assert (dmn.family, dmn.scale, dmn.cpu, len(dmn.groups)) == ("dmn", "cpu", True, 6) and dmn.seconds > 0
    assert cands["tolias-thesis/acvi-qg"].scale == "cpu"             # its provenance adds a sentence to the scale
    assert "acvi-paper/3" not in cands                               # every trained row needs data: no groups


def test_a_bad_request_is_a_message_with_exit_status_2(capsys):
    assert cli.main(["verify"]) == 2
    assert "name the tables (SOURCE/TABLE ...) or draw some with --sample N" in capsys.readouterr().err
    assert cli.main(["verify", "--tolerance", "-1", "shen-thesis/6.2"]) == 2
    assert "--tolerance -1: must be 0 (exact) or more" in capsys.readouterr().err


@pytest.mark.slow
def test_a_clone_retrains_a_committed_smoke_table_bit_for_bit_and_an_edited_cell_is_reported(
        tmp_path, mirror_dir, monkeypatch):
    def smoke_committed(params: dict) -> None:
        params["memnet"]["model"]["posterior_kernels"] = "eager"      # no kernels to build in a test
        params["committed_scale"] = "smoke"                            # its tables go to results/, in git
    repo = project_repo(tmp_path / "repo", smoke_committed)
    env = {**os.environ, "NLPBENCH_MIRROR": str(mirror_dir),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    assert clone.snakemake(repo, env, ["table_tolias_thesis_2", "--cores", "1", "--resources", "gpu=1",
                                            "--config", "scale=smoke"], tmp_path / "build.log") == 0, \
        (tmp_path / "build.log").read_text()[-3000:]
    table = repo / "results" / "tolias-thesis" / "2.csv"
    assert io.read_json(table.with_suffix(".json"))["provenance"]["scale"] == "smoke"
    lines = table.read_text().splitlines()
    first = lines[1].split(",")
    assert first[2] not in ("", "12.3456")
    lines[1] = ",".join([*first[:2], "12.3456", *first[3:]])          # one committed cell that is not what it trains
    table.write_text("\n".join(lines) + "\n")
    commit_all(repo, "Table 2 at the smoke scale")
    # the project moves its committed scale on: the smoke table, still in results/, rebuilds in results/smoke/
    edit_params(repo / "params.yaml", lambda params: params.update(committed_scale="cpu"))
    commit_all(repo, "cpu is the committed scale")
    monkeypatch.setenv("NLPBENCH_MIRROR", str(mirror_dir))
    out = []
    code = verify.verify(config.load(repo / "params.yaml"), repo, tmp_path / "logs", ["tolias-thesis/2"],
                         log=out.append)
    assert code == 1, "\n".join(out)
    differences = [line for line in out if line.startswith("tolias-thesis/2  row")]
    assert differences == [f"tolias-thesis/2  row {first[0]!r}  column {first[1]!r}: committed 12.3456, rebuilt "
                           f"{first[2]}  Δ {float(first[2]) - 12.3456:+.4f}"]
    assert f"{len(lines) - 1} cells, 1 differ" in out[-1]
    assert (tmp_path / "logs" / "verify" / "tolias-thesis" / "2.csv").read_text().splitlines()[1].split(",")[2] \
        == first[2]


# A stand-in for snakemake (found first on PYTHONPATH by `python -m snakemake`): it starts a training job that
# ignores SIGTERM in its own process group, says where it is, and sleeps, as a long verify does.
FAKE_SNAKEMAKE = """\
import json, os, subprocess, sys, time
job = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                        "print('ready', flush=True); time.sleep(600)"], stdout=subprocess.PIPE, text=True)
job.stdout.readline()
where = os.environ["FAKE_SNAKEMAKE_SAYS"]
with open(where + ".tmp", "w") as f:
    json.dump({"snakemake": os.getpid(), "job": job.pid, "clone": os.getcwd()}, f)
os.replace(where + ".tmp", where)
time.sleep(600)
"""


@pytest.fixture(scope="module")
def small_project(tmp_path_factory) -> Path:
    """A committed project with one retrainable table (the configuration, its costs and shen-thesis/6.2)."""
    repo = tmp_path_factory.mktemp("small_project") / "repo"
    (repo / "results" / "shen-thesis").mkdir(parents=True)
    shutil.copy2(REPO / "params.yaml", repo / "params.yaml")
    shutil.copytree(REPO / "pipeline", repo / "pipeline")
    shutil.copy2(REPO / "results" / "costs.tsv", repo / "results" / "costs.tsv")
    for suffix in (".csv", ".json"):
        shutil.copy2(REPO / "results" / "shen-thesis" / f"6.2{suffix}", repo / "results" / "shen-thesis")
    subprocess.run(["git", "-C", str(repo), "init", "-q"], check=True)
    commit_all(repo, "one table")
    return repo


def _alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie, ended but not yet reaped, does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _until(condition, what: str, limit: float = 120.0) -> None:
    """Wait for `condition()` (a guard against a hang, not a measurement)."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("sig, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_verify_stops_its_snakemake_and_jobs_and_deletes_its_clone(small_project, tmp_path, sig, status):
    fake = tmp_path / "fake"
    (fake / "snakemake").mkdir(parents=True)
    (fake / "snakemake" / "__init__.py").write_text("")
    (fake / "snakemake" / "__main__.py").write_text(FAKE_SNAKEMAKE)
    says, scratch = tmp_path / "snakemake.json", tmp_path / "scratch"
    scratch.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake), *sys.path]), "FAKE_SNAKEMAKE_SAYS": str(says),
           "TMPDIR": str(scratch)}
    proc = subprocess.Popen([sys.executable, "-m", "nlpbench.cli", "verify", "shen-thesis/6.2",
                             "--logs", str(tmp_path / "logs")], cwd=small_project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # as from a terminal: a pytest-xdist worker ignores SIGINT, and a child inherits that
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        _until(lambda: says.exists() or proc.poll() is not None, "the stand-in snakemake to start")
        assert proc.poll() is None, proc.communicate()
        started = json.loads(says.read_text())
        clone_dir = Path(started["clone"])
        assert clone_dir.parent.parent == scratch and clone_dir.is_dir()
        assert os.getpgid(started["job"]) == started["snakemake"] != os.getpgid(proc.pid)    # a session of its own
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == status, err
        assert err.splitlines() == [f"nlpbench verify: stopped by {sig.name}; snakemake and its jobs were stopped "
                                    "and the scratch clone deleted"]
        assert not _alive(started["snakemake"])
        _until(lambda: not _alive(started["job"]), "the training job to end")     # SIGKILL is delivered at once
        assert not clone_dir.exists() and list(scratch.iterdir()) == []
    finally:                                   # whatever went wrong, no process of this test is left behind
        if proc.poll() is None:
            proc.kill()
        if says.exists():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(json.loads(says.read_text())["snakemake"], signal.SIGKILL)
