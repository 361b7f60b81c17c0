"""One training run of a squad model: the baseline (thesis §3.3.2) or a full model of Table 4.4
(models.py; their settings may change the optimizer, epochs, batch and EMA below through squad.full_models).

Adadelta (lr 0.5, rho 0.95, eps 1e-6), batch 60, dropout 0.2, an exponential moving average (0.999) of the
trainable weights used at evaluation, loss (3.20). The EMA decay is min(0.999, (1+t)/(10+t)) at step t [D: the
TensorFlow num_updates rule BiDAF's code used], so short runs are not dominated by the initial weights.

Training data: passages longer than `max_passage_len` are cut and examples whose answer ends beyond the cut are
dropped; questions are cut to `max_question_len` [D]. Test passages are cut at `eval_max_passage_len`.

Epochs: the thesis reports its models after a fixed number of epochs. With `valid_articles` > 0 (a reading for
short runs) the last that many training articles are held out (data.hold_out_articles), the EMA weights are
scored on them after every epoch, and the test set is scored once, with the weights of the epoch of highest
validation EM (the first such epoch on a tie): the test articles never choose anything. With `patience` as
well, a run stops once that many epochs have passed without a higher validation EM, and not before
`min_epochs` (so that the flat first epochs of a slow start do not stop it), so that `epochs` is a cap and the
run trains until validation says it has converged (metrics: epochs_trained, stopped_early).

Reproducible: the seed fixes the initial weights (torch global RNG, also used by dropout) and a separate
generator fixes batch order; both RNG states go into the checkpoint written after every epoch, so a run killed
and restarted gives the same numbers as an uninterrupted one (on CPU; on CUDA the cuDNN LSTM kernels need not be
bit-reproducible). Outputs in the run directory, each written
atomically: checkpoint.pt (every epoch), history.json (every epoch: per-epoch records, `loss_log` every
loss_log_every steps and `step_loss`, the loss of every optimizer step, for the loss-curve figures; recording it
is no setting), model.pt (EMA weights), metrics.json (last).
"""

from __future__ import annotations

import copy
import math
import os
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from nlpbench.metrics.squad import squad_scores
from nlpbench.runtime import checkpoints
from nlpbench.runtime.io import read_json, write_json
from nlpbench.runtime.provenance import code_commit, device_label, resolve_device
from nlpbench.squad.configs import TrainConfig
from nlpbench.squad.data import hold_out_articles, token_span_text
from nlpbench.squad.model import decode, span_loss
from nlpbench.squad.models import build_model

DECODE_MODES = ("independent", "span")
OPTIMIZERS = ("adadelta", "adam")


def warmup_factor(cfg: "TrainConfig", step: int) -> float:
    """The learning-rate multiplier at optimizer step `step` (0, 1, ...): QANet's inverse-exponential warm-up,
    min(1, log(step + 1) / log(warmup_steps - 1)), reaching 1 after warmup_steps - 2 steps; 1 without warm-up."""
    if cfg.warmup_steps <= 2:
        return 1.0
    return min(1.0, math.log(step + 1) / math.log(cfg.warmup_steps - 1))


def make_optimizer(cfg: "TrainConfig", params: list) -> torch.optim.Optimizer:
    """Adadelta (lr, rho, eps) as the thesis (§3.3.2), or Adam (lr, adam_betas, adam_eps: QANet's optimizer, and a
    reading for short runs); either with `weight_decay` (L2 on every trainable weight)."""
    if cfg.optimizer == "adadelta":
        return torch.optim.Adadelta(params, lr=cfg.lr, rho=cfg.rho, eps=cfg.eps, weight_decay=cfg.weight_decay)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, betas=tuple(cfg.adam_betas), eps=cfg.adam_eps,
                                weight_decay=cfg.weight_decay)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, not {cfg.optimizer!r}")


# ---------------------------------------------------------------- encoding and batching


def encode(built: dict, index: dict[str, int], max_passage: int, max_question: int, drop_unreachable: bool) -> list[dict]:
    """Token ids per example; passages cut at max_passage, questions at max_question."""
    context_ids = [[index[t] for t in c["tokens"][:max_passage]] for c in built["contexts"]]
    encoded = []
    for k, ex in enumerate(built["examples"]):
        first, last = ex["span"]
        if drop_unreachable and last >= max_passage:
            continue
        encoded.append({"k": k, "passage": context_ids[ex["context"]],
                        "question": [index[t] for t in ex["question_tokens"][:max_question]] or [0],
                        "start": first, "end": last})
    return encoded


