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
    """Spec A-11: eq. 56 is exact only for nu_q == nu_p; used literally it can go negative. Pinned so the
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
    """StudentTMatrix.samples (batched test draws, issue 16): n draws per run from one generator call have the
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
    """model.t_sampler polar (issue 16): Bailey's polar method draws t(df) exactly (tail mass at the 97.5%
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


@pytest.mark.parametrize("short_blocks", [False, True])
def test_polar_t_noise_of_a_run_does_not_depend_on_its_group(monkeypatch, short_blocks):
    """Each run's draws come from its own generator, so a run grouped with others draws what it draws alone,
    also when a block of pairs holds too few accepted ones and the run draws more."""
    from nlpbench.nn import student_t
    if short_blocks:
        monkeypatch.setattr(student_t, "_polar_block", lambda n: max(n // 2, 1))
    df = torch.tensor([3.0, 7.0, 40.0])
    rows, d, seeds = [5, 9, 2], 4, (1, 2, 3)
    together = student_t.standard_t_noise_runs_polar(df, rows, d, [torch.Generator().manual_seed(s) for s in seeds])
    alone = torch.cat([student_t.standard_t_noise_runs_polar(df[k:k + 1], [n], d, [torch.Generator().manual_seed(s)])
                       for k, (n, s) in enumerate(zip(rows, seeds))])
    assert together.shape == (sum(rows), d) and torch.isfinite(together).all()
    assert torch.equal(together, alone)


def test_a_student_t_matrix_with_an_unknown_sampler_is_refused():
    with pytest.raises(ValueError, match="model.t_sampler: unknown value 'boxmuller'"):
        StudentTMatrix(torch.zeros(1, 3, 2), torch.ones(1, 3, dtype=torch.bool), [torch.arange(3)], 0.01, 10.0,
                       sampler="boxmuller")
