"""The GPU a job requests follows params.yaml's `device`, several GPUs run several training jobs each on its own
device, and every rule declares what a cluster scheduler needs (threads, run time, memory)."""

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from nlpbench import resources, status
from nlpbench.family import TrainGroup
from nlpbench.runtime import gpu_slots

REPO = Path(__file__).resolve().parents[1]


def _copy_project(tmp_path: Path) -> None:
    for item in ("Snakefile", "params.yaml", "overrides.yaml", "pipeline", "results", "envs", "profiles"):
        (shutil.copytree if (REPO / item).is_dir() else shutil.copy)(REPO / item, tmp_path / item)


def _env(**extra) -> dict:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", **extra}


def _planned_jobs(tmp_path: Path, *args: str) -> dict[str, dict]:
    """rule name -> {"threads": int, "resources": {name: value}} of every job a dry run plans (with more cores
    than any rule asks for: Snakemake cuts a local job's threads to --cores)."""
    done = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "64", *args], cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-3000:]
    jobs, rule = {}, None
    for line in done.stdout.splitlines():
        if line.startswith(("rule ", "localrule ")):
            rule = line.split()[1].rstrip(":")
            jobs[rule] = {"threads": 1, "resources": {}}
        elif rule and line.strip().startswith("threads:"):
            jobs[rule]["threads"] = int(line.split(":", 1)[1])
        elif rule and line.strip().startswith("resources:"):
            pairs = [p.split("=", 1) for p in line.split(":", 1)[1].split(", ")]
            jobs[rule]["resources"] = {k.strip(): v.strip() for k, v in pairs}
    return jobs


def test_device_cuda_plans_gpu_training_jobs_on_a_host_without_a_gpu(tmp_path):
    """A CPU-only login node plans a GPU run: every training job requests one GPU, with threads of its own (not
    the planning host's --cores); with device=cpu none does."""
    _copy_project(tmp_path)
    cuda = _planned_jobs(tmp_path, "--config", "device=cuda", "scale=smoke")
    train = {r: j for r, j in cuda.items() if r.startswith("train_")}
    assert train and all(j["resources"]["gpu"] == "1" for j in train.values())
    assert {j["threads"] for j in train.values()} == {resources.GPU_TRAIN_THREADS}
    assert all(j["resources"].get("gpu", "0") == "0" for r, j in cuda.items() if r.startswith(("data_", "table_")))
    cpu = _planned_jobs(tmp_path, "--config", "device=cpu", "scale=smoke")
    assert {cpu[r]["resources"]["gpu"] for r in train} == {"0"} and {cpu[r]["threads"] for r in train} == {1}


def test_device_auto_requests_a_gpu_only_where_the_planning_host_runs_the_jobs():
    assert resources.gpus("cuda", runs_here=False) == 1 and resources.gpus("cpu", runs_here=True) == 0
    assert resources.gpus("auto", runs_here=False) == 0         # a cluster: set device: cuda to ask for GPUs
    import torch
    assert resources.gpus("auto", runs_here=True) == int(torch.cuda.is_available())


FOUR_GPUS_SNAKEFILE = '''
import sys
from nlpbench import plan as nb_plan
from nlpbench import resources as nb_res
from nlpbench import status as nb_status
from nlpbench.family import DataStep, TrainGroup

SET, SCALE, COSTS, PYTHON = "--set device=cuda", "smoke", {{}}, sys.executable
GROUPS = [f"g{{i}}" for i in range({n})]
PLAN = nb_plan.Plan({{"d": DataStep("d", "data/d.ready")}},
                    {{g: TrainGroup(g, f"runs/{{g}}.json", needs=("d",)) for g in GROUPS}}, {{}},
                    {{g: "memnet" for g in GROUPS}})
train_gpu = lambda *_: nb_res.gpus("cuda", True)
train_threads = lambda *_: nb_res.train_threads(train_gpu())
CPU_ENV = gpu_env = {repo!r} + "/envs/nlpbench.yaml"    # used under --sdm conda only
TRAIN_PRIORITY = {{g: 0 for g in GROUPS}}
rule_name = nb_plan.rule_name

include: {repo!r} + "/pipeline/data.smk"
include: {repo!r} + "/pipeline/train.smk"

rule all:
    default_target: True
    input: [PLAN.groups[g].done for g in GROUPS]
'''