def _pad(rows: list[list[int]]) -> torch.Tensor:
    out = torch.zeros(len(rows), max(len(r) for r in rows), dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def collate(items: list[dict], device: str) -> dict[str, torch.Tensor]:
    return {"passage": _pad([x["passage"] for x in items]).to(device),
            "question": _pad([x["question"] for x in items]).to(device),
            "start": torch.tensor([x["start"] for x in items], device=device),
            "end": torch.tensor([x["end"] for x in items], device=device)}


def epoch_batches(items: list[dict], batch_size: int, pool_batches: int, gen: torch.Generator) -> list[list[dict]]:
    """Seeded shuffle; within pools of `pool_batches` batches, sort by passage length (less padding); the
    batches are then shuffled again."""
    order = torch.randperm(len(items), generator=gen).tolist()
    pool = batch_size * max(1, pool_batches)
    batches = []
    for p in range(0, len(order), pool):
        chunk = sorted(order[p : p + pool], key=lambda i: len(items[i]["passage"]))
        batches += [[items[i] for i in chunk[b : b + batch_size]] for b in range(0, len(chunk), batch_size)]
    return [batches[i] for i in torch.randperm(len(batches), generator=gen).tolist()]


# ---------------------------------------------------------------- EMA


class EMA:
    """Shadow copy of the trainable weights: theta_ema <- decay theta_ema + (1 - decay) theta."""

    def __init__(self, model: torch.nn.Module, decay: float):
        self.decay, self.steps = decay, 0
        self.shadow = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}

    @torch.no_grad()
    def update(self, model: torch.nn.Module) -> None:
        self.steps += 1
        decay = min(self.decay, (1 + self.steps) / (10 + self.steps))
        for n, p in model.named_parameters():
            if n in self.shadow:
                self.shadow[n].mul_(decay).add_(p.detach(), alpha=1 - decay)

    def averaged(self, model: torch.nn.Module) -> torch.nn.Module:
        return with_weights(model, self.shadow)

    def snapshot(self) -> dict[str, torch.Tensor]:
        return {n: t.clone() for n, t in self.shadow.items()}

    def state_dict(self) -> dict:
        return {"steps": self.steps, "shadow": self.shadow}

    def load_state_dict(self, state: dict) -> None:
        self.steps, self.shadow = state["steps"], state["shadow"]


