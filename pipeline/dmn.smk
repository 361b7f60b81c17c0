# DMN+, MoDMN+, ff-DMN and the ensemble (seed 004 ch. 6, Tables 6.2-6.7, Figures 6.3, 6.4, 6.8).
# Derived task-16 data (fact-order patterns, augmented set) under data/dmn/<id>/; each group trains its runs
# one after the other into runs/<group>/<item>-seed<seed>/ (metrics.json last), then writes group.json.

from nlpbench import dmn_experiments as dmn

DMN_GROUPS = dmn.groups_by_id(PARAMS) if "dmn" in PARAMS else {}
DMN_DATA = dmn.all_datasets(PARAMS) if "dmn" in PARAMS else {}
DMN_TABLES = PARAMS.get("dmn", {}).get("tables", {})
DMN_DONE = f"runs/_tables/{PARAMS['scale']}/shen-thesis/{{name}}.done"


rule dmn_data:
    input:
        "data/babi/STATUS.json",
    output:
        "data/dmn/{dataset}/manifest.json",
    wildcard_constraints:
        dataset="|".join(re.escape(d) for d in sorted(DMN_DATA)) or "^$",
    log:
        "logs/dmn/data-{dataset}.log",
    shell:
        "nlpbench {SET} dmn-data {wildcards.dataset} > {log} 2>&1"


rule train_dmn_group:
    input:
        "data/babi/STATUS.json",
        lambda w: [f"data/dmn/{d}/manifest.json" for d in DMN_GROUPS[w.group].datasets()],
    output:
        "runs/{group}/group.json",
    wildcard_constraints:
        group="|".join(re.escape(g) for g in sorted(DMN_GROUPS)) or "^$",
    log:
        "logs/train/{group}.log",
    benchmark:
        "logs/train/{group}.benchmark.tsv"
    threads: TRAIN_THREADS
    resources:
        gpu=TRAIN_GPU,
    shell:
        "nlpbench {SET} dmn-train {wildcards.group} --threads {threads} > {log} 2>&1"


rule dmn_table:
    input:
        lambda w: [f"runs/{g.group_id}/group.json" for g in dmn.table_groups(PARAMS, w.table)],
    output:
        md="results/shen-thesis/{table}.md",
        csv="results/shen-thesis/{table}.csv",
        json="results/shen-thesis/{table}.json",
        done=DMN_DONE.replace("{name}", "{table}"),
    wildcard_constraints:
        table="|".join(re.escape(t) for t in DMN_TABLES) or "^$",
    log:
        "logs/table/shen-thesis-{table}.log",
    shell:
        "nlpbench {SET} dmn-table {wildcards.table} > {log} 2>&1 && date -u > {output.done}"


# the figures are drawn by their table's rule from its CSV
DMN_MARKERS = [DMN_DONE.format(name=t) for t in DMN_TABLES]
