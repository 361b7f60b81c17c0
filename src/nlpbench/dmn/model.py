"""DMN+, MoDMN+, ff-DMN and their ensemble (Shen 2022 thesis §6.2, §6.4.2, §6.5.2, §6.6).

Shapes: B questions, M facts per story (padding after the n_facts real ones), L words per fact, Lq words per
question, d = the embedding and hidden size, A = answer classes. Word id 0 is the nil (padding) word.

- "dmn+":   PE -> bi-GRU fusion (summed) -> gates (6.8-6.10) -> AttnGRU (6.12, 6.13, 6.15) -> ReLU update
            m^i = ReLU(W^(i)[m^{i-1}; c^i; q] + b) -> answer (6.5).
- "modmn+": as dmn+ with the AttnGRU replaced by c^i = sum_t g_t^i f_t (6.16).
- "ff-dmn": no recurrence: f_t = FNN(PE(x_t)), q = FNN_q(PE(question)), c^i as 6.16, m^i = ReLU(W^(i) c^i + b).
           §6.5.2 leaves open the FNNs' depth and activation, whether the question shares the sentence FNN and
           whether q enters the update (it drops only m^{i-1}): `ffn_layers`, `ffn_activation`, `share_ffn`,
           `question_in_update` (defaults, params.yaml's: one ReLU layer, separate FNNs, q in the update, which
           validation chose: pilot-ffdmn).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nlpbench.nn.position import position_weights

VARIANTS = ("dmn+", "modmn+", "ff-dmn")
ACTIVATIONS = {"relu": torch.relu, "tanh": torch.tanh}      # ff-DMN's FNNs (model.ffn_activation)


@dataclass(frozen=True)
class DMNConfig:
    """One config for the three models; `variant` picks the model. Defaults: params.yaml's `dmn.model` (§6.3.2,
    [D] docs/dmn.md)."""

    n_words: int                  # vocabulary rows, nil (row 0) included
    n_answers: int                # answer classes of the task (eq. 6.5's output size)
    variant: str = "dmn+"         # "dmn+" | "modmn+" | "ff-dmn"
    dim: int = 80                 # d: embedding and hidden size [D: DMN+ paper]
    hops: int = 3                 # I [T]
    pe_index: str = "one_based"   # k = 1..d in the PE (MemN2N form [D]); "zero_based": k = 0..d-1 (eq. 6.2)
    input_dropout: float = 0.1    # on the sentence encodings s_t [D: DMN+ keep 0.9]
    answer_dropout: float = 0.1   # on the answer input [q; m^I] [D: DMN+ keep 0.9]
    tie_update: bool = False      # one memory-update layer for all hops (default: W^(i) untied per hop [D])
    share_ffn: bool = False       # ff-DMN: the question uses the sentence FNN (default: separate [D])
    ffn_layers: int = 1           # ff-DMN: d -> d layers of each FNN, each with the activation (§6.5.2: unsaid [D])
    ffn_activation: str = "relu"  # ff-DMN: the FNNs' activation, "relu" [D] | "tanh"
    question_in_update: bool = True    # ff-DMN: m^i = ReLU(W^(i)[c^i; q] + b), chosen by validation (pilot-ffdmn);
                                  # False: ReLU(W^(i) c^i + b), from c^i alone
    answer_bias: bool = False     # eq. 6.5 has no bias

    def check(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"model.variant: unknown value {self.variant!r} (expected one of {', '.join(VARIANTS)})")
        if self.pe_index not in ("one_based", "zero_based"):
            raise ValueError(f"model.pe_index: unknown value {self.pe_index!r} (expected 'one_based' or 'zero_based')")
        if self.ffn_activation not in ACTIVATIONS:
            raise ValueError(f"model.ffn_activation: unknown value {self.ffn_activation!r} (expected one of "
                             f"{', '.join(ACTIVATIONS)})")
        for key in ("n_words", "n_answers", "dim", "hops", "ffn_layers"):
            if getattr(self, key) < 1:
                raise ValueError(f"model.{key}={getattr(self, key)} must be at least 1")
        for key in ("input_dropout", "answer_dropout"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ValueError(f"model.{key}={getattr(self, key)} must be in [0, 1)")


def dropout(x: torch.Tensor, p: float, training: bool, generator: torch.Generator | None) -> torch.Tensor:
    """Inverted dropout whose mask comes from `generator` (so a run's randomness is its own)."""
    if not training or p == 0.0:
        return x
    keep = torch.bernoulli(torch.full(x.shape, 1.0 - p), generator=generator).to(x.device)  # CPU generator
    return x * keep / (1.0 - p)


class PositionEncoder(nn.Module):
    """Eq. 6.1: s_t = sum_j l_j o w_j, l_kj = (1 - j/J) - (k/d)(1 - 2j/J), J = the sentence's own length."""

    def __init__(self, dim: int, pe_index: str = "one_based"):
        super().__init__()
        start = 1 if pe_index == "one_based" else 0
        self.register_buffer("k_over_d", torch.arange(start, start + dim, dtype=torch.float32) / dim)

    def forward(self, emb: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """emb (..., L, d), lengths (...) -> (..., d); words past `lengths` get weight 0."""
        a, b = position_weights(lengths, emb.shape[-2], emb.shape[-1])
        l = a.unsqueeze(-1) + b.unsqueeze(-1) * self.k_over_d             # l_kj = a_j + (k/d) b_j: (..., L, d)
        return (l * emb).sum(-2)            # elementwise (a batched matmul of 1 x L by L x d matrices is far slower)


class AttentionGate(nn.Module):
    """Eqs. 6.8-6.10: g_t^i = softmax_t(W2 tanh(W1 z_t^i + b1) + b2) over the real facts."""

    def __init__(self, dim: int):
        super().__init__()
        self.W1 = nn.Linear(4 * dim, dim)   # W^(1), b^(1)
        self.W2 = nn.Linear(dim, 1)         # W^(2), b^(2)

    def forward(self, f: torch.Tensor, q: torch.Tensor, m: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """f (B, M, d), q and m (B, d), mask (B, M) true on real facts -> g (B, M), zero on padding.
        Only the real facts are scored (padding would cost B x max(n_facts) rows for sum(n_facts) real ones)."""
        story = mask.nonzero()[:, 0]                                              # the story of each real fact
        f, q, m = f[mask], q[story], m[story]                                     # (n_real, d) each
        z = torch.cat([f * q, f * m, (f - q).abs(), (f - m).abs()], dim=-1)    # eq. 6.8
        alpha = torch.tanh(self.W1(z))                                            # eq. 6.9
        scores = torch.full(mask.shape, float("-inf"), dtype=f.dtype, device=f.device)
        scores = scores.masked_scatter(mask, self.W2(alpha).squeeze(-1))
        return torch.softmax(scores, dim=-1)                                      # eq. 6.10


class AttnGRU(nn.Module):
    """Eqs. 6.12, 6.13, 6.15: a GRU whose update gate is the attention gate g_t (eq. 6.11 dropped)."""

    def __init__(self, dim: int):
        super().__init__()
        self.Wr, self.Ur = nn.Linear(dim, dim), nn.Linear(dim, dim, bias=False)   # W^(r), b^(r); U^(r)
        self.W, self.U = nn.Linear(dim, dim), nn.Linear(dim, dim, bias=False)     # W, b; U

    def forward(self, f: torch.Tensor, g: torch.Tensor, n_facts: torch.Tensor | None = None) -> torch.Tensor:
        """f (B, M, d), g (B, M), n_facts (B,; default all M) -> c = h_M (B, d), h_0 = 0.

        A fact past a story's n_facts has g_t = 0 and leaves h unchanged, so step t updates only the stories
        with more than t facts: the stories sorted longest first, those are the first n_t rows, and a step
        costs n_t rows instead of B (the same numbers as running every row through every step)."""
        if n_facts is None:
            n_facts = torch.full(f.shape[:1], f.shape[1], device=f.device)
        order = torch.argsort(n_facts, descending=True, stable=True)
        f, g = f[order], g[order]
        active = (n_facts.unsqueeze(0) > torch.arange(f.shape[1], device=f.device).unsqueeze(1)).sum(1).tolist()
        # input terms of all facts at once, cut into time steps by unbind: its backward is one stack, where
        # indexing wr[:, t] would add a zero-filled (B, M, d) gradient per step (quadratic in M)
        wr, w, g = self.Wr(f).unbind(1), self.W(f).unbind(1), g.unsqueeze(-1).unbind(1)
        h = f.new_zeros(f.shape[0], f.shape[2])
        for t, n in enumerate(active):
            if n == 0:
                break
            h_t, gt = h[:n], g[t][:n]
            r = torch.sigmoid(wr[t][:n] + self.Ur(h_t))                # eq. 6.12
            h_tilde = torch.tanh(w[t][:n] + r * self.U(h_t))            # eq. 6.13
            h_t = gt * h_tilde + (1 - gt) * h_t                         # eq. 6.15
            h = h_t if n == h.shape[0] else torch.cat([h_t, h[n:]])
        return h[torch.argsort(order)]


def _last_state(gru: nn.GRU, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Run `gru` over the first `lengths` steps of each row of x (B, T, d): (outputs (B, T, dirs*d), h_n)."""
    packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    out, h_n = gru(packed)
    out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out, h_n


class DMN(nn.Module):
    """DMN+ / MoDMN+ / ff-DMN (cfg.variant). forward(...) returns logits (B, A) of eq. 6.5."""

    def __init__(self, cfg: DMNConfig, generator: torch.Generator | None = None):
        super().__init__()
        cfg.check()
        self.cfg = cfg
        d = cfg.dim
        self.embedding = nn.Embedding(cfg.n_words, d, padding_idx=0)   # w_i in R^d
        self.pe = PositionEncoder(d, cfg.pe_index)
        if cfg.variant == "ff-dmn":
            self.sentence_ffn = nn.Linear(d, d)                           # f_t = act(W s_t + b): first layer
            self.question_ffn = None if cfg.share_ffn else nn.Linear(d, d)
            # the further layers of ffn_layers > 1 come after, so that one layer keeps the parameters, their
            # names and their initial values of the one-layer model
            deeper = range(cfg.ffn_layers - 1)
            self.sentence_ffn_deeper = nn.ModuleList(nn.Linear(d, d) for _ in deeper)
            self.question_ffn_deeper = None if cfg.share_ffn else nn.ModuleList(nn.Linear(d, d) for _ in deeper)
        else:
            self.fusion = nn.GRU(d, d, batch_first=True, bidirectional=True)   # eqs. 6.17-6.18
            self.question_gru = nn.GRU(d, d, batch_first=True)                  # eq. 6.3
        self.gate = AttentionGate(d)
        if cfg.variant == "dmn+":
            self.attn_gru = AttnGRU(d)
        n_in = (2 * d if cfg.question_in_update else d) if cfg.variant == "ff-dmn" else 3 * d
        self.update = nn.ModuleList(nn.Linear(n_in, d) for _ in range(1 if cfg.tie_update else cfg.hops))
        self.answer = nn.Linear(2 * d, cfg.n_answers, bias=cfg.answer_bias)     # W^(a), eq. 6.5
        init_weights(self, generator)

    # -- modules -------------------------------------------------------------------------------------------
    def ffn(self, x: torch.Tensor, question: bool = False) -> torch.Tensor:
        """ff-DMN's FNN (§6.5.2) on x (..., d): the sentence FNN, or the question's (`question`; the sentence
        FNN when share_ffn); each layer d -> d followed by the activation."""
        own = question and self.question_ffn is not None
        first = self.question_ffn if own else self.sentence_ffn
        deeper = self.question_ffn_deeper if own else self.sentence_ffn_deeper
        act = ACTIVATIONS[self.cfg.ffn_activation]
        x = act(first(x))
        for layer in deeper:
            x = act(layer(x))
        return x

    def encode_facts(self, stories: torch.Tensor, n_facts: torch.Tensor, generator=None) -> torch.Tensor:
        """f_t (B, M, d) for stories (B, M, L); rows past n_facts are zero."""
        mask = fact_mask(n_facts, stories.shape[1])
        facts = stories[mask]                                             # only the real facts are encoded
        s = self.pe(self.embedding(facts), (facts != 0).sum(-1))          # eq. 6.1: s_t
        s = s.new_zeros(*stories.shape[:2], s.shape[-1]).masked_scatter(mask.unsqueeze(-1), s)   # padding: 0
        s = dropout(s, self.cfg.input_dropout, self.training, generator)
        mask = mask.unsqueeze(-1)
        if self.cfg.variant == "ff-dmn":
            return self.ffn(s) * mask                                     # f_t = FNN(s_t), no order kept
        out, _ = _last_state(self.fusion, s, n_facts)
        fwd, bwd = out.chunk(2, dim=-1)
        return fwd + bwd                                                  # eq. 6.19: f_t = ->h_t + <-h_t

    def encode_question(self, queries: torch.Tensor) -> torch.Tensor:
        """q (B, d) for queries (B, Lq)."""
        lengths = (queries != 0).sum(-1)
        emb = self.embedding(queries)
        if self.cfg.variant == "ff-dmn":
            return self.ffn(self.pe(emb, lengths), question=True)         # q = FNN_q(PE(question))
        _, h_n = _last_state(self.question_gru, emb, lengths)
        return h_n[-1]                                                    # eq. 6.4: q = h_Q

    def memory_update(self, hop: int, m: torch.Tensor, c: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        layer = self.update[0 if self.cfg.tie_update else hop]
        if self.cfg.variant == "ff-dmn":
            if self.cfg.question_in_update:
                return torch.relu(layer(torch.cat([c, q], dim=-1)))       # m^i = ReLU(W^(i)[c^i; q] + b)
            return torch.relu(layer(c))                                   # m^i = ReLU(W^(i) c^i + b) (§6.5.2)
        return torch.relu(layer(torch.cat([m, c, q], dim=-1)))            # m^i = ReLU(W^(i)[m^{i-1}; c^i; q] + b)

    # -- forward -----------------------------------------------------------------------------------------
    def forward(self, stories: torch.Tensor, n_facts: torch.Tensor, queries: torch.Tensor,
                generator: torch.Generator | None = None, return_attention: bool = False):
        """stories (B, M, L), n_facts (B,) in 1..M, queries (B, Lq) -> logits (B, A)
        [and the gates g (B, hops, M)]. `generator` draws the dropout masks in training mode."""
        if n_facts.numel() and (int(n_facts.min()) < 1 or int(n_facts.max()) > stories.shape[1]):
            raise ValueError(f"n_facts must lie in 1..M={stories.shape[1]}, got {int(n_facts.min())}.."
                             f"{int(n_facts.max())}")
        f = self.encode_facts(stories, n_facts, generator)
        q = self.encode_question(queries)
        mask = fact_mask(n_facts, stories.shape[1])
        m, gates = q, []                                                  # m^0 = q [D]
        for i in range(self.cfg.hops):
            g = self.gate(f, q, m, mask)                                  # eqs. 6.8-6.10
            if self.cfg.variant == "dmn+":
                c = self.attn_gru(f, g, n_facts)                          # eqs. 6.12-6.15: c^i = h_T
            else:
                c = torch.einsum("bm,bmd->bd", g, f)                      # eq. 6.16
            m = self.memory_update(i, m, c, q)
            gates.append(g)
        x = dropout(torch.cat([q, m], dim=-1), self.cfg.answer_dropout, self.training, generator)
        logits = self.answer(x)                                           # eq. 6.5 (softmax in the loss)
        return (logits, torch.stack(gates, dim=1)) if return_attention else logits


def fact_mask(n_facts: torch.Tensor, M: int) -> torch.Tensor:
    """(B, M) true on the first n_facts slots."""
    return torch.arange(M, device=n_facts.device) < n_facts.unsqueeze(-1)


def init_weights(model: nn.Module, generator: torch.Generator | None = None) -> None:
    """§3.2: Glorot uniform for every weight matrix (each GRU gate block on its own), zero biases,
    embeddings U[-sqrt 3, sqrt 3] with the nil row zero. Parameters are visited in registration order."""
    for module in model.modules():
        if isinstance(module, nn.Embedding):
            nn.init.uniform_(module.weight, -math.sqrt(3.0), math.sqrt(3.0), generator=generator)
            if module.padding_idx is not None:
                with torch.no_grad():
                    module.weight[module.padding_idx].zero_()
        elif isinstance(module, nn.Linear):
            nn.init.xavier_uniform_(module.weight, generator=generator)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.GRU):
            for name, p in module.named_parameters():
                if name.startswith("weight"):
                    for block in p.data.chunk(3, dim=0):    # reset, update, new gates
                        nn.init.xavier_uniform_(block, generator=generator)
                else:
                    nn.init.zeros_(p)


def has_recurrence(model: nn.Module) -> bool:
    """True if any submodule is recurrent (a torch RNN or RNN cell, or the AttnGRU)."""
    return any(isinstance(m, (nn.RNNBase, nn.RNNCellBase, AttnGRU)) for m in model.modules())


# -- ensemble (§6.6) -----------------------------------------------------------------------------------------
def ensemble_probs(p_ff_dmn: torch.Tensor, p_dmn_plus: torch.Tensor) -> torch.Tensor:
    """Eq. 6.20: P^ = (P_ff-DMN + P_DMN+) / 2 over the same answer classes."""
    if p_ff_dmn.shape != p_dmn_plus.shape:
        raise ValueError(f"ensemble members disagree on shape: {tuple(p_ff_dmn.shape)} vs {tuple(p_dmn_plus.shape)}")
    return 0.5 * (p_ff_dmn + p_dmn_plus)


def ensemble_predict(p_ff_dmn: torch.Tensor, p_dmn_plus: torch.Tensor) -> torch.Tensor:
    """Eq. 6.21: answer = argmax P^."""
    return ensemble_probs(p_ff_dmn, p_dmn_plus).argmax(-1)


class Ensemble(nn.Module):
    """ff-DMN and DMN+, trained independently, combined at test time (Figure 6.17, eqs. 6.20-6.21)."""

    def __init__(self, ff_dmn: DMN, dmn_plus: DMN):
        super().__init__()
        if ff_dmn.cfg.variant != "ff-dmn" or dmn_plus.cfg.variant != "dmn+":
            raise ValueError(f"ensemble wants (ff-dmn, dmn+), got ({ff_dmn.cfg.variant}, {dmn_plus.cfg.variant})")
        if ff_dmn.cfg.n_answers != dmn_plus.cfg.n_answers:
            raise ValueError(f"ensemble members have {ff_dmn.cfg.n_answers} and {dmn_plus.cfg.n_answers} answer "
                             "classes; they must share the task's answer vocabulary")
        self.ff_dmn, self.dmn_plus = ff_dmn, dmn_plus

    def forward(self, stories: torch.Tensor, n_facts: torch.Tensor, queries: torch.Tensor) -> torch.Tensor:
        """P^ (B, A), eq. 6.20; answers are its argmax (eq. 6.21)."""
        return ensemble_probs(torch.softmax(self.ff_dmn(stories, n_facts, queries), -1),
                              torch.softmax(self.dmn_plus(stories, n_facts, queries), -1))
