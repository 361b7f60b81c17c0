"""One training run of the pointer-generator family: config, phased schedule, checkpoint/resume, outputs.

Schedule (thesis Table 19 = paper Table 5): phases of (end iteration, max encoder steps, max decoder steps), then
`coverage_iters` more iterations with coverage on (eq. 70-71, lambda = 1) at the last phase's lengths. The paper's
Gumbel-Softmax sampling (acvi_paper) is on for the last `gumbel_fraction` of all iterations, coverage ones included
(the literal "last 10% of training iterations"; reading B-15).
Adam with default settings, global gradient-norm clipping at 2 (T §7.4.1).

Determinism: one seed fixes the initial weights (torch.manual_seed), the batch order (a permutation per epoch from
its own generator seeded with seed and epoch) and the sampling noise (the global torch RNG, saved in checkpoints),
so a resumed run continues with exactly the numbers of an uninterrupted one.

Outputs in out_dir, each written atomically: checkpoint.pt (every `checkpoint_every` steps), model.pt,
history.json, metrics.json (last: its presence means the run is complete).
"""

from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from nlpbench.metrics.rouge import meteor, rouge_f1
from nlpbench.metrics.text import corpus_bleu
from nlpbench.runtime import checkpoints
from nlpbench.runtime.io import read_json, write_json

from .batching import make_batch, to_device
from .beam import beam_search
from .model import ModelConfig, PointerGenerator
from .rates import novel_word_rate, oov_adoption_rate
from .tokenize import split_sentences
from .vocab import Vocab

log = logging.getLogger("nlpbench.acvi")

# Thesis Table 19: (end iteration, max encoding steps, max decoding steps).
THESIS_PHASES = [[71_000, 10, 10], [116_000, 50, 50], [184_000, 100, 50], [223_000, 200, 50], [250_000, 400, 100]]


@dataclass
class TrainConfig:
    task: str = "copy"                  # copy (synthetic) | qg (Du et al.) | cnndm (needs the full corpus)
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    vocab_size: int = 50_000            # words besides the 4 special tokens
    batch_size: int = 16
    lr: float = 1e-3                    # Adam defaults
    max_grad_norm: float = 2.0
    phases: list = field(default_factory=lambda: [list(p) for p in THESIS_PHASES])
    coverage_iters: int = 3_000
    gumbel_fraction: float = 0.1
    checkpoint_every: int = 1_000
    log_every: int = 100
    # evaluation
    beam_width: int = 5
    n_samples: int = 10                 # K for ACVI decoding (thesis eq. 88); 1 for deterministic attention
    min_dec_steps: int = 35             # See et al.; the documents give none
    max_dec_steps: int = 100
    eval_before_coverage: bool = True   # thesis Table 20's no-coverage rows = the same run before the coverage phase
    eval_meteor: bool = True            # METEOR 1.5 exact + full (Java; the full mode adds ~20 s)
    # data sizes (None = all)
    n_train: int | None = None
    n_eval: int | None = None
    mirror: str | None = None
    device: str = "cpu"                 # "cuda" for paper scale (CPU times: docs/acvi.md)
    copy_task: dict = field(default_factory=lambda: {"n_train": 2000, "n_eval": 50, "length": [4, 8],
                                                      "n_words": 30, "n_oov_words": 20})

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        d = dict(d)
        if isinstance(d.get("model"), dict):
            d["model"] = ModelConfig(**d["model"])
        return cls(**d)

    @property
    def main_iters(self) -> int:
        return int(self.phases[-1][0])

    @property
    def total_iters(self) -> int:
        return self.main_iters + int(self.coverage_iters)

    def lengths_at(self, step: int) -> tuple[int, int]:
        for end, enc, dec in self.phases:
            if step < end:
                return int(enc), int(dec)
        return int(self.phases[-1][1]), int(self.phases[-1][2])

    def coverage_at(self, step: int) -> bool:
        return step >= self.main_iters

    def gumbel_at(self, step: int) -> bool:
        return self.model.attention == "acvi_paper" and step >= (1 - self.gumbel_fraction) * self.total_iters


# ------------------------------------------------------------------------------------------------------ data
def copy_task_pairs(spec: dict, seed: int) -> tuple[list, list]:
    """Synthetic copy task: the target is the source. Words w0..w{n-1} are in-vocabulary (they appear in
    training), o0..o{m-1} occur only in the evaluation sources, so they are OOV and can only be copied."""
    rng = random.Random(seed)
    lo, hi = spec["length"]
    words = [f"w{i}" for i in range(spec["n_words"])]
    oov = [f"o{i}" for i in range(spec["n_oov_words"])]

    def seq(pool_oov: bool):
        n = rng.randint(lo, hi)
        s = [rng.choice(words) for _ in range(n)]
        if pool_oov:
            s[rng.randrange(n)] = rng.choice(oov)
        return s

    train = [(s, list(s)) for s in (seq(False) for _ in range(spec["n_train"]))]
    evals = [(s, list(s)) for s in (seq(True) for _ in range(spec["n_eval"]))]
    return train, evals


