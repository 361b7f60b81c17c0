"""Context-vector mechanisms of the ACVI chapter, interchangeable behind `config.attention`.

All share the additive scores of thesis eq. 63 / 70 (coverage):
    e_t^i = v^T tanh(W_h h_i + W_s s_t + w_k k_t^i + b_attn)
and return (c_t, a_t, kl_t): the context vector (B, D), the attention distribution over source positions (B, N)
that the copy mechanism uses (eq. 68) and that coverage accumulates (eq. 69), and the per-example KL term (B,)
(zero for deterministic mechanisms).

  "asa"          additive soft attention (eqs. 64-65): a_t = softmax(e_t), c_t = sum_i a_t^i h_i.
  "acvi_thesis"  thesis §7.3: component means MLP_mu(h_i), log-variances MLP_sigma(h_i) (eqs. 78-80); sample
                 c_t = sum_i a mu + sqrt(sum_i a^2 sigma^2) eps (eqs. 85-87); KL of that Gaussian from N(0, I),
                 the closed form of eq. 84 with its sign corrected (reading B-3, docs/acvi.md).
  "acvi_paper"   paper §3: component means h_i (P-eq. 16), log sigma^2 = ReLU(W h + b) (P-eq. 17); the moment
                 heuristic (P-eq. 24) before the Gumbel phase, then z ~ Gumbel-Softmax(a, tau 0.5) and
                 c_t = sum_i z_i (h_i + sigma_i eps_i) (P-eqs. 22-23); KL by a one-sample Monte-Carlo estimate
                 log q(c_t) - log N(c_t; 0, I), q the mixture of P-eq. 18.
  "structured"   Kim et al. 2017 linear-chain CRF over source positions with binary z_i (reading
                 B-4): unary potentials e_t^i, learned 2x2 transition potentials, marginals p(z_i = 1) by
                 forward-backward (as the gradient of log Z); a_t = marginals / their sum so copying and
                 coverage still get a distribution.
  "variational"  Deng et al. 2018 categorical alignment z_t with prior p(z_t) = a_t and an amortised posterior
                 q(z_t | y_t) that also sees the target word; c_t = h_z for a sampled z, copy from z
                 (one-hot); ELBO E_q[log P(y|z)] - KL(q || p) with REINFORCE for q, the soft-attention output
                 under q as the baseline (paper: "REINFORCE along with a specialized baseline"). The training
                 step lives in model.PointerGenerator.variational_step (it needs the output distribution);
                 at decoding z ~ p (K samples averaged) or, with sample=False, the soft mean.

Sampling: `sample=True` draws (training, and each of the K decoding samples); `sample=False` uses the mean.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

ATTENTIONS = ("asa", "acvi_thesis", "acvi_paper", "structured", "variational")
NEG_INF = -1e9
LOG_2PI = math.log(2 * math.pi)


def masked_softmax(e: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """softmax over source positions, padding (mask False) gets probability 0 (eq. 64)."""
    return torch.softmax(e.masked_fill(~mask, NEG_INF), dim=-1)


class AdditiveScores(nn.Module):
    """e_t^i = v^T tanh(W_h h_i + W_s s_t + w_k k_t^i + b_attn) (eqs. 63, 70). W_h h is precomputed once."""

    def __init__(self, enc_dim: int, dec_dim: int, attn_dim: int):
        super().__init__()
        self.W_h = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_s = nn.Linear(dec_dim, attn_dim)              # its bias is b_attn
        self.w_k = nn.Linear(1, attn_dim, bias=False)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def forward(self, Wh_h: torch.Tensor, s_t: torch.Tensor, k_t: torch.Tensor | None) -> torch.Tensor:
        x = Wh_h + self.W_s(s_t).unsqueeze(1)                                   # (B, N, A)
        if k_t is not None:
            x = x + self.w_k(k_t.unsqueeze(-1))
        return self.v(torch.tanh(x)).squeeze(-1)                                # (B, N)


class SoftAttention(nn.Module):
    """ASA (eqs. 63-65)."""

    def forward(self, e, h, mask, sample=False, gumbel=False):
        a = masked_softmax(e, mask)
        c = torch.bmm(a.unsqueeze(1), h).squeeze(1)                             # eq. 65
        return c, a, e.new_zeros(e.shape[0])


def gaussian_kl_std_normal(m: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """KL(N(m, diag v) || N(0, I)) = 1/2 sum_d (v + m^2 - 1 - log v); = minus thesis eq. 84 (reading B-3)."""
    return 0.5 * (v + m * m - 1.0 - torch.log(v)).sum(-1)


class ACVIThesis(nn.Module):
    """Thesis ACVI: N(c | MLP_mu(h_i), diag exp MLP_sigma(h_i)) components weighted by a_t (eq. 81)."""

    def __init__(self, enc_dim: int):
        super().__init__()
        # "two layers of size dim(h)" (eq. 80); the activation is not given: tanh.
        self.mlp_mu = nn.Sequential(nn.Linear(enc_dim, enc_dim), nn.Tanh(), nn.Linear(enc_dim, enc_dim))
        self.mlp_sigma = nn.Sequential(nn.Linear(enc_dim, enc_dim), nn.Tanh(), nn.Linear(enc_dim, enc_dim))

    def components(self, h):
        return self.mlp_mu(h), self.mlp_sigma(h)                                # mu(h_i), log sigma^2(h_i)

    def forward(self, e, h, mask, sample=False, gumbel=False, comps=None):
        a = masked_softmax(e, mask)
        mu, log_var = comps if comps is not None else self.components(h)
        m = torch.bmm(a.unsqueeze(1), mu).squeeze(1)                            # E[c_t; D], eq. 86
        v = torch.bmm((a * a).unsqueeze(1), log_var.exp()).squeeze(1)           # V[c_t; D], eq. 87
        v = v.clamp_min(1e-8)
        c = m + v.sqrt() * torch.randn_like(m) if sample else m                  # eq. 85
        return c, a, gaussian_kl_std_normal(m, v)


class ACVIPaper(nn.Module):
    """Paper ACVI: N(c | h_i, diag sigma^2(h_i)) components, log sigma^2 = ReLU(W h + b) (P-eqs. 16-18)."""

    def __init__(self, enc_dim: int, tau: float = 0.5):
        super().__init__()
        self.W_sigma = nn.Linear(enc_dim, enc_dim)
        self.tau = tau

    def components(self, h):
        return h, F.relu(self.W_sigma(h))                                       # P-eq. 17

    def forward(self, e, h, mask, sample=False, gumbel=False, comps=None):
        a = masked_softmax(e, mask)
        mu, log_var = comps if comps is not None else self.components(h)
        if not sample:
            c = torch.bmm(a.unsqueeze(1), mu).squeeze(1)
        elif gumbel:                                                            # P-eqs. 22-23, footnote 1
            log_a = torch.log(a.clamp_min(1e-20)).masked_fill(~mask, NEG_INF)
            z = F.gumbel_softmax(log_a, tau=self.tau, hard=False)               # relaxed one-hot (B, N)
            c_ti = mu + (0.5 * log_var).exp() * torch.randn_like(mu)           # (B, N, D)
            c = torch.bmm(z.unsqueeze(1), c_ti).squeeze(1)
        else:                                                                   # P-eq. 24, in law
            m = torch.bmm(a.unsqueeze(1), mu).squeeze(1)
            v = torch.bmm((a * a).unsqueeze(1), log_var.exp()).squeeze(1)
            c = m + v.sqrt() * torch.randn_like(m)
        return c, a, self.mc_kl(c, a, mu, log_var, mask)

    @staticmethod
    def mc_kl(c, a, mu, log_var, mask):
        """log q(c) - log N(c; 0, I) with q(c) = sum_i a_i N(c; mu_i, diag exp log_var_i) (P-eqs. 18, 20, 21)."""
        d = c.shape[-1]
        diff = c.unsqueeze(1) - mu                                              # (B, N, D)
        log_comp = -0.5 * (d * LOG_2PI + log_var.sum(-1) + (diff * diff * torch.exp(-log_var)).sum(-1))
        log_q = torch.logsumexp((torch.log(a.clamp_min(1e-20)) + log_comp).masked_fill(~mask, NEG_INF), dim=-1)
        log_p = -0.5 * (d * LOG_2PI + (c * c).sum(-1))
        return log_q - log_p


class StructuredAttention(nn.Module):
    """Linear-chain CRF attention over source positions, binary z_i (Kim et al. 2017, segmentation attention)."""

    def __init__(self):
        super().__init__()
        self.transition = nn.Parameter(torch.zeros(2, 2))                       # theta(z_i, z_{i+1})

    def log_partition(self, unary: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Forward algorithm; unary (B, N, 2) log-potentials; padded positions are skipped."""
        alpha = unary[:, 0]                                                     # (B, 2)
        for i in range(1, unary.shape[1]):
            nxt = torch.logsumexp(alpha.unsqueeze(2) + self.transition, dim=1) + unary[:, i]
            alpha = torch.where(mask[:, i:i + 1], nxt, alpha)
        return torch.logsumexp(alpha, dim=-1)

    def marginals(self, e: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """p(z_i = 1 | e) = d log Z / d theta_i(1) (forward-backward by differentiation), (B, N)."""
        with torch.enable_grad():
            on = e if e.requires_grad else e.detach().requires_grad_(True)
            unary = torch.stack([torch.zeros_like(on), on], dim=-1)
            log_z = self.log_partition(unary, mask)
            (p1,) = torch.autograd.grad(log_z.sum(), on, create_graph=torch.is_grad_enabled() and e.requires_grad)
        return p1 * mask

    def forward(self, e, h, mask, sample=False, gumbel=False):
        p1 = self.marginals(e.masked_fill(~mask, 0.0), mask)
        a = p1 / p1.sum(-1, keepdim=True).clamp_min(1e-12)
        c = torch.bmm(a.unsqueeze(1), h).squeeze(1)
        return c, a, e.new_zeros(e.shape[0])


class VariationalAttention(nn.Module):
    """Categorical alignment variable (Deng et al. 2018): prior a_t = softmax(e_t), posterior with target info."""

    def __init__(self, enc_dim: int, emb_dim: int, attn_dim: int):
        super().__init__()
        self.W_qh = nn.Linear(enc_dim, attn_dim, bias=False)
        self.W_qy = nn.Linear(emb_dim, attn_dim)
        self.v_q = nn.Linear(attn_dim, 1, bias=False)

    def posterior(self, e, h, mask, y_emb):
        """q(z_t = i | x, y_<t, y_t) = softmax(e_t^i + v_q^T tanh(W_qh h_i + W_qy emb(y_t)))."""
        e_q = e + self.v_q(torch.tanh(self.W_qh(h) + self.W_qy(y_emb).unsqueeze(1))).squeeze(-1)
        return masked_softmax(e_q, mask)

    def forward(self, e, h, mask, sample=False, gumbel=False):
        """Decoding path (no target): z ~ p = a_t, c_t = h_z, copy weights one-hot(z); or the soft mean."""
        a = masked_softmax(e, mask)
        if sample:
            a = F.one_hot(torch.multinomial(a, 1).squeeze(1), a.shape[1]).to(a.dtype)
        c = torch.bmm(a.unsqueeze(1), h).squeeze(1)
        return c, a, e.new_zeros(e.shape[0])


def categorical_kl(q: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """KL(q || p) = sum_i q_i (log q_i - log p_i), with 0 log 0 = 0, (B,)."""
    return (q * (torch.log(q.clamp_min(1e-20)) - torch.log(p.clamp_min(1e-20)))).sum(-1)


def make_attention(kind: str, enc_dim: int, gumbel_tau: float = 0.5, emb_dim: int = 128,
                   attn_dim: int = 256) -> nn.Module:
    if kind == "asa":
        return SoftAttention()
    if kind == "acvi_thesis":
        return ACVIThesis(enc_dim)
    if kind == "acvi_paper":
        return ACVIPaper(enc_dim, gumbel_tau)
    if kind == "structured":
        return StructuredAttention()
    if kind == "variational":
        return VariationalAttention(enc_dim, emb_dim, attn_dim)
    raise ValueError(f"attention {kind!r}: expected one of {ATTENTIONS}")
