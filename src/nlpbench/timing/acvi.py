"""The acvi timing benchmark (on demand: `snakemake output_tolias_thesis_acvi_timing --cores all`): training
iterations per second of the pointer-generator with each attention, at the paper's model size and the lengths of
each Table 19 phase, and beam-search decoding time per article; then the paper schedule's projected hours on the
device measured (a CPU here: the projection says what a GPU must beat, it is not a GPU measurement)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from nlpbench import config
from nlpbench.family import OutputPage
from nlpbench.results import paper
from nlpbench.runtime import io
from nlpbench.runtime.provenance import code_commit, device_label, resolve_device

from nlpbench.acvi.batching import make_batch, to_device
from nlpbench.acvi.beam import beam_search
from nlpbench.acvi.model import ModelConfig, PointerGenerator
from nlpbench.acvi.vocab import Vocab

ATTENTIONS = ("asa", "acvi_thesis", "acvi_paper")


def _fake_pairs(n: int, enc: int, dec: int, vocab: Vocab, seed: int) -> list:
    g = torch.Generator().manual_seed(seed)
    words = vocab.itos[4:]
    pick = lambda k: [words[i] for i in torch.randint(len(words), (k,), generator=g).tolist()]  # noqa: E731
    return [(pick(enc), pick(dec)) for _ in range(n)]


def projection_note(train: dict, device: str) -> str:
    """What the projected hours are: GPU-hours where measured on a GPU, else a CPU figure that a GPU must beat."""
    where = ("on a GPU: the hours are this GPU's" if device == "cuda" else
             "on a CPU: it is not a GPU-hours figure; run this target on a GPU for that")
    return ("The projection multiplies each phase's measured seconds per iteration by its iterations "
            f"({train['phases'][-1][0]:,} + {train['coverage_iters']:,} coverage). Measured {where}.")


def benchmark(params: dict, d: config.Declared, data_root: Path, results_dir: Path) -> OutputPage:
    """Times `steps` training iterations per (attention, phase) after one warm-up step, and the decoding of
    `articles` random 400-token sources (beam 5, K samples for ACVI). Random token ids of the configured vocabulary
    size: the cost does not depend on the words."""
    a = params["acvi"]
    device = resolve_device(params["device"])
    t = a["train"]
    steps, n_articles = d.decl.get("steps", 20), d.decl.get("articles", 5)
    vocab = Vocab([f"w{i}" for i in range(t["vocab_size"])])
    rows, csv = [], ["attention,phase,enc,dec,iterations,sec_per_iter,iters_per_sec"]
    projection = {}
    for att in ATTENTIONS:
        torch.manual_seed(0)
        cfg = ModelConfig(**{**a["model"], "attention": att, "vocab_size": len(vocab)})
        model = PointerGenerator(cfg).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=t["lr"])
        total, start = 0.0, 0
        for i, (end, enc, dec) in enumerate(t["phases"], 1):
            pairs = _fake_pairs(t["batch_size"], enc, dec, vocab, i)
            batch = to_device(make_batch(pairs, vocab, enc, dec), device)
            for k in range(steps + 1):
                if k == 1:                                  # one warm-up step
                    if device == "cuda":
                        torch.cuda.synchronize()
                    t0 = time.perf_counter()
                loss = model(batch, coverage=False, sample=True)["loss"]
                opt.zero_grad()
                loss.backward()
                opt.step()
            if device == "cuda":
                torch.cuda.synchronize()
            sec = (time.perf_counter() - t0) / steps
            rows.append((att, i, enc, dec, sec))
            csv.append(f"{att},{i},{enc},{dec},{steps},{sec:.5f},{1 / sec:.3f}")
            total += (end - start) * sec
            start = end
        total += t["coverage_iters"] * rows[-1][4]
        model.eval()
        pairs = _fake_pairs(n_articles, t["phases"][-1][1], 10, vocab, 99)
        batch = to_device(make_batch(pairs, vocab, t["phases"][-1][1], t["max_dec_steps"]), device)
        K = t["n_samples"] if att.startswith("acvi") else 1
        t0 = time.perf_counter()
        for j in range(n_articles):
            beam_search(model, batch, j, width=t["beam_width"], min_steps=t["min_dec_steps"],
                        max_steps=t["max_dec_steps"], coverage=True, n_samples=K)
        dec_sec = (time.perf_counter() - t0) / n_articles
        csv.append(f"{att},decode,{t['phases'][-1][1]},{t['max_dec_steps']},{n_articles},{dec_sec:.4f},")
        projection[att] = (total / 3600, dec_sec, dec_sec * 11490 / 3600)
    out = [f"# {paper.source_label(d.source)} — acvi timing benchmark", "",
           f"- **device**: {device_label(device)}, torch threads {torch.get_num_threads()}",
           f"- **scale**: {params['scale']} (model emb {a['model']['emb_dim']}, LSTM {a['model']['hidden_dim']}, "
           f"vocabulary {t['vocab_size']}, batch {t['batch_size']})",
           f"- **code commit**: {code_commit()}",
           f"- **generated**: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}", "",
           "| attention | phase | enc / dec steps | s / iteration | iterations / s |", "|---|---:|---|---:|---:|"]
    out += [f"| {att} | {i} | {enc} / {dec} | {sec:.4f} | {1 / sec:.2f} |" for att, i, enc, dec, sec in rows]
    out += ["", "| attention | decoding s / article (beam, K) | projected training hours, Table 19 schedule + "
            "coverage | projected decoding hours, 11,490 test articles |", "|---|---:|---:|---:|"]
    out += [f"| {att} | {p[1]:.3f} | {p[0]:.1f} | {p[2]:.1f} |" for att, p in projection.items()]
    out += ["", projection_note(t, device)]
    md = results_dir / d.source / f"{d.name}.md"
    csv_path = results_dir / d.source / f"{d.name}.csv"
    io.write_text(csv_path, "\n".join(csv) + "\n")
    io.write_text(md, "\n".join(out) + "\n")
    return OutputPage("acvi timing benchmark", "benchmark", (md.name, csv_path.name), "measured")