# stands in for the nlpbench command: a training job records the devices it sees and when it ran
FAKE_TRAINER = '''#!{python}
import json, os, pathlib, sys, time
args = sys.argv[1:]
kind = args[args.index("--set") + 2]
name = args[args.index("--set") + 3]
out = pathlib.Path("data/d.ready" if kind == "data" else f"runs/{{name}}.json")
start = time.time()
if kind == "train":
    time.sleep({seconds})
    with open("jobs.jsonl", "a") as f:
        f.write(json.dumps({{"group": name, "devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                            "start": start, "end": time.time()}}) + "\\n")
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("")
'''


def test_four_gpus_run_four_training_jobs_at_once_each_on_a_device_of_its_own(tmp_path):
    """A machine showing four GPUs (a fake device list) and `--resources gpu=4`: eight training jobs run four at a
    time, and jobs that run at the same time see different devices."""
    (tmp_path / "Snakefile").write_text(FOUR_GPUS_SNAKEFILE.format(n=8, repo=str(REPO)))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nlpbench").write_text(FAKE_TRAINER.format(python=sys.executable, seconds=10))
    (bin_dir / "nlpbench").chmod(0o755)
    env = _env(CUDA_VISIBLE_DEVICES="0,1,2,3", NLPBENCH_GPU_LOCKS=str(tmp_path / "locks"))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "16", "--resources", "gpu=4"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = [json.loads(line) for line in (tmp_path / "jobs.jsonl").read_text().splitlines()]
    assert len(jobs) == 8 and {j["devices"] for j in jobs} == {"0", "1", "2", "3"}
    most = 0
    for job in jobs:
        beside = [o for o in jobs if o["start"] < job["end"] and job["start"] < o["end"]]   # itself included
        assert len({o["devices"] for o in beside}) == len(beside), beside      # never two on one device
        most = max(most, len(beside))
    assert most == 4


def test_a_job_waits_for_a_device_another_job_holds(tmp_path):
    locks = tmp_path / "locks"
    first, fds = gpu_slots.claim(1, ["0", "1"], locks)
    second, more = gpu_slots.claim(1, ["0", "1"], locks)
    assert first != second
    gpu_slots.POLL_SECONDS, old = 0.05, gpu_slots.POLL_SECONDS
    try:
        import threading
        got = []
        waiter = threading.Thread(target=lambda: got.append(gpu_slots.claim(1, ["0", "1"], locks)))
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive() and not got          # both taken: it waits
        for fd in fds:
            os.close(fd)
        waiter.join(5)
        assert got and got[0][0] == first             # the freed one
        for fd in got[0][1] + more:
            os.close(fd)
    finally:
        gpu_slots.POLL_SECONDS = old


