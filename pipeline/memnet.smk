# MemN2N and t-MEM-NN (seed 000 ch. 6): each group trains its tasks x seeds in one vectorised pass and
# writes runs/<group>/<run>/{model.pt,metrics.json,config.json,history.json}; group.json comes last.

rule train_memnet_group:
    input:
        "data/babi/STATUS.json",
    output:
        "runs/{group}/group.json",
    wildcard_constraints:
        group="|".join(re.escape(g) for g in sorted(GROUPS)),
    log:
        "logs/train/{group}.log",
    benchmark:
        "logs/train/{group}.benchmark.tsv"
    threads: TRAIN_THREADS
    resources:
        gpu=TRAIN_GPU,
    shell:
        "nlpbench {SET} train-group {wildcards.group} --threads {threads} > {log} 2>&1"
