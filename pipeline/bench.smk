# Timing benchmark (issue 3; spec seed-000-002 §7): training time per minibatch, inference time per answer and
# the speed-up of group training, measured on the machine at hand beside the thesis's figures.
# Run on demand: it is deliberately not an input of `rule all`, because its numbers describe the machine (and
# whatever else runs on it), not the reproduction. Ask for it by name:
#   snakemake timing_benchmark --cores all --resources gpu=1
# It takes every core (and the GPU slot) so that no other job of the workflow runs beside it, and measures with
# the threads a training job gets (TRAIN_THREADS: 1 on a CPU).

rule timing_benchmark:
    input:
        "data/babi/STATUS.json",
    output:
        md="results/tolias-thesis/timing.md",
        csv="results/tolias-thesis/timing.csv",
    log:
        "logs/bench/timing.log",
    threads: workflow.cores
    resources:
        gpu=1,
    shell:
        "nlpbench {SET} bench --threads {TRAIN_THREADS} --out results/tolias-thesis > {log} 2>&1"