def test_more_gpus_than_the_machine_shows_is_a_clear_error(tmp_path):
    env = _env(CUDA_VISIBLE_DEVICES="0", NLPBENCH_GPU_LOCKS=str(tmp_path / "locks"))
    done = subprocess.run([sys.executable, "-m", "nlpbench.runtime.gpu_slots", "2", "--", "true"], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and re.search(r"2 GPUs requested, this machine shows 1", done.stderr), done.stderr


def test_scale_auto_follows_the_configured_device_on_any_host():
    """`scale: auto` with `device: cuda` is the paper scale even where this host has no GPU (a login node)."""
    from nlpbench import config
    params = config.load(REPO / "params.yaml", {"device": "cuda"})
    assert params["scale"] == "paper"
    assert config.load(REPO / "params.yaml", {"device": "cpu"})["scale"] == "cpu"


# the warnings `snakemake --lint` still gives, each for a reason: SET and PYTHON are read by every rule's shell
# from the Snakefile (as params they would join Snakemake's params trigger and rerun every finished job of an
# existing clone). Every rule names its conda environment, so no "Specify a conda environment" warning remains.
EXPLAINED_LINT = {"Shell command directly uses variable SET from outside of the rule",
                  "Shell command directly uses variable PYTHON from outside of the rule"}


def test_snakemake_lint_gives_only_the_explained_warnings(tmp_path):
    _copy_project(tmp_path)
    done = subprocess.run([sys.executable, "-m", "snakemake", "--lint", "--config", "scale=smoke"], cwd=tmp_path,
                          env=_env(), capture_output=True, text=True, timeout=300)
    warnings = {line.strip()[2:].rstrip(":") for line in (done.stdout + done.stderr).splitlines()
                if line.startswith("    * ")}
    assert warnings and warnings <= EXPLAINED_LINT, warnings - EXPLAINED_LINT


_RULE_ENVS = """
import sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=Path("Snakefile"),
                            workdir=Path("."), config_settings=ConfigSettings(config={"scale": "smoke",
                                                                                      "device": sys.argv[1]}))
    for rule in workflow._workflow.rules:
        env = rule.expand_conda_env({})
        print(rule.name, env.file.get_path_or_uri(secret_free=True) if env else "-")
"""


@pytest.mark.parametrize("device, train_env", [("cuda", "nlpbench-cuda.yaml"), ("cpu", "nlpbench.yaml")])
def test_under_sdm_conda_a_gpu_job_runs_in_the_cuda_environment_and_every_other_job_in_the_cpu_one(
        tmp_path, device, train_env):
    _copy_project(tmp_path)
    done = subprocess.run([sys.executable, "-c", _RULE_ENVS, device], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    envs = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    from nlpbench import config, plan
    the_plan = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    benchmarks = {plan.rule_name("output", t.key) for t in the_plan.targets.values() if t.on_demand}
    assert benchmarks and benchmarks <= set(envs)
    for rule, env in envs.items():
        if rule == "all":                                   # no command: nothing to run in an environment
            continue
        gpu_job = rule.startswith("train_") or rule in benchmarks   # the benchmarks time the GPU they take
        want = tmp_path / "envs" / (train_env if gpu_job else "nlpbench.yaml")
        assert Path(env) == want and want.is_file(), (rule, env)
    assert sum(r.startswith("train_") for r in envs) > 10


def test_a_training_jobs_run_time_comes_from_its_measured_cost_with_a_margin():
    costs = {"g1": {"family": "memnet", "scale": "cpu", "seconds": 600.0},
             "g2": {"family": "memnet", "scale": "cpu", "seconds": 1200.0}}
    assert resources.train_runtime("g1", "memnet", "cpu", costs) == 40        # 600 s x 3 + 10 min
    assert resources.train_runtime("new", "memnet", "cpu", costs) == 70       # the family's longest, x 3 + 10
    assert resources.train_runtime("new", "acvi", "paper", costs) == 36 * 60   # the family's own estimate
    assert resources.train_runtime("new", "acvi", "cpu", {}) == resources.DEFAULT_TRAIN_MINUTES["cpu"]
    assert resources.train("g1", "memnet", "cpu", costs)["mem_mb"] == 2000     # measured time, no peak: memnet's


def test_a_training_jobs_memory_comes_from_its_measured_peak_with_a_margin(tmp_path):
    costs = {"g1": {"family": "memnet", "scale": "cpu", "seconds": 600.0, "peak_mb": 700.0},
             "g2": {"family": "memnet", "scale": "cpu", "seconds": 60.0, "peak_mb": 1600.0},
             "g3": {"family": "memnet", "scale": "cpu", "seconds": 60.0, "peak_mb": None}}
    assert resources.train_mem_mb("g1", "memnet", "cpu", costs) == 1500        # 700 x 2, up to 500
    assert resources.train_mem_mb("g3", "memnet", "cpu", costs) == 3500        # the family's largest peak x 2
    assert resources.train_mem_mb("new", "memnet", "paper", costs) == 8000     # memnet's own paper-scale estimate
    assert resources.train_mem_mb("new", "squad", "paper", costs) == 32000

    # the peak comes from Snakemake's benchmark file; a row measured before peaks were kept gains its peak
    logs = tmp_path / "logs"
    logs.mkdir()
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (logs / "g1.benchmark.tsv").write_text(header + "601.0\t0:10:01\t812.5\t1.0\t1.0\t1.0\t0\t0\t90\t600\n")
    (logs / "g2.benchmark.tsv").write_text(header + "60.0\t0:01:00\t-\t-\t-\t-\t-\t-\t-\t-\n")
    assert status.job_measurement(logs, "g1")[:2] == (601.0, 812.5)
    assert status.job_measurement(logs, "g2")[:2] == (60.0, None)
    path = tmp_path / "costs.tsv"
    stamp = datetime.fromtimestamp((logs / "g1.benchmark.tsv").stat().st_mtime, timezone.utc).strftime("%Y-%m-%d")
    old = {"g1": {"group": "g1", "family": "memnet", "scale": "cpu", "seconds": 601.0, "peak_mb": None,
                  "device": "an earlier device", "measured": stamp, "source": "s"}}
    status.write_costs(old, path)

    class Plan:
        groups = {"g1": TrainGroup("g1", "runs/g1/group.json"), "g2": TrainGroup("g2", "runs/g2/group.json")}
        owner = {"g1": "memnet", "g2": "memnet"}
    assert status.refresh_costs(Plan(), "cpu", "cpu (test)", logs, path) == 2
    after = status.read_costs(path)
    assert after["g1"]["peak_mb"] == 812.0 and after["g1"]["device"] == "an earlier device"   # the same job
    assert after["g2"]["peak_mb"] is None and after["g2"]["seconds"] == 60.0


def test_every_family_sizes_its_own_training_jobs_and_the_core_names_none():
    from nlpbench import registry
    for name in registry.FAMILIES:
        if name in registry.MEASUREMENT:
            continue
        size = registry.get(name).job_size
        assert 0 < size.mem_mb <= size.paper_mem_mb and size.paper_minutes > 0, name
    core = (REPO / "src" / "nlpbench" / "resources.py").read_text(encoding="utf-8")
    assert not [name for name in registry.FAMILIES if f'"{name}"' in core]


# The rules as the Snakemake API reads the workflow: name, whether a cluster run does it on the submitting host
# (a local rule), and the scope of the `gpu` resource and its value where --resources does not set it.
_RULES_WHERE_THEY_RUN = """
import json
import sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, ResourceSettings
with SnakemakeApi(OutputSettings()) as api:
    workflow = api.workflow(resource_settings=ResourceSettings(cores=1), snakefile=Path("Snakefile"),
                            workdir=Path("."), config_settings=ConfigSettings(config={"scale": sys.argv[1]}))
    wf = workflow._workflow
    print(json.dumps({"local": {rule.name: rule.name in wf._localrules or rule.norun for rule in wf.rules},
                      "gpu_scope_local": wf.resource_scopes.is_local("gpu"),
                      "gpu": wf.global_resources["gpu"].value if "gpu" in wf.global_resources else None}))
"""


def test_at_the_paper_scale_downloads_tables_and_the_index_run_on_the_submitting_host(tmp_path):
    """A cluster run submits the training jobs, the outputs (they may run a model) and the heavy data steps (word
    vectors trained, released outputs scored); every download and other light data step, every table, the index,
    the studies' index and the report run where Snakemake runs, not as 6-hour 16 GB jobs of their own."""
    _copy_project(tmp_path)
    done = subprocess.run([sys.executable, "-c", _RULES_WHERE_THEY_RUN, "paper"], cwd=tmp_path,
                          env=_env(CUDA_VISIBLE_DEVICES="0,1,2"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout.splitlines()[-1])
    local = read["local"]
    downloads = {"data_babi", "data_snli", "data_qg", "data_dialog", "data_squad", "data_squad_vectors",
                 "data_acvi_cnndm_mirror", "data_acvi_qg"}
    assert {r for r in downloads | {"table_tolias_thesis_2", "index"} if not local[r]} == set()
    from nlpbench import config, plan
    the_plan = plan.make(config.load(REPO / "params.yaml", {"scale": "paper"}))
    light = {plan.rule_name("data", s.id) for s in the_plan.data.values() if s.light}
    assert downloads <= light
    for rule, is_local in local.items():
        if rule.startswith("data_"):
            assert is_local == (rule in light), rule
        elif rule.startswith(("train_", "output_")):
            assert not is_local, rule
        else:
            assert is_local, rule                               # tables, index, studies, report, all
    assert {"data_embeddings_snli", "data_acvi_released"} <= {r for r, is_local in local.items() if not is_local}
    assert sum(r.startswith("table_") for r in local) > 40 and "index" in local and "report" in local
    assert read["gpu_scope_local"]
    assert read["gpu"] == 3                  # without --resources gpu=N, one GPU job per GPU the machine shows


def test_a_machine_without_a_gpu_still_lets_a_job_ask_for_one(monkeypatch):
    """The `gpu` limit where --resources does not set it caps each cluster job's request too (Snakemake
    constrains a job's resources by it): a login node that shows no GPU keeps it at one, not zero."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert resources.local_gpu_limit() == 1
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert resources.local_gpu_limit() == 2


# A cluster executor standing in for SLURM's: each round of submissions is one line of submissions.jsonl (the jobs'
# rules and the GPUs each asks for); a job is done once submitted, its files touched.
RECORDING_EXECUTOR = """
import json
from pathlib import Path
from snakemake_interface_executor_plugins.executors.base import SubmittedJobInfo
from snakemake_interface_executor_plugins.executors.remote import RemoteExecutor
from snakemake_interface_executor_plugins.settings import CommonSettings

common_settings = CommonSettings(non_local_exec=True, implies_no_shared_fs=False, job_deploy_sources=False)


class Executor(RemoteExecutor):
    def run_jobs(self, jobs):
        with open("submissions.jsonl", "a") as f:
            f.write(json.dumps([{"rule": job.name, "gpu": job.resources.get("gpu", 0)} for job in jobs]) + "\\n")
        super().run_jobs(jobs)

    def run_job(self, job):
        for path in [*job.output, *job.log, *([job.benchmark] if job.benchmark else [])]:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).touch()
        self.report_job_submission(SubmittedJobInfo(job=job))

    async def check_active_jobs(self, active_jobs):
        for job_info in active_jobs:            # every job is done once submitted: none stays active
            self.report_job_success(job_info)
        for still_running in ():
            yield still_running

    def cancel_jobs(self, active_jobs):
        pass
"""

# stands in for the nlpbench command of the jobs that run on the submitting host: a data step writes its output
FAKE_LOCAL_NLPBENCH = """#!{python}
import json, pathlib, sys
args = sys.argv[1:]
if "data" in args:
    out = pathlib.Path(json.loads(pathlib.Path({outputs!r}).read_text())[args[args.index("data") + 1]])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("{{}}")
if "table" in args:          # the files the rule copies beside its marker, in the smoke scale's results folder
    for name in ("2.md", "2.csv"):
        out = pathlib.Path("results/smoke/tolias-thesis") / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("")
"""


@pytest.mark.parametrize("resources", [(), ("--resources", "gpu=1")])
def test_under_the_cluster_profile_two_gpu_jobs_are_submitted_at_once_and_light_rules_run_locally(
        tmp_path, resources):
    """Table 2 at the smoke scale through profiles/slurm (its executor replaced by a recording one): the download
    and the table run on the submitting host, and its two training jobs, one GPU each, are submitted in the same
    round, also under `--resources gpu=1` (a job's own GPUs, not the cluster's: the `gpu` resource is scoped
    local)."""
    _copy_project(tmp_path)
    plugin = tmp_path / "plugins" / "snakemake_executor_plugin_recording"
    plugin.mkdir(parents=True)
    (plugin / "__init__.py").write_text(RECORDING_EXECUTOR)
    from nlpbench import config, plan
    the_plan = plan.make(config.load(REPO / "params.yaml", {"scale": "smoke"}))
    outputs = tmp_path / "data-outputs.json"
    outputs.write_text(json.dumps({s.id: s.output for s in the_plan.data.values()}))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nlpbench").write_text(FAKE_LOCAL_NLPBENCH.format(python=sys.executable, outputs=str(outputs)))
    (bin_dir / "nlpbench").chmod(0o755)
    env = _env(PYTHONPATH=os.pathsep.join([str(plugin.parent), os.environ.get("PYTHONPATH", "")]))
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    cmd = [sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", "--executor", "recording",
           "--seconds-between-status-checks", "1", "table_tolias_thesis_2", *resources,
           "--config", "scale=smoke", "device=cuda"]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rounds = [json.loads(line) for line in (tmp_path / "submissions.jsonl").read_text().splitlines()]
    table = the_plan.targets["tolias-thesis/2"]
    assert sorted(job["rule"] for job in rounds[0]) == sorted(plan.rule_name("train", g) for g in table.groups)
    assert len(rounds) == 1 and [job["gpu"] for job in rounds[0]] == [1, 1]     # nothing else was submitted
    assert (tmp_path / the_plan.data["babi"].output).is_file()                   # the download, run here
    assert (tmp_path / the_plan.marker(table, "smoke")).is_file()                # the table, built here
