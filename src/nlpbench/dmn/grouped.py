"""The grouped execution of DMN+ / MoDMN+ / ff-DMN: R runs (seeds of one task, or tasks of one seed) in one pass.

It computes the function of the readable model in nlpbench.dmn.model (`DMN`, eqs. 6.1-6.19; a test keeps the two
equal) with every weight stacked along a leading run axis, so that one batched product serves R runs where the
readable model makes R small ones, and the per-operation cost of the many small steps of the GRUs is paid once
for the group. The stacked weights keep the readable model's parameter names (`DMN.named_parameters()`), so a
run's slice is its state dict, and a run trained here writes the checkpoint a run trained alone writes.

Shapes: R runs, B questions per run (each run's batch padded to the group's largest with copies of its first
question, which carry no loss), M facts, L words per fact, Lq words per question, d = the hidden size, V and A the
group's largest vocabulary and answer set (rows past a run's own are zero and stay zero; answer classes past a
run's own get logit -inf), so a run computes in a group what it computes alone, up to float summation order.

Each run's questions are sorted longest story first inside the pass (as the readable AttnGRU sorts them), so that
a recurrent step computes only the rows some run still has facts for; the dropout masks are drawn from each run's
own generator in the readable model's shapes and order (input mask (B_r, M_r, d), then answer mask (B_r, 2d)).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch.nn import functional as F

from nlpbench.dmn.model import ACTIVATIONS, DMN, DMNConfig
from nlpbench.nn.position import position_weights

PADDED_ROWS = ("embedding.weight", "answer.weight", "answer.bias")   # sized by a run's vocabulary / answer set


# -- a group's batch -----------------------------------------------------------------------------------------

@dataclass
class GroupBatch:
    """R runs' batches in one padded block. stories (R, B, M, L), n_facts (R, B), queries (R, B, Lq), answers
    (R, B); `rows` (R, B) true on each run's own questions; `shapes` each run's (B_r, M_r) as its batch had them
    alone (the shapes its dropout masks are drawn in)."""

    stories: torch.Tensor
    n_facts: torch.Tensor
    queries: torch.Tensor
    answers: torch.Tensor
    rows: torch.Tensor
    shapes: list[tuple[int, int]]


def collate(batches: list[dict[str, torch.Tensor]], device: torch.device | str = "cpu") -> GroupBatch:
    """One GroupBatch from R batches of nlpbench.dmn.train.batch_of (each trimmed to its own longest story)."""
    R = len(batches)
    B = max(int(b["answers"].shape[0]) for b in batches)
    M = max(int(b["stories"].shape[1]) for b in batches)
    L = max(int(b["stories"].shape[2]) for b in batches)
    Lq = max(int(b["queries"].shape[1]) for b in batches)
    stories = torch.zeros(R, B, M, L, dtype=torch.long)
    queries = torch.zeros(R, B, Lq, dtype=torch.long)
    n_facts = torch.ones(R, B, dtype=torch.long)
    answers = torch.zeros(R, B, dtype=torch.long)
    rows = torch.zeros(R, B, dtype=torch.bool)
    shapes = []
    for r, b in enumerate(batches):
        n, m, l = b["stories"].shape
        fill = torch.cat([torch.arange(n), torch.zeros(B - n, dtype=torch.long)])   # padding rows copy row 0
        stories[r, :, :m, :l] = b["stories"].cpu()[fill]
        queries[r, :, :b["queries"].shape[1]] = b["queries"].cpu()[fill]
        n_facts[r] = b["n_facts"].cpu()[fill]
        answers[r] = b["answers"].cpu()[fill]
        rows[r, :n] = True
        shapes.append((n, m))
    return GroupBatch(*(t.to(device) for t in (stories, n_facts, queries, answers, rows)), shapes)


# -- the grouped model ---------------------------------------------------------------------------------------

def _same_model(configs: list[DMNConfig]) -> DMNConfig:
    """The runs' shared config (vocabulary and answer sizes may differ); a clear error where they differ."""
    first = replace(configs[0], n_words=0, n_answers=0)
    for c in configs[1:]:
        if replace(c, n_words=0, n_answers=0) != first:
            raise ValueError(f"a DMN group's runs must share one model config (they may differ only in n_words and "
                             f"n_answers): {first} vs {replace(c, n_words=0, n_answers=0)}")
    return configs[0]


