"""DVC: `dvc repro` regenerates the tables (smoke scale); no documented DVC command deletes what a user fetched or
trained; dvc.lock round-trips the whole params.yaml; `dvc exp run -S` keeps overrides.yaml's text."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nlpbench import config
from project_repo import inline_declarations

REPO = Path(__file__).resolve().parents[1]
BINDIR = Path(sys.executable).parent
DVC = str(BINDIR / "dvc")


def _run(cmd, cwd, env, timeout=900):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(cmd)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _env(extra_path: Path | None = None) -> dict:
    path = os.pathsep.join(str(p) for p in (extra_path, BINDIR) if p) + os.pathsep + os.environ["PATH"]
    return {**os.environ, "PATH": path,
            "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def _fresh_clone(work: Path, env: dict) -> Path:
    """The project as a fresh clone has it: git's files (the working tree's versions) and its own git repository;
    no dvc.lock, no data/, no runs/. results/ is left out: no test here reads it."""
    if not (REPO / ".dvc").is_dir():
        pytest.skip("not a checkout with .dvc/")
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        if rel.startswith("results/") or not (REPO / rel).is_file():
            continue
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, work / rel)
    _run(["git", "init", "-q"], work, env)
    _run(["git", "add", "-A"], work, env)
    _run(["git", "commit", "-qm", "clone"], work, env)
    return work


def _instant_commands(bindir: Path) -> Path:
    """`snakemake` and `nlpbench` that return at once (the training itself is test_pipeline.py's): DVC's side of
    each stage -- what it deletes, checks out and writes into dvc.lock -- runs exactly as with the real commands.
    The stand-in for snakemake leaves a file in runs/, as a run would; `nlpbench share` (the share stage's snapshot)
    is the real one."""
    bindir.mkdir()
    real = BINDIR / "nlpbench"
    (bindir / "nlpbench").write_text(f'#!/bin/sh\n[ "$1" = share ] && exec "{real}" "$@"\nexit 0\n')
    (bindir / "snakemake").write_text("#!/bin/sh\nmkdir -p runs/stand-in && date +%s%N > runs/stand-in/metrics.json\n")
    for tool in bindir.iterdir():
        tool.chmod(0o755)
    return bindir


def _plant(work: Path) -> dict:
    """What a user has before DVC runs: fetched data, a partly trained checkpoint, a file of their own."""
    import torch

    planted = {}
    for rel in ("data/babi/en-valid/qa1_train.txt", "data/textgen/STATUS.json", "data/squad/STATUS.json",
                "runs/my-notes.txt"):
        planted[rel] = f"{rel}: kept\n".encode()
    for rel, data in planted.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(data)
    checkpoint = work / "runs" / "memnet-cpu-1k" / "_checkpoint.pt"
    checkpoint.parent.mkdir(parents=True)
    torch.save({"epoch": 7, "model": {"A.weight": torch.ones(4, 3)}}, checkpoint)
    planted[str(checkpoint.relative_to(work))] = checkpoint.read_bytes()
    return planted


def _assert_kept(work: Path, planted: dict, after: str) -> None:
    for rel, data in planted.items():
        assert (work / rel).is_file(), f"{after} deleted {rel}"
        assert (work / rel).read_bytes() == data, f"{after} changed {rel}"


def test_no_documented_dvc_command_deletes_fetched_data_or_trained_runs(tmp_path):
    """In a fresh clone (no dvc.lock) `dvc repro` and the README's `dvc exp run -S overrides.yaml:++...` keep data/
    and runs/ as they were, and so does a later experiment, after runs were trained outside DVC."""
    env = _env(_instant_commands(tmp_path / "bin"))
    work = _fresh_clone(tmp_path / "clone", env)
    planted = _plant(work)

    _run([DVC, "repro"], work, env)
    _assert_kept(work, planted, "dvc repro in a fresh clone")

    (work / "dvc.lock").unlink()                       # a fresh clone again, now for the experiment
    _run([DVC, "exp", "run", "-S", "overrides.yaml:++memnet.train.lr=0.02"], work, env)
    _assert_kept(work, planted, "dvc exp run -S in a fresh clone")
    assert yaml.safe_load((work / "overrides.yaml").read_text()) == {"memnet": {"train": {"lr": 0.02}}}

    later = work / "runs" / "memnet-cpu-10k" / "_checkpoint.pt"          # trained by snakemake after dvc.lock
    later.parent.mkdir()
    later.write_bytes(b"trained outside DVC")
    planted[str(later.relative_to(work))] = later.read_bytes()
    _run([DVC, "exp", "run", "-S", "overrides.yaml:++memnet.train.lr=0.03"], work, env)
    _assert_kept(work, planted, "a second dvc exp run")
    _run([DVC, "repro"], work, env)
    _assert_kept(work, planted, "dvc repro after an experiment")
    tracked = subprocess.run(["git", "log", "--all", "--name-only", "--format="], cwd=work, env=env,
                             capture_output=True, text=True, check=True).stdout.split()
    assert not [p for p in tracked if p.startswith(("runs/", "data/"))], "an experiment committed data or runs to git"


def test_dvc_lock_round_trips_the_whole_params_yaml(tmp_path):
    """With the real params.yaml and dvc.yaml (declarations whose column names run past 90 characters), the
    dvc.lock DVC writes can be read back: a second `dvc repro`, `dvc status` and `dvc push` succeed."""
    env = _env(_instant_commands(tmp_path / "bin"))
    work = _fresh_clone(tmp_path / "clone", env)
    assert (work / "params.yaml").read_bytes() == (REPO / "params.yaml").read_bytes()
    longest = max(len(str(k)) for k in _keys(config.load(work / "params.yaml", {"scale": "paper"})))
    assert longest > 90                                # what made the lock unreadable is still there
    _plant(work)
    _run([DVC, "repro"], work, env)
    assert yaml.safe_load((work / "dvc.lock").read_text())["stages"]["tables"]
    _run([DVC, "repro"], work, env)
    status = _run([DVC, "status"], work, env)
    assert "up to date" in status.stdout.lower(), status.stdout
    _run([DVC, "remote", "add", "-d", "lab", str(tmp_path / "remote")], work, env)   # the README's form
    _run([DVC, "push"], work, env)
    # a declaration changed: DVC sees it (its home under pipeline/ is a dependency of the tables stage) and still
    # reads its lock
    home = work / "pipeline" / "tables" / "tolias-thesis" / "pilot-task15.yaml"
    text = home.read_text()
    renamed = text.replace("the paper's position encoding)", "the paper's position encoding, renamed)")
    assert renamed != text
    home.write_text(renamed)
    assert "tables" in _run([DVC, "status"], work, env).stdout
    _run([DVC, "repro"], work, env)
    assert "up to date" in _run([DVC, "status"], work, env).stdout.lower()


def _keys(node):
    if isinstance(node, dict):
        for k, v in node.items():
            yield k
            yield from _keys(v)
    elif isinstance(node, list):
        for v in node:
            yield from _keys(v)


def test_every_params_section_dvc_records_survives_its_lock_writer():
    """DVC writes a stage's tracked params into dvc.lock with its own YAML writer, which folds a long key that holds
    spaces onto two lines (unreadable); a section dvc.yaml names under `params:` must come back as it went in."""
    serialize = pytest.importorskip("dvc.utils.serialize")
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    for name, stage in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].items():
        for entry in stage.get("params", []):
            assert isinstance(entry, str), f"dvc.yaml: {name}: params: track a file as a dependency instead ({entry})"
            value = params
            for part in entry.split("."):
                value = value[part]
            lock = {"schema": "2.0", "stages": {name: {"params": {"params.yaml": {entry: value}}}}}
            try:
                back = serialize.loads_yaml(serialize.dumps_yaml(lock))
            except Exception as e:            # noqa: BLE001 -- any failure to read it back is the defect
                back = e
            assert back == lock, f"dvc.yaml: {name}: params: {entry} does not survive dvc.lock ({back})"


def test_the_tables_stage_depends_on_every_file_the_configuration_is_read_from(monkeypatch):
    """Wherever the table catalogue lives, a change to it must make `dvc repro` re-run the tables stage: each file
    that loading the configuration reads (params.yaml, and any file it may later be split into) is a dependency."""
    from nlpbench import config

    import builtins

    read = set()
    real_read_text, real_path_open, real_open = Path.read_text, Path.open, builtins.open

    def read_text(self, *a, **k):
        read.add(self.resolve())
        return real_read_text(self, *a, **k)

    def path_open(self, *a, **k):
        read.add(self.resolve())
        return real_path_open(self, *a, **k)

    def any_open(file, *a, **k):
        if isinstance(file, (str, os.PathLike)):
            read.add(Path(file).resolve())
        return real_open(file, *a, **k)

    monkeypatch.setattr(Path, "read_text", read_text)
    monkeypatch.setattr(Path, "open", path_open)
    monkeypatch.setattr(builtins, "open", any_open)
    monkeypatch.chdir(REPO)
    config.load("params.yaml", {})
    monkeypatch.undo()
    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["tables"]
    deps = [(REPO / d).resolve() for d in stage["deps"]]
    inside = [p for p in read if p.is_relative_to(REPO)]
    assert REPO / "params.yaml" in inside
    missing = [str(p.relative_to(REPO)) for p in inside if not any(p == d or p.is_relative_to(d) for d in deps)]
    assert not missing, f"dvc.yaml: the tables stage does not depend on {missing}"
    assert "overrides.yaml" in stage["deps"]


def test_dvc_set_param_keeps_every_line_of_overrides_yaml(tmp_path):
    """`dvc exp run -S overrides.yaml:++key=value` rewrites overrides.yaml with DVC's YAML writer: whatever text the
    committed file holds must still be there afterwards (comments above an empty mapping would be dropped)."""
    hydra = pytest.importorskip("dvc.utils.hydra")
    text = (REPO / "overrides.yaml").read_text()
    copy = tmp_path / "overrides.yaml"
    copy.write_text(text)
    hydra.apply_overrides(str(copy), ["++scale=smoke"])
    after = copy.read_text()
    assert yaml.safe_load(after) == {**(yaml.safe_load(text) or {}), "scale": "smoke"}
    lost = [line for line in text.splitlines() if line.strip().startswith("#") and line not in after.splitlines()]
    assert not lost, f"overrides.yaml: `dvc exp run -S` drops {lost}"


@pytest.mark.slow
def test_dvc_exp_run_regenerates_tables_and_keeps_its_runs(tmp_path, mirror_dir):
    env = {**_env(), "NLPBENCH_MIRROR": str(mirror_dir)}
    work = tmp_path / "clone"
    work.mkdir()
    work = _fresh_clone(work, env)
    params = inline_declarations(work)              # one file to cut down (the homes put inline)
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
    _run(["git", "commit", "-qam", "one table"], work, env)
    (work / "results" / "tolias-thesis").mkdir(parents=True)
    (work / "results" / "tolias-thesis" / "timing.md").write_text("a committed file no stage rebuilds\n")
    params_before = (work / "params.yaml").read_bytes()
    # the README's form: DVC writes the override into overrides.yaml, never into params.yaml
    _run([DVC, "exp", "run", "-S", "overrides.yaml:++scale=smoke"], work, env, timeout=1800)
    assert (work / "params.yaml").read_bytes() == params_before
    assert yaml.safe_load((work / "overrides.yaml").read_text()) == {"scale": "smoke"}
    assert (work / "results" / "tolias-thesis" / "timing.md").exists()     # results/ is git's, not DVC's
    assert (work / "results" / "smoke" / "tolias-thesis" / "2.md").exists()
    assert "**scale**: smoke" in (work / "results" / "smoke" / "tolias-thesis" / "2.md").read_text()
    assert (work / "results" / "smoke" / "index.csv").exists()
    assert (work / "dvc.lock").exists()
    assert "up to date" in _run([DVC, "status"], work, env).stdout.lower()
    _run([DVC, "remote", "add", "-d", "lab", str(tmp_path / "remote")], work, env)
    _run([DVC, "push"], work, env)

    checkpoints = {p: p.read_bytes() for p in (work / "runs").rglob("model.pt")}
    assert checkpoints
    _run([DVC, "exp", "run", "-S", "overrides.yaml:++scale=smoke"], work, env, timeout=1800)   # nothing to retrain
    assert {p: p.read_bytes() for p in (work / "runs").rglob("model.pt")} == checkpoints


def test_the_tables_stage_tracks_every_family_settings_section():
    """A family's settings (params.yaml `<family>:`) changing must make `dvc repro` re-run the tables stage."""
    from nlpbench import registry

    params = yaml.safe_load((REPO / "params.yaml").read_text())
    stage = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]["tables"]
    tracked = {p for p in stage["params"] if isinstance(p, str)}
    sections = {name for name in registry.FAMILIES if name in params}
    assert sections and sections <= tracked, f"dvc.yaml: tables stage does not track {sorted(sections - tracked)}"


def test_a_fetch_stage_depends_on_every_module_its_code_imports():
    """DVC reruns a fetch stage when one of its deps changes: the modules it lists and every nlpbench module they
    import, so that a change to a shared reader (a manifest's, a download's) is seen."""
    import import_graph
    succ, modules = import_graph.build().successors(), import_graph.modules_of()
    for name, stage in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].items():
        if not name.startswith("fetch_"):
            continue
        listed = {d for d in stage["deps"] if d.endswith(".py")}
        todo = [m for m, path in modules.items() if path.relative_to(REPO).as_posix() in listed]
        assert todo, name
        reached: set[str] = set()
        while todo:
            m = todo.pop()
            if m not in reached:
                reached.add(m)
                todo += succ.get(m, ())
        unlisted = sorted({modules[m].relative_to(REPO).as_posix() for m in reached} - listed)
        assert not unlisted, f"dvc.yaml: stage {name} lacks deps {unlisted}"


