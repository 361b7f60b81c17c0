# nlpbench: every table and output of the chosen scale.
#   snakemake --cores all                      (params.yaml's scale: auto = paper on a GPU, cpu on a CPU)
#   snakemake --cores all --config scale=smoke (any params.yaml key: memnet='{train: {lr: 0.01}}', or put it in
#                                               overrides.yaml, which DVC tracks too)
#   snakemake --profile profiles/slurm --config device=cuda   (a SLURM cluster: docs/cluster.md)
# The rules are written once over the plan of every family (src/nlpbench/plan.py: data steps, training groups,
# tables and outputs) and only call the `nlpbench` command line; the logic lives in src/nlpbench.

import shlex
from pathlib import Path
import sys
import yaml
from nlpbench import config as nb_config
from nlpbench import registry as nb
from nlpbench import plan as nb_plan
from nlpbench import status as nb_status
from nlpbench import resources as nb_res
from nlpbench import share as nb_share

# the user's overrides; --config adds to them. nlpbench reads overrides.yaml first, so that a file Snakemake could
# not walk in reasonable time (an alias bomb, nesting too deep) stops with its name and line before Snakemake reads it
if Path("overrides.yaml").exists():
    nb_config.read_yaml(Path("overrides.yaml").read_text(), "overrides.yaml")
configfile: "overrides.yaml"


PARAMS = nb.load("params.yaml", config, overrides_from="--config")   # validated: a bad key stops here with its name
SET = " ".join(
    "--set " + shlex.quote(f"{k}={yaml.safe_dump(v, default_flow_style=True).strip().removesuffix('...').strip()}")
    for k, v in config.items()
)
PLAN = nb_plan.make(PARAMS)
SCALE = PARAMS["scale"]
RESULTS = nb_config.results_dir(PARAMS).as_posix()   # results/ at the committed scale, results/<scale>/ for a trial

# What each job asks for (src/nlpbench/resources.py): a training job takes one GPU when params.yaml's `device` is
# cuda (on any planning host, a CPU-only login node included) or auto on a host that runs its own jobs and has one.
# On one machine as many run at once as it shows GPUs (`--resources gpu=N` to say otherwise), each on a device of its
# own (src/nlpbench/runtime/gpu_slots.py). On a CPU a job takes one thread and no GPU, so `--cores N` trains N groups side by
# side (docs/scales.md).
# `gpu` is scoped local: on a cluster it is what one job asks of its node, never a count of the cluster's jobs at
# once (Snakemake's default, global, would submit one GPU job at a time under `--resources gpu=1`).
resource_scopes:
    gpu="local"
if "gpu" not in workflow.global_resources:
    workflow.global_resources["gpu"] = nb_res.local_gpu_limit()
# Snakemake reads the Snakefile before it chooses the executor, so what depends on where jobs run is asked per
# job (these functions), not at parse time.
runs_here = lambda *_: nb_res.runs_here(workflow)    # the planning host runs the jobs (no cluster executor)
train_gpu = lambda *_: nb_res.gpus(PARAMS["device"], runs_here())
train_threads = lambda *_: nb_res.train_threads(train_gpu())
# The software each job runs in under `snakemake --sdm conda` (without it, the rules run in the installed
# environment): envs/nlpbench.yaml (CPU build of torch) for every job, envs/nlpbench-cuda.yaml (CUDA 13 build) for a
# job that takes a GPU, both for Linux x86_64. Each carries its lock of envs/lock/ written out with the hashes, as
# Snakemake builds it from a copy in its conda prefix; the path is the repository's, as an included file's relative
# path would be read from pipeline/.
CPU_ENV = str(Path(workflow.basedir) / "envs" / "nlpbench.yaml")
gpu_env = lambda *_: str(Path(workflow.basedir) / "envs" / ("nlpbench-cuda.yaml" if train_gpu() else "nlpbench.yaml"))
COSTS = nb_status.scale_costs(PARAMS)
PYTHON = sys.executable                   # the Python that has nlpbench (the rules' small helpers run in it)
# Longest expected training job first (results/costs.tsv), so that the short ones fill the cores at the end; a data
# step takes the priority of the longest group that reads it (pipeline/data.smk).
TRAIN_PRIORITY = nb_status.longest_first(PLAN, SCALE, COSTS)


rule_name = nb_plan.rule_name   # a rule per data step, group and target: data_babi, table_tolias_thesis_2, ...


include: "pipeline/data.smk"      # data steps  -> data/ (and word vectors under runs/)
include: "pipeline/train.smk"     # groups      -> runs/<group>/
include: "pipeline/targets.smk"   # tables and outputs -> results/<source>/, then the index


rule all:
    default_target: True
    input:
        f"{RESULTS}/index.csv",
        f"{RESULTS}/README.md",
        [PLAN.marker(t, SCALE) for t in PLAN.part(study=False)],


rule studies:   # the reading pilots, seed-spread studies and additions behind the documents' tables, then the
                # index again with what they wrote (its marker is newer than every study's)
    input:
        [PLAN.marker(t, SCALE) for t in PLAN.part(study=True)],
    output:
        done=f"runs/_tables/{SCALE}/studies.done",
    log:
        "logs/index-studies.log",
    localrule: True
    threads: 1
    resources:
        **nb_res.small(),
    conda:
        CPU_ENV
    shell:
        "nlpbench {SET} index > {log:q} 2>&1 || (tail -n 15 {log:q} >&2; exit 1); date -u > {output.done:q}"


onstart:   # the plan before the first job: scale, device, groups per family, and the time this run should take;
           # data/ and runs/ made where absent (DVC's share stage depends on both, src/nlpbench/share.py)
    nb_share.ensure_shared_dirs()
    _by_rule = {rule_name("train", gid): gid for gid in PLAN.groups}
    _this_run = [_by_rule[j.rule.name] for j in workflow.dag.needrun_jobs() if j.rule.name in _by_rule]
    _side_by_side = workflow.cores if runs_here() else workflow.nodes    # on a cluster: the jobs queued at once
    print(nb_status.report(PARAMS, PLAN, "cuda" if train_gpu() else "cpu", _side_by_side, per_table=False,
                           this_run=_this_run), file=sys.stderr)


onsuccess:   # measured group costs feed the next estimate (costs.tsv in the scale's results folder)
    shell("nlpbench {SET} costs --threads {TRAIN_THREADS:q} > /dev/null || true", TRAIN_THREADS=train_threads())
