"""Training several DMN runs together (nlpbench.dmn.grouped) with each run's own bookkeeping.

Each run stays a `DMNTrainer` (nlpbench.dmn.train): its generators (init, data order, dropout), its epoch count,
history, early stopping (patience) and selected epoch, and its checkpoint, in the format a run trained alone
writes, so a run can resume alone what it began in a group and the other way round. What the group shares is
the pass: every epoch each run draws its own order of its own training set, and step k trains the k-th batch of
every run at once (weights stacked, Adam per run with its own step count: grouped.GroupAdam). A run whose early
stopping fires leaves the group after that epoch; the others carry on. A group of one is the run's own trainer
(the readable model, bit for bit).
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Callable, Sequence

import torch

from nlpbench.dmn.grouped import GroupAdam, GroupedDMN, adam_moments, collate, set_adam_state
from nlpbench.dmn.train import DMNTrainer, batch_of
from nlpbench.runtime import checkpoints
from nlpbench.runtime.progress import Progress

SHARED_TRAIN_KEYS = ("lr", "batch_size", "l2", "eval_batch_size")   # what the runs of one pass must agree on


def stack_trainers(trainers: Sequence[DMNTrainer]) -> tuple[GroupedDMN, GroupAdam]:
    """The pass over these runs: their models' weights stacked, and their Adam states (step counts, moments)."""
    names = [n for n, _ in trainers[0].model.named_parameters()]
    engine = GroupedDMN([t.model for t in trainers], device=trainers[0].device)
    states = [adam_moments(t.opt, names) for t in trainers]
    moments = {n: tuple(engine.stack([s[1][n][k] for s in states], n) for k in (0, 1)) for n in names}
    return engine, GroupAdam(engine.params, trainers[0].tcfg.lr, steps=[s[0] for s in states], moments=moments)


def train_step(engine: GroupedDMN, adam: GroupAdam, batches: list[dict[str, torch.Tensor]],
               generators: list[torch.Generator], l2: float, stepping: list[bool] | None = None) -> list[float]:
    """One training step of every run on its own batch (nlpbench.dmn.train.batch_of's): the forward pass with
    each run's dropout generator, eq. 6.6's batch mean plus the L2 term, backward, Adam per run. A run that
    `stepping` marks false is left exactly as it is (its generator untouched). Returns each run's cross-entropy."""
    stepping = stepping or [True] * len(batches)
    batch = collate(batches, engine.device)
    gens = generators if all(stepping) else [g if go else torch.Generator() for g, go in zip(generators, stepping)]
    ce = engine.losses(engine.forward(batch, gens, training=True), batch)
    loss = ce + l2 * engine.l2_terms() if l2 else ce
    adam.zero_grad()
    (loss * torch.tensor(stepping, dtype=loss.dtype, device=loss.device)).sum().backward()
    engine.zero_pad_grads()
    adam.step(stepping)
    return ce.detach().tolist()


