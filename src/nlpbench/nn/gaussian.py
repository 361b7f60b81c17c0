"""Reparameterised diagonal Gaussians: the one Gaussian layer of the package.

Used by the priors ablation of the memory networks (Gaussian prior and posterior over the embedding matrices,
KL variational inference as in thesis ch. 6 eqs. 38-40) and by any family with amortised Gaussian latents
(variational attention, VAEs). Closed-form KL, reparameterised samples from an explicit generator.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nlpbench.nn.per_run import as_slots, draws_index, flat_row_index, scatter_rows


def reparameterize(mu: torch.Tensor, log_sigma: torch.Tensor, generator: torch.Generator | None = None,
                   scale: float = 1.0) -> torch.Tensor:
    """z = mu + scale * sigma * eps, eps ~ N(0, I): differentiable in mu and sigma.

    `scale` multiplies sigma: 1 = a posterior sample, 0 = the mean (MAP), 3 = the "neighbourhood" draws of the
    Bahuleyan thesis (Table 4.5)."""
    if scale == 0.0:
        return mu
    eps = torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype)
    return mu + scale * log_sigma.exp() * eps


def kl_normal(mu_q: torch.Tensor, log_sigma_q: torch.Tensor, mu_p: torch.Tensor | float = 0.0,
              log_sigma_p: torch.Tensor | float = 0.0) -> torch.Tensor:
    """Elementwise KL(N(mu_q, sigma_q^2) || N(mu_p, sigma_p^2)) =
    log(sigma_p/sigma_q) + (sigma_q^2 + (mu_q - mu_p)^2) / (2 sigma_p^2) - 1/2. Sum over the latent axes."""
    log_sigma_p = torch.as_tensor(log_sigma_p, dtype=mu_q.dtype, device=mu_q.device)
    var_ratio = torch.exp(2 * (log_sigma_q - log_sigma_p))
    mean_term = (mu_q - mu_p) ** 2 * torch.exp(-2 * log_sigma_p)
    return (log_sigma_p - log_sigma_q) + 0.5 * (var_ratio + mean_term) - 0.5


class GaussianMatrix(nn.Module):
    """q(Theta) = N(vec Theta | mu, diag(sigma^2)) for K runs at once, prior N(0, sigma_p^2 I).

    Same interface as StudentTMatrix (mean / sample / divergence / nu; one matrix per run, (K, V, d), or n per
    run, (K, n, V, d), a "slot" being one matrix of one run) so the memory network can swap the posterior
    family by a config value. `row_mask` (lead + (V,)) marks each slot's real rows; `rows` lists per slot the
    rows noise is drawn for (those a forward pass can read; the others stay at mu), from the generator the
    draws name for that slot (its run's own: grouping never changes a run).
    """

    def __init__(self, mu_init: torch.Tensor, row_mask: torch.Tensor, rows: list[torch.Tensor],
                 sigma_init: float, prior_sigma: float = 1.0):
        super().__init__()
        self.lead = tuple(mu_init.shape[:-2])
        self.mu = nn.Parameter(mu_init)                                                  # lead + (V, d)
        self.log_sigma = nn.Parameter(torch.full_like(mu_init, math.log(sigma_init)))
        for p in (self.mu, self.log_sigma):
            p.lead_dims = len(self.lead)   # per-tensor gradient clipping treats each matrix as its own tensor
        self.log_prior_sigma = math.log(prior_sigma)
        self.register_buffer("row_mask", row_mask.to(torch.float32).unsqueeze(-1))
        self.rows = rows
        self.register_buffer("flat_rows", flat_row_index(rows, mu_init.shape[-2]), persistent=False)

    @property
    def nu(self) -> None:
        return None

    def mean(self) -> torch.Tensor:
        return self.mu * self.row_mask

    def sample(self, generators: list[torch.Generator], escort: bool = False) -> torch.Tensor:
        """One reparameterised draw per slot (eq. 40); `escort` is ignored (a Gaussian is its own escort)."""
        S, V, d = as_slots(self.mu).shape
        noise = torch.cat([torch.randn((len(r), d), generator=g, device=self.mu.device)
                           for r, g in zip(self.rows, generators)])
        eps = scatter_rows(noise, self.flat_rows, (S, V, d)).view(self.mu.shape)
        return (self.mu + self.log_sigma.exp() * eps) * self.row_mask

    def samples(self, generators: list[torch.Generator], escort: bool, n: int) -> torch.Tensor:
        """n draws per slot, (n,) + lead + (V, d), each slot's n draws from one generator call
        (StudentTMatrix.samples)."""
        S, V, d = as_slots(self.mu).shape
        noise = torch.cat([torch.randn((n * len(r), d), generator=g, device=self.mu.device)
                           for r, g in zip(self.rows, generators)])
        eps = scatter_rows(noise, draws_index(self.rows, V, n).to(noise.device), (n * S, V, d))
        return (self.mu + self.log_sigma.exp() * eps.view((n,) + tuple(self.mu.shape))) * self.row_mask

    def divergence(self, prior_nu=None) -> torch.Tensor:
        """sum_l KL(q_l || N(0, sigma_p^2)) over each slot's existing elements: shape `lead`. `prior_nu` is
        ignored."""
        d = kl_normal(self.mu, self.log_sigma, 0.0, self.log_prior_sigma)
        return (d * self.row_mask).sum(dim=(-2, -1))


class GaussianHead(nn.Module):
    """An amortised diagonal Gaussian q(v | x) = N(mu(x), diag sigma(x)^2), parameterised by log sigma.

    mean="linear": mu = W_mu x + b (the VAE/VED latent z, thesis §6.4.1: "linearly transformed");
    mean="identity": mu = x (variational attention, mu_cj = c_j^det). log sigma is linear in x, or, with
    `sigma_hidden`, a tanh layer followed by a linear one (the context posterior of §6.4.1)."""

    def __init__(self, in_dim: int, out_dim: int, mean: str = "linear", sigma_hidden: int | None = None):
        super().__init__()
        if mean not in ("linear", "identity"):
            raise ValueError(f"GaussianHead: mean must be linear or identity, got {mean!r}")
        if mean == "identity" and in_dim != out_dim:
            raise ValueError(f"GaussianHead: an identity mean needs in_dim == out_dim ({in_dim} != {out_dim})")
        self.mu = nn.Linear(in_dim, out_dim) if mean == "linear" else nn.Identity()
        if sigma_hidden:
            self.log_sigma = nn.Sequential(nn.Linear(in_dim, sigma_hidden), nn.Tanh(), nn.Linear(sigma_hidden, out_dim))
        else:
            self.log_sigma = nn.Linear(in_dim, out_dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.mu(x), self.log_sigma(x)
