"""The smoke DAG, from download to tables, through Snakemake itself (a few CPU minutes)."""

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from project_repo import inline_declarations

REPO = Path(__file__).resolve().parents[1]


def _cells(path: Path) -> dict[tuple[str, str], dict]:
    """A table's long CSV, keyed by (row, column)."""
    with open(path, newline="") as f:
        return {(r["row"], r["column"]): r for r in csv.DictReader(f)}


@pytest.mark.slow
def test_smoke_dag_runs_from_download_to_tables(tmp_path, mirror_dir):
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline", "envs", "results"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)
    shutil.rmtree(tmp_path / "results" / "smoke", ignore_errors=True)      # a trial this checkout built, not in git
    committed = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file()}
    # an extra experiment on en-10k, whose task-3 training file the offline mirror lacks
    params = inline_declarations(tmp_path)          # the homes as one mapping, to cut down
    # one memnet table of each kind (per-task table, joint table, ablation with column overrides, the game); the
    # other families' tables of this source (acvi: thesis 20, 25, 26 and the QG addition) are all kept
    tolias = params["tables"]["tolias-thesis"]
    params["tables"]["tolias-thesis"] = {k: v for k, v in tolias.items()
                                         if v["family"] != "memnet" or k in ("2", "10", "priors", "16", "17")}
    params["tables"]["tolias-thesis"]["13"] = {
        "family": "memnet", "variant": "en-10k", "rows": [1, 3],
        "columns": {"Baseline / MemN2N": {"model": "memn2n", "metric": "point"}},
    }
    params["scales"]["smoke"]["memnet.train.epochs"] = 1
    params["scales"]["smoke"]["task_subset"] = [1, 3, 11]
    # DMN family: one table of each kind (pattern grid + figure, augmented column, ensemble with cited columns);
    # squad family: its data steps, cited cells and claims (3.1), a figure (5.3), the full models (4.4)
    params["tables"]["shen-thesis"] = {t: params["tables"]["shen-thesis"][t] for t in ("6.3", "6.7", "3.1", "4.4", "5.3")}
    # squad outputs: the heatmaps and the histograms of S (Figure 4.2); the loss curves name tables left out above
    params["outputs"]["shen-thesis"] = {k: v for k, v in params["outputs"]["shen-thesis"].items()
                                        if v.get("kind") != "loss_curves"}
    kept = tuple(f"tables.{source}.{name}." for source, tables in params["tables"].items() for name in tables)
    for scale in params["scales"].values():     # a scale's keys for the tables left out would name nothing
        for key in [k for k in scale if k.startswith("tables.") and not k.startswith(kept)]:
            del scale[key]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    env = {**os.environ, "NLPBENCH_MIRROR": str(mirror_dir),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    # the documents' tables (`all`) and the studies behind them (`studies`): every rule of the DAG
    cmd = [sys.executable, "-m", "snakemake", "all", "studies", "--cores", "2", "--resources", "gpu=1", "--config",
           "scale=smoke"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    logs = "\n".join(p.read_text() for p in (tmp_path / "logs").rglob("*.log")) if (tmp_path / "logs").exists() else ""
    assert done.returncode == 0, done.stderr[-3000:] + logs[-3000:]
    # a trial scale writes beside the committed tables, never over them (params.yaml committed_scale)
    after = {p.relative_to(tmp_path): p.read_bytes() for p in (tmp_path / "results").rglob("*") if p.is_file()}
    assert {p: b for p, b in after.items() if Path("results/smoke") not in p.parents} == committed
    assert (tmp_path / "results/smoke/.gitignore").read_text().splitlines()[-1] == "*"

    results = tmp_path / "results" / "smoke"
    with open(results / "index.csv", newline="") as f:
        index = list(csv.DictReader(f))
    assert len(index) == 39 and list(index[0]) == ["source", "table", "title", "status", "path"]
    status = {(r["source"], r["table"]): r for r in index}
    for key in [("tolias-thesis", "20"), ("tolias-thesis", "25"), ("tolias-thesis", "26"), ("acvi-paper", "1"),
                ("acvi-paper", "2"), ("acvi-paper", "3"), ("acvi-paper", "4")]:      # every acvi table was built
        assert status[key]["path"] == f"{key[0]}/{key[1]}.csv", key
    assert "ACVI beats ASA" in (results / "tolias-thesis" / "acvi-qg.md").read_text()
    assert (results / "tolias-thesis" / "acvi-summaries.md").exists() and (results / "tolias-thesis" / "19.md").exists()
    assert status[("tolias-thesis", "2")]["path"] == "tolias-thesis/2.csv"
    assert status[("tolias-thesis", "13")]["status"] == "not comparable at this scale"    # nothing at smoke is
    assert status[("shen-thesis", "6.2")]["status"] == "not yet implemented"

    cells = _cells(results / "tolias-thesis" / "2.csv")
    assert cells[("1", "Baseline / MemN2N")]["paper"] == "100"
    assert 0 <= float(cells[("1", "t-MEM-NN / 10 samples")]["reproduced"]) <= 100
    assert cells[("5", "Baseline / MemN2N")]["reproduced"] == ""          # not in the smoke scale
    cells13 = _cells(results / "tolias-thesis" / "13.csv")
    assert cells13[("3", "Baseline / MemN2N")]["status"] == "needs_data"
    assert cells13[("1", "Baseline / MemN2N")]["status"] == "ok"
    md = (results / "tolias-thesis" / "13.md").read_text()
    assert "needs data" in md and "qa3_three-supporting-facts_train.txt" in md
    assert "min for 1 runs in 1 vectorised groups" in md               # task 3 has no data: trained no run
    assert "| 2 |" in (results / "README.md").read_text() or "tolias-thesis/2.md" in (results / "README.md").read_text()

    # every run has its own checkpoint and metrics (Table 2: 2 models x 3 tasks x 1 seed)
    table2 = [p for p in (tmp_path / "runs").glob("*-en-h3-*/qa*-seed0") if (p / "model.pt").exists()]
    assert len(table2) >= 2 * 3
    cells10 = _cells(results / "tolias-thesis" / "10.csv")      # one joint model, per-task cells
    assert cells10[("11", "t-MEM-NN / 10 samples")]["status"] == "ok"
    assert len(list((tmp_path / "runs").glob("memn2n-en-joint-*/joint-seed0/model.pt"))) == 1
    assert "min for 2 runs in 2 vectorised groups" in (results / "tolias-thesis" / "10.md").read_text()  # one per seed
    priors = (results / "tolias-thesis" / "priors.md").read_text()
    assert "Gaussian prior + posterior" in priors and "addition" in priors
    assert (results / "tolias-thesis" / "fig16.png").stat().st_size > 1000
    assert "daniel travelled to the office" in (results / "tolias-thesis" / "3.md").read_text()
    assert "Not run" in (results / "tolias-thesis" / "5.md").read_text()          # task 14: not in the subset
    assert "nu_A" in (results / "tolias-thesis" / "dof.md").read_text()
    assert "Accuracy" in (results / "tolias-thesis" / "16.md").read_text()
    assert "TESTING MODEL STARTS" in (results / "tolias-thesis" / "18.md").read_text()

    # seed 001 (variational text generation): every rule of its part of the DAG ran at the smoke scale
    bahuleyan = results / "bahuleyan-thesis"
    for table in ("4.2", "5.2", "6.1", "6.2"):
        assert status[("bahuleyan-thesis", table)]["path"] == f"bahuleyan-thesis/{table}.csv"
        assert status[("bahuleyan-thesis", table)]["status"] != "not yet implemented"
        md = (bahuleyan / f"{table}.md").read_text()
        assert "**scale**: smoke" in md and "MIRROR DATA" in md
    cells61 = _cells(bahuleyan / "6.1.csv")
    du = cells61[("DED (w/o Attn) Du et al. (2017) / MAP", "BLEU-1")]
    assert du["paper"] == "31.34" and du["reproduced"] == "" and "cited" in du["note"]
    assert cells61[("VED+VAttn-hbar / MAP", "Entropy")]["status"] == "not_applicable"
    assert 0 <= float(cells61[("VED+VAttn-hbar / Sampling", "Entropy")]["reproduced"]) <= 10
    assert cells61[("VED+VAttn-0 / MAP", "BLEU-1")]["status"] == "not_run"          # not in the smoke subset
    cells52 = _cells(bahuleyan / "5.2.csv")
    assert 0 <= float(cells52[("Distinct-1", "VAE with Bypass")]["reproduced"]) <= 1
    assert "there is a couple eating cake" in (bahuleyan / "4.4.md").read_text()
    assert "nova scotia" in (bahuleyan / "6.3.md").read_text()
    for fig in ("fig4.7", "fig5.3", "fig6.4", "fig6.5"):
        assert (bahuleyan / f"{fig}.png").stat().st_size > 1000
    readme = (results / "README.md").read_text()
    assert "bahuleyan-thesis/4.3.md" in readme and "bahuleyan-thesis/fig6.5.png" in readme
    run_dirs = [p for p in (tmp_path / "runs" / "textgen").glob("snli-tanh-3000-*") if (p / "metrics.json").exists()]
    assert len(run_dirs) == 1 and {"model.pt", "train_log.csv", "config.json"} <= {p.name for p in run_dirs[0].iterdir()}
    # DMN+ / ff-DMN (Shen ch. 6): derived task-16 data, pattern and task runs, cited columns, ensemble, figure
    patterns = next((tmp_path / "data" / "dmn").glob("patterns-*/manifest.json"))
    assert yaml.safe_load(patterns.read_text())["splits"]["pattern6_test"]["n"] == 333
    assert status[("shen-thesis", "6.3")]["status"] == "not comparable at this scale"
    assert status[("shen-thesis", "6.7")]["status"] == "not comparable at this scale"   # smoke; task 3: needs data
    cells63 = _cells(results / "shen-thesis" / "6.3.csv")
    assert cells63[("4", "Trained Network / augmented")]["status"] == "ok"
    assert cells63[("4", "Trained Network / augmented")]["paper"] == "56.3"
    assert 0 <= float(cells63[("2", "Trained Network / 5")]["reproduced"]) <= 100
    cells67 = _cells(results / "shen-thesis" / "6.7.csv")
    assert cells67[("11", "Ensemble")]["status"] == "ok" and cells67[("3", "Ensemble")]["status"] == "needs_data"
    assert cells67[("11", "EnDMN")]["status"] == "cited" and cells67[("5", "Ensemble")]["status"] == "not_run"
    md67 = (results / "shen-thesis" / "6.7.md").read_text()
    assert "Scale `smoke` cuts relative to `paper`" in md67 and "Claim (§6.6" in md67
    assert (results / "shen-thesis" / "fig6.4.png").stat().st_size > 5000
    assert "fig6.4" in (results / "README.md").read_text()
    dmn_runs = list((tmp_path / "runs").glob("dmn-*/*-seed0/metrics.json"))
    assert len(dmn_runs) == 7 + 3 + 3                      # 6 patterns + augmented, 3 tasks x (DMN+, ff-DMN)
    assert len(list((tmp_path / "runs").glob("dmn-*/*-seed0/model.pt"))) == 7 + 2 + 2
    assert not list((tmp_path / "runs").glob("dmn-*/*/checkpoint.pt"))   # training checkpoints give way to model.pt
    # squad (Shen chs. 3-5): the dev-split data, its vectors, six configurations x two seeds, three tables
    assert status[("shen-thesis", "3.1")]["status"] == "not comparable at this scale"
    assert status[("shen-thesis", "4.4")]["status"] == "not comparable at this scale"
    assert _cells(results / "shen-thesis" / "4.4.csv")[("DCN", "T-trilinear / EM")]["status"] == "ok"
    cells31 = _cells(results / "shen-thesis" / "3.1.csv")
    assert cells31[("SAN", "Original Model / EM")]["status"] == "cited"
    assert 0 <= float(cells31[("DCN", "Baseline Model with existing model's attention / F1")]["reproduced"]) <= 100
    assert "Claim (§3.3" in (results / "shen-thesis" / "3.1.md").read_text()
    assert (results / "shen-thesis" / "fig5.2.png").stat().st_size > 5000
    assert (results / "shen-thesis" / "fig4.6.png").stat().st_size > 5000       # the heatmaps, an output
    assert (results / "shen-thesis" / "fig4.2.png").stat().st_size > 5000       # the histograms of S
    assert "fig4.2" in (results / "README.md").read_text()
    # 3.1: 3 configurations, 5.3: 3, the heatmaps: trilinear, general-3, T-trilinear x O_1, O_2 (general-3 O_1
    # shared), 4.4: 3 models x 2 similarities, the histograms: dot-product, scaled dot-product, cosine x O_1, O_2
    assert len(list((tmp_path / "runs").glob("squad-*/seed*/metrics.json"))) == 23 * 2

    # a second invocation has nothing to do
    again = subprocess.run(cmd + ["-n"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr

    # a changed declaration (a column's metric) makes its table stale, and only its table (no training)
    params = yaml.safe_load((tmp_path / "params.yaml").read_text())
    params["tables"]["tolias-thesis"]["2"]["columns"]["t-MEM-NN / 10 samples"]["metric"] = "S1"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    stale = subprocess.run(cmd + ["-n", "--quiet", "rules"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    jobs = {line.split()[0] for line in stale.stdout.splitlines() if line.split()[1:2] and line.split()[1].isdigit()}
    assert stale.returncode == 0 and "table_tolias_thesis_2" in jobs, stale.stdout
    assert not {j for j in jobs if j.startswith(("train_", "data_"))}, jobs

    # a fresh clone has the committed results/ but not this clone's markers: the documented one-table command
    # (the table's rule) builds it anyway
    for marker in (tmp_path / "runs" / "_tables").rglob("*.done"):
        marker.unlink()
    one = subprocess.run([sys.executable, "-m", "snakemake", "table_tolias_thesis_16", "--cores", "1", "--config",
                          "scale=smoke"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert one.returncode == 0 and (tmp_path / "runs/_tables/smoke/tolias-thesis/16.done").exists(), one.stderr[-2000:]


def _readme_commands() -> list[str]:
    readme = (REPO / "README.md").read_text()
    block = readme[readme.index("source .venv/bin/activate"):]
    block = block[:block.index("```")]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.startswith("snakemake")]


def _dry_run(command: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    import shlex
    args = shlex.split(command)
    return subprocess.run([sys.executable, "-m", *args, "-n", "--quiet", "rules"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _jobs(done: subprocess.CompletedProcess) -> set[str]:
    return {ln.split()[0] for ln in done.stdout.splitlines() if ln.split()[1:2] and ln.split()[1].isdigit()}


@pytest.mark.slow
def test_the_readme_commands_run(tmp_path):
    """README quick start: every snakemake command as written (dry run), the override reaching the runs, the
    one-table command scheduling that table, and the ablation of 'Adding an ablation' pasted into params.yaml."""
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline", "envs"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    commands = _readme_commands()
    assert len(commands) == 4, commands
    runs = {}
    for command in commands:
        done = _dry_run(command, tmp_path, env)
        assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
        runs[command] = _jobs(done)
    plain, one, smoke, override = commands
    assert "table_tolias_thesis_2" in runs[one] and "table_shen_thesis_6_2" not in runs[one]
    assert any(j.startswith("train_") for j in runs[smoke])
    # the lr override changes the memnet groups (new ids), so other training jobs are planned than without it
    plain_train = {j for j in runs[plain] if j.startswith("train_memn2n")}
    override_train = {j for j in runs[override] if j.startswith("train_memn2n")}
    assert plain_train and override_train and plain_train != override_train

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Adding an ablation"):readme.index("## Adding a model family")]
    snippet = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "pipeline" / "tables" / "tolias-thesis" / "hops-4.yaml").write_text(snippet)   # a home, copied
    done = _dry_run("snakemake table_tolias_thesis_hops_4 --cores 1", tmp_path, env)
    assert done.returncode == 0 and "table_tolias_thesis_hops_4" in _jobs(done), done.stderr[-2000:]


def test_a_table_is_named_by_its_rule_at_any_scale_and_its_committed_file_is_no_target(tmp_path):
    """results/ is committed, so a file under it always exists: as a target, Snakemake found it there and had
    nothing to do at a scale never built. The file is no rule's output (Snakemake says so); the rule builds the
    table at the scale asked for, whatever another scale's marker says."""
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline", "envs", "results/tolias-thesis/2.md"):
        (tmp_path / item).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)
    smoke = tmp_path / "runs/_tables/smoke/tolias-thesis/2.done"
    smoke.parent.mkdir(parents=True)
    smoke.write_text("built at the smoke scale\n")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    by_file = _dry_run("snakemake results/tolias-thesis/2.md --cores 1 --config scale=cpu", tmp_path, env)
    said = by_file.stdout + by_file.stderr
    assert by_file.returncode != 0 and "No rule to produce results/tolias-thesis/2.md" in said, said[-2000:]
    by_rule = _dry_run("snakemake table_tolias_thesis_2 --cores 1 --config scale=cpu", tmp_path, env)
    assert by_rule.returncode == 0 and "table_tolias_thesis_2" in _jobs(by_rule), by_rule.stderr[-2000:]


def test_a_failed_data_step_says_why_on_the_console(tmp_path):
    """An empty mirror: the step fails, its reason reaches the console (not only its log), nothing is marked done."""
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline", "envs"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)
    (tmp_path / "empty").mkdir()
    env = {**os.environ, "NLPBENCH_MIRROR": str(tmp_path / "empty"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "snakemake", "data_babi", "--cores", "1", "--config", "scale=smoke"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "nlpbench: cannot get the bAbI archive" in done.stderr + done.stdout
    assert not (tmp_path / "data" / "babi" / "STATUS.json").exists()


def test_dvc_lock_is_never_committed():
    """dvc.lock records the hashes of src/nlpbench (every commit changes them) and of this machine's data/ and
    runs/, which no clone has (the default remote is local): a committed one is stale at the next commit. DVC writes
    it on the first `dvc repro`; it must not be git-ignored either (DVC refuses to run then)."""
    tracked = subprocess.run(["git", "ls-files", "dvc.lock"], cwd=REPO, capture_output=True, text=True).stdout
    ignored = subprocess.run(["git", "check-ignore", "-q", "dvc.lock"], cwd=REPO).returncode == 0
    assert tracked.strip() == "" and not ignored


def test_run_sh_tables_passes_targets_and_options_through():
    """`bash envs/run.sh tables <target> -n`: the wrapper's own options must not swallow what follows them."""
    venv = Path(sys.executable).parent.parent
    if not (venv / ".nlpbench-installed").exists():
        pytest.skip("not running inside the venv that envs/run.sh installed")
    env = {**os.environ, "NLPBENCH_VENV": str(venv)}
    done = subprocess.run(["bash", "envs/run.sh", "tables", "table_shen_thesis_6_2", "-n", "--config", "scale=smoke"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "table_shen_thesis_6_2" in done.stdout and "table_tolias_thesis_2 " not in done.stdout


def test_a_data_step_runs_before_the_shorter_training_jobs_of_the_longest_group_that_reads_it(tmp_path):
    """Snakemake orders ready jobs by priority and passes none on to a job's inputs: the task-16 pattern and
    augmented data steps, left at priority 0, waited behind every bAbI training job of the DMN tables (an
    end-to-end measurement ran them 81 minutes in), and the augmented network, a ten-minute job, started last."""
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline", "envs", "results/costs.tsv"):
        (tmp_path / item).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    tables = [f"table_shen_thesis_6_{t}" for t in range(2, 8)]     # Tables 6.2-6.7, as dmn-thesis-epochs builds them
    done = subprocess.run([sys.executable, "-m", "snakemake", *tables, "--cores", "2", "-n"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    priority = {}
    for block in done.stdout.split("rule ")[1:]:                   # "rule NAME:" then its fields, one per line
        name = block.split(":", 1)[0].strip()
        fields = dict(ln.strip().split(": ", 1) for ln in block.splitlines()[1:] if ": " in ln)
        priority[name] = int(fields.get("priority", 0))
    readers = {"data_patterns": [j for j in priority if j.startswith(("train_dmn_dmnplus_patterns",
                                                                       "train_dmn_dmnplus_augmented"))],
               "data_augmented": [j for j in priority if j.startswith("train_dmn_dmnplus_augmented")]}
    for prefix, jobs in readers.items():
        step = next(j for j in priority if j.startswith(prefix))
        assert jobs and priority[step] == max(priority[j] for j in jobs) > 0, (step, priority)
    babi = [j for j in priority if j.startswith("train_")]
    # every group reads bAbI, the longest included; the step's priority is that of the longest reader in the whole
    # plan, which may be a memnet group outside this DAG (results/costs.tsv decides), so at least this DAG's longest
    assert priority["data_babi"] >= max(priority[j] for j in babi) > 0


def test_data_priorities_pass_a_groups_priority_on_to_every_step_it_reads():
    from nlpbench.family import DataStep, TrainGroup
    from nlpbench.plan import Plan
    from nlpbench.status import data_priorities
    plan = Plan(data={"raw": DataStep("raw", "r"), "derived": DataStep("derived", "d", ("raw",)),
                      "unread": DataStep("unread", "u")},
                groups={"long": TrainGroup("long", "l", ("derived",)), "short": TrainGroup("short", "s", ("raw",))},
                targets={}, owner={})
    assert data_priorities(plan, {"long": 7, "short": 3}) == {"raw": 7, "derived": 7, "unread": 0}
    assert data_priorities(plan, {"long": 2, "short": 3}) == {"raw": 3, "derived": 2, "unread": 0}


def test_a_new_end_to_end_record_makes_its_benchmark_stale(tmp_path):
    """`nlpbench end-to-end` rewrites a record that an on-demand benchmark cites; the benchmark did not list it
    among its inputs, so `snakemake output_shen_thesis_dmn_timing` found nothing to do after a new measurement
    (it had to be forced with --forcerun)."""
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline", "envs"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)
    record = tmp_path / "results/shen-thesis/end-to-end-dmn-thesis-epochs.json"
    built = [tmp_path / "results/shen-thesis/dmn-timing.md", tmp_path / "runs/_tables/cpu/shen-thesis/dmn-timing.done"]
    built.append(tmp_path / "runs/_tables/cpu/shen-thesis/dmn-timing.md")        # its page, copied for --report
    for path, age in [(tmp_path / "data/babi/STATUS.json", 3), (record, 2)] + [(p, 1) for p in built]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}")
        os.utime(path, (time.time() - age * 3600,) * 2)     # data, then the record, then the benchmark built on it
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    command = "snakemake output_shen_thesis_dmn_timing --cores 1 --config scale=cpu"
    before = _dry_run(command, tmp_path, env)
    assert before.returncode == 0 and not _jobs(before), before.stdout + before.stderr[-2000:]
    record.write_text("{}")                                     # measured again
    after = _dry_run(command, tmp_path, env)
    assert after.returncode == 0 and _jobs(after) - {"total"} == {"output_shen_thesis_dmn_timing"}, after.stdout


def test_a_benchmark_cites_the_end_to_end_records_of_its_source_and_nothing_else():
    from nlpbench import config, plan
    targets = plan.make(config.load(REPO / "params.yaml")).targets
    assert targets["shen-thesis/dmn-timing"].reads == ("shen-thesis/end-to-end-dmn-thesis-epochs.json",)
    assert targets["tolias-thesis/timing"].reads == ("tolias-thesis/end-to-end-ch6-five-seeds.json",)
    assert targets["shen-thesis/squad-timing"].reads == ()                  # it cites no measurement
    assert all(not t.reads for t in targets.values() if not t.on_demand)    # a table never waits on a record


def test_a_plan_of_fewer_tables_than_a_measurement_names_still_builds():
    """The smoke DAG keeps one table of chapter 6, while ch6-five-seeds names eleven: listing the records a benchmark
    cites must not check the measurement's tables (an unmerged review mend did, and every pruned plan failed)."""
    from nlpbench import config, plan
    params = config.load(REPO / "params.yaml")
    params["tables"]["tolias-thesis"] = {k: v for k, v in params["tables"]["tolias-thesis"].items() if k == "2"}
    targets = plan.make(params).targets
    assert targets["tolias-thesis/timing"].reads == ("tolias-thesis/end-to-end-ch6-five-seeds.json",)


RULES_WITH_A_NAME = '''
import shlex
from pathlib import Path
from nlpbench import plan as nb_plan
from nlpbench import status as nb_status
from nlpbench.family import DataStep, Target, TrainGroup

NAME = {name!r}
SET = "--set " + shlex.quote("scale=smoke")
SCALE = "smoke"
PARAMS = {{"scale": SCALE, "tables": {{"tolias-thesis": {{NAME: {{"family": "memnet"}}}}}}}}
_target = Target("tables", "tolias-thesis", NAME, files=(f"{{NAME}}.md",), groups=(NAME,))
RESULTS = "results"
PLAN = nb_plan.Plan({{NAME: DataStep(NAME, f"data/{{NAME}}.ready")}},
                    {{NAME: TrainGroup(NAME, f"runs/{{NAME}}.json", needs=(NAME,))}},
                    {{_target.key: _target}}, {{NAME: "memnet", _target.key: "memnet"}})
from nlpbench import resources as nb_res
import sys
TRAIN_PRIORITY, COSTS = {{NAME: 0}}, {{}}
train_gpu, train_threads, runs_here = (lambda *_: 0), (lambda *_: 1), (lambda *_: True)
PYTHON = sys.executable
CPU_ENV = gpu_env = {repo!r} + "/envs/nlpbench.yaml"    # used under --sdm conda only
rule_name = nb_plan.rule_name

include: {repo!r} + "/pipeline/data.smk"
include: {repo!r} + "/pipeline/train.smk"
include: {repo!r} + "/pipeline/targets.smk"

rule all:
    default_target: True
    input: PLAN.marker(_target, SCALE)
'''

# stands in for the nlpbench command: records its arguments and writes the file the rule expects
FAKE_NLPBENCH = '''#!{python}
import json, pathlib, sys
args = sys.argv[3:]                      # after --set scale=smoke
with open("argv.jsonl", "a") as f:
    f.write(json.dumps(args) + "\\n")
kind = args[0]
if kind == "table" and pathlib.Path("table-fails").exists():
    sys.exit("nlpbench: the table cannot be built")
out = {{"data": "data/{{}}.ready", "train": "runs/{{}}.json", "table": "results/{{}}.md"}}[kind].format(
    args[2] if kind == "table" else args[1])
pathlib.Path(out).parent.mkdir(parents=True, exist_ok=True)
pathlib.Path(out).write_text("")
'''


def _fixture_pipeline(tmp_path: Path, name: str) -> dict:
    """RULES_WITH_A_NAME in tmp_path, with FAKE_NLPBENCH first on the PATH; the environment to run it in."""
    (tmp_path / "Snakefile").write_text(RULES_WITH_A_NAME.format(name=name, repo=str(REPO)))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nlpbench").write_text(FAKE_NLPBENCH.format(python=sys.executable))
    (bin_dir / "nlpbench").chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}"
                                  f"{os.environ.get('PATH', '')}"}


def test_every_rule_quotes_the_names_it_passes_to_the_shell(tmp_path):
    """A data step, group and table whose name holds a space, a quote and `; touch X`: each rule's command passes
    the name as one argument and the shell runs nothing else (the schema refuses such names anyway; this is the
    rules' own guard, for a name that a family builds)."""
    name = "a b'; touch X; echo"
    env = _fixture_pipeline(tmp_path, name)
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    calls = [json.loads(line) for line in (tmp_path / "argv.jsonl").read_text().splitlines()]
    assert calls == [["data", name], ["train", name, "--threads", "1"],
                     ["table", "tolias-thesis", name, "--allow-empty"]]
    assert not (tmp_path / "X").exists()
    assert (tmp_path / f"logs/data/{name}.log").exists()
    assert (tmp_path / f"logs/tables/tolias-thesis-{name}.log").exists()
    assert (tmp_path / f"runs/_tables/smoke/tolias-thesis/{name}.done").read_text().strip()
    assert (tmp_path / f"runs/_tables/smoke/tolias-thesis/{name}.md").exists()       # the copy for --report


def test_a_failing_table_job_leaves_the_committed_table_byte_for_byte(tmp_path):
    """Snakemake deletes a job's outputs before it runs it and after it fails: the committed files under results/
    are not the table rule's outputs, so a table job that fails leaves them as they were (and marks nothing built)."""
    env = _fixture_pipeline(tmp_path, "t2")
    committed = tmp_path / "results" / "t2.md"
    committed.parent.mkdir()
    committed.write_bytes(b"the committed table\n")
    (tmp_path / "table-fails").touch()
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "the table cannot be built" in done.stderr, done.stderr[-3000:]
    assert committed.read_bytes() == b"the committed table\n"
    assert not (tmp_path / "runs/_tables/smoke/tolias-thesis/t2.done").exists()
    (tmp_path / "table-fails").unlink()
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and committed.read_bytes() == b"", done.stderr[-3000:]    # the job's own table
    assert (tmp_path / "runs/_tables/smoke/tolias-thesis/t2.done").exists()


def test_snakemake_config_reads_a_number_written_as_text_as_the_number(tmp_path):
    """`--config memnet='{train: {lr: 1e-2}}'`: YAML 1.1 reads 1e-2 as text; the pipeline plans the runs of 0.01."""
    from nlpbench import config, plan
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline", "envs"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = _dry_run("snakemake --cores 1 --config 'memnet={train: {lr: 1e-2}}'", tmp_path, env)
    assert done.returncode == 0, done.stderr[-2000:]
    p = plan.make(config.load(REPO / "params.yaml", {"memnet": {"train": {"lr": 0.01}}}))
    expected = {g: p.groups[g] for g in p.groups_of(p.part(study=False))}      # what `snakemake` (all) trains
    memnet = {plan.rule_name("train", g) for g, grp in expected.items() if grp.done.startswith("runs/memn2n-")}
    assert memnet and memnet <= _jobs(done)


def test_snakemake_refuses_an_alias_bomb_with_its_one_line(tmp_path):
    """Snakemake reads --config and overrides.yaml itself before the Snakefile loads params.yaml: an alias bomb
    (9**9 values once expanded) in either stops the dry run with nlpbench's line naming the option or the file and
    line (deep nesting, as Snakemake hands it over, is test_config's)."""
    from yaml_bombs import alias_bomb, alias_bomb_value
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline", "envs"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    bomb = "more than 100,000 values once its aliases are expanded"
    for config, overrides, says in ((f"memnet={alias_bomb_value()}", "{}\n", f"--config memnet: {bomb}"),
                                    (None, alias_bomb(), f"overrides.yaml: {bomb} (line 6)")):
        (tmp_path / "overrides.yaml").write_text(overrides)
        done = subprocess.run([sys.executable, "-m", "snakemake", "-n", *(["--config", config] if config else [])],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        said = done.stdout + done.stderr
        assert done.returncode == 1 and says in said, (says, said[-2000:])
        assert "RecursionError" not in said and len(said) < 5000
