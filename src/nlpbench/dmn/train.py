"""Training and evaluation of DMN+ / MoDMN+ / ff-DMN on one bAbI data set (Shen thesis §6.3.2).

Adam at 0.001 [T]; batch 128, up to 256 epochs, early stop when the validation loss has not improved for 20
epochs and keep the epoch with the lowest validation loss, L2 0.001 on every non-bias weight [D: DMN+ paper].
A run owns one torch.Generator per purpose (init, data order, dropout), seeded from its seed as in
nlpbench.memnet.train, so it is deterministic given the seed; the checkpoint holds everything needed to carry
on exactly where it stopped and is written atomically.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from torch.nn import functional as F

from nlpbench.data.babi import Sample, Vocab, vectorize
from nlpbench.dmn.model import DMN, DMNConfig
from nlpbench.runtime import checkpoints
from nlpbench.runtime.progress import Progress

PURPOSES = {"init": 0, "data": 1, "dropout": 2}
CHECKPOINT_FORMAT = "nlpbench-dmn-checkpoint/1"


@dataclass
class DMNTrainConfig:
    """Training settings; the ones the thesis leaves open take the DMN+ paper's values (docs/dmn.md)."""

    lr: float = 0.001              # Adam [T]
    batch_size: int = 128          # [D]
    max_epochs: int = 256          # [D]
    patience: int = 20             # [D] stop after this many epochs without a lower validation loss
    select_by: str = "val_loss"    # [D] the kept epoch: "val_loss" (lowest) | "val_acc" (highest) | "last"
    l2: float = 0.001              # [D] loss += l2 * sum of squares of every non-bias weight
    checkpoint_every: int = 1      # epochs between checkpoints (the last epoch is always saved)
    eval_batch_size: int = 1000

    def check(self) -> None:
        if self.select_by not in ("val_loss", "val_acc", "last"):
            raise ValueError(f"train.select_by: unknown value {self.select_by!r} (expected val_loss, val_acc, last)")
        for key in ("batch_size", "max_epochs", "patience", "checkpoint_every", "eval_batch_size"):
            if getattr(self, key) < 1:
                raise ValueError(f"train.{key}={getattr(self, key)} must be at least 1")


def generator(seed: int, purpose: str) -> torch.Generator:
    """The run's own generator for one purpose (seed * 1000 + purpose id, as nlpbench.memnet.train)."""
    return torch.Generator().manual_seed(seed * 1000 + PURPOSES[purpose])


# -- data --------------------------------------------------------------------------------------------------
@dataclass
class DMNData:
    """Padded tensors per split, with the word vocabulary and the answer classes they were built with."""

    vocab: Vocab
    answers: tuple[str, ...]
    splits: dict[str, dict[str, torch.Tensor]]

    def size(self, split: str) -> int:
        return int(self.splits[split]["answers"].shape[0])


def build_data(splits: Mapping[str, Sequence[Sample]], vocab: Vocab | None = None,
               answers: Sequence[str] | None = None, memory_size: int | None = None) -> DMNData:
    """Vectorise every split. The vocabulary and the answer classes (sorted) come from all the splits unless
    given; give both models of an ensemble the same `answers`. memory_size None: no cap on the facts
    (§6.3.2); otherwise the most recent `memory_size` facts are kept."""
    if "train" not in splits or "val" not in splits:
        raise ValueError(f"DMN data needs 'train' and 'val' splits, got {sorted(splits)}")
    every = [s for samples in splits.values() for s in samples]
    vocab = vocab or Vocab.build(every)
    answers = tuple(answers) if answers is not None else tuple(sorted({s.answer for s in every}))
    index = {a: i for i, a in enumerate(answers)}
    M = memory_size or max((len(s.facts) for s in every), default=1)
    out = {}
    for name, samples in splits.items():
        if not samples:
            raise ValueError(f"split {name!r} is empty")
        missing = next((s for s in samples if s.answer not in index), None)
        if missing is not None:
            raise ValueError(f"{missing.source}: answer {missing.answer!r} is not among the {len(answers)} classes")
        empty = next((s for s in samples if not s.facts), None)
        if empty is not None:
            raise ValueError(f"{empty.source}: question has no story facts")
        arr = vectorize(samples, vocab, memory_size=M)
        out[name] = {"stories": torch.as_tensor(arr["stories"]), "n_facts": torch.as_tensor(arr["n_facts"]),
                     "queries": torch.as_tensor(arr["queries"]),
                     "answers": torch.as_tensor(np.array([index[s.answer] for s in samples], dtype=np.int64))}
    return DMNData(vocab, answers, out)


