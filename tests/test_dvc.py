"""`dvc repro` regenerates the tables (smoke scale), and checkpoints round-trip through the default remote."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


def _run(cmd, cwd, env, timeout=900):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.mark.slow
def test_dvc_repro_regenerates_tables_and_push_pull_work(tmp_path, mirror_dir):
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    work = tmp_path / "clone"
    for rel in files:
        if rel.startswith("results/"):
            continue                                   # regenerate from nothing
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, work / rel)
    params = yaml.safe_load((work / "params.yaml").read_text())
    params["scales"]["smoke"]["memnet.train.epochs"] = 1
    # DVC's side of the DAG is what is tested here (test_pipeline.py covers every rule): one table, one task
    # (the other families' tables are left out: their rules are covered there too)
    params["tables"] = {"tolias-thesis": {"2": params["tables"]["tolias-thesis"]["2"]}}
    params["outputs"] = {"tolias-thesis": {"3": params["outputs"]["tolias-thesis"]["3"]}}
    for scale in params["scales"].values():           # a scale's override of a dropped declaration would be unknown
        for key in [k for k in scale if k.startswith(("tables.", "outputs.")) and not k.startswith("tables.tolias-thesis.2.")]:
            del scale[key]
    params["scales"]["smoke"]["task_subset"] = [1]
    (work / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    bindir = Path(sys.executable).parent
    env = {**os.environ, "NLPBENCH_MIRROR": str(mirror_dir), "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    _run(["git", "init", "-q"], work, env)
    _run(["git", "add", "-A"], work, env)
    _run(["git", "commit", "-qm", "clone"], work, env)
    (work / "results" / "tolias-thesis").mkdir(parents=True)
    (work / "results" / "tolias-thesis" / "timing.md").write_text("a committed file no stage rebuilds\n")
    params_before = (work / "params.yaml").read_bytes()
    # the README's form: DVC writes the override into overrides.yaml, never into params.yaml
    _run([str(bindir / "dvc"), "exp", "run", "-S", "overrides.yaml:++scale=smoke"], work, env, timeout=1800)
    assert (work / "params.yaml").read_bytes() == params_before
    assert yaml.safe_load((work / "overrides.yaml").read_text()) == {"scale": "smoke"}
    assert (work / "results" / "tolias-thesis" / "timing.md").exists()     # results/ is git's, not DVC's
    assert (work / "results" / "tolias-thesis" / "2.md").exists()
    assert "**scale**: smoke" in (work / "results" / "tolias-thesis" / "2.md").read_text()
    assert (work / "results" / "index.csv").exists()
    assert (work / "dvc.lock").exists()
    status = _run([str(bindir / "dvc"), "status"], work, env)
    assert "up to date" in status.stdout.lower() or "changed" not in status.stdout

    _run([str(bindir / "dvc"), "push"], work, env)
    assert any((work / "dvc-storage").rglob("*"))
    checkpoints = sorted(p.relative_to(work) for p in (work / "runs").rglob("model.pt"))
    assert checkpoints
    shutil.rmtree(work / "runs")
    shutil.rmtree(work / ".dvc" / "cache")
    _run([str(bindir / "dvc"), "pull"], work, env)
    assert sorted(p.relative_to(work) for p in (work / "runs").rglob("model.pt")) == checkpoints


def test_the_tables_stage_tracks_every_family_settings_section():
    """A family's settings (params.yaml `<family>:`) changing must make `dvc repro` re-run the tables stage."""
    from nlpbench import registry

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["tables"]
    tracked = {p for p in stage["params"] if isinstance(p, str)}
    sections = {name for name in registry.FAMILIES if name in params}
    assert sections and sections <= tracked, f"dvc.yaml: tables stage does not track {sorted(sections - tracked)}"