def test_a_fetch_stage_depends_on_overrides_yaml_whole_and_names_none_of_its_keys():
    """`dvc exp run -S overrides.yaml:++scale=smoke` puts the settings a fetch stage reads into overrides.yaml, so
    the stage depends on it; it cannot name just those keys under `params:`, since DVC stops a stage whose named
    parameter is missing from its file and the committed overrides.yaml holds none (a re-run after an unrelated
    change leaves the prepared files untouched instead: test_prepared.py)."""
    assert not yaml.safe_load((REPO / "overrides.yaml").read_text())
    for name, stage in yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"].items():
        if name.startswith("fetch_"):
            assert "overrides.yaml" in stage["deps"], name
            assert all(isinstance(entry, str) for entry in stage.get("params", [])), name


def _declared_table_sidecars() -> set[str]:
    """The JSON sidecar of every table the plan builds, at every scale."""
    from nlpbench import plan
    return {f for scale in ("smoke", "cpu", "paper")
            for t in plan.make(config.load(REPO / "params.yaml", {"scale": scale})).targets.values()
            if t.section == "tables" for f in map(f"{config.RESULTS.as_posix()}/{{}}".format, t.files)
            if f.endswith(".json")}


def test_dvc_metrics_show_lists_every_tables_json_sidecar(tmp_path):
    """dvc.yaml lists each table's sidecar as a metric, so that `dvc metrics show` (and `dvc exp show`) reads its
    counts; the list is the plan's tables, no more and no fewer."""
    sidecars = _declared_table_sidecars()
    listed = yaml.safe_load((REPO / "dvc.yaml").read_text()).get("metrics", [])
    assert len(sidecars) > 40 and set(listed) == sidecars and len(listed) == len(sidecars)
    env = _env()
    work = _fresh_clone(tmp_path / "clone", env)
    shutil.copytree(REPO / "results", work / "results")
    _run(["git", "add", "-A"], work, env)
    _run(["git", "commit", "-qm", "the committed tables"], work, env)
    shown = json.loads(_run([DVC, "metrics", "show", "--json"], work, env).stdout)
    files = next(iter(shown.values()))["data"]
    assert set(files) == sidecars
    table = files["results/tolias-thesis/2.json"]
    assert "error" not in table and table["data"]["n_cells"] == 60, table