def batch_of(split: dict[str, torch.Tensor], idx: torch.Tensor, device: torch.device | str = "cpu"
             ) -> dict[str, torch.Tensor]:
    """Rows idx of a split, trimmed to the batch's longest story and sentence (padding is masked anyway),
    on `device`."""
    b = {k: v[idx] for k, v in split.items()}
    M = int(b["n_facts"].max())
    L = max(int((b["stories"][:, :M] != 0).sum(-1).max()), 1)
    Lq = max(int((b["queries"] != 0).sum(-1).max()), 1)
    b["stories"], b["queries"] = b["stories"][:, :M, :L], b["queries"][:, :Lq]
    return {k: v.to(device) for k, v in b.items()}


# -- training ----------------------------------------------------------------------------------------------
class DMNTrainer:
    """One run: a model of `model_cfg.variant` on `data`, trained with `train_cfg` from `seed`."""

    def __init__(self, model_cfg: DMNConfig, train_cfg: DMNTrainConfig, data: DMNData, seed: int,
                 log: Callable[[str], None] = print, device: str = "cpu"):
        train_cfg.check()
        self.model_cfg = dataclasses.replace(model_cfg, n_words=len(data.vocab), n_answers=len(data.answers))
        self.tcfg, self.data, self.seed, self.log = train_cfg, data, seed, log
        self.gens = {p: generator(seed, p) for p in PURPOSES}
        self.device = torch.device(device)
        self.model = DMN(self.model_cfg, self.gens["init"]).to(self.device)   # initialised on the CPU generator
        self.opt = torch.optim.Adam(self.model.parameters(), lr=train_cfg.lr)
        self.epoch, self.bad_epochs, self.done = 0, 0, False
        self.best: dict | None = None          # {"epoch", "val_loss", "val_acc", "model": state dict}
        self.history: list[dict] = []

    # -- state for resuming ------------------------------------------------------------------------------
    def identity(self) -> dict:
        """What a checkpoint must match to be resumed (stopping and bookkeeping keys may change)."""
        train = {k: getattr(self.tcfg, k) for k in ("lr", "batch_size", "l2", "select_by")}
        return {"model": dataclasses.asdict(self.model_cfg), "train": train, "seed": self.seed,
                "sizes": {s: self.data.size(s) for s in self.data.splits}, "answers": list(self.data.answers)}

    def state(self) -> dict:
        return {"format": CHECKPOINT_FORMAT, "identity": self.identity(), "epoch": self.epoch,
                "bad_epochs": self.bad_epochs, "done": self.done, "best": self.best, "history": self.history,
                "model": self.model.state_dict(), "opt": self.opt.state_dict(),
                "gens": {p: g.get_state() for p, g in self.gens.items()}}

    def load_state(self, state: dict, where: str = "checkpoint") -> None:
        if state.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{where}: key 'format' is {state.get('format')!r}, expected {CHECKPOINT_FORMAT!r}")
        mine = self.identity()
        for key, value in mine.items():
            if state["identity"].get(key) != value:
                raise ValueError(f"{where}: key 'identity.{key}' differs from this run's; delete the checkpoint "
                                 "or use the configuration it was written with")
        self.epoch, self.bad_epochs, self.done = state["epoch"], state["bad_epochs"], state["done"]
        self.best, self.history = state["best"], state["history"]
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        for p, g in self.gens.items():
            g.set_state(state["gens"][p])

    def save(self, path: Path) -> None:
        checkpoints.save(self.state(), path)

    # -- one epoch ---------------------------------------------------------------------------------------
    def l2_term(self) -> torch.Tensor:
        """sum of squares of every non-bias weight (matrices and embeddings) [D]."""
        return sum((p.pow(2).sum() for p in self.model.parameters() if p.dim() > 1),
                   torch.zeros((), device=self.device))

    def train_epoch(self) -> dict:
        self.epoch += 1
        self.model.train()
        train = self.data.splits["train"]
        N, B = self.data.size("train"), self.tcfg.batch_size
        perm = torch.randperm(N, generator=self.gens["data"])
        total, n_batches = 0.0, 0
        t0 = time.perf_counter()
        for start in range(0, N, B):                     # the last batch may be smaller
            b = batch_of(train, perm[start:start + B], self.device)
            logits = self.model(b["stories"], b["n_facts"], b["queries"], generator=self.gens["dropout"])
            ce = F.cross_entropy(logits, b["answers"])    # eq. 6.6: batch mean
            loss = ce + self.tcfg.l2 * self.l2_term() if self.tcfg.l2 else ce
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            total += float(ce.detach())
            n_batches += 1
        seconds = time.perf_counter() - t0
        val_loss, val_acc = self.loss_and_accuracy("val")
        record = {"epoch": self.epoch, "train_ce": total / n_batches, "val_loss": val_loss, "val_acc": val_acc,
                  "seconds": seconds, "ms_per_batch": 1000 * seconds / n_batches}
        self.history.append(record)
        self._select(record)
        return record

    def _select(self, rec: dict) -> None:
        """Keep the selected epoch's weights; early stopping counts epochs without a lower val loss."""
        key = self.tcfg.select_by
        better = (self.best is None or key == "last"
                  or (key == "val_loss" and rec["val_loss"] < self.best["val_loss"])
                  or (key == "val_acc" and rec["val_acc"] > self.best["val_acc"]))
        if better:
            self.best = {"epoch": rec["epoch"], "val_loss": rec["val_loss"], "val_acc": rec["val_acc"],
                         "model": copy.deepcopy(self.model.state_dict())}
        best_loss = min(h["val_loss"] for h in self.history[:-1]) if len(self.history) > 1 else float("inf")
        self.bad_epochs = 0 if rec["val_loss"] < best_loss else self.bad_epochs + 1
        self.done = self.bad_epochs >= self.tcfg.patience or self.epoch >= self.tcfg.max_epochs

    def fit(self, checkpoint: str | Path | None = None, max_new_epochs: int | None = None) -> bool:
        """Train until early stopping or max_epochs (resuming from `checkpoint` if it exists); with
        `max_new_epochs`, stop after that many epochs in this call. Returns True when training is finished."""
        path = Path(checkpoint) if checkpoint is not None else None
        if path is not None and path.exists():
            self.load_state(checkpoints.load(path, map_location=self.device), where=str(path))
            self.log(f"resumed from {path} at epoch {self.epoch}")
        new = 0
        progress = Progress(self.tcfg.max_epochs, start=self.epoch)
        while not self.done and (max_new_epochs is None or new < max_new_epochs):
            rec = self.train_epoch()
            new += 1
            self.log(f"{progress.line(self.epoch, at_most=True)} (early stopping: patience {self.tcfg.patience}): "
                     f"train ce {rec['train_ce']:.4f} val loss {rec['val_loss']:.4f} "
                     f"val acc {rec['val_acc']:.3f} {rec['ms_per_batch']:.1f} ms/batch")
            if path is not None and (self.done or self.epoch % self.tcfg.checkpoint_every == 0):
                self.save(path)
        if path is not None and new == 0 and not path.exists():
            self.save(path)
        return self.done

    # -- evaluation --------------------------------------------------------------------------------------
    @torch.no_grad()
    def logits(self, split: str, model: DMN | None = None) -> torch.Tensor:
        """Logits (N, A) on a split in eval mode (no dropout); default: the current weights."""
        model = model or self.model
        was_training = model.training
        model.eval()
        data = self.data.splits[split]
        N, chunk = self.data.size(split), self.tcfg.eval_batch_size
        parts = []
        for s in range(0, N, chunk):
            b = batch_of(data, torch.arange(s, min(s + chunk, N)), self.device)
            parts.append(model(b["stories"], b["n_facts"], b["queries"]))
        model.train(was_training)
        return torch.cat(parts)

    def loss_and_accuracy(self, split: str, model: DMN | None = None) -> tuple[float, float]:
        logits = self.logits(split, model)
        answers = self.data.splits[split]["answers"].to(logits.device)
        return float(F.cross_entropy(logits, answers)), float((logits.argmax(-1) == answers).float().mean())

    def selected_model(self) -> DMN:
        """A copy of the model with the selected epoch's weights (lowest validation loss by default);
        the trainer's own model keeps its latest weights, so training can go on."""
        if self.best is None:
            raise RuntimeError("no epoch trained yet: call fit() first")
        model = copy.deepcopy(self.model)
        model.load_state_dict(self.best["model"])
        return model.eval()

    def probabilities(self, split: str) -> torch.Tensor:
        """Softmax outputs P (N, A) of the selected weights (eq. 6.5): what the ensemble averages."""
        return torch.softmax(self.logits(split, self.selected_model()), -1)

    def evaluate(self, splits: Sequence[str] | None = None) -> dict[str, float]:
        """Accuracy per split (eq. 6.7 argmax against the gold class) with the selected weights."""
        model = self.selected_model()
        return {s: self.loss_and_accuracy(s, model)[1] for s in (splits or list(self.data.splits))}
