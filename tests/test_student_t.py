"""The Student-t machinery of t-MEM-NN: t-divergence (eqs. 56-59) and escort sampling (eqs. 60-62)."""

import math

import pytest
import torch

from nlpbench.nn.student_t import StudentTMatrix, log_psi, standard_t_noise, standard_t_noise_runs, t_divergence


def D(mu, log_sigma, nu_q, nu_p):
    f = lambda x: torch.tensor([float(x)], dtype=torch.float64)
    return t_divergence(f(mu), f(log_sigma), f(nu_q), f(nu_p)).item()


@pytest.mark.parametrize("nu", [1.0, 3.0, 10.0, 100.0, 1e4])
def test_divergence_is_zero_when_posterior_equals_prior(nu):
    assert D(0.0, 0.0, nu, nu) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("nu", [2.0, 5.0, 100.0])
@pytest.mark.parametrize("mu,sigma", [(0.5, 1.0), (-0.1, 1.0), (0.0, 0.01), (0.0, 3.0), (0.2, 0.1)])
def test_divergence_is_positive_when_posterior_differs(nu, mu, sigma):
    assert D(mu, math.log(sigma), nu, nu) > 0


def test_divergence_grows_with_the_distance_of_the_mean():
    values = [D(m, 0.0, 5.0, 5.0) for m in (0.0, 0.5, 1.0, 2.0)]
    assert values == sorted(values) and values[0] < values[-1]


def test_eq56_is_not_a_divergence_when_the_dofs_differ():
    """Our reading: eq. 56 is exact only for nu_q == nu_p; used literally it can go negative. Pinned so the
    notes under the tables stay true."""
    assert D(0.0, 0.0, 5.0, 100.0) < 0


def test_log_space_is_stable_at_extremes():
    for nu_q, nu_p, ls in [(1e5, 1e5, 0.0), (1.0, 100.0, math.log(1e-8)), (1e4, 1.0, math.log(50.0))]:
        assert math.isfinite(D(0.3, ls, nu_q, nu_p))


def test_log_psi_matches_the_direct_formula():
    nu, sigma = 7.0, 0.3
    direct = (math.gamma((nu + 1) / 2) / (math.gamma(nu / 2) * math.sqrt(math.pi * nu) * sigma)) ** (-2 / (nu + 1))
    got = log_psi(torch.tensor(nu, dtype=torch.float64), math.log(sigma)).exp().item()
    assert got == pytest.approx(direct, rel=1e-10)


def test_t_noise_has_the_variance_of_a_unit_scale_t():
    g = torch.Generator().manual_seed(0)
    for df in (5.0, 12.0):
        eps = standard_t_noise(torch.tensor([[df]]), (400, 1000), g)
        assert eps.var().item() == pytest.approx(df / (df - 2), rel=0.05)      # unit scale, variance nu/(nu-2)
        assert eps.median().abs().item() < 0.02


def test_t_noise_is_reparameterised_in_the_dof():
    df = torch.tensor([[4.0]], requires_grad=True)
    eps = standard_t_noise(df, (50, 40), torch.Generator().manual_seed(1))
    eps.abs().mean().backward()
    assert df.grad is not None and df.grad.item() < 0     # more dof -> thinner tails -> smaller |eps|


def test_t_noise_of_several_runs_has_torchs_gamma_gradient():
    """The batched Gamma backward equals autograd through torch's own Gamma sampler, run by run."""
    df = torch.tensor([3.0, 7.0, 40.0], requires_grad=True)
    rows, d = [5, 9, 2], 4
    eps = standard_t_noise_runs(df, rows, d, [torch.Generator().manual_seed(s) for s in (1, 2, 3)])
    (eps.abs() * torch.linspace(0, 1, eps.numel()).view_as(eps)).sum().backward()
    ref_df = df.detach().clone().requires_grad_(True)
    parts = []
    for k, (n, s) in enumerate(zip(rows, (1, 2, 3))):
        g = torch.Generator().manual_seed(s)
        half = ref_df[k] / 2
        gamma = torch._standard_gamma(half.expand(n, d).contiguous(), generator=g)   # differentiable in df
        parts.append(torch.randn((n, d), generator=g) * torch.rsqrt(gamma / half))
    ref = torch.cat(parts)
    (ref.abs() * torch.linspace(0, 1, ref.numel()).view_as(ref)).sum().backward()
    assert torch.allclose(eps, ref, rtol=1e-5) and torch.allclose(df.grad, ref_df.grad, rtol=1e-4)