class GroupedDMN:
    """R readable DMNs' weights stacked: `params[name]` is (R, *shape) of DMN parameter `name`."""

    def __init__(self, models: list[DMN], device: torch.device | str = "cpu"):
        self.cfg = _same_model([m.cfg for m in models])
        self.n_words = [m.cfg.n_words for m in models]
        self.n_answers = [m.cfg.n_answers for m in models]
        self.device = torch.device(device)
        self.names = [name for name, _ in models[0].named_parameters()]
        self.matrices = {name for name, p in models[0].named_parameters() if p.dim() > 1}   # the L2 term's
        self.k_over_d = models[0].pe.k_over_d.to(self.device)
        self.params = {name: self.stack([dict(m.named_parameters())[name].detach() for m in models], name)
                       .requires_grad_(True) for name in self.names}

    @property
    def runs(self) -> int:
        return len(self.n_words)

    def stack(self, tensors: list[torch.Tensor], name: str) -> torch.Tensor:
        """Stack one parameter (or an optimizer moment) of every run, padding the rows of a vocabulary- or
        answer-sized one with zeros."""
        if name in PADDED_ROWS:
            rows = max(t.shape[0] for t in tensors)
            tensors = [torch.cat([t, t.new_zeros(rows - t.shape[0], *t.shape[1:])]) for t in tensors]
        return torch.stack([t.to(self.device) for t in tensors]).contiguous()

    def unpad(self, r: int, name: str, t: torch.Tensor) -> torch.Tensor:
        if name == "embedding.weight":
            return t[:self.n_words[r]]
        if name in ("answer.weight", "answer.bias"):
            return t[:self.n_answers[r]]
        return t

    def run_tensors(self, r: int, stacked: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Run r's slice of stacked tensors named as the parameters (its own rows only)."""
        return {name: self.unpad(r, name, stacked[name][r]).detach().clone() for name in self.names}

    def keep(self, runs: list[int]) -> None:
        """Keep only these runs (in this order): the others leave the group."""
        index = torch.tensor(runs, device=self.device)
        self.params = {n: p.detach().index_select(0, index).requires_grad_(True) for n, p in self.params.items()}
        self.n_words = [self.n_words[r] for r in runs]
        self.n_answers = [self.n_answers[r] for r in runs]

    def zero_pad_grads(self) -> None:
        """The nil row (padding_idx 0) and the rows past a run's own vocabulary or answer set get no gradient."""
        emb = self.params["embedding.weight"].grad
        if emb is not None:
            emb[:, 0] = 0
            for r, n in enumerate(self.n_words):
                emb[r, n:] = 0
        for name in ("answer.weight", "answer.bias"):
            grad = self.params[name].grad if name in self.params else None
            if grad is not None:
                for r, n in enumerate(self.n_answers):
                    grad[r, n:] = 0

    # -- the pieces, each on stacked weights ----------------------------------------------------------------
    def linear(self, x: torch.Tensor, name: str, bias: bool = True) -> torch.Tensor:
        """x (R, ..., in) -> x W_r^T + b_r (R, ..., out) for the DMN Linear `name`."""
        W = self.params[f"{name}.weight"]
        shape = x.shape
        y = torch.bmm(x.reshape(shape[0], -1, shape[-1]), W.transpose(1, 2))
        if bias and f"{name}.bias" in self.params:
            y = y + self.params[f"{name}.bias"].unsqueeze(1)
        return y.reshape(*shape[:-1], W.shape[1])

    def embed(self, ids: torch.Tensor, run: torch.Tensor) -> torch.Tensor:
        """Rows `ids` of each run's own table; run (same shape as ids' leading dims) names the run."""
        E = self.params["embedding.weight"]
        V = E.shape[1]
        return E.reshape(-1, E.shape[-1])[ids + (run * V).unsqueeze(-1)]

    def pe(self, emb: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Eq. 6.1 on emb (..., L, d) with lengths (...)."""
        a, b = position_weights(lengths, emb.shape[-2], emb.shape[-1])
        l = a.unsqueeze(-1) + b.unsqueeze(-1) * self.k_over_d
        return (l * emb).sum(-2)

    def fusion(self, s: torch.Tensor, n_facts: torch.Tensor) -> torch.Tensor:
        """The bi-GRU of eqs. 6.17-6.18 summed (eq. 6.19) over s (R, B, M, d), rows sorted longest story first.
        Both directions run in one loop of 2R sequences: the backward one reads each story's facts in reverse
        (fact t of a story of n facts at step n-1-t), so every sequence starts at its first step and a fact past
        a story's end is never read before its real ones; its outputs there are left to the caller's mask."""
        R, B, M, _ = s.shape
        t = torch.arange(M, device=s.device)
        flip = torch.where(t < n_facts.unsqueeze(-1), n_facts.unsqueeze(-1) - 1 - t, t)     # (R, B, M)
        flip_d = flip.unsqueeze(-1).expand_as(s)
        x = torch.cat([s, s.gather(2, flip_d)])                                             # (2R, B, M, d)
        P = self.params
        weights = [torch.cat([P[f"fusion.{w}_l0"], P[f"fusion.{w}_l0_reverse"]])
                   for w in ("weight_ih", "bias_ih", "weight_hh", "bias_hh")]
        out = self._gru_steps(x, _rows_stepping(torch.cat([n_facts, n_facts]), M), *weights)
        return out[:R] + out[R:].gather(2, flip_d)                                          # eq. 6.19

    def question(self, emb: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Eqs. 6.3-6.4: q = h_Q, the question GRU's state after each question's own words (R, B, d)."""
        P = self.params
        R, B, T, _ = emb.shape
        out = self._gru_steps(emb, [B] * T, *(P[f"question_gru.{w}_l0"]
                                               for w in ("weight_ih", "bias_ih", "weight_hh", "bias_hh")))
        last = (lengths - 1).clamp_min(0)[..., None, None].expand(R, B, 1, out.shape[-1])
        return out.gather(2, last).squeeze(2)

    @staticmethod
    def _gru_steps(x: torch.Tensor, counts: list[int], W_ih, b_ih, W_hh, b_hh) -> torch.Tensor:
        """torch.nn.GRU's equations over x (S, B, T, d); step t computes rows :counts[t] only (the others keep
        their state). A row past its own length goes on computing (finite values its caller masks or never reads)
        instead of being masked step by step. Outputs (S, B, T, d): the state after each step."""
        S, B, T, _ = x.shape
        gi = GroupedDMN.linear_raw(x, W_ih, b_ih).unbind(2)
        h = x.new_zeros(S, B, W_hh.shape[-1])
        outs = []
        for t in range(T):
            n = counts[t]
            if n:
                h_n = h[:, :n]
                gh = torch.baddbmm(b_hh.unsqueeze(1), h_n, W_hh.transpose(1, 2))
                i_r, i_z, i_n = gi[t][:, :n].chunk(3, -1)
                h_r, h_z, h_nn = gh.chunk(3, -1)
                r = torch.sigmoid(i_r + h_r)
                z = torch.sigmoid(i_z + h_z)
                cand = torch.tanh(i_n + r * h_nn)
                h_n = cand + z * (h_n - cand)                             # (1 - z) * n + z * h
                h = h_n if n == B else torch.cat([h_n, h[:, n:]], dim=1)
            outs.append(h)
        return torch.stack(outs, dim=2)

    @staticmethod
    def linear_raw(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        shape = x.shape
        y = torch.bmm(x.reshape(shape[0], -1, shape[-1]), W.transpose(1, 2))
        if b is not None:
            y = y + b.unsqueeze(1)
        return y.reshape(*shape[:-1], W.shape[1])

    def ffn(self, x: torch.Tensor, question: bool = False) -> torch.Tensor:
        own = question and "question_ffn.weight" in self.params
        first, deeper = ("question_ffn", "question_ffn_deeper") if own else ("sentence_ffn", "sentence_ffn_deeper")
        act = ACTIVATIONS[self.cfg.ffn_activation]
        x = act(self.linear(x, first))
        for k in range(self.cfg.ffn_layers - 1):
            x = act(self.linear(x, f"{deeper}.{k}"))
        return x

    # -- forward -----------------------------------------------------------------------------------------
    def forward(self, batch: GroupBatch, generators: list[torch.Generator] | None = None,
                training: bool = False) -> torch.Tensor:
        """Logits (R, B, A) of eq. 6.5 for every run's batch (classes past a run's own: -inf); in training mode
        the dropout masks come from each run's generator."""
        cfg = self.cfg
        R, B, M, _ = batch.stories.shape
        d = cfg.dim
        dev = self.device
        # each run's questions longest story first (the recurrent steps compute the rows some run still steps)
        order = torch.argsort(batch.n_facts, dim=1, descending=True, stable=True)
        stories = batch.stories.gather(1, order[..., None, None].expand_as(batch.stories))
        n_facts = batch.n_facts.gather(1, order)
        queries = batch.queries.gather(1, order[..., None].expand_as(batch.queries))
        run_of = torch.arange(R, device=dev)
        keep_in, keep_out = self._dropout_masks(batch, generators, training, order, M)

        # facts: eq. 6.1 on the real facts only, then fusion (eqs. 6.17-6.19) or the FNN
        mask = torch.arange(M, device=dev) < n_facts.unsqueeze(-1)                 # (R, B, M)
        facts = stories[mask]                                                       # (n_real, L)
        fact_run = run_of[:, None, None].expand(R, B, M)[mask]
        s = self.pe(self.embed(facts, fact_run), (facts != 0).sum(-1))
        s = s.new_zeros(R, B, M, d).masked_scatter(mask.unsqueeze(-1), s)
        if keep_in is not None:
            s = s * keep_in / (1.0 - cfg.input_dropout)
        if cfg.variant == "ff-dmn":
            f = self.ffn(s) * mask.unsqueeze(-1)
        else:
            f = self.fusion(s, n_facts) * mask.unsqueeze(-1)                        # eqs. 6.17-6.19

        # question: eqs. 6.3-6.4 (or FNN_q(PE(question)))
        q_len = (queries != 0).sum(-1)
        q_emb = self.embed(queries, run_of[:, None].expand(R, B))
        if cfg.variant == "ff-dmn":
            q = self.ffn(self.pe(q_emb, q_len), question=True)
        else:
            q = self.question(q_emb, q_len)

        # hops: gates on the real facts (eqs. 6.8-6.10), the episode (6.12-6.15 or 6.16), the update
        real = _RealFacts(mask)
        f_real = real.gather(f)                                                     # (R, N, d)
        m = q
        for i in range(cfg.hops):
            g = self._gate(f_real, real.rows_of(q), real.rows_of(m), real)          # (R, B, M)
            c = self._attn_gru(f, g, n_facts) if cfg.variant == "dmn+" else torch.einsum("rbm,rbmd->rbd", g, f)
            layer = f"update.{0 if cfg.tie_update else i}"
            if cfg.variant == "ff-dmn":
                x = torch.cat([c, q], dim=-1) if cfg.question_in_update else c
            else:
                x = torch.cat([m, c, q], dim=-1)
            m = torch.relu(self.linear(x, layer))
        x = torch.cat([q, m], dim=-1)
        if keep_out is not None:
            x = x * keep_out / (1.0 - cfg.answer_dropout)
        logits = self.linear(x, "answer")                                           # eq. 6.5
        logits = logits.gather(1, torch.argsort(order, dim=1)[..., None].expand_as(logits))   # the batch's order
        A = logits.shape[-1]
        own = torch.arange(A, device=dev) < torch.tensor(self.n_answers, device=dev).unsqueeze(-1)   # (R, A)
        return logits.masked_fill(~own.unsqueeze(1), float("-inf"))

    def _dropout_masks(self, batch: GroupBatch, generators, training: bool, order: torch.Tensor, M: int):
        """Each run's dropout keep-masks as the readable model draws them (input (B_r, M_r, d), then answer
        (B_r, 2d), from the run's generator), padded and put in the pass's row order; None where off."""
        cfg = self.cfg
        R, B = batch.n_facts.shape
        d = cfg.dim
        keep_in = keep_out = None
        if training and cfg.input_dropout:
            keep_in = torch.ones(R, B, M, d)
        if training and cfg.answer_dropout:
            keep_out = torch.ones(R, B, 2 * d)
        if keep_in is None and keep_out is None:
            return None, None
        for r, (n, m) in enumerate(batch.shapes):
            gen = generators[r] if generators is not None else None
            if keep_in is not None:
                keep_in[r, :n, :m] = torch.bernoulli(torch.full((n, m, d), 1.0 - cfg.input_dropout), generator=gen)
            if keep_out is not None:
                keep_out[r, :n] = torch.bernoulli(torch.full((n, 2 * d), 1.0 - cfg.answer_dropout), generator=gen)
        # the readable model draws both masks in one forward, input first: so do these (per run)
        order_cpu = order.cpu()
        if keep_in is not None:
            keep_in = keep_in.gather(1, order_cpu[..., None, None].expand_as(keep_in)).to(self.device)
        if keep_out is not None:
            keep_out = keep_out.gather(1, order_cpu[..., None].expand_as(keep_out)).to(self.device)
        return keep_in, keep_out

    def _gate(self, f: torch.Tensor, q: torch.Tensor, m: torch.Tensor, real: "_RealFacts") -> torch.Tensor:
        """Eqs. 6.8-6.10 on each run's real facts f (R, N, d): g (R, B, M), zero on padding."""
        z = torch.cat([f * q, f * m, (f - q).abs(), (f - m).abs()], dim=-1)      # eq. 6.8
        alpha = torch.tanh(self.linear(z, "gate.W1"))                            # eq. 6.9
        scores = self.linear(alpha, "gate.W2").squeeze(-1)                       # (R, N)
        return torch.softmax(real.scatter_scores(scores), dim=-1)                # eq. 6.10

    def _attn_gru(self, f: torch.Tensor, g: torch.Tensor, n_facts: torch.Tensor) -> torch.Tensor:
        """Eqs. 6.12, 6.13, 6.15 over f (R, B, M, d) with gates g (R, B, M), rows sorted longest story first;
        c = h_M. A fact past a story's end has g = 0 and leaves h as it is."""
        R, B, M, d = f.shape
        P = self.params
        wr = self.linear(f, "attn_gru.Wr").unbind(2)
        w = self.linear(f, "attn_gru.W").unbind(2)
        gs = g.unsqueeze(-1).unbind(2)
        Ur, U = P["attn_gru.Ur.weight"].transpose(1, 2), P["attn_gru.U.weight"].transpose(1, 2)
        counts = _rows_stepping(n_facts, M)
        h = f.new_zeros(R, B, d)
        for t, n in enumerate(counts):
            if n == 0:
                break
            h_t, gt = h[:, :n], gs[t][:, :n]
            r = torch.sigmoid(wr[t][:, :n] + torch.bmm(h_t, Ur))                # eq. 6.12
            h_tilde = torch.tanh(w[t][:, :n] + r * torch.bmm(h_t, U))           # eq. 6.13
            h_t = gt * h_tilde + (1 - gt) * h_t                                 # eq. 6.15
            h = h_t if n == B else torch.cat([h_t, h[:, n:]], dim=1)
        return h

    # -- losses ------------------------------------------------------------------------------------------
    def l2_terms(self) -> torch.Tensor:
        """Per run: the sum of squares of every non-bias weight (R,), as DMNTrainer.l2_term."""
        return sum(self.params[n].pow(2).flatten(1).sum(1) for n in self.names if n in self.matrices)

    def losses(self, logits: torch.Tensor, batch: GroupBatch) -> torch.Tensor:
        """Per run: eq. 6.6's batch mean over its own questions (R,)."""
        R, B, A = logits.shape
        ce = F.cross_entropy(logits.reshape(R * B, A), batch.answers.reshape(-1), reduction="none").view(R, B)
        rows = batch.rows.to(ce.dtype)
        return (ce * rows).sum(1) / rows.sum(1)


def _rows_stepping(lengths: torch.Tensor, T: int) -> list[int]:
    """For rows sorted by length, longest first, in each of S sequences (lengths (S, B)): how many leading rows some
    sequence still steps at each step t < T."""
    return (lengths.unsqueeze(-1) > torch.arange(T, device=lengths.device)).sum(1).amax(0).tolist()


class _RealFacts:
    """Each run's real facts (those under `mask`, (R, B, M)) as a padded (R, N) list, N the most any run has."""

    def __init__(self, mask: torch.Tensor):
        R, B, M = mask.shape
        self.shape = mask.shape
        count = mask.flatten(1).sum(1)                                        # (R,)
        N = max(int(count.max()), 1)
        flat = mask.flatten(1)
        # positions of each run's real facts in (B*M) order, then padding pointing at its first real fact
        rank = torch.argsort((~flat).to(torch.int8), dim=1, stable=True)[:, :N]     # real positions first
        self.valid = torch.arange(N, device=mask.device) < count.unsqueeze(-1)      # (R, N)
        self.pos = torch.where(self.valid, rank, rank[:, :1])                       # (R, N) into B*M
        self.story = self.pos // M                                                  # (R, N) into B

    def gather(self, x: torch.Tensor) -> torch.Tensor:
        """x (R, B, M, d) -> (R, N, d) at the real facts."""
        R, B, M, d = x.shape
        return x.reshape(R, B * M, d).gather(1, self.pos.unsqueeze(-1).expand(R, self.pos.shape[1], d))

    def rows_of(self, x: torch.Tensor) -> torch.Tensor:
        """x (R, B, d) -> (R, N, d): each real fact's story's row."""
        return x.gather(1, self.story.unsqueeze(-1).expand(*self.story.shape, x.shape[-1]))

    def scatter_scores(self, scores: torch.Tensor) -> torch.Tensor:
        """(R, N) scores of the real facts -> (R, B, M), -inf elsewhere (the padding entries write into a spare
        column, cut off)."""
        R, B, M = self.shape
        into = torch.where(self.valid, self.pos, B * M)
        out = scores.new_full((R, B * M + 1), float("-inf"))
        return out.scatter(1, into, scores.masked_fill(~self.valid, float("-inf")))[:, :B * M].view(R, B, M)


# -- Adam over the stacked weights -----------------------------------------------------------------------------

class GroupAdam:
    """torch.optim.Adam's update (no weight decay, no amsgrad) on stacked weights, each run with its own step
    count, so runs that resumed at different epochs share a pass; `stepping` (R,) leaves the runs it marks false
    exactly as they are."""

    def __init__(self, params: dict[str, torch.Tensor], lr: float, betas=(0.9, 0.999), eps: float = 1e-8,
                 steps: list[int] | None = None, moments: dict[str, tuple[torch.Tensor, torch.Tensor]] | None = None):
        self.lr, (self.beta1, self.beta2), self.eps = lr, betas, eps
        self.params = params
        R = next(iter(params.values())).shape[0]
        self.steps = list(steps) if steps is not None else [0] * R
        self.moments = moments or {n: (torch.zeros_like(p), torch.zeros_like(p)) for n, p in params.items()}

    def zero_grad(self) -> None:
        for p in self.params.values():
            p.grad = None

    @torch.no_grad()
    def step(self, stepping: list[bool] | None = None) -> None:
        R = len(self.steps)
        stepping = stepping or [True] * R
        self.steps = [s + 1 if go else s for s, go in zip(self.steps, stepping)]
        dev = next(iter(self.params.values())).device
        bc1 = [1 - self.beta1 ** max(s, 1) for s in self.steps]
        bc2 = [1 - self.beta2 ** max(s, 1) for s in self.steps]
        step_size = torch.tensor([self.lr / b for b in bc1], device=dev)
        bc2_sqrt = torch.tensor([b ** 0.5 for b in bc2], device=dev)
        everyone = all(stepping)
        go = torch.tensor(stepping, device=dev)
        for name, p in self.params.items():
            if p.grad is None:
                continue
            m, v = self.moments[name]
            view = (R,) + (1,) * (p.dim() - 1)
            g = p.grad
            new_m = m.lerp(g, 1 - self.beta1)
            new_v = (v * self.beta2).addcmul_(g, g, value=1 - self.beta2)
            denom = (new_v.sqrt() / bc2_sqrt.view(view)).add_(self.eps)
            update = step_size.view(view) * new_m / denom
            if everyone:
                m.copy_(new_m), v.copy_(new_v), p.sub_(update)
            else:
                w = go.view(view)
                m.copy_(torch.where(w, new_m, m)), v.copy_(torch.where(w, new_v, v))
                p.sub_(torch.where(w, update, 0.0))

    def keep(self, runs: list[int], params: dict[str, torch.Tensor]) -> None:
        index = torch.tensor(runs, device=next(iter(params.values())).device)
        self.params = params
        self.steps = [self.steps[r] for r in runs]
        self.moments = {n: (m.index_select(0, index), v.index_select(0, index)) for n, (m, v) in self.moments.items()}


# -- to and from torch.optim.Adam's state ------------------------------------------------------------------------

def adam_moments(opt: torch.optim.Optimizer, names: list[str]) -> tuple[int, dict[str, tuple[torch.Tensor, ...]]]:
    """(step count, {name: (exp_avg, exp_avg_sq)}) of a one-run torch Adam over DMN.parameters() (in `names`'
    order); zeros for a fresh optimizer."""
    params = opt.param_groups[0]["params"]
    out, step = {}, 0
    for name, p in zip(names, params):
        state = opt.state.get(p, {})
        if state:
            step = int(state["step"])
            out[name] = (state["exp_avg"].detach().clone(), state["exp_avg_sq"].detach().clone())
        else:
            out[name] = (torch.zeros_like(p.detach()), torch.zeros_like(p.detach()))
    return step, out


def set_adam_state(opt: torch.optim.Optimizer, names: list[str], step: int,
                   moments: dict[str, tuple[torch.Tensor, torch.Tensor]]) -> None:
    """Write a run's step count and moments into its one-run torch Adam (the state a checkpoint saves)."""
    params = opt.param_groups[0]["params"]
    for name, p in zip(names, params):
        if step == 0:
            opt.state.pop(p, None)
            continue
        m, v = moments[name]
        opt.state[p] = {"step": torch.tensor(float(step)), "exp_avg": m.to(p.device).clone(),
                        "exp_avg_sq": v.to(p.device).clone()}
