"""Training and evaluation of one text-generation run (Bahuleyan thesis chs. 4-6).

`train_run` trains a run's model with its KL annealing (Eqs. 4.15-4.18), word dropout (§4.6.2), attention KL
weight gamma_a (Eq. 6.11) and optional 2-stage attention switch, logging every iteration (KL, lambda, lambda*KL,
reconstruction); it checkpoints every epoch (a killed run resumes from its last epoch), then evaluates the
chosen checkpoint on the test split (MAP and sampled BLEU-1..4, entropy, distinct-1/2) and writes
`runs/textgen/<run>/{model.pt, config.json, train_log.csv, history.json, metrics.json}`, metrics.json last.
"""

from __future__ import annotations

import csv
import io as _io
import math
import time
import zlib
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

from nlpbench.data.prepared import prepared_output, verified_output
from nlpbench.metrics.text import bleu_eq416, corpus_bleu_1_to_4, diversity
from nlpbench.runtime import checkpoints, io
from nlpbench.runtime.progress import Progress
from nlpbench.runtime.provenance import device_label
from nlpbench.textgen.config import corpus_dir, embeddings_path, embeddings_step
from nlpbench.textgen.corpora import PreparedCorpus, load_prepared
from nlpbench.textgen.groups import TextRun
from nlpbench.textgen.model import Seq2SeqConfig, TextSeq2Seq
from nlpbench.textgen.prep import BOS, EOS, PAD, UNK
from nlpbench.textgen.schedules import kl_schedule, word_dropout_schedule

LOG_FIELDS = ("iteration", "epoch", "lambda", "word_dropout", "rec", "rec_per_token", "kl", "lambda_kl",
              "kl_attention", "gamma_lambda_kl_attention", "loss")


# -- data ------------------------------------------------------------------------------------------------------

class Batchable:
    """One split as padded id tensors: src (N, S), src_len (N,), tgt (N, T); references as token lists."""

    def __init__(self, corpus: PreparedCorpus, split: str, limit: int | None = None):
        examples = corpus.splits[split][:limit] if limit else corpus.splits[split]
        self.examples = examples
        self.src = torch.tensor([corpus.encode(ex.src, "src") for ex in examples], dtype=torch.long)
        self.src_len = (self.src != corpus.vocab.id(PAD)).sum(1).clamp(min=1)
        self.tgt = torch.tensor([corpus.encode(ex.tgt, "tgt") for ex in examples], dtype=torch.long)
        bos = torch.full((len(examples), 1), corpus.vocab.id(BOS), dtype=torch.long)
        self.dec_in = torch.cat([bos, self.tgt[:, :-1]], dim=1)       # ground truth shifted right (teacher forcing)

    def __len__(self) -> int:
        return len(self.examples)

    def references(self, kind: str) -> list[list[str]]:
        """BLEU references: `tgt` (the model's target words: <unk>, truncation; the SNLI code) or `ref` (the full
        normalised target, as the authors' QG/dialog evaluation)."""
        return [list(ex.tgt if kind == "tgt" else ex.ref) for ex in self.examples]


def word2vec_sentences(corpus: PreparedCorpus, split_names: list[str]) -> list[list[str]]:
    """word2vec's input: each example's source, then its reference when it differs (autoencoding corpora have
    src == ref), in corpus order. The order fixes the vocabulary and the training, so no set may decide it
    (a set of strings iterates in the order of Python's salted hash, which changes with PYTHONHASHSEED)."""
    return [list(s) for name in split_names for ex in corpus.splits[name]
            for s in ((ex.src,) if ex.src == ex.ref else (ex.src, ex.ref))]


def train_embeddings(corpus: PreparedCorpus, emb: dict, seed: int) -> torch.Tensor:
    """word2vec (gensim; CBOW window 5, 300-d, §3.1/§4.5.2/§3.4) on the training split's text, one row per vocabulary
    id; words word2vec did not see (the specials) get U(-0.05, 0.05) as in the authors' code."""
    from gensim.models import Word2Vec

    split_names = ["train"] if emb["fit_on"] == "train" else list(corpus.splits)
    model = Word2Vec(sentences=word2vec_sentences(corpus, split_names), vector_size=emb["dim"], window=emb["window"], sg=emb["sg"],
                     min_count=emb["min_count"], epochs=emb["epochs"], workers=1, seed=seed,
                     hashfxn=lambda s: zlib.crc32(s.encode()))        # deterministic (not Python's salted hash)
    g = torch.Generator().manual_seed(seed)
    out = torch.empty(len(corpus.vocab), emb["dim"]).uniform_(-0.05, 0.05, generator=g)
    for i, tok in enumerate(corpus.vocab.tokens):
        if tok in model.wv.key_to_index:
            out[i] = torch.from_numpy(model.wv[tok].copy())
    return out


