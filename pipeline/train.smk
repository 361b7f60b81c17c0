# Training groups (nlpbench.family.TrainGroup): each job trains one group's runs (many small runs in one
# vectorised pass where the family does so), each run with its own checkpoint and metrics.json; `done` last.
# Longest expected job first (TRAIN_PRIORITY, in the Snakefile), so that the cores stay busy to the end; threads,
# GPUs, run time and memory from src/nlpbench/resources.py.

for _group in PLAN.groups.values():

    rule:
        name: rule_name("train", _group.id)
        input:
            [PLAN.data[n].output for n in _group.needs],
        output:
            _group.done,
        log:
            f"logs/train/{_group.id}.log",
        benchmark:
            f"logs/train/{_group.id}.benchmark.tsv"
        threads: train_threads
        priority: TRAIN_PRIORITY[_group.id]
        resources:
            gpu=train_gpu,
            **nb_res.train(_group.id, PLAN.owner[_group.id], SCALE, COSTS),
        conda:
            gpu_env
        params:
            group=_group.id,
        shell:   # gpu_slots: the job's own device(s) among the machine's, or none when it requests none
            "{PYTHON:q} -m nlpbench.runtime.gpu_slots {resources.gpu} -- nlpbench {SET} train {params.group:q} --threads {threads} "
            "> {log:q} 2>&1 || (tail -n 15 {log:q} >&2; exit 1)"
