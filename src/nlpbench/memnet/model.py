"""MemN2N and t-MEM-NN (Tolias thesis ch. 3 and §6.2-6.3) for one run, written as the thesis writes them.

  m_i = sum_j l_j . A x_ij + T_A(i),  c_i likewise with C     memory (PE and TE)                  ch. 3
  u^1 = sum_j l_j . B q_j                                       the question                        ch. 3
  varpi_i = softmax_i(u^T m_i)                                  attention over the slots            (33), (34)
  o = sum_i varpi_i c_i                                         the memory's output                 (35)
  u^{k+1} = u^k + o^k                                           the next hop                        ch. 3
  a^ = softmax(W (o^K + u^K))                                   the answer                          (36)
  t-MEM-NN: q(Theta) = t(vec Theta | mu, diag(sigma^2), nu)     per matrix Theta                    (51)-(53)
  Theta = mu + (nu / (nu + 2))^(1/2) sigma eps,  eps ~ t(nu + 2)  a draw from the escort (training)   (60)-(62)
  loss = -log a^_a + sum_Theta D_t(q(Theta) || p(Theta))        the t-divergence objective          (55), (56)
  predict: the mean of a^ over S draws from q                                                        §6.3.3

Tying (ch. 3): "adjacent", the thesis's footnoted code and the default: matrices E_0 .. E_K with B = A^1 = E_0,
A^{k+1} = C^k = E_k and W^T = C^K; "layerwise": A, B, C shared by every hop and a separate W.
Each matrix has V = n_words + M rows: nil, the run's words, then the time rows T(1) .. T(M), T(1) the most recent
sentence. The nil row is zero (padding is no word) or, with `nil_row: learned`, a learned embedding. The memory
holds `slots` sentences, the story's facts first; an empty slot is the empty sentence (m_i = c_i = 0: score 0;
with a learned nil row, the nil sentence) and has no time row.
This model states the function; memnet.engine computes it for many runs at once (a test keeps the two equal).
MemNetConfig's defaults are the values of params.yaml's `memnet.model` (a test keeps them equal too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from nlpbench.nn.gaussian import kl_normal
from nlpbench.nn.position import position_weights, position_weights_code, position_weights_code_published
from nlpbench.nn.student_t import T_SAMPLERS, t_divergence


@dataclass(frozen=True)
class MemNetConfig:
    n_words: int                 # rows for nil + words (the engine: max over the group)
    memory_size: int = 50
    embedding_dim: int = 20      # delta
    hops: int = 3
    tying: str = "adjacent"      # "adjacent": A^{k+1} = C^k, B = A^1, W^T = C^K; "layerwise": A, B, C shared by all hops + W
    position_encoding: bool = True
    temporal_encoding: bool = True
    mask_empty_memory: bool = False   # empty slots dropped from the softmax (the engine only: no table uses it)
    memory_slots: str = "longest_story"  # min(memory_size, the run's longest story) slots, as the footnoted code sizes
                                 # its memory per task; "fixed": memory_size slots, the empty ones with logit 0
    position_form: str = "code_published"  # the footnoted code's formula as published; "code": our earlier
                                 # transcription of it; "paper": l_kj of thesis ch. 3 over the sentence's own J
    t_sampler: str = "polar"     # t-MEM-NN's Student-t noise: "polar" (Bailey's polar method) or "gamma"
                                 # (z / sqrt(Gamma / df), implicit gradient): the same distribution, other numbers
    memory_read: str = "auto"    # the engine: how a pass reads the memory slots (the same numbers up to float
                                 # summation order): "gather" each slot's row, "whole_table" products with each
                                 # run's whole sentence table, "auto" whichever is cheaper per bucket of runs
    posterior_kernels: str = "auto"    # the engine: t-MEM-NN's Student-t draw and divergence "eager" (op by op),
                                 # "compiled" (fused by torch.compile; needs a C++ compiler on a CPU) or "auto"
                                 # (compiled where it can be): the same formulas, equal up to float rounding
    hop_kernels: str = "eager"   # the engine: the memory hops (eqs. 33-35), likewise: "eager", "compiled" or "auto"
    nil_row: str = "zero"        # "zero": padding is no word; "learned": the nil row is a learned embedding, sentences
                                 # are position-encoded over the data's padded length, empty slots hold the nil sentence
    init_std: float = 0.1
    bayesian: bool = False       # t-MEM-NN: Student-t posteriors over the embedding matrices
    posterior: str = "student_t" # "student_t" (t-MEM-NN) or "gaussian" (KL-VI ablation, eqs. 38-40)
    prior_sigma: float = 1.0     # scale of the zero-mean prior (Gaussian posterior only)
    sigma_init: float = 0.01
    dof_init: float = 100.0
    dof_min: float = 1.0         # floor on the learned nu_Theta (not in the thesis; keeps samples finite)

    @property
    def n_rows(self) -> int:
        return self.n_words + self.memory_size

    def matrix_names(self) -> list[str]:
        if self.tying == "layerwise":
            return ["A", "B", "C"]
        if self.tying == "adjacent":
            return [f"E{k}" for k in range(self.hops + 1)]
        raise ValueError(f"model.tying: unknown value {self.tying!r} (expected 'layerwise' or 'adjacent')")


class MemN2N(nn.Module):
    """MemN2N (cfg.bayesian False) or t-MEM-NN (True; cfg.posterior "gaussian": the KL-VI ablation) for one
    run with `n_words` rows of nil + words. `longest_story`: the run's longest story, which sizes the memory
    under memory_slots "longest_story" and bounds the time rows a draw gives noise to."""

    def __init__(self, cfg: MemNetConfig, n_words: int, longest_story: int, generator: torch.Generator | None = None):
        super().__init__()
        if cfg.mask_empty_memory or (cfg.nil_row == "learned" and cfg.memory_slots == "longest_story"):
            raise ValueError("model: mask_empty_memory, and a learned nil row with longest_story memory, are read "
                             "by memnet.engine only (no table uses them)")
        self.cfg, self.n_words = cfg, n_words
        M, d = cfg.memory_size, cfg.embedding_dim
        V = n_words + M
        self.slots = min(longest_story, M) if cfg.memory_slots == "longest_story" else M
        self.names = cfg.matrix_names()
        if cfg.tying == "layerwise":
            self.hops = [("A", "C")] * cfg.hops                        # A^k = A, C^k = C
            self.question, self.answer = "B", None                     # u^1 = B q, a^ = softmax(W u^{K+1})
            self.W = nn.Parameter(torch.randn(n_words, d, generator=generator) * cfg.init_std)
        else:
            self.hops = [(f"E{k}", f"E{k + 1}") for k in range(cfg.hops)]   # A^{k+1} = C^k
            self.question, self.answer = "E0", f"E{cfg.hops}"               # B = A^1, W^T = C^K
        row = torch.arange(V)
        word = (row < n_words) & ((row > 0) | (cfg.nil_row == "learned"))
        # the rows each matrix has (B: no time rows), and those a draw gives noise: the words and the longest
        # story's time rows (no other row reaches the answer; these are the rows the engine draws for)
        self.register_buffer("rows", torch.stack([word if n == "B" else word | (row >= n_words) for n in self.names]))
        times = n_words + torch.arange(min(longest_story, M))
        self.noisy = [torch.arange(n_words) if n == "B" else torch.cat([torch.arange(n_words), times]) for n in self.names]
        mu = lambda: nn.Parameter(torch.randn(V, d, generator=generator) * cfg.init_std)   # N(0, 0.1^2) (§6.4.1)
        self.mu = nn.ParameterDict({n: mu() for n in self.names})       # MemN2N: the matrices; else their means
        if cfg.bayesian:
            self.log_sigma = nn.ParameterDict({n: nn.Parameter(torch.full((V, d), math.log(cfg.sigma_init)))
                                               for n in self.names})
        if cfg.bayesian and cfg.posterior == "student_t":               # nu_Theta = dof_min + exp(log_nu)
            self.log_nu = nn.ParameterDict({n: nn.Parameter(torch.tensor(math.log(cfg.dof_init - cfg.dof_min)))
                                            for n in self.names})

    def nu(self, name: str) -> torch.Tensor:
        return self.cfg.dof_min + self.log_nu[name].exp()

    # -- the embedding matrices --------------------------------------------------------------------------
    def weights(self, mode: str = "mean", generator: torch.Generator | None = None) -> dict[str, torch.Tensor]:
        """The matrices for one pass: "mean" (MemN2N, or the posterior means), "escort" (a draw for training,
        eqs. 60-62) or "posterior" (a draw from q itself, for prediction, §6.3.3)."""
        cfg, d = self.cfg, self.cfg.embedding_dim
        if mode == "mean":
            return {n: self.mu[n] * self.rows[m, :, None] for m, n in enumerate(self.names)}
        sizes = [len(r) for r in self.noisy]
        if cfg.posterior == "gaussian":                                 # eq. 40: eps ~ N(0, I)
            noise = [torch.randn(s, d, generator=generator) for s in sizes]
            scale = [1.0] * len(self.names)
        else:
            nu = torch.stack([self.nu(n) for n in self.names])
            df = nu + 2 if mode == "escort" else nu                     # eq. 62: eps ~ t(0, I, nu + 2)
            noise = T_SAMPLERS[cfg.t_sampler](df, sizes, d, [generator] * len(sizes)).split(sizes)
            scale = torch.sqrt(nu / (nu + 2)) if mode == "escort" else torch.ones_like(nu)
        out = {}
        for m, n in enumerate(self.names):
            eps = torch.zeros_like(self.mu[n]).index_put((self.noisy[m],), noise[m])
            out[n] = (self.mu[n] + scale[m] * self.log_sigma[n].exp() * eps) * self.rows[m, :, None]   # eq. 61
        return out

    def divergence(self, prior_nu: torch.Tensor | None = None) -> torch.Tensor:
        """sum_Theta D_t(q(Theta) || p(Theta)) (eq. 56), each prior's dof its posterior's nu_Theta unless
        `prior_nu` is given; the Gaussian ablation: sum_Theta KL(q(Theta) || N(0, sigma_p^2 I)) (eqs. 38-39)."""
        total = torch.zeros(())
        for m, n in enumerate(self.names):
            if self.cfg.posterior == "gaussian":
                D = kl_normal(self.mu[n], self.log_sigma[n], 0.0, math.log(self.cfg.prior_sigma))
            else:
                nu = self.nu(n)
                D = t_divergence(self.mu[n], self.log_sigma[n], nu, nu if prior_nu is None else prior_nu)
            total = total + (D * self.rows[m, :, None]).sum()
        return total

    # -- the network -------------------------------------------------------------------------------------
    def position_encoding(self, x: torch.Tensor) -> torch.Tensor:
        """l_j (..., W, d) for sentences x (..., W) of word ids padded to the data's width W: l_kj = a_j + (k/d) b_j
        in the form `position_form` names (nn.position), zero past a sentence's words (a learned nil row: past W);
        without position encoding, 1 per word (a bag of words)."""
        cfg, W, d = self.cfg, x.shape[-1], self.cfg.embedding_dim
        words = torch.ones_like(x, dtype=torch.bool) if cfg.nil_row == "learned" else x != 0
        width = torch.full(x.shape[:-1], W)
        if not cfg.position_encoding:
            return words.float().unsqueeze(-1).expand(*x.shape, d)
        if cfg.position_form == "paper":                                # J: the sentence's own length
            a, b = position_weights(words.sum(-1), W, d)
        elif cfg.position_form == "code":
            a, b = position_weights_code(width, W, d)
        else:
            a, b = position_weights_code_published(width, W, d, cfg.temporal_encoding)
        k = torch.arange(1, d + 1) / d
        return (a.unsqueeze(-1) + k * b.unsqueeze(-1)) * words.unsqueeze(-1)

    def forward(self, stories: torch.Tensor, n_facts: torch.Tensor, queries: torch.Tensor,
                E: dict[str, torch.Tensor], return_attention: bool = False):
        """Logits (B, n_words) of a^ (-inf for nil) for stories (B, >= slots, W) and queries (B, W) of word ids,
        n_facts (B,), with the matrices E (`weights`); with return_attention also varpi (B, hops, slots)."""
        x = stories[:, : self.slots]
        i = torch.arange(self.slots)
        filled = i < n_facts.unsqueeze(1)                                           # the slots holding facts
        time = torch.where(filled, self.n_words + n_facts.unsqueeze(1) - 1 - i, 0)  # T(1): the most recent
        te = (filled & self.cfg.temporal_encoding).unsqueeze(-1)                    # facts have time rows, if TE
        l_x, l_q = self.position_encoding(x), self.position_encoding(queries)
        u = (l_q * E[self.question][queries]).sum(-2)                               # u^1 = sum_j l_j . B q_j
        attention = []
        for A, C in self.hops:
            m = (l_x * E[A][x]).sum(-2) + E[A][time] * te                           # m_i = sum_j l_j . A x_ij + T_A(i)
            c = (l_x * E[C][x]).sum(-2) + E[C][time] * te                           # c_i = sum_j l_j . C x_ij + T_C(i)
            p = torch.softmax((m @ u.unsqueeze(-1)).squeeze(-1), dim=-1)            # (33): varpi_i = softmax(u^T m_i)
            o = (p.unsqueeze(-1) * c).sum(1)                                        # (35): o = sum_i varpi_i c_i
            u = u + o                                                               # u^{k+1} = u^k + o^k
            attention.append(p)
        W = self.W if self.answer is None else E[self.answer][: self.n_words]      # W^T = C^K (adjacent)
        logits = u @ W.T                                                            # (36): W (o^K + u^K)
        logits = logits.masked_fill(torch.arange(self.n_words) == 0, float("-inf"))   # nil is never an answer
        return (logits, torch.stack(attention, 1)) if return_attention else logits

    def loss(self, stories, n_facts, queries, answers, n_train: int, generator: torch.Generator | None = None,
             divergence_weight: float = 0.1, prior_nu: torch.Tensor | None = None) -> torch.Tensor:
        """The minibatch's summed cross-entropy under one draw from the escort (MemN2N: the matrices), plus for
        t-MEM-NN the divergence weighted by `divergence_weight` and scaled to the minibatch, |M| / N (eq. 55)."""
        mode = "escort" if self.cfg.bayesian else "mean"
        logits = self(stories, n_facts, queries, self.weights(mode, generator))
        ce = F.cross_entropy(logits, answers, reduction="sum")                      # -log a^_a
        if not self.cfg.bayesian:
            return ce
        return ce + divergence_weight * self.divergence(prior_nu) * len(answers) / n_train

    @torch.no_grad()
    def predict(self, stories, n_facts, queries, S: int = 1, generator: torch.Generator | None = None,
                mode: str | None = None) -> torch.Tensor:
        """The mean of a^ (B, n_words) over S weight draws (§6.3.3); mode default "posterior" for t-MEM-NN, the
        matrices themselves (one pass) for MemN2N."""
        mode = mode or ("posterior" if self.cfg.bayesian else "mean")
        draws = [self.weights(mode, generator) for _ in range(S if mode != "mean" else 1)]
        return torch.stack([torch.softmax(self(stories, n_facts, queries, E), -1) for E in draws]).mean(0)
