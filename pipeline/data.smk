# Data steps (nlpbench.family.DataStep): downloads verified by checksum or read from a mirror (params `mirror`
# or $NLPBENCH_MIRROR), and data derived from them. Each step's output is written last. A step takes the priority of
# the longest training group that reads it (TRAIN_PRIORITY), so that the group is not held back behind shorter ones.
# A light step (a download, its check and unpacking: DataStep.light) is a local rule: a cluster run does it on the
# host that submits, which has the network, rather than as a job of its own.

DATA_PRIORITY = nb_status.data_priorities(PLAN, TRAIN_PRIORITY)

for _step in PLAN.data.values():

    rule:
        name: rule_name("data", _step.id)
        input:
            [PLAN.data[n].output for n in _step.needs],
        output:
            _step.output,
        log:
            f"logs/data/{_step.id}.log",
        priority: DATA_PRIORITY[_step.id]
        localrule: _step.light
        threads: 1
        resources:
            **nb_res.data(SCALE),
        conda:
            CPU_ENV
        params:
            step=_step.id,
        shell:
            "nlpbench {SET} data {params.step:q} > {log:q} 2>&1 || (tail -n 15 {log:q} >&2; exit 1)"   # why, on the console
