"""Student's-t posteriors over weight matrices, as in t-MEM-NN (Tolias thesis, ch. 6, eqs. 41-62).

Every tensor here carries a leading dimension K: K independent runs (tasks, seeds, configurations) are
trained together, each with its own posterior. Each matrix Theta (V x delta) has a per-element mean and scale
and one scalar degrees of freedom nu_Theta per run (eqs. 51-53).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nlpbench.nn.per_run import draws_index, flat_row_index, scatter_rows


class _GammaRuns(torch.autograd.Function):
    """Gamma(alpha_k, 1) draws, rows[k] x d of them from run k's own generator, stacked run after run
    (`run_of_row` names each row's run).

    Backward: the implicit reparameterisation gradient dg/dalpha (as torch's own Gamma sampler has), computed in
    one call over every run's draws and summed per run, instead of one autograd node per run."""

    @staticmethod
    def forward(ctx, alpha, rows, d, generators, run_of_row):
        g = torch.cat([torch._standard_gamma(alpha[k].expand(n, d).contiguous(), generator=gen)
                       for k, (n, gen) in enumerate(zip(rows, generators))])
        ctx.save_for_backward(alpha, g, run_of_row)
        return g

    @staticmethod
    def backward(ctx, grad):
        alpha, g, run_of_row = ctx.saved_tensors
        dg = torch._standard_gamma_grad(alpha[run_of_row].unsqueeze(1).expand_as(g).contiguous(), g)
        per_row = (grad * dg).sum(1)
        return torch.zeros_like(alpha).index_add_(0, run_of_row, per_row), None, None, None, None


def standard_t_noise_runs(df: torch.Tensor, rows: list[int], d: int,
                          generators: list[torch.Generator]) -> torch.Tensor:
    """eps ~ t(0, 1, df_k) elementwise (unit *scale*, spec reading A-12) for K runs: run k draws (rows[k], d)
    values from its own generator; returns them stacked, (sum(rows), d). Reparameterised in df.

    A t variate is z / sqrt(g), z ~ N(0, 1), g ~ Gamma(df/2, rate=df/2) (the scale mixture of eqs. 43-45);
    the Gamma draw is differentiable in df (implicit reparameterisation), so nu can be learned. Only the
    draws are per run; the arithmetic runs once over all of them.
    """
    half = df.reshape(-1) / 2
    run_of_row = torch.repeat_interleave(torch.arange(len(rows), device=df.device),
                                         torch.tensor(rows, device=df.device))
    gamma = _GammaRuns.apply(half, list(rows), d, generators, run_of_row)
    z = torch.cat([torch.randn((n, d), generator=g, device=df.device, dtype=df.dtype)
                   for n, g in zip(rows, generators)])
    return z * torch.rsqrt((gamma / half[run_of_row].unsqueeze(1)).clamp_min(1e-30))


def _polar_block(n: int) -> int:
    """Pairs drawn at a time for n accepted ones (acceptance pi/4 ~ 0.785: a block is short with negligible odds)."""
    return int(n * 1.35) + 64


def _first_accepted(uv: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(u, w) of the first n accepted pairs (0 < w = u^2 + v^2 < 1) among uv (2, m), in order."""
    w = uv[0] * uv[0] + uv[1] * uv[1]
    keep = (w < 1) & (w > 0)
    return uv[0][keep][:n], w[keep][:n]


def _accepted_polar_pairs(rows: list[int], d: int, generators: list[torch.Generator], device, dtype
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """For every run, the first rows[k] * d pairs (u, w = u^2 + v^2) with u, v ~ U(-1, 1) and 0 < w < 1 (Bailey's
    polar method), from the run's own generator in blocks of _polar_block(n) pairs, stacked run after run. A
    run draws what it would draw alone; the acceptance of every run's first block is one pass over all runs."""
    need = [n * d for n in rows]
    blocks = [torch.rand((2, _polar_block(n)), generator=g, device=device, dtype=dtype) * 2 - 1
              for n, g in zip(need, generators)]
    width = max(b.shape[1] for b in blocks)
    uv = torch.stack([torch.nn.functional.pad(b, (0, width - b.shape[1]), value=1.0) for b in blocks])  # w=2: out
    w = uv[:, 0] * uv[:, 0] + uv[:, 1] * uv[:, 1]
    keep = (w < 1) & (w > 0)
    rank = keep.cumsum(1)
    n_k = torch.tensor(need, device=device).unsqueeze(1)
    if bool((rank[:, -1:] >= n_k).all()):                     # every run's first block is enough (all but always)
        take = keep & (rank <= n_k)
        return uv[:, 0][take], w[take]
    us, ws = [], []
    for k, (n, g) in enumerate(zip(need, generators)):        # a short block: that run draws more, as alone
        u, wk = _first_accepted(blocks[k], n)
        while len(u) < n:
            more = torch.rand((2, _polar_block(n - len(u))), generator=g, device=device, dtype=dtype) * 2 - 1
            u2, w2 = _first_accepted(more, n - len(u))
            u, wk = torch.cat([u, u2]), torch.cat([wk, w2])
        us.append(u)
        ws.append(wk)
    return torch.cat(us), torch.cat(ws)


def standard_t_noise_runs_polar(df: torch.Tensor, rows: list[int], d: int,
                                generators: list[torch.Generator]) -> torch.Tensor:
    """eps ~ t(0, 1, df_k) elementwise as `standard_t_noise_runs` (the same distribution, other numbers), by
    Bailey's polar method (Math. Comp. 62, 1994): T = u sqrt(df (w^(-2/df) - 1) / w) for an accepted pair
    (u, w). The acceptance does not depend on df, so T is an exact reparameterisation in df (a pathwise
    gradient through this formula, no rejection term) without a Gamma draw or its implicit gradient. As
    df -> inf it is Marsaglia's polar normal; w^(-2/df) - 1 is computed as expm1(-2 log(w) / df)."""
    u, w = _accepted_polar_pairs(rows, d, generators, df.device, df.dtype)
    u, log_w = u.view(-1, d), w.log().view(-1, d)
    run_of_row = torch.repeat_interleave(torch.arange(len(rows), device=df.device),
                                         torch.tensor(rows, device=df.device))
    nu = df.reshape(-1)[run_of_row].unsqueeze(1)
    return u * torch.sqrt(nu * torch.expm1(-2 * log_w / nu) * torch.exp(-log_w))


T_SAMPLERS = {"gamma": standard_t_noise_runs, "polar": standard_t_noise_runs_polar}


def standard_t_noise(df: torch.Tensor, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """eps ~ t(0, 1, df) of `shape` from one generator (one run of `standard_t_noise_runs`)."""
    n, d = shape[0], math.prod(shape[1:])
    return standard_t_noise_runs(df, [n], d, [generator]).view(shape)


def log_psi(nu: torch.Tensor, log_sigma: torch.Tensor | float = 0.0) -> torch.Tensor:
    """log Psi of eqs. 57-58: -(2/(nu+1)) [lgamma((nu+1)/2) - lgamma(nu/2) - log(pi nu)/2 - log sigma]."""
    log_norm = torch.lgamma((nu + 1) / 2) - torch.lgamma(nu / 2) - 0.5 * torch.log(math.pi * nu) - log_sigma
    return -(2.0 / (nu + 1)) * log_norm


def t_divergence(
    mu: torch.Tensor, log_sigma: torch.Tensor, nu_q: torch.Tensor, nu_p: torch.Tensor
) -> torch.Tensor:
    """Elementwise t-divergence D_t(q || p) of eq. 56, q = t(mu, sigma^2, nu_q), p = t(0, 1, nu_p).

    Returns a tensor shaped like `mu`; sum it over the elements of a matrix. Psi is computed in log space
    (eqs. 57-58) and t = 1 + 2/(1 + nu_q) (eq. 59), so 1/(1 - t) = -(1 + nu_q)/2. The value is 0 when
    q == p; the form is exact only when nu_q == nu_p (spec A-11), which we use literally as the regulariser.
    """
    one_over_1mt = -(1 + nu_q) / 2
    psi_q = torch.exp(log_psi(nu_q, log_sigma))
    psi_p = torch.exp(log_psi(nu_p))
    sigma2 = torch.exp(2 * log_sigma)
    return one_over_1mt * (psi_q * (1 + 1 / nu_q) - psi_p * (1 + (sigma2 + mu**2) / nu_p))


class StudentTMatrix(nn.Module):
    """q(Theta) = t(vec Theta | mu, diag(sigma^2), nu_Theta) for K runs at once (eqs. 51-53).

    `row_mask` (K, V) marks rows that exist for each run (the nil row 0 and vocabulary padding are 0):
    masked rows are exactly zero in every sample and add nothing to the divergence.
    """

    def __init__(self, mu_init: torch.Tensor, row_mask: torch.Tensor, rows: list[torch.Tensor],
                 sigma_init: float, dof_init: float, dof_min: float = 0.0, sampler: str = "gamma"):
        super().__init__()
        if sampler not in T_SAMPLERS:
            raise ValueError(f"model.t_sampler: unknown value {sampler!r} (expected one of {', '.join(T_SAMPLERS)})")
        self.noise = T_SAMPLERS[sampler]    # gamma: z / sqrt(g / df) with g ~ Gamma; polar: Bailey's polar method
        K = mu_init.shape[0]
        self.mu = nn.Parameter(mu_init)                                           # (K, V, d)
        self.log_sigma = nn.Parameter(torch.full_like(mu_init, math.log(sigma_init)))  # sigma > 0 via exp
        # nu_Theta = dof_min + exp(log_nu) > dof_min (a floor keeps the t noise finite; 0 = none)
        self.dof_min = dof_min
        self.log_nu = nn.Parameter(torch.full((K,), math.log(dof_init - dof_min)))
        self.register_buffer("row_mask", row_mask.to(torch.float32).unsqueeze(-1))
        self.rows = rows  # per run, the rows noise is drawn for (the others stay at mu), as when trained alone
        self.register_buffer("flat_rows", flat_row_index(rows, mu_init.shape[1]), persistent=False)

    @property
    def nu(self) -> torch.Tensor:
        return self.dof_min + self.log_nu.exp()

    def mean(self) -> torch.Tensor:
        return self.mu * self.row_mask

    def sample(self, generators: list[torch.Generator], escort: bool) -> torch.Tensor:
        """One draw per run. escort=True: eqs. 60-62, Theta = mu + sqrt(nu/(nu+2)) sigma * eps, eps ~ t(nu+2)
        (training). escort=False: Theta = mu + sigma * eps, eps ~ t(nu), the posterior q itself (reading A-5)."""
        nu = self.nu
        sigma = self.log_sigma.exp()
        noise = self.noise(nu + 2 if escort else nu, [len(r) for r in self.rows], self.mu.shape[2], generators)
        eps = scatter_rows(noise, self.flat_rows, self.mu.shape)
        scale = torch.sqrt(nu / (nu + 2)).view(-1, 1, 1) if escort else 1.0
        return (self.mu + scale * sigma * eps) * self.row_mask

    def samples(self, generators: list[torch.Generator], escort: bool, n: int) -> torch.Tensor:
        """n draws per run, (n, K, V, d), each run's n draws from one call of its generator: the distribution of
        n calls of `sample`, not their numbers (the generator fills the values in another order)."""
        nu = self.nu
        K, V, d = self.mu.shape
        noise = self.noise(nu + 2 if escort else nu, [n * len(r) for r in self.rows], d, generators)
        eps = scatter_rows(noise, draws_index(self.rows, V, n).to(noise.device), (n * K, V, d)).view(n, K, V, d)
        scale = torch.sqrt(nu / (nu + 2)).view(1, -1, 1, 1) if escort else 1.0
        return (self.mu + scale * self.log_sigma.exp() * eps) * self.row_mask

    def divergence(self, prior_nu: torch.Tensor | None) -> torch.Tensor:
        """sum_l D_t(q_l || p_l) over the existing elements of each run's matrix: shape (K,).
        prior_nu None ties the prior's dof to this posterior's nu_Theta (then eq. 56 is exact)."""
        nu_q = self.nu.reshape(-1, 1, 1)
        nu_p = nu_q if prior_nu is None else prior_nu.reshape(-1, 1, 1)
        d = t_divergence(self.mu, self.log_sigma, nu_q, nu_p)
        return (d * self.row_mask).sum(dim=(1, 2))