def _matrix(nu, sigma, V=200, d=50):
    mu = torch.zeros(1, V, d)
    mask = torch.ones(1, V, dtype=torch.bool)
    mask[0, 0] = False                                    # the nil row
    return StudentTMatrix(mu, mask, [torch.arange(V)], sigma_init=sigma, dof_init=nu, dof_min=0.0)


def test_escort_samples_have_covariance_sigma_squared():
    """Eq. 60: the escort t(mu, nu/(nu+2) sigma^2, nu+2) has covariance diag(sigma^2)."""
    q = _matrix(nu=6.0, sigma=0.5)
    draws = torch.cat([q.sample([torch.Generator().manual_seed(s)], escort=True)[0, 1:] for s in range(20)])
    assert draws.var().item() == pytest.approx(0.25, rel=0.05)


def test_posterior_samples_have_the_variance_of_q():
    q = _matrix(nu=6.0, sigma=0.5)
    draws = torch.cat([q.sample([torch.Generator().manual_seed(s)], escort=False)[0, 1:] for s in range(20)])
    assert draws.var().item() == pytest.approx(0.25 * 6 / 4, rel=0.05)


def test_masked_rows_are_zero_and_excluded_from_the_divergence():
    q = _matrix(nu=100.0, sigma=0.01, V=5, d=3)
    assert torch.all(q.sample([torch.Generator().manual_seed(0)], escort=True)[0, 0] == 0)
    full = q.divergence(torch.tensor([100.0]))
    per_element = t_divergence(q.mu, q.log_sigma, q.nu.view(-1, 1, 1), torch.tensor(100.0))[0, 1:].sum()
    assert full.item() == pytest.approx(per_element.item(), rel=1e-6)


@pytest.mark.parametrize("escort,var", [(True, 0.25), (False, 0.25 * 6 / 4)])
def test_n_draws_from_one_generator_call_have_the_distribution_of_n_calls(escort, var):
    """StudentTMatrix.samples (batched test draws): n draws per run from one generator call have the
    variance of `sample`'s; masked rows stay zero, and one draw is exactly `sample`'s."""
    q = _matrix(nu=6.0, sigma=0.5)
    many = q.samples([torch.Generator().manual_seed(0)], escort=escort, n=20)
    assert many.shape == (20,) + tuple(q.mu.shape)
    assert many[:, 0, 1:].var().item() == pytest.approx(var, rel=0.05)
    assert torch.all(many[:, 0, 0] == 0) and not torch.equal(many[0], many[1])
    one = q.samples([torch.Generator().manual_seed(3)], escort=escort, n=1)[0]
    assert torch.equal(one, q.sample([torch.Generator().manual_seed(3)], escort=escort))


def test_n_draws_of_several_runs_keep_each_runs_own_stream():
    """Run k's n draws come from run k's generator alone: the same in a group of runs as alone."""
    torch.manual_seed(0)
    mu, mask = torch.randn(2, 6, 3), torch.ones(2, 6)
    rows = [torch.arange(6), torch.arange(4)]
    q2 = StudentTMatrix(mu, mask, rows, 0.5, 6.0)
    q1 = StudentTMatrix(mu[1:], mask[1:], rows[1:], 0.5, 6.0)
    together = q2.samples([torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)], False, 5)
    alone = q1.samples([torch.Generator().manual_seed(2)], False, 5)
    assert torch.equal(together[:, 1], alone[:, 0])
    assert torch.equal(together[:, 1, 4:], mu[1, 4:].expand(5, 2, 3))      # rows without noise stay at mu