def load_pairs(cfg: TrainConfig) -> tuple[list, list]:
    if cfg.task == "copy":
        return copy_task_pairs(cfg.copy_task, cfg.seed)
    if cfg.task == "qg":
        from .data import load_qg
        train, evals = load_qg("dev", cfg.mirror), load_qg("test", cfg.mirror)
        return train[: cfg.n_train], evals[: cfg.n_eval]
    if cfg.task == "cnndm":
        raise FileNotFoundError(
            "needs data: the CNN/DM training split (287,226 stories, See et al.) is not in the mirror; only 250 "
            "test articles are (cnn_dm/artidoro-frank). Download cnn_stories.tgz and dailymail_stories.tgz from "
            "https://cs.nyu.edu/~kcho/DMQA/ and the url lists of abisee/cnn-dailymail")
    raise ValueError(f"task {cfg.task!r}: expected copy, qg or cnndm")


# ------------------------------------------------------------------------------------------------ training
def _set_seed(seed: int) -> None:
    torch.manual_seed(seed)


def _batch_indices(step: int, n: int, batch_size: int, seed: int) -> list[int]:
    """Indices of the batch at `step`: epoch-wise permutations from a generator seeded by (seed, epoch)."""
    per_epoch = max(1, n // batch_size)
    epoch, k = divmod(step, per_epoch)
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed * 1_000_003 + epoch))
    return perm[k * batch_size:(k + 1) * batch_size].tolist()


def decode(model: PointerGenerator, vocab: Vocab, pairs: Sequence, cfg: TrainConfig, *,
           coverage: bool) -> tuple[list, list, list]:
    """Beam-decode the source of each (source, reference) pair at the last phase's encoder length:
    (hypothesis tokens, reference tokens, truncated source tokens) per pair. Leaves the model in train mode."""
    model.eval()
    K = cfg.n_samples if cfg.model.attention.startswith("acvi") else 1
    hyps, refs, srcs = [], [], []
    for start in range(0, len(pairs), 32):
        chunk = pairs[start:start + 32]
        batch = to_device(make_batch(chunk, vocab, cfg.lengths_at(cfg.total_iters)[0], cfg.max_dec_steps), cfg.device)
        for i in range(len(chunk)):
            ids = beam_search(model, batch, i, width=cfg.beam_width, min_steps=cfg.min_dec_steps,
                              max_steps=cfg.max_dec_steps, coverage=coverage, n_samples=K)
            hyps.append(vocab.words(ids, batch["oovs"][i]))
            refs.append(list(chunk[i][1]))
            srcs.append(list(chunk[i][0])[: cfg.lengths_at(cfg.total_iters)[0]])
    model.train()
    return hyps, refs, srcs


def load_trained(out_dir: str | os.PathLike, device: str = "cpu") -> tuple[PointerGenerator, Vocab, TrainConfig]:
    """The final model of a finished run (out_dir/model.pt), its vocabulary and config."""
    path = Path(out_dir) / "model.pt"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the run has not finished training")
    saved = checkpoints.load(path, map_location=device)
    cfg = TrainConfig.from_dict({**saved["config"], "device": device})
    model = PointerGenerator(cfg.model).to(device)
    model.load_state_dict(saved["model"])
    return model, Vocab(saved["vocab"]), cfg


def evaluate(model: PointerGenerator, vocab: Vocab, pairs: Sequence, cfg: TrainConfig, *, coverage: bool) -> dict:
    """Beam-decode each pair; ROUGE-1/2/L F1 (sentences split at . ! ?), exact-match accuracy, the rates."""
    K = cfg.n_samples if cfg.model.attention.startswith("acvi") else 1
    hyps, refs, srcs = decode(model, vocab, pairs, cfg, coverage=coverage)
    as_sents = lambda toks: [" ".join(s) for s in split_sentences(toks)] or [""]  # noqa: E731
    rouge = rouge_f1([as_sents(h) for h in hyps], [as_sents(r) for r in refs])
    extra = {}
    if cfg.eval_meteor:
        flat_h, flat_r = [" ".join(h) for h in hyps], [[" ".join(r)] for r in refs]
        extra = {"meteor_exact": 100.0 * meteor(flat_h, flat_r, "exact"),
                 "meteor_full": 100.0 * meteor(flat_h, flat_r, "full")}
    return {
        "rouge1": rouge["rouge1"], "rouge2": rouge["rouge2"], "rougeL": rouge["rougeL"],
        "bleu4": 100.0 * corpus_bleu(hyps, refs, 4), **extra,
        "exact_match": 100.0 * sum(h == r for h, r in zip(hyps, refs)) / len(refs),
        "novel_word_rate": novel_word_rate(hyps, srcs),
        "oov_adoption_rate": oov_adoption_rate(hyps, srcs, set(vocab.itos)),
        "n_eval": len(refs), "n_samples": K, "examples": [" ".join(h) for h in hyps[:5]],
    }


