"""Training and MC-sampled evaluation of MemN2N / t-MEM-NN, many runs in one vectorised pass.

Thesis §6.4.1: Adagrad, eta = 0.01 halved every 25 epochs, 100 epochs, batch size 32, 900/100
train/validation split, N(0, 0.1^2) initialisation; t-MEM-NN trains on one MC sample from the escort
(eqs. 60-62) and predicts with the average over S samples (§6.3.3). Each run keeps its own generators, data
order, optimiser state and clipping, so a run trained in a group gives the numbers it gives alone.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch.nn import functional as F

from nlpbench.memnet.data import TaskTensors, gather, stack_sentences, stack_split
from nlpbench.memnet.engine import GroupedMemNet
from nlpbench.memnet.model import MemN2N, MemNetConfig
from nlpbench.runtime import checkpoints
from nlpbench.runtime.progress import Progress

PURPOSES = {"init": 0, "data": 1, "noise": 2, "eval": 3}
DRAW_RUNS = 32      # at evaluation, weight draws side by side up to this many pseudo-runs (draws x runs) per pass


@dataclass
class Run:
    run_id: str
    data_index: int     # which TaskTensors of the group this run trains on
    seed: int


@dataclass
class TrainConfig:
    optimizer: str = "sgd"         # the thesis's footnoted code | "adagrad" (its text; reading: docs/memnet.md)
    epochs: int = 100
    batch_size: int = 32
    lr: float = 0.01
    lr_halve_every: int = 25
    adagrad_initial_accumulator: float = 0.1
    clip_norm: float | None = 40.0
    clip_scope: str = "tensor"     # "tensor" (each gradient tensor clipped alone) | "global" (a run's whole gradient)
    grad_noise_std: float = 0.001  # Gaussian gradient noise, as the footnoted code (0: none)
    drop_last: bool = True         # drop the last partial minibatch of an epoch (False: train on it too)
    checkpoint_every: int = 10
    loss_reduction: str = "sum"    # "sum" over the minibatch (as the reference code) or "mean"
    track_test_samples: tuple[int, ...] = ()   # test accuracy after every epoch with these S (Fig. 16)


@dataclass
class BayesConfig:
    prior_dof: float = 100.0
    learn_prior_dof: bool = False
    tie_prior_dof: bool = True           # nu_p := nu_Theta per matrix: eq. 56 is then an exact t-divergence
    train_samples: int = 1
    test_samples: tuple[int, ...] = (1, 10)
    test_sampling: str = "posterior"     # "posterior" (q, §6.3.3) or "escort" (q~, as in training)
    test_draws: str = "sequential"       # S test draws: "sequential" (S draw calls) or "batched" (one per run and
                                         # matrix: the same distribution, other numbers; the S = 10 timing benchmark)
    divergence_weight: float = 0.1       # multiplies sum_Theta D_t / N_train (reading A-4)


def generator(seed: int, purpose: str, device) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed * 1000 + PURPOSES[purpose])


def learning_rate(cfg: TrainConfig, epoch: int) -> float:
    """eta halved every `lr_halve_every` epochs: epochs 1-25 use 0.01, 26-50 0.005, ..."""
    return cfg.lr * 0.5 ** ((epoch - 1) // cfg.lr_halve_every)


def clip_per_run(params, max_norm: float, scope: str = "tensor") -> None:
    """Gradient-norm clipping, done separately for each run (leading axis K): each tensor by its own norm
    (scope "tensor") or all of a run's gradients by their joint norm (scope "global"). A parameter that holds
    several matrices per run (`lead_dims` 2: (K, n, ...), StudentTMatrix with a matrix axis) counts as n
    tensors, each clipped by its own norm."""
    params = [p for p in params if p.grad is not None]
    grads = [p.grad for p in params]
    if scope == "tensor":
        leads = [getattr(p, "lead_dims", 1) for p in params]
        norms = [g.reshape(g.shape[:lead] + (-1,)).norm(dim=-1) for g, lead in zip(grads, leads)]
    elif scope == "global":
        total = torch.stack([g.reshape(g.shape[0], -1).pow(2).sum(1) for g in grads]).sum(0).sqrt()
        norms = [total] * len(grads)
    else:
        raise ValueError(f"memnet.train.clip_scope: unknown value {scope!r} (expected 'tensor' or 'global')")
    for g, norm in zip(grads, norms):
        factor = (max_norm / (norm + 1e-6)).clamp(max=1.0)
        g.mul_(factor.view(tuple(norm.shape) + (1,) * (g.dim() - norm.dim())))


def train_step(model: MemN2N, opt: torch.optim.Optimizer, batch: dict[str, torch.Tensor], n_train: int,
               divergence_weight: float = 0.1, clip_norm: float | None = 40.0) -> torch.Tensor:
    """One minibatch of the readable one-run model (memnet.model, the loop a user would write without the group
    trainer; the timing benchmark's baseline): its loss (eq. 55), backward, each gradient tensor clipped at
    `clip_norm`, one optimiser step. `batch`: padded_split's tensors for the minibatch."""
    loss = model.loss(batch["stories"], batch["n_facts"], batch["queries"], batch["answers"], n_train,
                      divergence_weight=divergence_weight)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    if clip_norm:
        for p in model.parameters():
            torch.nn.utils.clip_grad_norm_(p, clip_norm)
    opt.step()
    return loss.detach()


def bucket_runs(longest: list[int], memory_size: int, max_buckets: int = 3, overhead: float = 0.04) -> list[list[int]]:
    """Split runs into at most `max_buckets` groups by the longest story of their data, minimising the memory
    slots computed per step (sum over buckets of runs x longest story), plus `overhead` x K x memory_size per
    extra bucket for its extra pass. Returns run indices per bucket, shortest stories first."""
    order = sorted(range(len(longest)), key=lambda k: longest[k])
    L = [min(longest[k], memory_size) for k in order]
    K, penalty = len(L), overhead * len(L) * memory_size
    best = {(0, 0): (0.0, [])}                   # (runs placed, buckets used) -> (cost, cut points)
    for used in range(max_buckets):
        for (i, b), (cost, cuts) in list(best.items()):
            if b != used or i == K:
                continue
            for j in range(i + 1, K + 1):        # next bucket: sorted runs i..j-1, sized by the longest, L[j-1]
                c = cost + (j - i) * L[j - 1] + (penalty if b else 0.0)
                if (j, b + 1) not in best or c < best[(j, b + 1)][0]:
                    best[(j, b + 1)] = (c, cuts + [j])
    _, cuts = min(v for (i, _), v in best.items() if i == K)
    return [order[a:b] for a, b in zip([0] + cuts[:-1], cuts)]


WHOLE_TABLE_RATIO = 15.0   # "auto": a table of at most this many sentences per memory slot is read whole (measured:
                           # `nlpbench output tolias-thesis timing`, gather against whole table)


def whole_table_rows(memory_read: str, counts: torch.Tensor, slots: torch.Tensor) -> int | None:
    """Rows per run of the padded sentence tables when a pass reads them whole (GroupedMemNet.forward), else None (the
    slots' rows are gathered). counts (K,): each run's distinct sentences; slots (K,): its memory slots used."""
    rows = int(counts.max())
    if memory_read == "gather":
        return None
    if memory_read == "whole_table":
        return rows
    if memory_read == "auto":
        return rows if rows <= WHOLE_TABLE_RATIO * int(slots.max()) else None
    raise ValueError(f"model.memory_read: unknown value {memory_read!r} (expected 'gather', 'whole_table' or 'auto')")


class GroupTrainer:
    """Trains K runs of one model configuration together."""

    def __init__(self, runs: list[Run], datasets: list[TaskTensors], model_cfg: MemNetConfig,
                 train_cfg: TrainConfig, bayes_cfg: BayesConfig | None, device="cpu",
                 log: Callable[[str], None] = print):
        self.runs, self.datasets, self.device, self.log = runs, datasets, torch.device(device), log
        self.tcfg, self.bcfg = train_cfg, bayes_cfg
        self.data_of_run = torch.tensor([r.data_index for r in runs], device=self.device)
        self.split = {s: stack_split(datasets, s, self.device) for s in ("train", "val", "test")}
        sizes = {int(self.split["train"]["size"][r.data_index]) for r in runs}
        if len(sizes) != 1:
            raise ValueError(f"runs trained together need equal training-set sizes, got {sorted(sizes)}")
        self.n_train = sizes.pop()
        self.gens = {p: [generator(r.seed, p, "cpu" if p in ("init", "data") else self.device) for r in runs]
                     for p in PURPOSES}
        n_words = max(d.n_words for d in datasets)
        self.model_cfg = dataclasses.replace(model_cfg, n_words=n_words)
        vocab_sizes = [datasets[r.data_index].n_words for r in runs]
        longest = [max(int(datasets[r.data_index].splits[s]["n_facts"].max()) for s in ("train", "val", "test"))
                   for r in runs]
        self.model = GroupedMemNet(self.model_cfg, vocab_sizes, self.gens["init"], time_rows=longest).to(self.device)
        self.tables = stack_sentences(datasets, self.device)            # each run's own sentence table
        bags = self._bags

        # Runs whose stories are short go through the memory in their own pass, which computes only the slots
        # their stories fill (GroupedMemNet.forward); each bucket has its own slice of the sentence tables, and the
        # table of all runs in run order (`sentences`) is built only when there is one bucket.
        self.buckets = [torch.tensor(b, device=self.device) for b in bucket_runs(longest, model_cfg.memory_size)]
        if len(self.buckets) == 1:
            self.sentences = bags(torch.arange(len(runs), device=self.device))
            self.bucket_sentences = [self.sentences]
        else:
            self.sentences = None                                       # forward goes bucket by bucket
            self.bucket_sentences = [bags(b) for b in self.buckets]
        self.bucket_order = torch.argsort(torch.cat(self.buckets))     # rows of the concatenated buckets -> runs
        read_of = {k: "gather" if s["bags"]["rows_per_run"] is None else "whole_table"
                   for b, s in zip(self.buckets, self.bucket_sentences) for k in b.tolist()}
        self.memory_reads = [read_of[k] for k in range(len(runs))]     # how each run's passes read its memory
        # how t-MEM-NN's Student-t draw and divergence run here (eager | compiled; nn.kernels); None: no such posterior
        posterior = getattr(self.model, "posterior", None)
        self.posterior_kernels = getattr(posterior, "kernels_used", None)
        self.hop_kernels = self.model.hop_kernels_used                 # how the memory hops run here (eager | compiled)
        self._draw_layouts: dict[int, tuple] = {}                       # n draws side by side -> see forward_draws
        self._draw_bags: dict[tuple[int, int], dict] = {}               # (n, bucket) -> its pseudo-runs' tables
        self._word_weights = None                                       # the tables for own_sentences, when asked
        params = list(self.model.parameters())
        K = len(runs)
        self.prior_log_nu = None
        if self.model_cfg.bayesian:
            self.prior_log_nu = torch.nn.Parameter(torch.full((K,), math.log(bayes_cfg.prior_dof), device=self.device),
                                                   requires_grad=bayes_cfg.learn_prior_dof)
            if bayes_cfg.learn_prior_dof:
                params.append(self.prior_log_nu)
        self.params = params
        if train_cfg.optimizer == "adagrad":
            self.opt = torch.optim.Adagrad(params, lr=train_cfg.lr,
                                           initial_accumulator_value=train_cfg.adagrad_initial_accumulator)
        elif train_cfg.optimizer == "sgd":
            self.opt = torch.optim.SGD(params, lr=train_cfg.lr, foreach=True)
        else:
            raise ValueError(f"memnet.train.optimizer: unknown optimizer {train_cfg.optimizer!r}")
        self.epoch = 0
        self.history: list[dict] = []
        self._noise_layout = None                                       # add_gradient_noise's, built on first use

    # -- state for resuming ------------------------------------------------------------------------------
    def state(self) -> dict:
        return {"run_ids": [r.run_id for r in self.runs], "epoch": self.epoch, "model": self.model.state_dict(),
                "opt": self.opt.state_dict(), "prior_log_nu": self.prior_log_nu, "history": self.history,
                "gens": {p: [g.get_state() for g in gs] for p, gs in self.gens.items()}}

    def load_state(self, state: dict) -> None:
        self.epoch = state["epoch"]
        self.model.load_state_dict(state["model"])
        self.opt.load_state_dict(state["opt"])
        if self.prior_log_nu is not None:
            self.prior_log_nu.data.copy_(state["prior_log_nu"].data)
        self.history = state["history"]
        for p, gs in self.gens.items():
            for g, s in zip(gs, state["gens"][p]):
                g.set_state(s)

    def holds_these_runs(self, state: dict) -> bool:
        """Whether a checkpoint's state is of this trainer's runs (checkpoints written before run ids were
        recorded: whether its tensors have this group's shapes)."""
        own = self.model.state_dict()
        theirs = state["model"]
        same_layout = own.keys() == theirs.keys() and all(own[k].shape == theirs[k].shape for k in own)
        if "run_ids" in state:      # and the parameters laid out as this code lays them (an older layout restarts)
            return state["run_ids"] == [r.run_id for r in self.runs] and same_layout
        return same_layout

    def _bags(self, runs_at: torch.Tensor) -> dict:
        """The sentence tables of the runs `runs_at` (a run may appear more than once) as one sparse matrix, laid
        out for the way `memory_read` reads them (see `whole_table_rows`)."""
        d = self.data_of_run[runs_at]
        t = self.tables
        rows = whole_table_rows(self.model_cfg.memory_read, t["count"][d], self.model.slots[runs_at])
        return {"bags": self.model.sentence_bags(t["tokens"][d], t["len"][d], t["width"][d], t["count"][d], rows)}

    # -- forward pass ------------------------------------------------------------------------------------
    def forward(self, batch: dict[str, torch.Tensor], weights: dict[str, torch.Tensor], attention: bool = False):
        """GroupedMemNet.forward for every run, bucket by bucket (see `bucket_runs`), back in run order."""
        if len(self.buckets) == 1:
            return self.model(batch, weights, self.sentences, return_attention=attention)
        outs = [self.model({k: v[b] for k, v in batch.items()}, {n: w[b] for n, w in weights.items()}, sentences,
                           return_attention=attention, runs=b)
                for b, sentences in zip(self.buckets, self.bucket_sentences)]
        if not attention:
            return torch.cat(outs)[self.bucket_order]
        return tuple(torch.cat(parts)[self.bucket_order] for parts in zip(*outs))

    def forward_draws(self, batch: dict[str, torch.Tensor], weights: dict[str, torch.Tensor], n: int,
                      own_sentences: bool = False) -> torch.Tensor:
        """Logits (n, K, B, V) for n weight draws (GroupedMemNet.draws: (n K, V, d), draw-major) in one pass: draw s of
        run k is pseudo-run s K + k, which reads run k's questions, sentences and masks (GroupedMemNet.forward's
        `runs`). Equal to n calls of forward.

        own_sentences: each pass embeds only the batch's own sentences (GroupedMemNet.own_sentences), not every run's
        whole sentence table; cheaper for a few questions (answering one at a time), dearer for a full batch.
        The same numbers up to the order of floating-point sums; training and the tables' evaluation use the
        whole tables."""
        K = len(self.runs)
        if n == 1 and not own_sentences:
            return self.forward(batch, weights).unsqueeze(0)
        if n not in self._draw_layouts:
            layout = []
            for b in self.buckets:
                pseudo = torch.cat([b + s * K for s in range(n)])
                layout.append((pseudo, b.repeat(n)))                   # and the real run of each pseudo-run
            pseudo = torch.cat([p for p, _ in layout])
            identity = len(layout) == 1 and torch.equal(pseudo, torch.arange(n * K, device=self.device))
            self._draw_layouts[n] = (layout, torch.argsort(pseudo), identity)
        layout, order, identity = self._draw_layouts[n]
        outs = []
        for i, (pseudo, runs_at) in enumerate(layout):
            draws = weights if identity else {m: w[pseudo] for m, w in weights.items()}
            questions = {k: v[runs_at] for k, v in batch.items()}
            if own_sentences:
                if self._word_weights is None:
                    self._word_weights = self.model.word_weights(self.tables)
                sentences, questions = self.model.own_sentences(self._word_weights, self.data_of_run[runs_at],
                                                                questions)
            else:
                if (n, i) not in self._draw_bags:
                    self._draw_bags[(n, i)] = self._bags(runs_at)
                sentences = self._draw_bags[(n, i)]
            outs.append(self.model(questions, draws, sentences, runs=runs_at))
        logits = torch.cat(outs)
        logits = logits if identity else logits[order]
        return logits.view(n, K, *logits.shape[1:])

    # -- training ----------------------------------------------------------------------------------------
    def loss(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-run objective (K,): mean cross-entropy + sum_Theta D_t(q||p) / N (eqs. 54-55, reading A-4)."""
        bayes = self.model_cfg.bayesian
        weights = self.model.draw(self.gens["noise"], "escort" if bayes else "mean")  # one MC sample
        logits = self.forward(batch, weights)
        K, B, V = logits.shape
        ce = F.cross_entropy(logits.reshape(K * B, V), batch["answers"].reshape(-1), reduction="none")
        ce = ce.view(K, B).sum(1)
        # (N/|M|) sum_M CE + D_t (eq. 55 on a minibatch, reading A-4), scaled by |M|/N, or by 1/N for "mean"
        scale = 1.0 if self.tcfg.loss_reduction == "sum" else 1.0 / B
        if not bayes:
            return ce * scale, ce / B
        div = self.model.divergence(None if self.bcfg.tie_prior_dof else self.prior_log_nu.exp())
        return scale * (ce + self.bcfg.divergence_weight * div * B / self.n_train), ce / B

    def add_gradient_noise(self, std: float) -> None:
        """N(0, std^2) added to the gradient of every element a run owns (its own rows of each matrix, all of its
        scalars). Run k's noise comes from one call of its own generator, in parameter order, so a run in a
        group gets the numbers it gets alone (the padding rows of a group's larger vocabulary draw none)."""
        if self._noise_layout is None:
            self._noise_layout = self._gradient_noise_placement()
        sizes, places = self._noise_layout
        noise = torch.cat([torch.randn(n, generator=g, device=self.device) for n, g in zip(sizes, self.gens["noise"])]
                          + [torch.zeros(1, device=self.device)])        # the last: the zero of unowned elements
        for p, place in zip(self.params, places):
            if p.grad is not None:      # std * noise, then added: index_add_(alpha=std)'s numbers (add_'s alpha fuses)
                p.grad.add_(noise.index_select(0, place).mul_(std).view_as(p.grad))

    def _gradient_noise_placement(self) -> tuple[list[int], list[torch.Tensor]]:
        """`_gradient_noise_layout` as one gather per parameter: for each element its place in the runs' draws,
        or the zero appended after them where no run owns it (one dense gather and add, no scatter)."""
        sizes, targets = self._gradient_noise_layout()
        places = []
        for p, (at, picks) in zip(self.params, targets):
            place = torch.full((p.numel(),), sum(sizes), dtype=torch.long, device=self.device)
            places.append(place.index_copy_(0, at, picks))
        return sizes, places

    def _gradient_noise_layout(self) -> tuple[list[int], list[tuple[torch.Tensor, torch.Tensor]]]:
        """Each run's count of noisy elements, and per parameter the flat positions its noise goes to with
        their places in the runs' concatenated draws (run after run; in a run, parameter after parameter)."""
        K, cfg = len(self.runs), self.model_cfg
        vocab = [self.datasets[r.data_index].n_words for r in self.runs]
        own = []                                          # per parameter, per run: flat ids in the run's slice
        for p in self.params:
            lead = getattr(p, "lead_dims", 1)             # (K,) or (K, n matrices), then a matrix or a scalar
            n_mat, inner = math.prod(p.shape[1:lead]), tuple(p.shape[lead:])
            if not inner:                                 # one scalar per matrix (nu_Theta, a prior's dof)
                own.append([torch.arange(n_mat)] * K)
                continue
            if len(inner) != 2 or inner[0] not in (cfg.n_rows, cfg.n_words):
                raise ValueError(f"gradient noise: a parameter of shape {tuple(p.shape)} has no row layout")
            V, per_row = inner
            rows = self.model.rows if V == cfg.n_rows else [torch.arange(n) for n in vocab]
            m = torch.arange(n_mat).view(-1, 1, 1)        # matrix, row, element: the run's slice (n, V, d) flat
            own.append([((m * V + r.view(1, -1, 1)) * per_row + torch.arange(per_row)).reshape(-1) for r in rows])
        sizes = [sum(len(ids[k]) for ids in own) for k in range(K)]
        start = torch.tensor([0] + sizes[:-1]).cumsum(0).tolist()
        targets = []
        before = [0] * K                                  # a run's noise drawn for the earlier parameters
        for p, ids in zip(self.params, own):
            slice_size = p[0].numel()
            at = torch.cat([ids[k] + k * slice_size for k in range(K)]).to(self.device)
            picks = torch.cat([start[k] + before[k] + torch.arange(len(ids[k])) for k in range(K)]).to(self.device)
            targets.append((at, picks))
            before = [b + len(ids[k]) for k, b in enumerate(before)]
        return sizes, targets

    def step(self, batch: dict[str, torch.Tensor], gradient_noise: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """One training step of every run on its own minibatch: the objective, its gradients, the gradient noise
        (A-9; `gradient_noise` False leaves it out, for the timing benchmark), then `clip_and_update`. Returns
        each run's loss and cross-entropy, (K,) each, detached."""
        loss, ce = self.loss(batch)
        self.opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        if gradient_noise and self.tcfg.grad_noise_std > 0:   # Gaussian noise, then clipped, as the codes do
            self.add_gradient_noise(self.tcfg.grad_noise_std)
        self.clip_and_update()
        return loss.detach(), ce.detach()

    def clip_and_update(self) -> None:
        """Each run's gradients clipped (`clip_norm`, `clip_scope`), then the optimiser's step."""
        if self.tcfg.clip_norm:
            clip_per_run(self.params, self.tcfg.clip_norm, self.tcfg.clip_scope)
        self.opt.step()

    def train_epoch(self) -> dict:
        self.epoch += 1
        lr = learning_rate(self.tcfg, self.epoch)
        for group in self.opt.param_groups:
            group["lr"] = lr
        B = self.tcfg.batch_size
        # the last partial batch is dropped, or (drop_last false) trained on as a smaller batch
        n_batches = self.n_train // B if self.tcfg.drop_last else -(-self.n_train // B)
        perms = torch.stack([torch.randperm(self.n_train, generator=g) for g in self.gens["data"]]).to(self.device)
        total, total_ce = 0.0, 0.0
        t0 = time.perf_counter()
        for b in range(n_batches):
            loss, ce = self.step(gather(self.split["train"], self.data_of_run, perms[:, b * B:(b + 1) * B]))
            total = total + loss
            total_ce = total_ce + ce
        seconds = time.perf_counter() - t0
        record = {"epoch": self.epoch, "lr": lr, "loss": (total / n_batches).tolist(),
                  "ce": (total_ce / n_batches).tolist(), "seconds": seconds,
                  "ms_per_batch": 1000 * seconds / n_batches,
                  "val_acc_mean_weights": self.accuracy("val", [1], mode="mean")[1].tolist()}
        if self.tcfg.track_test_samples:
            if self.model_cfg.bayesian:
                acc = self.accuracy("test", sorted(self.tcfg.track_test_samples), self.bcfg.test_sampling)
                record["test_acc"] = {f"S{s}": v.tolist() for s, v in acc.items()}
            else:
                record["test_acc"] = {"point": self.accuracy("test", [1], "mean")[1].tolist()}
        if self.model.dof():
            record["dof"] = {n: v.tolist() for n, v in self.model.dof().items()}
        self.history.append(record)
        return record

    def fit(self, checkpoint: Path | None = None) -> None:
        """Train to `epochs`, saving `checkpoint` every `checkpoint_every` epochs and at the end; resume from it
        when it holds exactly these runs in this code's parameter layout (else start afresh: another set of runs,
        or parameters laid out as older code laid them, cannot be loaded)."""
        if checkpoint is not None and checkpoint.exists():
            state = checkpoints.load(checkpoint, map_location=self.device)
            if self.holds_these_runs(state):
                self.load_state(state)
                self.log(f"resumed from {checkpoint} at epoch {self.epoch}")
            else:
                self.log(f"not resuming from {checkpoint}: it holds other runs ({state.get('run_ids', 'unrecorded')})"
                         f" than this pass ({[r.run_id for r in self.runs]}) or another parameter layout; "
                         "starting afresh")
        progress = Progress(self.tcfg.epochs, start=self.epoch)
        while self.epoch < self.tcfg.epochs:
            rec = self.train_epoch()
            acc = rec["val_acc_mean_weights"]
            self.log(f"{progress.line(self.epoch)}: lr {rec['lr']:.5f} loss {sum(rec['loss']) / len(acc):.4f} "
                     f"val acc (mean of runs) {sum(acc) / len(acc):.3f} {rec['ms_per_batch']:.1f} ms/batch")
            if checkpoint is not None and (self.epoch % self.tcfg.checkpoint_every == 0
                                           or self.epoch == self.tcfg.epochs):
                checkpoints.save(self.state(), checkpoint)

    # -- evaluation --------------------------------------------------------------------------------------
    @torch.no_grad()
    def predictive(self, split: str, S: int, mode: str, chunk: int = 250, attention: bool = False):
        """Average predictive probabilities over s = 1..S samples; yields (s, mean probs (K, N, V)[, attn])."""
        data = self.split[split]
        K, N = len(self.runs), data["answers"].shape[1]
        idx_all = torch.arange(N, device=self.device).expand(K, N)
        acc_probs = None
        # Draws go through the model side by side, up to DRAW_RUNS pseudo-runs per pass. With test_draws
        # "sequential" they are the draws of S passes one after another, so the averages are the same numbers.
        at_once = 1 if attention else max(1, min(S, DRAW_RUNS // K))
        batched = self.bcfg is not None and self.bcfg.test_draws == "batched"
        s = 0
        while s < S:
            n = min(at_once, S - s)
            weights = self.model.draws(self.gens["eval"], mode, n, batched)
            parts, atts = [], []
            step = max(1, chunk // n)                                   # n draws x step questions per pass
            for start in range(0, N, step):
                batch = gather(data, self.data_of_run, idx_all[:, start:start + step])
                if attention:
                    logits, att = self.forward(batch, weights, attention)
                    logits = logits.unsqueeze(0)
                else:
                    logits, att = self.forward_draws(batch, weights, n), None
                parts.append(torch.softmax(logits, -1))
                atts.append(att)
            probs = torch.cat(parts, 2)                                 # (draws, K, N, V)
            for p in probs:
                s += 1
                acc_probs = p if acc_probs is None else acc_probs + p
                yield s, acc_probs / s, (torch.cat(atts, 1) if attention else None)

    def hits(self, split: str, samples: list[int], mode: str) -> dict[int, torch.Tensor]:
        """Correct answers (K, N) of argmax of the S-sample average for every S in `samples` (nested draws);
        padding rows past a run's own data are False."""
        return self.hits_and_nll(split, samples, mode)[0]

    def hits_and_nll(self, split: str, samples: list[int], mode: str) -> tuple[dict, dict]:
        """`hits`, and from the same draws each run's mean negative log predictive probability of the right
        answer (K,) for every S in `samples`: -1/N sum_n log (1/S sum_s p_s(a_n | x_n))."""
        data = self.split[split]
        answers = data["answers"][self.data_of_run]
        n_real = data["size"][self.data_of_run]
        real = torch.arange(answers.shape[1], device=self.device) < n_real.unsqueeze(1)
        hits, nll = {}, {}
        for s, probs, _ in self.predictive(split, max(samples), mode):
            if s in samples:
                hits[s] = ((probs.argmax(-1) == answers) & real).cpu()
                p_right = probs.gather(-1, answers.clamp(min=0).unsqueeze(-1)).squeeze(-1)
                nll[s] = (-p_right.clamp_min(1e-30).log() * real).sum(1).cpu() / n_real.cpu()
        return hits, nll

    def accuracy(self, split: str, samples: list[int], mode: str) -> dict[int, torch.Tensor]:
        """Accuracy (K,) of argmax of the S-sample average for every S in `samples` (nested draws)."""
        n_real = self.split[split]["size"][self.data_of_run].cpu().float()
        return {s: h.sum(1).float() / n_real for s, h in self.hits(split, samples, mode).items()}

    def accuracy_by_task(self, split: str, hits: dict[int, torch.Tensor]) -> list[dict[str, dict[int, float]]] | None:
        """Per run: {task: {S: accuracy}} from `hits` over the samples of each bAbI task (joint data sets),
        else None."""
        if any(d.task_of is None or len(set(d.task_of[split].tolist())) < 2 for d in self.datasets):
            return None
        out = []
        for k, run in enumerate(self.runs):
            task_of = torch.as_tensor(self.datasets[run.data_index].task_of[split])
            per = {}
            for t in sorted(set(task_of.tolist())):
                rows = torch.nonzero(task_of == t).squeeze(1)
                per[str(t)] = {s: float(h[k, rows].float().mean()) for s, h in hits.items()}
            out.append(per)
        return out

    def evaluate(self) -> list[dict]:
        """Validation and test accuracy of every run; t-MEM-NN with each S of `test_samples`."""
        if self.model_cfg.bayesian:
            S = sorted(self.bcfg.test_samples)
            mode = self.bcfg.test_sampling
            keys = {s: f"S{s}" for s in S}
        else:
            S, mode, keys = [1], "mean", {1: "point"}
        val_hits, val_nll = self.hits_and_nll("val", S, mode)
        n_val = self.split["val"]["size"][self.data_of_run].cpu().float()
        res = {"val": {s: h.sum(1).float() / n_val for s, h in val_hits.items()}}
        val_by_task = self.accuracy_by_task("val", val_hits)
        test_hits = self.hits("test", S, mode)
        n_test = self.split["test"]["size"][self.data_of_run].cpu().float()
        res["test"] = {s: h.sum(1).float() / n_test for s, h in test_hits.items()}
        by_task = self.accuracy_by_task("test", test_hits)
        dof = self.model.dof()
        metrics = []
        for k, run in enumerate(self.runs):
            m = {"run_id": run.run_id, "status": "ok", "seed": run.seed,
                 "val_acc": {keys[s]: float(v[k]) for s, v in res["val"].items()},
                 "val_nll": {keys[s]: float(v[k]) for s, v in val_nll.items()},
                 "test_acc": {keys[s]: float(v[k]) for s, v in res["test"].items()},
                 "epochs": self.epoch, "n_train": self.n_train,
                 "final_train_loss": self.history[-1]["loss"][k] if self.history else None}
            if by_task is not None:
                m["test_acc_by_task"] = {t: {keys[s]: v for s, v in acc.items()} for t, acc in by_task[k].items()}
            if val_by_task is not None:
                m["val_acc_by_task"] = {t: {keys[s]: v for s, v in acc.items()} for t, acc in val_by_task[k].items()}
            if dof:
                m["dof"] = {n: float(v[k]) for n, v in dof.items()}
                m["prior_dof"] = float(self.prior_log_nu.detach().exp()[k])
            metrics.append(m)
        return metrics

    def run_history(self, k: int) -> list[dict]:
        """Run k's per-epoch records (the group's lists and dicts of lists, sliced at k)."""
        def pick(v):
            if isinstance(v, list):
                return v[k]
            if isinstance(v, dict):
                return {n: x[k] for n, x in v.items()}
            return v
        return [{key: pick(v) for key, v in h.items()} for h in self.history]

    def run_state(self, k: int) -> dict[str, torch.Tensor]:
        """Run k's slice of every parameter and buffer (its own checkpoint)."""
        state = {n: t[k].detach().cpu().clone() for n, t in self.model.state_dict().items()}
        if self.prior_log_nu is not None:
            state["prior_log_nu"] = self.prior_log_nu[k].detach().cpu().clone()
        return state
