# Variational text generation (seed 001, Bahuleyan thesis chs. 4-6): data preparation per corpus, word2vec,
# one training rule per run (textgen.runs), then Tables 4.2/5.2/6.1/6.2, the qualitative tables and figures.
# Per-scale markers under runs/_tables/<scale>/ tell Snakemake this clone built results/ (as tables.smk).

from nlpbench import textgen_config as tgc

TG_RUNS = tgc.runs_by_id(PARAMS) if "textgen" in PARAMS else {}
TG_CORPORA = sorted({r.corpus for r in TG_RUNS.values()})
TG_DATA = {tgc.corpus_dir(PARAMS, c).name: c for c in TG_CORPORA}
TG_TABLES = PARAMS["textgen"]["tables"] if "textgen" in PARAMS else {}
TG_OUTPUTS = PARAMS["textgen"]["outputs"] if "textgen" in PARAMS else {}
TG_DONE = f"runs/_tables/{PARAMS['scale']}/{tgc.SOURCE}/{{name}}.done"
TG_MARKERS = ([TG_DONE.format(name=t["table"]) for t in TG_TABLES.values()]
              + [TG_DONE.format(name=o["name"]) for o in TG_OUTPUTS.values()])


def _tg_metrics(names):
    return [str(tgc.make_run(PARAMS, n).run_dir() / "metrics.json") for n in tgc.active(PARAMS, names)]


rule textgen_data:
    output:
        "data/textgen/{tgdata}/STATUS.json",
    wildcard_constraints:
        tgdata="|".join(TG_DATA) or "^$",
    log:
        "logs/textgen/data-{tgdata}.log",
    params:
        corpus=lambda w: TG_DATA[w.tgdata],
    shell:
        "nlpbench {SET} fetch {params.corpus} > {log} 2>&1"


rule textgen_embeddings:
    input:
        lambda w: str(tgc.corpus_dir(PARAMS, w.tgcorpus) / "STATUS.json"),
    output:
        "runs/textgen/_embeddings/{tgcorpus}-{tgdigest}-word2vec-{tgemb}.pt",
    wildcard_constraints:
        tgcorpus="|".join(TG_CORPORA) or "^$",
    log:
        "logs/textgen/embeddings-{tgcorpus}-{tgdigest}-{tgemb}.log",
    shell:
        "nlpbench {SET} textgen-embed {wildcards.tgcorpus} > {log} 2>&1"


rule textgen_train:
    input:
        lambda w: str(tgc.corpus_dir(PARAMS, TG_RUNS[w.tgrun].corpus) / "STATUS.json"),
        lambda w: str(tgc.embeddings_path(PARAMS, TG_RUNS[w.tgrun].corpus)),
    output:
        "runs/textgen/{tgrun}/metrics.json",
    wildcard_constraints:
        tgrun="|".join(re.escape(r) for r in sorted(TG_RUNS)) or "^$",
    log:
        "logs/textgen/train-{tgrun}.log",
    benchmark:
        "logs/textgen/train-{tgrun}.benchmark.tsv"
    threads: TRAIN_THREADS
    resources:
        gpu=TRAIN_GPU,
    shell:
        "nlpbench {SET} textgen-train {wildcards.tgrun} --threads {threads} > {log} 2>&1"


rule textgen_table:
    input:
        lambda w: _tg_metrics(tgc.table_runs(PARAMS, TG_TABLE_KEYS[w.tgtable])),
    output:
        md=f"results/{tgc.SOURCE}/{{tgtable}}.md",
        csv=f"results/{tgc.SOURCE}/{{tgtable}}.csv",
        json=f"results/{tgc.SOURCE}/{{tgtable}}.json",
        done=TG_DONE.replace("{name}", "{tgtable}"),
    wildcard_constraints:
        tgtable="|".join(re.escape(t["table"]) for t in TG_TABLES.values()) or "^$",
    log:
        "logs/table/bahuleyan-thesis-{tgtable}.log",
    params:
        key=lambda w: TG_TABLE_KEYS[w.tgtable],
    shell:
        "nlpbench {SET} textgen-table {params.key} > {log} 2>&1 && date -u > {output.done}"


TG_TABLE_KEYS = {t["table"]: k for k, t in TG_TABLES.items()}


TG_FIGURES = {o["name"]: k for k, o in TG_OUTPUTS.items() if o["kind"] in ("iterations", "epochs")}
TG_QUALITATIVE = {o["name"]: k for k, o in TG_OUTPUTS.items() if k not in TG_FIGURES.values()}


rule textgen_qualitative:
    input:
        lambda w: _tg_metrics(tgc.output_runs(PARAMS, TG_QUALITATIVE[w.tgqual])),
    output:
        md=f"results/{tgc.SOURCE}/{{tgqual}}.md",
        done=TG_DONE.replace("{name}", "{tgqual}"),
    wildcard_constraints:
        tgqual="|".join(re.escape(n) for n in TG_QUALITATIVE) or "^$",
    log:
        "logs/table/bahuleyan-thesis-{tgqual}.log",
    params:
        key=lambda w: TG_QUALITATIVE[w.tgqual],
    shell:
        "nlpbench {SET} textgen-output {params.key} > {log} 2>&1 && date -u > {output.done}"


rule textgen_figure:
    input:
        lambda w: _tg_metrics(tgc.output_runs(PARAMS, TG_FIGURES[w.tgfig])),
    output:
        png=f"results/{tgc.SOURCE}/{{tgfig}}.png",
        done=TG_DONE.replace("{name}", "{tgfig}"),
    wildcard_constraints:
        tgfig="|".join(re.escape(n) for n in TG_FIGURES) or "^$",
    log:
        "logs/table/bahuleyan-thesis-{tgfig}.log",
    params:
        key=lambda w: TG_FIGURES[w.tgfig],
    shell:
        "nlpbench {SET} textgen-output {params.key} > {log} 2>&1 && date -u > {output.done}"
