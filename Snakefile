# nlpbench: every table of the chosen scale.
#   snakemake --cores all --resources gpu=1                      (paper scale, params.yaml)
#   snakemake --cores all --resources gpu=1 --config scale=smoke (any params.yaml key can be overridden)
# Thin rules over the `nlpbench` command line; the logic lives in src/nlpbench, where the tests reach it.

import re
import shlex
import yaml
from nlpbench import config as nb

PARAMS = nb.load("params.yaml", config)   # validated: a bad key stops here with its name
SET = " ".join(
    "--set " + shlex.quote(f"{k}={yaml.safe_dump(v, default_flow_style=True).strip().removesuffix('...').strip()}")
    for k, v in config.items()
)
GROUPS = nb.all_groups(PARAMS)

# Training jobs: on a GPU one at a time with every core (the `gpu` resource); on a CPU one thread each and no
# `gpu` resource, so `--cores N` trains N groups side by side (on 2 shared cores, two 1-thread jobs measured
# faster than one 2-thread job: README, Scales).
from nlpbench.provenance import resolve_device

ON_GPU = resolve_device(PARAMS["device"]) == "cuda"
TRAIN_THREADS = workflow.cores if ON_GPU else 1
TRAIN_GPU = 1 if ON_GPU else 0


include: "pipeline/data.smk"
include: "pipeline/memnet.smk"
include: "pipeline/tables.smk"
include: "pipeline/qualitative.smk"
include: "pipeline/game.smk"
include: "pipeline/textgen.smk"
include: "pipeline/dmn.smk"
include: "pipeline/bench.smk"   # on demand only: snakemake timing_benchmark --cores all


# the markers of every output that is not an experiment table (the index rule waits for them too)
OUTPUT_MARKERS = (
    [QUAL_DONE.format(name=f"figure-{t}") for t in FIGURES]
    + [QUAL_DONE.format(name=n) for n in ("attention-3", "attention-4", "attention-5", "dof")]
    + [QUAL_DONE.format(name=f"game-{t}") for t in GAME_TABLES]
    + TG_MARKERS
    + DMN_MARKERS
)


rule all:
    input:
        "results/index.csv",
        "results/README.md",
        [TABLE_DONE.format(source=e["source"], table=e["table"]) for e in PARAMS["experiments"].values()
         if e.get("output", "table") == "table"],
        OUTPUT_MARKERS,
