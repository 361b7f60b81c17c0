"""Trained runs shared through a DVC remote: the share stage's snapshot, `dvc push`, and in a fresh clone `dvc pull`,
`nlpbench share restore` and Snakemake building the tables without training (the README's "Sharing runs")."""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from nlpbench import share
from project_repo import commit_all, project_repo

BINDIR = Path(sys.executable).parent


def _run(cmd, cwd, env, timeout=600):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, cmd))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_pack_snapshots_data_and_runs_without_this_clones_table_markers(tmp_path):
    _write(tmp_path / "data/babi/en/qa1_train.txt", "1 Mary moved.\n")
    run = _write(tmp_path / "runs/memnet-smoke/run-1/model.pt", "weights")
    _write(tmp_path / "runs/_tables/smoke/tolias-thesis-2.done", "built here\n")
    _write(tmp_path / "runs/memnet-smoke/.model.pt.abc-1-x.tmp", "half written")
    _write(tmp_path / "runs/.staged-0a0b0c0d-1-abcdefgh/x.csv", "half staged")
    counts = share.pack(tmp_path / "data", tmp_path / "runs", tmp_path / "share")
    files = sorted(str(p.relative_to(tmp_path / "share")) for p in (tmp_path / "share").rglob("*") if p.is_file())
    assert files == ["data/babi/en/qa1_train.txt", "runs/memnet-smoke/run-1/model.pt"]
    assert counts == {"data": 1, "runs": 1}
    with run.open("r+") as f:            # a file rewritten in place in runs/ leaves the snapshot as it was
        f.write("WEIGHTS")
    assert (tmp_path / "share/runs/memnet-smoke/run-1/model.pt").read_text() == "weights"
    # a second pack replaces the snapshot: a run removed since is gone from it
    run.unlink()
    share.pack(tmp_path / "data", tmp_path / "runs", tmp_path / "share")
    assert not (tmp_path / "share/runs/memnet-smoke/run-1/model.pt").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_restore_keeps_your_files_and_gives_the_pulled_ones_one_mtime(tmp_path):
    _write(tmp_path / "share/data/babi/qa1.txt", "pulled data\n")
    _write(tmp_path / "share/runs/g/done", "pulled\n")
    _write(tmp_path / "share/runs/g/r1/model.pt", "pulled weights")
    _write(tmp_path / "share/runs/g/r2/model.pt", "pulled weights 2")
    mine = _write(tmp_path / "runs/g/r2/model.pt", "my own weights")
    _write(tmp_path / "runs/g/done", "pulled\n")
    old = time.time() - 3600
    for p in (tmp_path / "share").rglob("*"):
        os.utime(p, (old, old))
    done = share.restore(tmp_path / "data", tmp_path / "runs", tmp_path / "share")
    assert sorted(p.relative_to(tmp_path).as_posix() for p in done["restored"]) == [
        "data/babi/qa1.txt", "runs/g/r1/model.pt"]
    assert done["kept"] == [mine] and mine.read_text() == "my own weights"
    assert [p.relative_to(tmp_path).as_posix() for p in done["same"]] == ["runs/g/done"]
    stamps = {(tmp_path / p).stat().st_mtime for p in ("data/babi/qa1.txt", "data/babi", "data", "runs/g/r1/model.pt",
                                                       "runs/g/r1")}
    assert len(stamps) == 1 and stamps.pop() > old + 1800
    assert (tmp_path / "share/runs/g/r1/model.pt").stat().st_mtime == pytest.approx(old)   # copies, not links


def test_restore_without_a_pulled_snapshot_says_what_to_run(tmp_path, monkeypatch):
    from nlpbench import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["share", "restore"]) == 2


def _one_table(params: dict) -> None:
    """One cheap table at the smoke scale: Table 2 of the thesis on bAbI task 1, one epoch (no other table, no
    output); the scale is committed in overrides.yaml, so that Snakemake and DVC both read it."""
    params["scales"]["smoke"]["memnet.train.epochs"] = 1
    params["scales"]["smoke"]["task_subset"] = [1]
    params["tables"] = {"tolias-thesis": {"2": params["tables"]["tolias-thesis"]["2"]}}
    params["outputs"] = {}
    for scale in params["scales"].values():        # a scale's keys for the declarations left out would name nothing
        for key in [k for k in scale if k.startswith(("tables.", "outputs."))
                    and not k.startswith("tables.tolias-thesis.2.")]:
            del scale[key]


def _jobs_to_run(work: Path, env: dict) -> set[str]:
    """The rules Snakemake would run (its dry run's job counts)."""
    out = _run(["snakemake", "--cores", "1", "--resources", "gpu=1", "--dry-run", "--quiet", "rules"], work, env).stdout
    return {m[1] for m in re.finditer(r"^(\S+)\s+\d+$", out, re.M)} - {"total"}


def test_pulled_runs_rebuild_the_table_in_a_fresh_clone_without_training(tmp_path, mirror_dir):
    """Clone A trains and builds one table, snapshots data/ and runs/ (`dvc repro --single-item share`) and pushes
    them to a local-directory remote; a fresh `git clone` B pulls them, restores them and runs Snakemake, which
    trains nothing and builds the same table."""
    env = {**os.environ, "PATH": f"{BINDIR}{os.pathsep}{os.environ['PATH']}", "NLPBENCH_MIRROR": str(mirror_dir)}
    a = tmp_path / "a"
    a.mkdir()
    project_repo(a, _one_table)
    (a / "overrides.yaml").write_text("scale: smoke\n")
    _run(["git", "rm", "-rqf", "results"], a, env)      # no committed tables: B has only what it builds
    commit_all(a, "one table at the smoke scale")

    _run(["snakemake", "--cores", "1", "--resources", "gpu=1"], a, env)
    table = Path("results/tolias-thesis/2.csv")
    assert (a / table).is_file() and any((a / "logs" / "train").glob("*.log"))
    remote = tmp_path / "lab-remote"
    _run(["dvc", "remote", "add", "-d", "lab", str(remote)], a, env)          # the README's commands, in order
    _run(["dvc", "repro", "--single-item", "share"], a, env)
    _run(["dvc", "push"], a, env)
    # DVC links share/ to its cache; runs/ shares no file with either (a file rewritten there cannot alter a pushed one)
    assert all(p.stat().st_nlink == 1 for p in (a / "runs").rglob("*") if p.is_file())
    assert any(remote.rglob("*")), "dvc push sent nothing to the remote"
    _run(["git", "add", "dvc.lock", ".dvc/config"], a, env)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "runs pushed to the lab remote"], a, env)

    b = tmp_path / "b"
    _run(["git", "clone", "-q", str(a), str(b)], tmp_path, env)
    assert not (b / "runs").exists() and not (b / "data").exists() and not (b / table).exists()
    _run(["dvc", "pull"], b, env)
    _run(["nlpbench", "share", "restore"], b, env)
    assert _jobs_to_run(b, env) == {"table_tolias_thesis_2", "index", "all"}    # no training, no data step
    _run(["snakemake", "--cores", "1", "--resources", "gpu=1"], b, env)
    assert not (b / "logs" / "train").exists() and not (b / "logs" / "data").exists()   # no training, no fetching
    assert (b / table).read_bytes() == (a / table).read_bytes()
    assert all(p.stat().st_nlink == 1 for p in (b / "runs").rglob("*") if p.is_file())
    assert yaml.safe_load((b / "dvc.lock").read_text())["stages"]["share"]
