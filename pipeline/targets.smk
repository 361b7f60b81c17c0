# Tables and outputs (nlpbench.family.Target), then the index, in the scale's results folder (RESULTS: results/ for
# params.yaml's committed_scale, results/<scale>/ for a trial). results/ is committed to git, so a fresh clone
# already has the files; the per-scale marker under runs/_tables/<scale>/ (not in git) is what tells Snakemake
# that this clone built them. The files under results/ are not the rules' outputs: Snakemake deletes a job's
# outputs when it starts and when it fails, which would lose the committed tables of a job that fails or is killed.
# `nlpbench table` and `nlpbench output` write them themselves, a table's files all at once (io.staged); the rule's
# outputs are the marker and, beside it, copies of the pages, tables and figures for `snakemake --report`. So a
# table is built by naming its rule (snakemake table_tolias_thesis_2), never its file under results/ (Snakemake
# answers that no rule produces it). An on-demand target (the timing benchmark) takes every core (on a cluster a
# node of its own) and the GPU it times, so nothing else runs beside it, and is built only when named: snakemake
# output_tolias_thesis_timing --cores all (again after `nlpbench end-to-end` rewrites a record it cites: the record
# is one of its inputs). A table (it reads its runs' metrics), the index and the report are local rules: a cluster
# run builds them on the host that submits, not as jobs of their own; an output (it may run a model) is a job.

for _t in PLAN.targets.values():

    rule:
        name: rule_name("table" if _t.section == "tables" else "output", _t.key)
        input:
            [PLAN.groups[g].done for g in _t.groups],
            [PLAN.data[n].output for n in _t.needs],
            # the committed files it cites that exist (a benchmark's end-to-end records): a new or rewritten one
            # reruns it (Snakemake's mtime and input triggers)
            [PLAN.result_path(f) for f in _t.reads if Path(PLAN.result_path(f)).exists()],
        output:
            # copies of the pages, tables and figures shown by `snakemake --report` (not the JSON sidecars), by
            # document, beside the marker
            *[report(copy, category=_t.source, subcategory=_t.name) for _, copy in PLAN.report_copies(_t, SCALE)],
            done=PLAN.marker(_t, SCALE),
        log:
            f"logs/{_t.section}/{_t.source}-{_t.name}.log",
        localrule: _t.section == "tables"
        threads: (lambda wildcards: nb_res.benchmark_threads(runs_here())) if _t.on_demand else 1
        resources:
            gpu=train_gpu if _t.on_demand else 0,
            slurm_extra=(lambda wildcards: nb_res.benchmark_slurm_extra(runs_here())) if _t.on_demand else "",
            **nb_res.target(_t.on_demand),
        conda:
            gpu_env if _t.on_demand else CPU_ENV
        params:   # a changed declaration or table-building code reruns the target (Snakemake's params trigger)
            declaration=nb_plan.declaration_digest(PARAMS, _t),
            builder=nb_plan.builder_version(PLAN.owner[_t.key]),
            command="table" if _t.section == "tables" else "output",
            source=_t.source,
            name=_t.name,
            # the rule's inputs are its trained groups, so an empty table here is the scale's honest answer
            options=(lambda wildcards: f"--threads {train_threads()}") if _t.on_demand
                    else ("--allow-empty" if _t.section == "tables" else ""),
            shown=[f for f, _ in PLAN.report_copies(_t, SCALE)],
        shell:   # (the shell string is formatted when the job runs: loop variables belong in params)
            "nlpbench {SET} {params.command} {params.source:q} {params.name:q} {params.options} > {log:q} 2>&1 "
            "|| (tail -n 15 {log:q} >&2; exit 1); "
            "for f in {params.shown:q}; do cp -- \"$f\" \"$(dirname {output.done:q})/\"; done; "
            "date -u > {output.done:q}"


rule index:     # after the documents' tables (`all`); `snakemake studies` refreshes it after the studies
    input:
        [PLAN.marker(t, SCALE) for t in PLAN.part(study=False)],
    output:
        f"{RESULTS}/index.csv",
        f"{RESULTS}/README.md",
    log:
        "logs/index.log",
    localrule: True
    threads: 1
    resources:
        **nb_res.small(),
    conda:
        CPU_ENV
    shell:
        "nlpbench {SET} index > {log:q} 2>&1 || (tail -n 15 {log:q} >&2; exit 1)"


rule report:    # `snakemake report`: the tables and the index if they are stale, then one self-contained HTML page
                # of results/ (the index, every table and output it links, their figures); not part of `all`
    input:
        f"{RESULTS}/index.csv",
        f"{RESULTS}/README.md",
    output:
        f"{RESULTS}/report.html",
    log:
        "logs/report.log",
    localrule: True
    threads: 1
    resources:
        **nb_res.small(),
    conda:
        CPU_ENV
    shell:
        "nlpbench {SET} report --out {output:q} > {log:q} 2>&1 || (tail -n 15 {log:q} >&2; exit 1)"