def _mean_abs_t(nu: torch.Tensor) -> torch.Tensor:
    """E|T| of a unit-scale t(nu): 2 sqrt(nu) Gamma((nu+1)/2) / (sqrt(pi) (nu-1) Gamma(nu/2)), nu > 1."""
    return 2 * torch.sqrt(nu) * torch.exp(torch.lgamma((nu + 1) / 2) - torch.lgamma(nu / 2)) / (
        math.sqrt(math.pi) * (nu - 1))


@pytest.mark.parametrize("df", [3.0, 12.0, 150.0])
def test_polar_t_noise_has_the_t_distribution_and_its_dof_gradient(df):
    """model.t_sampler polar: Bailey's polar method draws t(df) exactly (tail mass at the 97.5%
    quantile, variance, E|T|) and its pathwise gradient in df is the derivative of E|T| (closed form)."""
    from nlpbench.nn.student_t import standard_t_noise_runs_polar
    quantile = {3.0: 3.182446, 12.0: 2.178813, 150.0: 1.975905}[df]          # t tables, two-sided 5%
    nu = torch.tensor([df], dtype=torch.float64, requires_grad=True)
    eps = standard_t_noise_runs_polar(nu, [2000], 400, [torch.Generator().manual_seed(0)])
    assert eps.shape == (2000, 400)
    assert (eps.abs() > quantile).double().mean().item() == pytest.approx(0.05, abs=0.002)
    if df > 4:
        assert eps.var().item() == pytest.approx(df / (df - 2), rel=0.03)
    eps.abs().mean().backward()
    x = torch.tensor(df, dtype=torch.float64, requires_grad=True)
    _mean_abs_t(x).backward()
    assert eps.abs().mean().item() == pytest.approx(_mean_abs_t(torch.tensor(df, dtype=torch.float64)).item(),
                                                    rel=0.01)
    assert nu.grad.item() == pytest.approx(x.grad.item(), rel=0.03, abs=1e-6)


def test_polar_t_noise_of_a_run_does_not_depend_on_its_group():
    """Each run's draws come from its own generator, so a run grouped with others draws what it draws alone."""
    from nlpbench.nn import student_t
    df = torch.tensor([3.0, 7.0, 40.0])
    rows, d, seeds = [5, 9, 2], 4, (1, 2, 3)
    together = student_t.standard_t_noise_runs_polar(df, rows, d, [torch.Generator().manual_seed(s) for s in seeds])
    alone = torch.cat([student_t.standard_t_noise_runs_polar(df[k:k + 1], [n], d, [torch.Generator().manual_seed(s)])
                       for k, (n, s) in enumerate(zip(rows, seeds))])
    assert together.shape == (sum(rows), d) and torch.isfinite(together).all()
    assert torch.equal(together, alone)


