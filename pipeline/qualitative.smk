# Qualitative outputs of seed 000 ch. 6 from trained runs: attention per hop (Tables 3-5, from the Table 2
# runs) and the fitted degrees of freedom of every t-MEM-NN run (§6.5.5). Per-scale markers as in tables.smk.

QUAL_DONE = f"runs/_tables/{PARAMS['scale']}/tolias-thesis/{{name}}.done"


def _group_files(name):
    return [f"runs/{g.group_id}/group.json" for g in nb.experiment_groups(PARAMS, name).values()]


rule attention:
    input:
        _group_files("tolias-2"),
    output:
        md="results/tolias-thesis/{table}.md",
        csv="results/tolias-thesis/{table}.csv",
        done=QUAL_DONE.replace("{name}", "attention-{table}"),
    wildcard_constraints:
        table="3|4|5",
    log:
        "logs/table/tolias-thesis-{table}.log",
    shell:
        "nlpbench {SET} attention {wildcards.table} > {log} 2>&1 && date -u > {output.done}"


rule dof:
    input:
        [f"runs/{gid}/group.json" for gid, g in GROUPS.items() if g.model == "tmemnn"],
    output:
        md="results/tolias-thesis/dof.md",
        csv="results/tolias-thesis/dof.csv",
        done=QUAL_DONE.replace("{name}", "dof"),
    log:
        "logs/table/tolias-thesis-dof.log",
    shell:
        "nlpbench {SET} dof > {log} 2>&1 && date -u > {output.done}"


FIGURES = {e["table"]: n for n, e in PARAMS["experiments"].items() if e.get("output") == "figure"}


rule figure:
    input:
        lambda w: _group_files(FIGURES[w.figure]),
    output:
        png="results/tolias-thesis/{figure}.png",
        done=QUAL_DONE.replace("{name}", "figure-{figure}"),
    wildcard_constraints:
        figure="|".join(FIGURES) or "^$",
    log:
        "logs/table/tolias-thesis-{figure}.log",
    params:
        name=lambda w: FIGURES[w.figure],
    shell:
        "nlpbench {SET} figure {params.name} > {log} 2>&1 && date -u > {output.done}"
