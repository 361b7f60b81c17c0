"""Student's-t posteriors over weight matrices, as in t-MEM-NN (Tolias thesis, ch. 6, eqs. 41-62).

Every tensor here carries a leading dimension K: K independent runs (tasks, seeds, configurations) are
trained together, each with its own posterior. Each matrix Theta (V x delta) has a per-element mean and scale
and one scalar degrees of freedom nu_Theta per run (eqs. 51-53).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nlpbench.nn.kernels import check as check_kernels, resolve as resolve_kernels, run_as
from nlpbench.nn.per_run import as_slots, draws_index, flat_row_index, run_of_rows, scatter_rows


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
    """eps ~ t(0, 1, df_k) elementwise (unit *scale*, reading A-12) for K runs: run k draws (rows[k], d)
    values from its own generator; returns them stacked, (sum(rows), d). Reparameterised in df.

    A t variate is z / sqrt(g), z ~ N(0, 1), g ~ Gamma(df/2, rate=df/2) (the scale mixture of eqs. 43-45);
    the Gamma draw is differentiable in df (implicit reparameterisation), so nu can be learned. Only the
    draws are per run; the arithmetic runs once over all of them.
    """
    half = df.reshape(-1) / 2
    run_of_row = run_of_rows(rows, df.device)
    gamma = _GammaRuns.apply(half, list(rows), d, generators, run_of_row)
    z = torch.cat([torch.randn((n, d), generator=g, device=df.device, dtype=df.dtype)
                   for n, g in zip(rows, generators)])
    return z * torch.rsqrt((gamma / half[run_of_row].unsqueeze(1)).clamp_min(1e-30))


def _polar_pairs(rows: list[int], d: int, generators: list[torch.Generator], device, dtype) -> torch.Tensor:
    """For every run, rows[k] x d uniform pairs (U_1, U_2) ~ U[0, 1)^2 from its own generator, stacked run after
    run: (2, sum(rows) d). Consecutive runs that share a generator (the matrices of one run of a model,
    StudentTMatrix with a matrix axis) take theirs from one call."""
    calls: list[list] = []                                       # [generator, rows] per call
    for n, g in zip(rows, generators):
        if calls and calls[-1][0] is g:
            calls[-1][1] += n
        else:
            calls.append([g, n])
    return torch.cat([torch.rand((2, n * d), generator=g, device=device, dtype=dtype) for g, n in calls], 1)


def _angle_and_log(pairs: torch.Tensor, d: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The pairs' angle cosine cos(2 pi U_2) and log(w) with w = 1 - U_1 in (0, 1], each (rows, d)."""
    return torch.cos(2 * math.pi * pairs[1]).view(-1, d), torch.log1p(-pairs[0]).view(-1, d)