@pytest.mark.parametrize("escort", [True, False])
def test_the_fused_polar_draw_is_autograd_through_its_formulas(escort):
    """StudentTMatrix.sample with the polar sampler computes Theta and its gradients in one autograd node
    (a t-MEM-NN step at 1.3x MemN2N's); they equal autograd through eqs. 60-62 and the polar formula
    on the same uniforms, for mu, log sigma and each run's nu, with masked rows and rows without noise."""
    from nlpbench.nn.student_t import standard_t_noise_runs_polar
    torch.manual_seed(0)
    K, V, d = 3, 7, 5
    mask = torch.rand(K, V) > 0.2
    rows = [torch.tensor([0, 2, 3, 5]), torch.arange(V), torch.tensor([1, 6])]
    q = StudentTMatrix(torch.randn(K, V, d) * 0.3, mask, rows, 0.2, 6.0, dof_min=1.0, sampler="polar").double()
    with torch.no_grad():
        q.log_sigma.add_(torch.randn_like(q.log_sigma) * 0.5)
        q.log_nu.copy_(torch.tensor([0.5, 2.0, 4.0], dtype=torch.float64))
    upstream = torch.randn(K, V, d, dtype=torch.float64)
    seeds = (11, 12, 13)

    def grads(theta):
        q.zero_grad()
        (theta * upstream).sum().backward()
        return theta.detach(), q.mu.grad.clone(), q.log_sigma.grad.clone(), q.log_nu.grad.clone()

    fused = grads(q.sample([torch.Generator().manual_seed(s) for s in seeds], escort))
    nu = q.nu
    eps_rows = standard_t_noise_runs_polar(nu + 2 if escort else nu, [len(r) for r in rows], d,
                                           [torch.Generator().manual_seed(s) for s in seeds])
    eps = torch.zeros(K * V, d, dtype=torch.float64).index_put((q.flat_rows,), eps_rows).view(K, V, d)
    c = torch.sqrt(nu / (nu + 2)).view(-1, 1, 1) if escort else 1.0
    reference = grads((q.mu + c * q.log_sigma.exp() * eps) * q.row_mask)
    for got, want in zip(fused, reference):
        assert torch.allclose(got, want, rtol=1e-10, atol=1e-12)
    assert fused[3].abs().min() > 0                                  # every run's nu gets a gradient


def test_the_fused_polar_draw_has_a_finite_gradient_where_w_is_one():
    """U_1 = 0 (w = 1, probability 2^-24 a value, so about once in a thousand steps here) gives T = 0; its dof
    gradient is 0, not 0/0."""
    from nlpbench.nn.student_t import _PolarDraw
    mu, log_sigma = torch.zeros(1, 2, 3, requires_grad=True), torch.zeros(1, 2, 3, requires_grad=True)
    nu = torch.tensor([5.0], requires_grad=True)
    log_w = torch.tensor([[0.0, -0.5, -1.0], [-2.0, 0.0, -0.1]])
    theta = _PolarDraw.apply(mu, log_sigma, nu, torch.ones(2, 3), log_w, torch.tensor([0, 1]), torch.tensor([0, 0]),
                             torch.ones(1, 2, 1), True)
    theta.sum().backward()
    assert theta[0, 0, 0] == 0 and torch.isfinite(nu.grad).all() and torch.isfinite(log_sigma.grad).all()


def test_a_student_t_matrix_with_an_unknown_sampler_is_refused():
    with pytest.raises(ValueError, match="model.t_sampler: unknown value 'boxmuller'"):
        StudentTMatrix(torch.zeros(1, 3, 2), torch.ones(1, 3, dtype=torch.bool), [torch.arange(3)], 0.01, 10.0,
                       sampler="boxmuller")


def test_a_bank_of_matrices_draws_each_runs_matrices_from_its_own_generator_and_sums_per_matrix():
    """StudentTMatrix over (K, n, V, d) (t-MEM-NN's n embedding matrices as one module): each run's n
    matrices take their noise from one call of the run's generator, so a run draws the same in a bank of two
    runs as alone; the divergence is per matrix, each with its own dof."""
    torch.manual_seed(0)
    K, n, V, d = 2, 3, 6, 4
    mu, mask = torch.randn(K, n, V, d), torch.ones(K, n, V)
    rows = [torch.arange(V) if m else torch.arange(4) for _ in range(K) for m in range(n)]   # per slot, run-major
    both = StudentTMatrix(mu, mask, rows, 0.5, 6.0, sampler="polar")
    alone = StudentTMatrix(mu[1:], mask[1:], rows[n:], 0.5, 6.0, sampler="polar")
    gens = [torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)]
    drawn = both.sample([g for g in gens for _ in range(n)], escort=True)
    g2 = torch.Generator().manual_seed(2)
    assert drawn.shape == (K, n, V, d)
    assert torch.equal(drawn[1], alone.sample([g2] * n, escort=True)[0])
    assert torch.equal(drawn[:, 0, 4:], mu[:, 0, 4:])                    # rows without noise stay at mu
    with torch.no_grad():
        both.log_nu[1, 2] = 3.0
    div = both.divergence(None)
    assert div.shape == (K, n) and div[1, 2] != div[1, 1]


