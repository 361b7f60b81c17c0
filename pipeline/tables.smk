# Tables: reproduced cells next to the paper's numbers (src/nlpbench/reference), then the index.
# results/ is committed to git, so a fresh clone already has the tables; the per-scale marker under runs/
# (not in git, versioned by DVC with the checkpoints) is what tells Snakemake that this clone built them.

TABLE_DONE = f"runs/_tables/{PARAMS['scale']}/{{source}}/{{table}}.done"


def experiment_groups(wildcards):
    name = next(n for n, e in PARAMS["experiments"].items()
                if e["source"] == wildcards.source and e["table"] == wildcards.table)
    return [f"runs/{g.group_id}/group.json" for g in nb.experiment_groups(PARAMS, name).values()]


def experiment_name(wildcards):
    return next(n for n, e in PARAMS["experiments"].items()
                if e["source"] == wildcards.source and e["table"] == wildcards.table)


rule table:
    input:
        experiment_groups,
    output:
        md="results/{source}/{table}.md",
        csv="results/{source}/{table}.csv",
        json="results/{source}/{table}.json",
        done=TABLE_DONE,
    wildcard_constraints:   # only experiments' tables (other files under results/ have their own rules)
        table="|".join(sorted({re.escape(e["table"]) for e in PARAMS["experiments"].values()
                               if e.get("output", "table") == "table"})),
    log:
        "logs/table/{source}-{table}.log",
    params:
        name=experiment_name,
    shell:
        "nlpbench {SET} table {params.name} > {log} 2>&1 && date -u > {output.done}"


def index_inputs(wildcards):
    """Every table and every other output of rule all (evaluated once all rule files are included)."""
    return ([nb.table_paths(PARAMS, name)["json"] for name, e in PARAMS["experiments"].items()
             if e.get("output", "table") == "table"] + OUTPUT_MARKERS)


rule index:
    input:
        index_inputs,
    output:
        "results/index.csv",
        "results/README.md",
    log:
        "logs/index.log",
    shell:
        "nlpbench index > {log} 2>&1"