def _polar_uniforms(rows: list[int], d: int, generators: list[torch.Generator], device, dtype
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """cos(2 pi U_2) and log(1 - U_1) for every run's rows[k] x d pairs (_polar_pairs, _angle_and_log)."""
    return _angle_and_log(_polar_pairs(rows, d, generators, device, dtype), d)


def _polar_t(cos: torch.Tensor, log_w: torch.Tensor, df: torch.Tensor) -> torch.Tensor:
    """Bailey's polar t(df) variate T = cos(2 pi U_2) sqrt(df (w^(-2/df) - 1)), w^(-2/df) - 1 computed as
    expm1(-2 log(w) / df)."""
    return cos * torch.sqrt(df * torch.expm1(-2 * log_w / df))


def standard_t_noise_runs_polar(df: torch.Tensor, rows: list[int], d: int,
                                generators: list[torch.Generator]) -> torch.Tensor:
    """eps ~ t(0, 1, df_k) elementwise as `standard_t_noise_runs` (the same distribution, other numbers), by
    Bailey's polar method (Math. Comp. 62, 1994): a pair (u, v) uniform in the unit disk gives
    T = u sqrt(df (w^(-2/df) - 1) / w), w = u^2 + v^2. Its pair is drawn here without rejection, as Box-Muller
    draws Marsaglia's polar normal: w = 1 - U_1 is uniform and u / sqrt(w) = cos(2 pi U_2), so
    T = cos(2 pi U_2) sqrt(df (w^(-2/df) - 1)). No draw depends on df, so T is an exact reparameterisation in df
    (a pathwise gradient through this formula) without a Gamma draw or its implicit gradient. As df -> inf it
    is the Box-Muller normal."""
    cos, log_w = _polar_uniforms(rows, d, generators, df.device, df.dtype)
    run_of_row = run_of_rows(rows, df.device)
    return _polar_t(cos, log_w, df.reshape(-1)[run_of_row].unsqueeze(1))


class _PolarDraw(torch.autograd.Function):
    """One draw Theta = (mu + c sigma eps) * mask of every run's matrix, eps ~ t(df) by the polar method
    (`_polar_t` of the uniforms (cos, log w), placed at each run's noise rows), with c = sqrt(nu/(nu+2)) and
    df = nu + 2 for the escort (eqs. 60-62), c = 1 and df = nu for q itself. The same numbers and gradients as
    autograd through those formulas, in a few passes over the matrix instead of autograd's many:

        dTheta/dmu = mask,  dTheta/dlog sigma = c sigma eps (the noise term itself),
        dTheta/dnu = sigma (eps dc/dnu + c dT/ddf),  dc/dnu = c / (nu (nu + 2)),
        dT/ddf = T / (2 df) (1 - (1 + q) x / q)  with x = -2 log(w) / df, q = expm1(x),

    each run's dnu summed over its own elements."""

    @staticmethod
    def forward(ctx, mu, log_sigma, nu, cos, log_w, flat_rows, run_of_row, row_mask, escort):
        df = (nu + 2 if escort else nu)[run_of_row].unsqueeze(1)           # (rows, 1)
        T = _polar_t(cos, log_w, df)
        eps = scatter_rows(T, flat_rows, mu.shape)
        c = torch.sqrt(nu / (nu + 2)) if escort else torch.ones_like(nu)
        sigma = log_sigma.exp()
        noise = c.view(-1, 1, 1) * sigma * eps
        ctx.save_for_backward(nu, c, sigma, noise, T, log_w, df, flat_rows, run_of_row, row_mask)
        ctx.escort = escort
        return (mu + noise) * row_mask

    @staticmethod
    def backward(ctx, grad):
        nu, c, sigma, noise, T, log_w, df, flat_rows, run_of_row, row_mask = ctx.saved_tensors
        K, V, d = grad.shape
        g = grad * row_mask
        d_log_sigma = g * noise
        x = -2 * log_w / df
        q = torch.expm1(x)
        dT = T / (2 * df) * (1 - (1 + q) * x / q.clamp_min(1e-30))        # dT/ddf (T = 0 where w = 1, q = 0)
        g_sigma = (g * sigma).view(K * V, d).index_select(0, flat_rows)     # dL/deps / c at the noise rows
        d_nu = c * torch.zeros_like(nu).index_add_(0, run_of_row, (g_sigma * dT).sum(1))
        if ctx.escort:                                                      # + sum sigma eps dc/dnu dL/dTheta
            d_nu = d_nu + d_log_sigma.sum((1, 2)) / (nu * (nu + 2))
        return g, d_log_sigma, d_nu, None, None, None, None, None, None


def polar_draw(mu: torch.Tensor, log_sigma: torch.Tensor, nu: torch.Tensor, pairs: torch.Tensor,
               flat_rows: torch.Tensor, run_of_row: torch.Tensor, row_mask: torch.Tensor, escort: bool) -> torch.Tensor:
    """One draw of every slot's matrix, (slots, V, d): _PolarDraw of the uniform pairs (_polar_pairs) placed at
    each slot's noise rows. The pairs are drawn outside, so that the arithmetic can run as compiled kernels."""
    cos, log_w = _angle_and_log(pairs, mu.shape[-1])
    return _PolarDraw.apply(mu, log_sigma, nu, cos, log_w, flat_rows, run_of_row, row_mask, escort)


T_SAMPLERS = {"gamma": standard_t_noise_runs, "polar": standard_t_noise_runs_polar}
KERNELS_KEY = "model.posterior_kernels"     # the setting that chooses eager or compiled kernels, named in errors


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
    q == p; the form is exact only when nu_q == nu_p (reading A-11), which we use literally as the regulariser.
    """
    one_over_1mt = -(1 + nu_q) / 2
    psi_q = torch.exp(log_psi(nu_q, log_sigma))
    psi_p = torch.exp(log_psi(nu_p))
    sigma2 = torch.exp(2 * log_sigma)
    return one_over_1mt * (psi_q * (1 + 1 / nu_q) - psi_p * (1 + (sigma2 + mu**2) / nu_p))


def divergence_sums(mu: torch.Tensor, log_sigma: torch.Tensor, nu_q: torch.Tensor, rows: torch.Tensor,
                    n_elements: torch.Tensor, prior_nu: torch.Tensor | None) -> torch.Tensor:
    """sum_l D_t(q_l || p_l) (eq. 56) over the existing elements of each slot's matrix, (slots,): mu, log_sigma
    (slots, V, d), nu_q (slots,), rows (slots, V) 1 where a row exists, n_elements (slots,) their elements.
    prior_nu None: each prior's dof is its posterior's nu_Theta; else one per slot.

    `t_divergence` summed, with the sums taken first: per element only sigma^(2/(nu_q+1)) (in Psi_q,
    eq. 57) and sigma^2 + mu^2 depend on the element. With Psi_1 = Psi_q at sigma = 1 and N elements,
        sum_l D_t = -(1+nu_q)/2 [N ((1 + 1/nu_q) Psi_1 - Psi_p) + (1 + 1/nu_q) Psi_1 S_1 - Psi_p S_2 / nu_p],
    S_1 = sum_l (sigma_l^(2/(nu_q+1)) - 1) and S_2 = sum_l (sigma_l^2 + mu_l^2): no difference of
    two large sums, so float32 keeps the per-element form's accuracy. Tied (Psi_p = Psi_1), the bracket is
    (Psi_1 / nu_q) (N + (1 + nu_q) S_1 - S_2)."""
    s1 = (((log_sigma * (2 / (nu_q + 1)).view(-1, 1, 1)).exp() - 1).sum(2) * rows).sum(1)   # exp: 6x expm1's speed
    s2 = (((2 * log_sigma).exp() + mu * mu).sum(2) * rows).sum(1)
    psi_1 = torch.exp(log_psi(nu_q))
    if prior_nu is None:                                                     # nu_p = nu_q: Psi_p = Psi_1
        return -(1 + nu_q) / (2 * nu_q) * (n_elements + (1 + nu_q) * s1 - s2) * psi_1
    nu_p = prior_nu.reshape(-1)
    psi_p = torch.exp(log_psi(nu_p))
    q_term = (1 + 1 / nu_q) * psi_1
    return -(1 + nu_q) / 2 * (n_elements * (q_term - psi_p) + q_term * s1 - psi_p * s2 / nu_p)


class StudentTMatrix(nn.Module):
    """q(Theta) = t(vec Theta | mu, diag(sigma^2), nu_Theta) for K runs at once (eqs. 51-53).

    mu_init (K, V, d): one matrix per run; or (K, n, V, d): n matrices per run, each with its own nu_Theta
    (the embedding matrices of one t-MEM-NN as one module: one draw, one divergence and three parameters
    for all of them, not n of each). Below, a "slot" is one matrix of one run, in that order (run-major).
    `row_mask` (K, V) or (K, n, V) marks rows that exist (the nil row 0 and vocabulary padding are 0): masked
    rows are exactly zero in every sample and add nothing to the divergence. `rows` lists, per slot, the rows
    noise is drawn for (the others stay at mu); `generators` passed to the draws are per slot, so a run's
    matrices name the run's generator n times (and take their uniforms from one call of it).
    """

    def __init__(self, mu_init: torch.Tensor, row_mask: torch.Tensor, rows: list[torch.Tensor],
                 sigma_init: float, dof_init: float, dof_min: float = 0.0, sampler: str = "gamma",
                 kernels: str = "eager"):
        super().__init__()
        if sampler not in T_SAMPLERS:
            raise ValueError(f"model.t_sampler: unknown value {sampler!r} (expected one of {', '.join(T_SAMPLERS)})")
        self.kernels = check_kernels(kernels, KERNELS_KEY)   # how the polar draw and the divergence run (nn.kernels)
        self._kernels_on: dict[str, str] = {}                                     # device type -> eager | compiled
        self.sampler = sampler
        self.noise = T_SAMPLERS[sampler]    # gamma: z / sqrt(g / df) with g ~ Gamma; polar: Bailey's polar method
        self.lead = tuple(mu_init.shape[:-2])                                     # (K,) or (K, n)
        self.mu = nn.Parameter(mu_init)                                           # lead + (V, d)
        self.log_sigma = nn.Parameter(torch.full_like(mu_init, math.log(sigma_init)))  # sigma > 0 via exp
        # nu_Theta = dof_min + exp(log_nu) > dof_min (a floor keeps the t noise finite; 0 = none)
        self.dof_min = dof_min
        self.log_nu = nn.Parameter(torch.full(self.lead, math.log(dof_init - dof_min)))
        for p in (self.mu, self.log_sigma, self.log_nu):
            p.lead_dims = len(self.lead)   # per-tensor gradient clipping treats each matrix as its own tensor
        self.register_buffer("row_mask", row_mask.to(torch.float32).unsqueeze(-1))
        self.rows = rows  # per slot, the rows noise is drawn for (the others stay at mu), as when trained alone
        self.register_buffer("flat_rows", flat_row_index(rows, mu_init.shape[-2]), persistent=False)
        self.register_buffer("run_of_row", run_of_rows([len(r) for r in rows]), persistent=False)   # each row's slot
        self.register_buffer("n_elements", self.row_mask.sum((-2, -1)).reshape(-1) * mu_init.shape[-1],
                             persistent=False)

    @property
    def nu(self) -> torch.Tensor:
        return self.dof_min + self.log_nu.exp()

    @property
    def kernels_used(self) -> str:
        """"eager" or "compiled": how `polar_draw` and `divergence_sums` run on this module's device."""
        device = self.mu.device
        if device.type not in self._kernels_on:
            self._kernels_on[device.type] = resolve_kernels(self.kernels, device, KERNELS_KEY)
        return self._kernels_on[device.type]

    def _with_kernels(self, fn):
        """`fn` run as `kernels` says (op by op, or as compiled kernels: the same formulas)."""
        return run_as(fn, self.kernels_used)

    def mean(self) -> torch.Tensor:
        return self.mu * self.row_mask

    def sample(self, generators: list[torch.Generator], escort: bool) -> torch.Tensor:
        """One draw per slot. escort=True: eqs. 60-62, Theta = mu + sqrt(nu/(nu+2)) sigma * eps, eps ~ t(nu+2)
        (training). escort=False: Theta = mu + sigma * eps, eps ~ t(nu), the posterior q itself (reading A-5)."""
        nu = self.nu.reshape(-1)
        mu = as_slots(self.mu)
        d = mu.shape[2]
        if self.sampler == "polar":
            theta = self._with_kernels(polar_draw)(mu, as_slots(self.log_sigma), nu, self.polar_pairs(generators),
                                             self.flat_rows, self.run_of_row, as_slots(self.row_mask), escort)
            return theta.view(self.mu.shape)
        sigma = self.log_sigma.exp()
        noise = self.noise(nu + 2 if escort else nu, [len(r) for r in self.rows], d, generators)
        eps = scatter_rows(noise, self.flat_rows, mu.shape).view(self.mu.shape)
        scale = torch.sqrt(nu / (nu + 2)).view(self.lead + (1, 1)) if escort else 1.0
        return (self.mu + scale * sigma * eps) * self.row_mask

    def polar_pairs(self, generators: list[torch.Generator]) -> torch.Tensor:
        """The polar sampler's uniform pairs for one draw per slot, its noise rows only (_polar_pairs)."""
        return _polar_pairs([len(r) for r in self.rows], self.mu.shape[-1], generators, self.mu.device,
                            self.mu.dtype)

    def samples(self, generators: list[torch.Generator], escort: bool, n: int) -> torch.Tensor:
        """n draws per slot, (n,) + lead + (V, d), each slot's n draws from one call of its generator: the
        distribution of n calls of `sample`, not their numbers (the generator fills the values in another order)."""
        nu = self.nu.reshape(-1)
        S, V, d = as_slots(self.mu).shape
        noise = self.noise(nu + 2 if escort else nu, [n * len(r) for r in self.rows], d, generators)
        eps = scatter_rows(noise, draws_index(self.rows, V, n).to(noise.device), (n * S, V, d))
        eps = eps.view((n,) + tuple(self.mu.shape))
        scale = torch.sqrt(nu / (nu + 2)).view((1,) + self.lead + (1, 1)) if escort else 1.0
        return (self.mu + scale * self.log_sigma.exp() * eps) * self.row_mask

    def divergence(self, prior_nu: torch.Tensor | None) -> torch.Tensor:
        """sum_l D_t(q_l || p_l) over the existing elements of each slot's matrix: shape `lead`.
        prior_nu None ties the prior's dof to this posterior's nu_Theta (then eq. 56 is exact); else one prior
        dof per slot (`lead`). See `divergence_sums`."""
        nu_q = self.nu.reshape(-1)
        mu, log_sigma = as_slots(self.mu), as_slots(self.log_sigma)
        rows = as_slots(self.row_mask)[..., 0]                                # (slots, V)
        per_slot = self._with_kernels(divergence_sums)(mu, log_sigma, nu_q, rows, self.n_elements, prior_nu)
        return per_slot.view(self.lead)