def test_posterior_kernels_setting_is_checked_and_auto_falls_back_to_eager_without_a_compiler(monkeypatch):
    """model.posterior_kernels: auto compiles on a CPU only where torch.compile can build kernels (a
    C++ compiler), else runs eager; 'compiled' without a compiler and an unknown value are errors naming the key."""
    from nlpbench.nn import kernels
    with pytest.raises(ValueError, match="model.posterior_kernels: unknown value 'fast'"):
        StudentTMatrix(torch.zeros(1, 3, 2), torch.ones(1, 3, dtype=torch.bool), [torch.arange(3)], 0.01, 10.0,
                       kernels="fast")
    monkeypatch.setattr(kernels, "compiler_works", lambda device_type: False)
    assert kernels.resolve("auto", "cpu", "k") == "eager" and kernels.resolve("eager", "cpu", "k") == "eager"
    with pytest.raises(ValueError, match="k: 'compiled', but torch.compile cannot build kernels on cpu"):
        kernels.resolve("compiled", "cpu", "k")
    q = StudentTMatrix(torch.zeros(1, 3, 2), torch.ones(1, 3, dtype=torch.bool), [torch.arange(3)], 0.01, 10.0,
                       sampler="polar", kernels="auto")
    assert q.kernels_used == "eager" and torch.isfinite(q.sample([torch.Generator().manual_seed(0)], True)).all()
    monkeypatch.setattr(kernels, "compiler_works", lambda device_type: True)
    assert kernels.resolve("auto", "cpu", "k") == "compiled" and kernels.resolve("auto", "cuda", "k") == "eager"


needs_compiler = pytest.mark.skipif(not __import__("nlpbench.nn.kernels", fromlist=["x"]).compiler_works("cpu"),
                                    reason="torch.compile cannot build CPU kernels here (no C++ compiler)")


@needs_compiler
@pytest.mark.parametrize("escort,tied", [(True, True), (False, False)])
def test_compiled_posterior_kernels_compute_the_eager_draw_divergence_and_gradients(escort, tied):
    """posterior_kernels 'compiled' runs the same formulas as 'eager' (torch.compile fuses them): the draw from the
    same generators, the t-divergence and every gradient agree to float rounding."""
    torch.manual_seed(0)
    K, n, V, d = 3, 2, 7, 5
    mask = torch.rand(K, n, V) > 0.2
    rows = [torch.tensor([0, 2, 3, 5]), torch.arange(V), torch.tensor([1, 6]), torch.arange(4), torch.arange(V),
            torch.tensor([2])]
    mu = torch.randn(K, n, V, d) * 0.3
    prior = None if tied else torch.tensor([3.0, 50.0, 7.0]).view(K, 1).expand(K, n)
    out = {}
    for how in ("eager", "compiled"):
        q = StudentTMatrix(mu.clone(), mask, rows, 0.2, 6.0, dof_min=1.0, sampler="polar", kernels=how)
        with torch.no_grad():
            q.log_sigma.add_(torch.linspace(-1, 1, q.log_sigma.numel()).view_as(q.log_sigma))
            q.log_nu.copy_(torch.tensor([[0.5, 1.0], [2.0, 3.0], [4.0, 0.2]]))
        gens = [torch.Generator().manual_seed(s) for s in (11, 11, 12, 12, 13, 13)]
        theta, div = q.sample(gens, escort), q.divergence(prior)
        ((theta * torch.linspace(-2, 2, theta.numel()).view_as(theta)).sum() + div.sum()).backward()
        assert q.kernels_used == how
        out[how] = [theta.detach(), div.detach(), q.mu.grad, q.log_sigma.grad, q.log_nu.grad]
    for got, want in zip(out["compiled"], out["eager"]):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-6)