class GroupTrainer:
    """Trains `trainers` (runs of one model config; data, seeds and stopping keys may differ) in one pass."""

    def __init__(self, trainers: Sequence[DMNTrainer], log: Callable[[str], None] = print):
        if not trainers:
            raise ValueError("a DMN group needs at least one run")
        first = trainers[0]
        for t in trainers[1:]:
            for key in SHARED_TRAIN_KEYS:
                if getattr(t.tcfg, key) != getattr(first.tcfg, key):
                    raise ValueError(f"runs of one DMN group differ in train.{key}: {getattr(first.tcfg, key)!r} "
                                     f"vs {getattr(t.tcfg, key)!r}")
            if t.device != first.device:
                raise ValueError(f"runs of one DMN group are on {first.device} and {t.device}")
        self.trainers, self.log = list(trainers), log
        self.names = [n for n, _ in first.model.named_parameters()]

    def fit(self, checkpoint_paths: Sequence[str | Path | None] | None = None,
            max_new_epochs: int | None = None) -> list[bool]:
        """Train every run until its early stopping or max_epochs, each resuming from its checkpoint where that
        exists (DMNTrainer.fit's semantics, per run); returns each run's `done`."""
        paths = [Path(p) if p is not None else None for p in (checkpoint_paths or [None] * len(self.trainers))]
        if len(paths) != len(self.trainers):
            raise ValueError(f"{len(paths)} checkpoint paths for {len(self.trainers)} runs")
        if len(self.trainers) == 1:                       # a group of one: the readable model itself
            return [self.trainers[0].fit(paths[0], max_new_epochs)]
        for t, path in zip(self.trainers, paths):
            if path is not None and path.exists():
                t.load_state(checkpoints.load(path, map_location=t.device), where=str(path))
                t.log(f"resumed from {path} at epoch {t.epoch}")
        active = [i for i, t in enumerate(self.trainers) if not t.done]
        self.progress = {i: Progress(t.tcfg.max_epochs, start=t.epoch) for i, t in enumerate(self.trainers)}
        new = 0
        if active:
            engine, adam = self._stack(active)
            while active and (max_new_epochs is None or new < max_new_epochs):
                self._epoch(active, engine, adam)
                new += 1
                for r, i in enumerate(active):
                    self._checkpoint(i, engine, adam, r, paths[i])
                leaving = [i for i in active if self.trainers[i].done]
                if leaving:
                    stay = [k for k, i in enumerate(active) if not self.trainers[i].done]
                    active = [active[k] for k in stay]
                    if active:
                        engine.keep(stay)
                        adam.keep(stay, engine.params)
            for r, i in enumerate(active):                 # stopped by max_new_epochs: the state in memory too
                self._sync_optimizer(i, engine, adam, r)
        for t, path in zip(self.trainers, paths):
            if path is not None and not path.exists():
                t.save(path)
        return [t.done for t in self.trainers]

    # -- the pass ----------------------------------------------------------------------------------------
    def _stack(self, active: list[int]) -> tuple[GroupedDMN, GroupAdam]:
        return stack_trainers([self.trainers[i] for i in active])

    def _epoch(self, active: list[int], engine: GroupedDMN, adam: GroupAdam) -> None:
        trainers = [self.trainers[i] for i in active]
        B = trainers[0].tcfg.batch_size
        orders, n_batches = [], []
        for t in trainers:
            t.epoch += 1
            t.model.train()
            N = t.data.size("train")
            orders.append(torch.randperm(N, generator=t.gens["data"]))
            n_batches.append(math.ceil(N / B))
        totals = [0.0] * len(trainers)
        gens = [t.gens["dropout"] for t in trainers]
        t0 = time.perf_counter()
        for k in range(max(n_batches)):
            stepping = [k < n for n in n_batches]
            # a run whose epoch has ended repeats its last batch, untrained (its loss and step are not taken)
            batches = [batch_of(t.data.splits["train"], order[min(k, n - 1) * B:(min(k, n - 1) + 1) * B])
                       for t, order, n in zip(trainers, orders, n_batches)]
            ce = train_step(engine, adam, batches, gens, trainers[0].tcfg.l2, stepping)
            for r, value in enumerate(ce):
                if stepping[r]:
                    totals[r] += value
        seconds = time.perf_counter() - t0
        for r, t in enumerate(trainers):                   # each run's weights back into its readable model
            t.model.load_state_dict(engine.run_tensors(r, engine.params), strict=False)
        val = self._validation(trainers, engine)
        share = seconds / len(trainers)                    # the pass's time, shared by its runs
        for r, (i, t) in enumerate(zip(active, trainers)):
            val_loss, val_acc = val[r]
            rec = {"epoch": t.epoch, "train_ce": totals[r] / n_batches[r], "val_loss": val_loss, "val_acc": val_acc,
                   "seconds": share, "ms_per_batch": 1000 * share / n_batches[r], "runs_in_pass": len(trainers)}
            t.history.append(rec)
            t._select(rec)
            t.log(f"{self.progress[i].line(t.epoch, at_most=True)} (early stopping: patience {t.tcfg.patience}; "
                  f"{len(trainers)} runs in the pass): train ce {rec['train_ce']:.4f} val loss {val_loss:.4f} "
                  f"val acc {val_acc:.3f} {rec['ms_per_batch']:.1f} ms/batch per run")

    @torch.no_grad()
    def _validation(self, trainers: list[DMNTrainer], engine: GroupedDMN) -> list[tuple[float, float]]:
        """Each run's validation loss and accuracy (eval mode), all runs in one pass per chunk."""
        chunk = trainers[0].tcfg.eval_batch_size
        sizes = [t.data.size("val") for t in trainers]
        logits = [[] for _ in trainers]
        for s in range(0, max(sizes), chunk):
            parts = [batch_of(t.data.splits["val"], torch.arange(min(s, n - 1), min(s + chunk, n)))
                     for t, n in zip(trainers, sizes)]
            batch = collate(parts, engine.device)
            out = engine.forward(batch, training=False)
            for r, (t, n) in enumerate(zip(trainers, sizes)):
                if s < n:
                    logits[r].append(out[r, :min(s + chunk, n) - s, :len(t.data.answers)])
        result = []
        for r, t in enumerate(trainers):
            lg = torch.cat(logits[r])
            gold = t.data.splits["val"]["answers"].to(lg.device)
            result.append((float(torch.nn.functional.cross_entropy(lg, gold)),
                           float((lg.argmax(-1) == gold).float().mean())))
        return result

    def _sync_optimizer(self, i: int, engine: GroupedDMN, adam: GroupAdam, r: int) -> None:
        """Run i (row r of the pass): its step count and moments back into its own torch Adam."""
        moments = {n: (engine.unpad(r, n, adam.moments[n][0][r]), engine.unpad(r, n, adam.moments[n][1][r]))
                   for n in self.names}
        set_adam_state(self.trainers[i].opt, self.names, adam.steps[r], moments)

    def _checkpoint(self, i: int, engine: GroupedDMN, adam: GroupAdam, r: int, path: Path | None) -> None:
        """Run i's checkpoint where one is due (as DMNTrainer.fit: every checkpoint_every epochs and when it is
        done), in the format of a run trained alone."""
        t = self.trainers[i]
        if path is None or not (t.done or t.epoch % t.tcfg.checkpoint_every == 0):
            return
        self._sync_optimizer(i, engine, adam, r)
        t.save(path)
