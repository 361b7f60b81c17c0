"""MemN2N and t-MEM-NN for one run, written plainly: the baseline of the timing benchmark (issue 16).

This is the loop a user would write without the group trainer: one run, its stories as padded word ids
(B, M, W), embedding lookups and position weights summed over each sentence's words, one minibatch after another.
t-MEM-NN draws its Student-t noise with torch.distributions.StudentT (Gamma-based, reparameterised) and sums
the elementwise t-divergence (nlpbench.nn.student_t.t_divergence). The model is the default reading of
memnet.model: adjacent tying (A^k = E_k, C^k = E_{k+1}, B = E_0, W^T = E_K), the published code's position
encoding, temporal rows, min(M, the longest story) memory slots whose empty ones score 0, the nil row zero.
Its forward pass equals MemNet's for the same weights (tested), so the benchmark compares like with like.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from nlpbench.memnet.data import TaskTensors, sentence_index
from nlpbench.nn.position import position_weights_code_published
from nlpbench.nn.student_t import t_divergence


def padded_split(data: TaskTensors, split: str) -> dict[str, torch.Tensor]:
    """A split's stories (N, M, W) and queries (N, W) as word ids padded to the sentence table's width W (the
    width the position encoding reads), with n_facts and answers."""
    W = sentence_index(data)[0].shape[1]
    a = data.splits[split]
    stories, queries = torch.as_tensor(a["stories"]), torch.as_tensor(a["queries"])
    return {"stories": F.pad(stories, (0, W - stories.shape[2])), "queries": F.pad(queries, (0, W - queries.shape[1])),
            "n_facts": torch.as_tensor(a["n_facts"]), "answers": torch.as_tensor(a["answers"])}


class PlainMemNet(nn.Module):
    """One run: matrices E_0 .. E_K of (n_words + memory_size) rows, the time rows after the words."""

    def __init__(self, n_words: int, slots: int, width: int, d: int = 20, hops: int = 3, memory_size: int = 50,
                 bayesian: bool = False, sigma_init: float = 0.01, dof_init: float = 100.0, dof_min: float = 1.0,
                 init_std: float = 0.1, generator: torch.Generator | None = None):
        super().__init__()
        self.n_words, self.slots, self.hops, self.bayesian, self.dof_min = n_words, slots, hops, bayesian, dof_min
        V = n_words + memory_size
        self.mu = nn.ParameterList([nn.Parameter(torch.randn(V, d, generator=generator) * init_std)
                                    for _ in range(hops + 1)])
        if bayesian:
            self.log_sigma = nn.ParameterList([nn.Parameter(torch.full((V, d), math.log(sigma_init)))
                                               for _ in range(hops + 1)])
            self.log_nu = nn.ParameterList([nn.Parameter(torch.tensor(math.log(dof_init - dof_min)))
                                            for _ in range(hops + 1)])
        rows = torch.ones(V, 1)
        rows[0] = 0                                                   # the nil word embeds to zero
        self.register_buffer("rows", rows)
        a, b = position_weights_code_published(torch.tensor([width]), width, d, time_slot=True)
        self.register_buffer("l", (a[0].unsqueeze(1) + torch.arange(1, d + 1) / d * b[0].unsqueeze(1)))  # (W, d)

    def weights(self, generator: torch.Generator | None = None) -> list[torch.Tensor]:
        """E_0 .. E_K: the matrices (MemN2N) or one draw from each escort, eqs. 60-62 (t-MEM-NN)."""
        if not self.bayesian:
            return [E * self.rows for E in self.mu]
        out = []
        for mu, log_sigma, log_nu in zip(self.mu, self.log_sigma, self.log_nu):
            nu = self.dof_min + log_nu.exp()
            eps = torch.distributions.StudentT(nu + 2).rsample(mu.shape)     # t(nu + 2), reparameterised
            out.append((mu + torch.sqrt(nu / (nu + 2)) * log_sigma.exp() * eps) * self.rows)
        return out

    def divergence(self) -> torch.Tensor:
        """sum over the matrices and their elements of D_t(q || p), the prior's dof tied to nu (eq. 56)."""
        total = 0.0
        for mu, log_sigma, log_nu in zip(self.mu, self.log_sigma, self.log_nu):
            nu = self.dof_min + log_nu.exp()
            total = total + (t_divergence(mu, log_sigma, nu, nu) * self.rows).sum()
        return total

    def forward(self, stories: torch.Tensor, n_facts: torch.Tensor, queries: torch.Tensor,
                E: list[torch.Tensor]) -> torch.Tensor:
        """Logits (B, n_words) for stories (B, M, W) of word ids, n_facts (B,), queries (B, W)."""
        stories = stories[:, : self.slots]
        slot = torch.arange(self.slots)
        filled = slot < n_facts.unsqueeze(1)                                          # (B, slots)
        time = torch.where(filled, self.n_words + n_facts.unsqueeze(1) - 1 - slot, 0)  # most recent = time_1
        u = (E[0][queries] * self.l).sum(1)                                          # u^1 = sum_j l_j B x_j
        for k in range(self.hops):
            A, C = E[k], E[k + 1]
            m = (A[stories] * self.l).sum(2) + A[time] * filled.unsqueeze(-1)         # m_i = sum_j l_j A x_ij + T_A(i)
            c = (C[stories] * self.l).sum(2) + C[time] * filled.unsqueeze(-1)
            p = torch.softmax((m * u.unsqueeze(1)).sum(-1), dim=-1)                 # eq. 33 (empty slots score 0)
            u = u + (p.unsqueeze(-1) * c).sum(1)                                     # eqs. 34-35
        logits = u @ E[self.hops][: self.n_words].T                                  # W^T = E_K
        return logits.masked_fill(self.rows[: self.n_words, 0] == 0, float("-inf"))


def train_step(model: PlainMemNet, opt: torch.optim.Optimizer, batch: dict[str, torch.Tensor], n_train: int,
               divergence_weight: float = 0.1, clip_norm: float = 40.0) -> torch.Tensor:
    """One minibatch: the summed cross-entropy (+ the weighted divergence, scaled by |M|/N), backward, each
    gradient tensor clipped at `clip_norm`, one optimiser step."""
    logits = model(batch["stories"], batch["n_facts"], batch["queries"], model.weights())
    loss = F.cross_entropy(logits, batch["answers"], reduction="sum")
    if model.bayesian:
        loss = loss + divergence_weight * model.divergence() * len(batch["answers"]) / n_train
    opt.zero_grad(set_to_none=True)
    loss.backward()
    for p in model.parameters():
        torch.nn.utils.clip_grad_norm_(p, clip_norm)
    opt.step()
    return loss.detach()