def prepare_embeddings(params: dict, corpus_name: str, data_root: Path, runs_root: Path) -> Path:
    path = embeddings_path(params, corpus_name, runs_root)
    if path.exists():
        return verified_output(path, embeddings_step(corpus_name))      # edited since? (size, sha256)
    corpus = load_prepared(corpus_dir(params, corpus_name, data_root))
    if corpus.vocab is None:
        raise FileNotFoundError(f"{corpus.root}: no training split, so no vocabulary to embed")
    vectors = train_embeddings(corpus, params["textgen"]["embeddings"], params["textgen"]["seed"])
    with prepared_output(path) as tmp:
        checkpoints.write({"vectors": vectors, "tokens": list(corpus.vocab.tokens)}, tmp, output=path)
    return path


def build_model(settings: dict, corpus: PreparedCorpus, emb_dim: int, vectors: torch.Tensor | None) -> TextSeq2Seq:
    v = corpus.vocab
    cfg = Seq2SeqConfig(vocab_size=len(v), emb_dim=emb_dim, pad_id=v.id(PAD), bos_id=v.id(BOS), eos_id=v.id(EOS),
                        **settings["model"])
    return TextSeq2Seq(cfg, vectors)


# -- losses --------------------------------------------------------------------------------------------------

def reconstruction(logits: torch.Tensor, tgt: torch.Tensor, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-sentence summed categorical cross entropy over the target steps (J_rec, §4.3) and the token counts."""
    ce = F.cross_entropy(logits.transpose(1, 2), tgt, reduction="none")
    mask = (tgt != pad_id).float()
    return (ce * mask).sum(1), mask.sum(1).clamp(min=1)


def objective(out: dict, tgt: torch.Tensor, pad_id: int, lam: float, gamma_a: float, reduction: str) -> dict:
    """Eq. 6.11 (Eq. 4.15 without attention): J = J_rec + lambda [KL_z + gamma_a sum_j KL(c_j)], batch mean.

    reduction "sum" (thesis): J_rec and the context KL summed over target steps; "mean" (the authors' code, A1):
    both divided by the target length."""
    if "rec" in out:    # computed by the model at the target positions only
        rec, n_tok = out["rec"], out["n_tokens"].clamp(min=1).to(out["rec"].dtype)
    else:
        rec, n_tok = reconstruction(out["logits"], tgt, pad_id)
    mask = (tgt != pad_id).float()
    kl_c = (out["kl_c"] * mask).sum(1)
    if reduction == "mean":
        rec_term, kl_c_term = rec / n_tok, kl_c / n_tok
    else:
        rec_term, kl_c_term = rec, kl_c
    loss = (rec_term + lam * (out["kl_z"] + gamma_a * kl_c_term)).mean()
    return {"loss": loss, "rec": rec.mean(), "rec_per_token": (rec / n_tok).mean(), "kl": out["kl_z"].mean(),
            "kl_attention": kl_c.mean()}


# -- decoding and metrics ------------------------------------------------------------------------------------

def decode_batches(model: TextSeq2Seq, data: Batchable, vocab, max_len: int, z_scale: float, attn_scale: float,
                   generator: torch.Generator | None, device: str, batch_size: int = 500,
                   attention_on: bool = True) -> list[list[str]]:
    """Greedy outputs for every example (tokens up to </s>)."""
    model.eval()
    out = []
    for i in range(0, len(data), batch_size):
        ids = model.generate(max_len, data.src[i:i + batch_size].to(device), data.src_len[i:i + batch_size],
                             z_scale=z_scale, attn_scale=attn_scale, attention_on=attention_on, generator=generator)
        out += [vocab.decode(row) for row in ids.tolist()]
    return out


def is_stochastic(settings: dict) -> bool:
    m = settings["model"]
    return (m["latent"] and not m["deterministic_latent"]) or m["attention"] == "variational"


def evaluate(model: TextSeq2Seq, data: Batchable, vocab, settings: dict, device: str, seed: int,
             max_len: int, diversity_only: bool = False, attention_on: bool = True) -> dict:
    """MAP BLEU-1..4 (z = mu, c_j = c_j^det) and, for stochastic models, the mean of `samples` corpus BLEUs of
    posterior samples (A6) and entropy / distinct-1/2 per input's sample set, averaged (Tables 5.2, 6.1, 6.2)."""
    ev = settings["eval"]
    refs = data.references(ev["bleu_reference"])
    res: dict = {}
    if not diversity_only:
        hyps = decode_batches(model, data, vocab, max_len, 0.0, 0.0, None, device, attention_on=attention_on)
        res["map"] = {k: 100 * v for k, v in corpus_bleu_1_to_4(hyps, refs).items()}
        res["map"]["bleu_eq416"] = {str(n): 100 * bleu_eq416(hyps, refs, n) for n in (1, 2, 3, 4)}
        res["map"]["mean_length"] = sum(map(len, hyps)) / max(1, len(hyps))
    if is_stochastic(settings):
        gen = torch.Generator(device=device).manual_seed(seed + 7919)
        k = ev["samples"]
        samples = [decode_batches(model, data, vocab, max_len, 1.0, 1.0, gen, device, attention_on=attention_on)
                   for _ in range(k)]
        per_input = [[samples[s][i] for s in range(k)] for i in range(len(data))]
        res["sample"] = diversity(per_input, ev["distinct_variant"])
        res["sample"]["distinct_eq"] = diversity(per_input, "eq")
        if not diversity_only:
            bleus = [corpus_bleu_1_to_4(s, refs) for s in samples]
            for key in ("bleu1", "bleu2", "bleu3", "bleu4"):
                res["sample"][key] = 100 * sum(b[key] for b in bleus) / k
    return res


# -- training ------------------------------------------------------------------------------------------------

def _log_csv(rows: list[list[float]]) -> str:
    buf = _io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(LOG_FIELDS)
    for r in rows:
        w.writerow([int(r[0]), int(r[1])] + [f"{x:.6g}" for x in r[2:]])
    return buf.getvalue()


def _val_loss(model, data: Batchable, pad_id: int, lam: float, gamma_a: float, reduction: str, device: str,
              generator: torch.Generator, attention_on: bool, batch_size: int = 500) -> float:
    model.eval()
    total = 0.0
    with torch.no_grad():
        for i in range(0, len(data), batch_size):
            sl = slice(i, i + batch_size)
            out = model(data.src[sl].to(device), data.src_len[sl], data.dec_in[sl].to(device), attention_on,
                        generator=generator, targets=data.tgt[sl].to(device))
            total += float(objective(out, data.tgt[sl].to(device), pad_id, lam, gamma_a, reduction)["loss"]) \
                * len(data.tgt[sl])
    return total / len(data)


def train_run(run: TextRun, params: dict, data_root: Path, runs_root: Path, device: str = "cpu",
              log: Callable[[str], None] = print) -> dict:
    """Train (or resume) and evaluate one run; returns its metrics (also written to metrics.json, last)."""
    s, tr, ev = run.settings, run.settings["train"], run.settings["eval"]
    run_dir = run.run_dir(runs_root)
    corpus = load_prepared(corpus_dir(params, run.corpus, data_root))
    if corpus.vocab is None or "train" not in corpus.splits:
        raise FileNotFoundError(f"{corpus.root}: no training split")
    vocab = corpus.vocab
    path = verified_output(embeddings_path(params, run.corpus, runs_root), embeddings_step(run.corpus))
    vectors = checkpoints.load(path, remedy=f"delete it and run the data step {embeddings_step(run.corpus)} again")["vectors"]
    torch.manual_seed(run.seed)
    model = build_model(s, corpus, params["textgen"]["embeddings"]["dim"], vectors).to(device)
    params_ = [p for p in model.parameters() if p.requires_grad]
    opt = (torch.optim.Adam(params_, lr=tr["lr"]) if tr["optimizer"] == "adam"
           else torch.optim.SGD(params_, lr=tr["lr"]))
    train = Batchable(corpus, "train", tr["max_train_examples"])
    valid = Batchable(corpus, "valid", ev["max_valid_examples"])
    pad_id, unk_id = vocab.id(PAD), vocab.id(UNK if tr["word_dropout_token"] == "unk" else PAD)
    protected = (vocab.id(BOS), pad_id)
    kl_w, wd = kl_schedule(tr["kl_schedule"], "train.kl_schedule"), word_dropout_schedule(tr["word_dropout"])
    n_batches = math.ceil(len(train) / tr["batch_size"])
    total_iters = n_batches * tr["epochs"]
    speed = tr["schedule_speedup"]   # the schedules see iteration i * speedup (1 = the thesis)
    lam_final = kl_w(round(total_iters * speed))
    max_len = train.tgt.shape[1]
    data_gen = torch.Generator().manual_seed(run.seed)
    noise_gen = torch.Generator(device=device).manual_seed(run.seed + 1)

    state = {"epoch": 0, "iteration": 0, "log": [], "history": [], "best": None, "wall": 0.0}
    ckpt = run_dir / "checkpoint.pt"
    if ckpt.exists():   # resume a killed run from its last finished epoch
        saved = checkpoints.load(ckpt)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        data_gen.set_state(saved["data_gen"])
        noise_gen.set_state(saved["noise_gen"])
        torch.set_rng_state(saved["torch_rng"])          # input dropout draws from the global generator
        state = saved["state"]
        log(f"{run.run_id}: resuming after epoch {state['epoch']}")
    log(f"{run.run_id}: {len(train)} training examples, {n_batches} iterations/epoch, {tr['epochs']} epochs, "
        f"|V| = {len(vocab)}, device {device}")
    progress = Progress(tr["epochs"], start=state["epoch"])
    for epoch in range(state["epoch"] + 1, tr["epochs"] + 1):
        if stopped_early(state, tr):
            break
        t0 = time.perf_counter()
        model.train()
        attention_on = epoch > tr["attention_off_epochs"]
        order = torch.randperm(len(train), generator=data_gen)
        for b in range(n_batches):
            idx = order[b * tr["batch_size"]:(b + 1) * tr["batch_size"]]
            state["iteration"] += 1
            it = state["iteration"]
            lam, p = kl_w(round(it * speed)), wd(round(it * speed), n_batches)
            dec_in = word_dropout(train.dec_in[idx], p, unk_id, protected, data_gen)
            out = model(train.src[idx].to(device), train.src_len[idx], dec_in.to(device), attention_on,
                        generator=noise_gen, targets=train.tgt[idx].to(device))
            o = objective(out, train.tgt[idx].to(device), pad_id, lam, tr["gamma_a"], tr["loss_reduction"])
            opt.zero_grad()
            o["loss"].backward()
            if tr["clip_value"]:
                torch.nn.utils.clip_grad_value_(params_, tr["clip_value"])
            opt.step()
            v = {k: float(t.detach()) for k, t in o.items()}
            kl, kla = v["kl"], v["kl_attention"]
            state["log"].append([it, epoch, lam, p, v["rec"], v["rec_per_token"], kl, lam * kl, kla,
                                 tr["gamma_a"] * lam * kla, v["loss"]])
        record = {"epoch": epoch, "iteration": state["iteration"],
                  "val_loss": _val_loss(model, valid, pad_id, lam_final, tr["gamma_a"], tr["loss_reduction"],
                                        device, noise_gen, attention_on)}
        if ev["val_curves"]:   # Figs. 6.4/6.5: validation BLEU (MAP) and diversity (10 samples) per epoch
            m = evaluate(model, valid, vocab, s, device, run.seed + epoch, max_len, attention_on=attention_on)
            record.update({"bleu2": m["map"]["bleu2"], "bleu4": m["map"]["bleu4"]})
            if "sample" in m:
                record.update({"entropy": m["sample"]["entropy"], "distinct1": m["sample"]["distinct1"]})
        state["wall"] += time.perf_counter() - t0
        state["history"].append(record)
        # 2-stage training (A14) chooses among the epochs with attention: "the rest of the training" (§6.5.3)
        if tr["select"] == "best_val" and attention_on and (state["best"] is None
                                                             or record["val_loss"] < state["best"]["val_loss"]):
            state["best"] = {"epoch": epoch, "val_loss": record["val_loss"],
                             "model": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}}
        log(f"{progress.line(epoch)}: iteration {state['iteration']}, lambda {lam:.6f}, word dropout {p:.2f}, "
            f"val loss {record['val_loss']:.3f}, train KL {kl:.3f}, {time.perf_counter() - t0:.1f} s")
        state["epoch"] = epoch
        checkpoints.save({"model": model.state_dict(), "opt": opt.state_dict(), "data_gen": data_gen.get_state(),
                          "noise_gen": noise_gen.get_state(), "torch_rng": torch.get_rng_state(), "state": state}, ckpt)

    chosen, chosen_val = state["epoch"], state["history"][-1]["val_loss"] if state["history"] else None
    if tr["select"] == "best_val" and state["best"] is not None:
        model.load_state_dict(state["best"]["model"])
        chosen, chosen_val = state["best"]["epoch"], state["best"]["val_loss"]
    t0 = time.perf_counter()
    test = Batchable(corpus, "test", ev["max_test_examples"])
    metrics = evaluate(model, test, vocab, s, device, run.seed, max_len)
    eval_wall = time.perf_counter() - t0
    metrics.update({"status": "ok", "run_id": run.run_id, "name": run.name, "corpus": run.corpus,
                    "seed": run.seed, "chosen_epoch": chosen, "chosen_val_loss": chosen_val,
                    "epochs": state["epoch"], "max_epochs": tr["epochs"], "patience": tr.get("patience"),
                    "iterations": state["iteration"], "train_examples": len(train), "test_examples": len(test),
                    "corpus_version": corpus.status["version"], "vocab_size": len(vocab),
                    "device": device_label(device), "train_wall_time_s": state["wall"], "eval_wall_time_s": eval_wall,
                    "final_lambda": lam_final, "final_kl": state["log"][-1][6] if state["log"] else None})
    checkpoints.save({"model": model.state_dict(), "settings": s, "vocab_size": len(vocab),
                      "emb_dim": params["textgen"]["embeddings"]["dim"]}, run_dir / "model.pt")
    io.write_json(run_dir / "config.json", {"run": run.name, "run_id": run.run_id, "corpus": run.corpus,
                                            "seed": run.seed, "settings": s,
                                            "corpus_config": params["textgen"]["corpora"][run.corpus],
                                            "embeddings": params["textgen"]["embeddings"]})
    io.write_text(run_dir / "train_log.csv", _log_csv(state["log"]))
    io.write_json(run_dir / "history.json", state["history"])
    io.write_json(run_dir / "metrics.json", metrics)
    ckpt.unlink(missing_ok=True)
    return metrics


def stopped_early(state: dict, train: dict) -> bool:
    """Early stopping: `train.patience` epochs have passed without a lower validation loss than the best one
    (`train.select: best_val` keeps that epoch). With patience p and at most 10 p epochs, a run that stops early has
    its chosen epoch outside the last tenth of those it trained, so the learning check (claims.still_learning)
    calls it converged; one that reaches the last epoch still improving is called still learning."""
    patience = train.get("patience")
    return bool(patience and state["best"] is not None and state["epoch"] - state["best"]["epoch"] >= patience)


def word_dropout(dec_in: torch.Tensor, p: float, unk_id: int, protected: tuple[int, ...],
                 generator: torch.Generator) -> torch.Tensor:
    from nlpbench.textgen.schedules import apply_word_dropout
    return apply_word_dropout(dec_in, p, unk_id, protected, generator)


def load_run_model(run: TextRun, params: dict, data_root: Path, runs_root: Path, device: str = "cpu"
                   ) -> tuple[TextSeq2Seq, PreparedCorpus]:
    corpus = load_prepared(corpus_dir(params, run.corpus, data_root))
    saved = checkpoints.load(run.run_dir(runs_root) / "model.pt")
    model = build_model(saved["settings"], corpus, saved["emb_dim"], None).to(device)
    model.load_state_dict(saved["model"])
    model.eval()
    return model, corpus