def with_weights(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> torch.nn.Module:
    """A copy of `model` with the named parameters in `weights` (an EMA shadow) in place of its own."""
    copied = copy.deepcopy(model)
    with torch.no_grad():
        for n, p in copied.named_parameters():
            if n in weights:
                p.copy_(weights[n])
    return copied


# ---------------------------------------------------------------- evaluation


@torch.no_grad()
def evaluate(model: torch.nn.Module, items: list[dict], built: dict, cfg: TrainConfig, device: str) -> dict:
    """EM/F1 (in %) under both decoding rules; the configured one is "em"/"f1"."""
    model.eval()
    predictions: dict[str, dict[str, str]] = {mode: {} for mode in DECODE_MODES}
    order = sorted(range(len(items)), key=lambda i: len(items[i]["passage"]))
    for b in range(0, len(order), cfg.eval_batch_size):
        batch = [items[i] for i in order[b : b + cfg.eval_batch_size]]
        out = model(**{k: v for k, v in collate(batch, device).items() if k in ("passage", "question")})
        for mode in DECODE_MODES:
            spans = decode(out["start"], out["end"], mode, cfg.max_answer_len).tolist()
            for x, (first, last) in zip(batch, spans):
                ex = built["examples"][x["k"]]
                ctx = built["contexts"][ex["context"]]
                predictions[mode][ex["id"]] = token_span_text(ctx["text"], ctx["offsets"], first, last)
    golds = {ex["id"]: ex["answers"] for ex in built["examples"]}
    scores = {mode: squad_scores(predictions[mode], golds) for mode in DECODE_MODES}
    chosen = scores[cfg.decode]
    return {"em": chosen["em"], "f1": chosen["f1"], "n": chosen["n"],
            "by_decode": {mode: {"em": s["em"], "f1": s["f1"]} for mode, s in scores.items()}}


# ---------------------------------------------------------------- the run


def _weights(model: torch.nn.Module) -> dict:
    """State dict without the frozen word vectors (they are rebuilt from GloVe and the vocabulary)."""
    return {k: v for k, v in model.state_dict().items() if k != "embed.weight"}


def stopped_early(cfg: TrainConfig, best: dict | None, epoch: int) -> bool:
    """Whether `patience` epochs have passed since the best validation EM (`epoch`: the last one trained), once
    the run has trained `min_epochs`."""
    return (cfg.patience is not None and best is not None and epoch - best["epoch"] >= cfg.patience
            and epoch >= (cfg.min_epochs or 0))


def _fmt(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def run(cfg: TrainConfig, train_set: dict, test_set: dict, embeddings: np.ndarray | torch.Tensor,
        vocab: list[str], run_dir: str | os.PathLike, log: Callable[[str], None] = print) -> dict:
    """Train one model on `train_set`, evaluate on `test_set` (both data.build_examples output). Resumes from
    run_dir/checkpoint.pt; returns (and writes last) metrics.json."""
    if cfg.decode not in DECODE_MODES:
        raise ValueError(f"decode must be one of {DECODE_MODES}")
    run_dir = Path(run_dir)
    if (run_dir / "metrics.json").is_file():
        return read_json(run_dir / "metrics.json")
    device = resolve_device(cfg.device)
    index = {w: i for i, w in enumerate(vocab)}
    valid_items, valid_set = [], None
    if cfg.valid_articles:
        train_set, valid_set = hold_out_articles(train_set, cfg.valid_articles)
        valid_items = encode(valid_set, index, cfg.eval_max_passage_len, 10**9, drop_unreachable=False)
    train_items = encode(train_set, index, cfg.max_passage_len, cfg.max_question_len, drop_unreachable=True)
    test_items = encode(test_set, index, cfg.eval_max_passage_len, 10**9, drop_unreachable=False)
    if not train_items or not test_items:
        raise ValueError(f"nothing to train on or evaluate: {len(train_items)} train, {len(test_items)} test examples")

    torch.manual_seed(cfg.seed)
    model = build_model(torch.as_tensor(np.asarray(embeddings), dtype=torch.float32), cfg.model, vocab).to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = make_optimizer(cfg, params)
    ema = EMA(model, cfg.ema_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    history = {"epochs": [], "loss_log": [], "step_loss": [], "n_train": len(train_items),
               "n_train_dropped": len(train_set["examples"]) - len(train_items), "n_test": len(test_items),
               "n_valid": len(valid_items)}
    start_epoch, step, spent = 1, 0, 0.0
    best = None        # with valid_articles: {"epoch", "valid", "weights"} of the highest validation EM so far

    checkpoint = run_dir / "checkpoint.pt"
    if checkpoint.is_file():
        state = checkpoints.load(checkpoint)
        if state["config"] != cfg.to_dict():
            raise ValueError(f"{checkpoint} was written with a different config; remove {run_dir} to start over")
        missing, unexpected = model.load_state_dict(state["model"], strict=False)
        if missing != ["embed.weight"] or unexpected:
            raise ValueError(f"{checkpoint}: weights do not fit the model (missing {missing}, unexpected {unexpected})")
        optimizer.load_state_dict(state["optimizer"])
        ema.load_state_dict(state["ema"])
        gen.set_state(state["generator"])
        torch.set_rng_state(state["torch_rng"])
        if state.get("cuda_rng") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])
        history, start_epoch, step, spent = state["history"], state["epoch"] + 1, state["step"], state["seconds"]
        best = state.get("best")
        log(f"resuming from {checkpoint} after epoch {state['epoch']}")

    t0 = time.monotonic() - spent
    for epoch in range(start_epoch, cfg.epochs + 1):
        if stopped_early(cfg, best, epoch - 1):     # checked before each epoch, so that a resumed run stops too
            log(f"stopping after epoch {epoch - 1}: no higher validation EM since epoch {best['epoch']} "
                f"(patience {cfg.patience})")
            break
        model.train()
        total, count = 0.0, 0
        for batch in epoch_batches(train_items, cfg.batch_size, cfg.bucket_batches, gen):
            b = collate(batch, device)
            loss = span_loss(model(b["passage"], b["question"]), b["start"], b["end"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.grad_clip:
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            if cfg.warmup_steps:
                for group in optimizer.param_groups:
                    group["lr"] = cfg.lr * warmup_factor(cfg, step)
            optimizer.step()
            ema.update(model)
            step += 1
            total, count = total + loss.item() * len(batch), count + len(batch)
            history.setdefault("step_loss", []).append(loss.item())   # every batch loss (the loss curves)
            if step % cfg.loss_log_every == 0:
                history["loss_log"].append([step, loss.item()])
        record = {"epoch": epoch, "train_loss": total / count, "steps": step}
        if valid_items:
            record["valid"] = evaluate(ema.averaged(model), valid_items, valid_set, cfg, device)
            if best is None or record["valid"]["em"] > best["valid"]["em"]:
                best = {"epoch": epoch, "valid": record["valid"], "weights": ema.snapshot()}
        elif cfg.eval_every_epoch or epoch == cfg.epochs:
            record["dev"] = evaluate(ema.averaged(model), test_items, test_set, cfg, device)
        elapsed = time.monotonic() - t0
        record["elapsed_s"] = elapsed
        history["epochs"].append(record)
        done = epoch - start_epoch + 1
        remaining = (time.monotonic() - t0 - spent) / done * (cfg.epochs - epoch)
        dev = "".join(f", {k} EM {record[k]['em']:.1f} F1 {record[k]['f1']:.1f}" for k in ("valid", "dev")
                      if k in record)
        log(f"epoch {epoch}/{cfg.epochs}, elapsed {_fmt(elapsed)}, remaining ~{_fmt(remaining)}, "
            f"loss {record['train_loss']:.3f}{dev}")
        checkpoints.save({"config": cfg.to_dict(), "model": _weights(model), "optimizer": optimizer.state_dict(),
                          "ema": ema.state_dict(), "generator": gen.get_state(), "torch_rng": torch.get_rng_state(),
                          "cuda_rng": torch.cuda.get_rng_state_all() if device == "cuda" else None,
                          "history": history, "epoch": epoch, "step": step, "seconds": elapsed, "best": best},
                         checkpoint)
        write_json(run_dir / "history.json", history)

    chosen = ema.averaged(model) if best is None else with_weights(model, best["weights"])
    final = history["epochs"][-1]["dev"] if best is None else evaluate(chosen, test_items, test_set, cfg, device)
    checkpoints.save({"config": cfg.to_dict(), "vocab": vocab, "ema_weights": _weights(chosen)},
                     run_dir / "model.pt")
    metrics = {
        "em": final["em"], "f1": final["f1"], "decode": cfg.decode, "by_decode": final["by_decode"],
        "per_epoch": [{"epoch": r["epoch"], "em": r["dev"]["em"], "f1": r["dev"]["f1"], "train_loss": r["train_loss"]}
                      for r in history["epochs"] if "dev" in r],
        "n_test": final["n"], "n_train": history["n_train"], "n_train_dropped": history["n_train_dropped"],
        "seed": cfg.seed, "config": cfg.to_dict(), "device": device_label(device), "code_commit": code_commit(),
        "train_seconds": history["epochs"][-1]["elapsed_s"],
        "epoch": history["epochs"][-1]["epoch"] if best is None else best["epoch"],   # the weights scored on test
        "epochs_trained": history["epochs"][-1]["epoch"],
        "stopped_early": history["epochs"][-1]["epoch"] < cfg.epochs,
    }
    if best is not None:
        metrics.update(selected_by="validation EM", n_valid=len(valid_items),
                       valid=[{"epoch": r["epoch"], "em": r["valid"]["em"], "f1": r["valid"]["f1"]}
                              for r in history["epochs"]])
    write_json(run_dir / "metrics.json", metrics)
    return metrics


def load_trained(run_dir: str | os.PathLike, embeddings: np.ndarray | torch.Tensor) -> tuple[torch.nn.Module, list[str]]:
    """(model with the EMA weights of run_dir/model.pt, its vocabulary); `embeddings` must be built for that
    vocabulary (glove.embedding_matrix), as the frozen word vectors are not stored."""
    saved = checkpoints.load(Path(run_dir) / "model.pt")
    cfg = TrainConfig.from_dict(saved["config"])
    model = build_model(torch.as_tensor(np.asarray(embeddings), dtype=torch.float32), cfg.model, saved["vocab"])
    missing, unexpected = model.load_state_dict(saved["ema_weights"], strict=False)
    if missing != ["embed.weight"] or unexpected:
        raise ValueError(f"{run_dir}/model.pt does not fit its config (missing {missing}, unexpected {unexpected})")
    return model.eval(), saved["vocab"]


def run_prepared(cfg: TrainConfig, prepared_dir: str | os.PathLike, vectors: dict[str, np.ndarray],
                 run_dir: str | os.PathLike, log: Callable[[str], None] = print) -> dict:
    """run() on a finished data.prepare() folder, with word vectors from glove.load_text/load_kumo."""
    from nlpbench.squad import glove
    from nlpbench.squad.data import load_prepared

    train_set, test_set = load_prepared(prepared_dir, "train"), load_prepared(prepared_dir, "test")
    vocab = glove.build_vocab([c["tokens"] for c in train_set["contexts"] + test_set["contexts"]] +
                              [e["question_tokens"] for e in train_set["examples"] + test_set["examples"]])
    matrix, oov = glove.embedding_matrix(vocab, vectors)
    log(f"vocabulary {len(vocab) - 1} words, {oov} without a vector (zeros)")
    return run(cfg, train_set, test_set, matrix, vocab, run_dir, log)