def run(cfg: TrainConfig, out_dir: str | os.PathLike, *, stop_after: int | None = None,
        pairs: tuple[list, list] | None = None) -> dict | None:
    """Train (resuming from out_dir/checkpoint.pt if present), evaluate, write outputs. `stop_after` ends the
    process-equivalent of a kill after that many steps (a checkpoint is written there); returns None then.
    `pairs` = (training, evaluation) pairs prepared by the pipeline (else `load_pairs(cfg)`), cut to
    cfg.n_train / cfg.n_eval."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if (out / "metrics.json").is_file():
        return read_json(out / "metrics.json")
    if pairs is None:
        train_pairs, eval_pairs = load_pairs(cfg)
    else:
        train_pairs, eval_pairs = list(pairs[0])[: cfg.n_train], list(pairs[1])[: cfg.n_eval]
    if not train_pairs or not eval_pairs:
        raise ValueError(f"task {cfg.task}: empty training or evaluation set")
    vocab = Vocab.build((s for p in train_pairs for s in p), cfg.vocab_size)
    cfg.model.vocab_size = len(vocab)
    _set_seed(cfg.seed)
    model = PointerGenerator(cfg.model).to(cfg.device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    step, history, before_coverage = 0, [], None
    ckpt_path = out / "checkpoint.pt"
    if ckpt_path.is_file():
        ckpt = checkpoints.load(ckpt_path, map_location=cfg.device)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        torch.set_rng_state(ckpt["rng"].cpu())
        if cfg.device.startswith("cuda"):
            torch.cuda.set_rng_state(ckpt["cuda_rng"].cpu())
        step, history, before_coverage = ckpt["step"], ckpt["history"], ckpt.get("before_coverage")
        log.info("resumed at step %d", step)

    N = cfg.total_iters
    per_epoch = max(1, len(train_pairs) // cfg.batch_size)
    t0 = time.perf_counter()
    start_step = step
    model.train()
    while step < N:
        if (step == cfg.main_iters and cfg.coverage_iters > 0 and cfg.eval_before_coverage
                and before_coverage is None):
            before_coverage = evaluate(model, vocab, eval_pairs, cfg, coverage=False)
            before_coverage["steps"] = step
        max_enc, max_dec = cfg.lengths_at(step)
        batch = make_batch([train_pairs[i] for i in _batch_indices(step, len(train_pairs), cfg.batch_size, cfg.seed)],
                           vocab, max_enc, max_dec)
        batch = to_device(batch, cfg.device)
        losses = model(batch, coverage=cfg.coverage_at(step), sample=True, gumbel=cfg.gumbel_at(step))
        opt.zero_grad()
        losses["loss"].backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
        opt.step()
        step += 1
        if step % cfg.log_every == 0 or step == N:
            row = {"step": step, **{k: v.item() for k, v in losses.items()}}
            history.append(row)
            elapsed = time.perf_counter() - t0
            remaining = elapsed / (step - start_step) * (N - step)
            log.info("epoch %d step %d/%d loss %.4f elapsed %.1fs remaining %.1fs",
                     step // per_epoch + 1, step, N, row["loss"], elapsed, remaining)
        if step % cfg.checkpoint_every == 0 or step == stop_after:
            checkpoints.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "rng": torch.get_rng_state(),
                              "cuda_rng": torch.cuda.get_rng_state() if cfg.device.startswith("cuda") else None,
                              "step": step, "history": history, "before_coverage": before_coverage}, ckpt_path)
        if stop_after is not None and step >= stop_after and step < N:
            return None
    train_seconds = time.perf_counter() - t0
    metrics = evaluate(model, vocab, eval_pairs, cfg, coverage=cfg.coverage_iters > 0)
    if before_coverage is not None:
        metrics["before_coverage"] = before_coverage
    metrics.update({"steps": N, "train_seconds_this_process": train_seconds, "task": cfg.task,
                    "attention": cfg.model.attention, "vocab_size": len(vocab),
                    "synthetic": cfg.task == "copy"})
    checkpoints.save({"model": model.state_dict(), "config": asdict(cfg), "vocab": vocab.itos}, out / "model.pt")
    write_json(out / "history.json", history)
    write_json(out / "metrics.json", metrics)
    return metrics
