"""Global sticks of the HDP allocation model (lsdask.models.hdp_sticks).

References are written out here term by term from the HDP supplement (Eq. 7,
13-21, 25) with plain loops, independent of the vectorized module.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import digamma, expit, gammaln, logit
from scipy.stats import beta as beta_dist
from threadpoolctl import threadpool_limits

from lsdask.models.hdp_sticks import (
    C_BOUND,
    D_BOUNDS,
    expected_beta,
    expected_log_sticks,
    expected_surrogate_log_norm,
    init_sticks,
    optimize_sticks,
    surrogate_gradient,
    surrogate_log_norm,
    surrogate_objective,
    surrogate_objective_constant,
    unconstrained_gradient,
)

# ------------------------------------------------------------------ helpers


def random_problem(rng: np.random.Generator, K: int, D: float):
    """Random sticks and a negative sum_log_pi (T_k = sum_d E[log pi_dk] < 0)."""
    rho = rng.uniform(0.02, 0.98, K)
    omega = np.exp(rng.uniform(-1.0, 6.0, K))
    T = -max(D, 1.0) * rng.uniform(0.1, 20.0, K + 1)
    alpha = float(np.exp(rng.uniform(-2.0, 2.0)))
    gamma = float(np.exp(rng.uniform(-2.0, 2.0)))
    return rho, omega, T, alpha, gamma


def realistic_sum_log_pi(rng: np.random.Generator, K: int, D: float) -> np.ndarray:
    """D times the average E[log pi_d] of a few Dirichlet posteriors, as a memo holds."""
    theta = rng.gamma(0.3, 1.0, size=(20, K + 1)) + 1e-3
    theta[:, :K] += rng.poisson(5.0, size=(20, K)) * (rng.random((20, K)) < 0.2)
    elog = digamma(theta) - digamma(theta.sum(axis=1, keepdims=True))
    return D * elog.mean(axis=0)


def richardson(f: Callable[[np.ndarray], float], x: np.ndarray, steps: np.ndarray) -> np.ndarray:
    """Central differences with one Richardson step (error O(h^4))."""
    out = np.empty(x.size)
    for i in range(x.size):

        def central(h: float, i: int = i) -> float:
            e = np.zeros_like(x)
            e[i] = h
            return (f(x + e) - f(x - e)) / (2.0 * h)

        out[i] = (4.0 * central(steps[i] / 2.0) - central(steps[i])) / 3.0
    return out


def naive_expected_beta(rho: np.ndarray) -> np.ndarray:
    K = rho.size
    out = np.empty(K + 1)
    for k in range(K + 1):
        v = rho[k] if k < K else 1.0
        for ell in range(k):
            v *= 1.0 - rho[ell]
        out[k] = v
    return out


def c_beta(a: float, b: float) -> float:
    """Beta log cumulant ``c_B(a, b) = log Gamma(a + b) - log Gamma(a) - log Gamma(b)``."""
    return float(gammaln(a + b) - gammaln(a) - gammaln(b))


def naive_global_objective(rho, omega, T, D, alpha, gamma) -> float:
    """Eq. 17 (L_u) + D times Eq. 16 + alpha sum_{k<=K+1} E[beta_k] T_k, term by term."""
    K = rho.size
    Ebeta = naive_expected_beta(rho)
    total = 0.0
    for k in range(1, K + 1):
        a, b = rho[k - 1] * omega[k - 1], (1.0 - rho[k - 1]) * omega[k - 1]
        elog_u = digamma(a) - digamma(a + b)  # Eq. 18
        elog_1mu = digamma(b) - digamma(a + b)
        # Eq. 17
        total += c_beta(1.0, gamma) - c_beta(a, b)
        total += (1.0 - a) * elog_u + (gamma - b) * elog_1mu
        # Eq. 16, once per document
        total += D * (np.log(alpha) + elog_u + (K + 1 - k) * elog_1mu)
    for k in range(K + 1):
        total += alpha * Ebeta[k] * T[k]
    return float(total)


def exact_dirichlet_log_norm(u: np.ndarray, alpha: float) -> np.ndarray:
    """``c_Dir(alpha beta(u))`` (Eq. 7), the sticks on the last axis."""
    log_1mu = np.log1p(-u)
    log_rest = np.concatenate((np.zeros((*u.shape[:-1], 1)), np.cumsum(log_1mu, axis=-1)), axis=-1)
    log_beta = log_rest + np.concatenate((np.log(u), np.zeros((*u.shape[:-1], 1))), axis=-1)
    return gammaln(alpha) - gammaln(alpha * np.exp(log_beta)).sum(axis=-1)


# ---------------------------------------------------------------- expectations


@pytest.mark.parametrize("K", [1, 2, 9, 200])
def test_expected_beta_sums_to_one_and_matches_the_product(K: int) -> None:
    rng = np.random.default_rng(100 + K)
    rho = rng.uniform(0.001, 0.999, K)
    Eb = expected_beta(rho)
    assert Eb.shape == (K + 1,)
    assert np.all(Eb > 0)
    np.testing.assert_allclose(Eb.sum(), 1.0, rtol=0, atol=1e-12)
    np.testing.assert_allclose(Eb, naive_expected_beta(rho), rtol=1e-12, atol=1e-300)


def test_expected_beta_single_topic() -> None:
    np.testing.assert_allclose(expected_beta([0.3]), [0.3, 0.7], rtol=1e-15)
    np.testing.assert_allclose(expected_beta(np.array([0.25, 0.5])), [0.25, 0.375, 0.375])


def test_expected_beta_is_the_mean_of_beta_under_q() -> None:
    rng = np.random.default_rng(5)
    K, n = 4, 200_000
    rho = rng.uniform(0.1, 0.9, K)
    omega = rng.uniform(2.0, 30.0, K)
    u = rng.beta(rho * omega, (1 - rho) * omega, size=(n, K))
    rest = np.concatenate((np.ones((n, 1)), np.cumprod(1 - u, axis=1)), axis=1)
    samples = rest * np.concatenate((u, np.ones((n, 1))), axis=1)
    se = samples.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(samples.mean(axis=0) - expected_beta(rho)) <= 5 * se)


def test_expected_log_sticks_match_numerical_integration() -> None:
    rng = np.random.default_rng(11)
    rho = rng.uniform(0.2, 0.8, 5)
    omega = rng.uniform(5.0, 60.0, 5)  # a, b >= 1: smooth integrands for quad
    elog_u, elog_1mu = expected_log_sticks(rho, omega)
    for k in range(5):
        q = beta_dist(rho[k] * omega[k], (1 - rho[k]) * omega[k])
        ref_u = quad(lambda t, q=q: np.log(t) * q.pdf(t), 0, 1, epsabs=1e-13, epsrel=1e-12)[0]
        ref_1mu = quad(lambda t, q=q: np.log1p(-t) * q.pdf(t), 0, 1, epsabs=1e-13, epsrel=1e-12)[0]
        np.testing.assert_allclose(elog_u[k], ref_u, rtol=1e-8)
        np.testing.assert_allclose(elog_1mu[k], ref_1mu, rtol=1e-8)


# ------------------------------------------------------------ surrogate bound


@pytest.mark.parametrize("K", [1, 2, 5, 50])
def test_surrogate_bound_holds_pointwise(K: int) -> None:
    """Eq. 10-13 bound c_Dir(alpha beta) for *every* beta on the simplex (the
    dropped series has non-negative terms), so the exact check is pointwise in
    u: it implies the bound in expectation (Eq. 16) for every q(u)."""
    rng = np.random.default_rng(200 + K)
    for alpha in [1e-3, 0.1, 1.0, 7.5, 300.0]:
        u = np.concatenate(
            (
                rng.uniform(0.001, 0.999, size=(400, K)),
                rng.beta(0.5, 3.0, size=(200, K)).clip(1e-6, 1 - 1e-6),
                rng.beta(3.0, 0.5, size=(200, K)).clip(1e-6, 1 - 1e-6),
            )
        )
        exact = exact_dirichlet_log_norm(u, alpha)
        bound = surrogate_log_norm(u, alpha)
        assert np.all(np.isfinite(exact)) and np.all(np.isfinite(bound))
        assert np.all(bound <= exact + 1e-10 * (1.0 + np.abs(exact)))


def test_surrogate_bound_is_tight_as_alpha_goes_to_zero() -> None:
    """The gap (the dropped series of Eq. 10) is O(alpha^2)."""
    rng = np.random.default_rng(3)
    u = rng.uniform(0.05, 0.95, size=(50, 4))
    for alpha in [1e-2, 1e-3]:
        gap = exact_dirichlet_log_norm(u, alpha) - surrogate_log_norm(u, alpha)
        assert np.all(gap >= -1e-10)
        assert np.all(gap <= 2.0 * alpha**2)


def test_surrogate_bound_in_expectation_monte_carlo() -> None:
    """Eq. 16 is the q-mean of the pointwise Eq. 15 and lies below E_q[c_Dir]."""
    rng = np.random.default_rng(17)
    n = 100_000
    for K, alpha in [(1, 0.5), (3, 2.0), (8, 20.0)]:
        rho = rng.uniform(0.1, 0.9, K)
        omega = rng.uniform(1.0, 40.0, K)
        # u and 1 - u from two Gammas, so that log(1 - u) keeps its precision
        x = rng.gamma(rho * omega, size=(n, K))
        y = rng.gamma((1 - rho) * omega, size=(n, K))
        u = x / (x + y)
        ok = (u > 0) & (u < 1)
        assert ok.all()
        bound_samples = surrogate_log_norm(u, alpha)
        exact_samples = exact_dirichlet_log_norm(u, alpha)
        expected = expected_surrogate_log_norm(rho, omega, alpha)
        se_bound = bound_samples.std() / np.sqrt(n)
        se_exact = exact_samples.std() / np.sqrt(n)
        assert abs(bound_samples.mean() - expected) <= 5 * se_bound
        assert expected <= exact_samples.mean() + 5 * se_exact


# ------------------------------------------------------------------ objective


@pytest.mark.parametrize("K", [1, 3, 12])
def test_objective_matches_term_by_term_reference(K: int) -> None:
    rng = np.random.default_rng(300 + K)
    for D in [0.0, 4.0, 1234.0]:
        rho, omega, T, alpha, gamma = random_problem(rng, K, D)
        full = surrogate_objective(rho, omega, T, D, alpha, gamma, include_constants=True)
        ref = naive_global_objective(rho, omega, T, D, alpha, gamma)
        np.testing.assert_allclose(full, ref, rtol=1e-11, atol=1e-9)
        part = surrogate_objective(rho, omega, T, D, alpha, gamma)
        const = surrogate_objective_constant(K, D, alpha, gamma)
        np.testing.assert_allclose(part + const, ref, rtol=1e-11, atol=1e-9)
        np.testing.assert_allclose(const, K * (D * np.log(alpha) + np.log(gamma)), rtol=1e-14)


def test_beta_terms_are_minus_kl_to_the_prior() -> None:
    """With D = 0 and T = 0 the objective (with constants) is L_u = -KL(q(u) || p(u))."""
    rng = np.random.default_rng(8)
    K, gamma = 5, 2.5
    rho, omega = rng.uniform(0.1, 0.9, K), rng.uniform(0.5, 20.0, K)
    L_u = surrogate_objective(rho, omega, np.zeros(K + 1), 0.0, 1.0, gamma, include_constants=True)
    _, elog_1mu = expected_log_sticks(rho, omega)
    # -KL = H[q] + E_q[log p(u)], log p(u) = log gamma + (gamma - 1) log(1 - u)
    entropy = sum(beta_dist(r * w, (1 - r) * w).entropy() for r, w in zip(rho, omega, strict=True))
    np.testing.assert_allclose(
        L_u, entropy + K * np.log(gamma) + (gamma - 1) * elog_1mu.sum(), rtol=1e-10
    )
    assert L_u <= 0.0
    prior_rho, prior_omega = init_sticks(K, gamma)
    assert (
        abs(
            surrogate_objective(
                prior_rho, prior_omega, np.zeros(K + 1), 0.0, 1.0, gamma, include_constants=True
            )
        )
        < 1e-12
    )


# ------------------------------------------------------------------ gradients


@pytest.mark.parametrize("K", [1, 2, 7, 50])
@pytest.mark.parametrize("D", [0.0, 3.0, 1000.0])
def test_gradients_match_finite_differences(K: int, D: float) -> None:
    rng = np.random.default_rng(int(1000 * K + D))
    for _ in range(2):
        rho, omega, T, alpha, gamma = random_problem(rng, K, D)
        args = (T, D, alpha, gamma)

        # in (rho, omega): Eq. 24-26 (with K + 1 - m and the leftover term)
        g_rho, g_omega = surrogate_gradient(rho, omega, *args)
        point = np.concatenate((rho, omega))
        steps = 1e-3 * np.concatenate((np.minimum(rho, 1 - rho), omega))
        fd = richardson(lambda v, a=args: surrogate_objective(v[:K], v[K:], *a), point, steps)
        np.testing.assert_allclose(np.concatenate((g_rho, g_omega)), fd, rtol=1e-6, atol=0)

        # in (c, d) = (logit rho, log omega): Eq. 29-30
        g_c, g_d = unconstrained_gradient(rho, omega, *args)
        x = np.concatenate((logit(rho), np.log(omega)))
        fd = richardson(
            lambda v, a=args: surrogate_objective(expit(v[:K]), np.exp(v[K:]), *a),
            x,
            np.full(2 * K, 1e-3),
        )
        np.testing.assert_allclose(np.concatenate((g_c, g_d)), fd, rtol=1e-6, atol=0)
        np.testing.assert_allclose(g_c, rho * (1 - rho) * g_rho, rtol=1e-10)
        np.testing.assert_allclose(g_d, omega * g_omega, rtol=1e-12)


def test_leftover_term_enters_the_rho_gradient() -> None:
    """Eq. 26 as printed sums Delta_mk T_k over k <= K; the leftover k = K + 1
    (Delta_{m,K+1} = -E[beta_{K+1}] / (1 - rho_m)) is needed to match the objective."""
    rng = np.random.default_rng(21)
    K, D, alpha, gamma = 6, 10.0, 1.5, 1.0
    rho, omega = rng.uniform(0.1, 0.9, K), rng.uniform(1.0, 20.0, K)
    T = np.zeros(K + 1)
    T[K] = -400.0
    g_rho, g_omega = surrogate_gradient(rho, omega, T, D, alpha, gamma)
    g0_rho, g0_omega = surrogate_gradient(rho, omega, np.zeros(K + 1), D, alpha, gamma)
    leftover = -alpha * expected_beta(rho)[K] * T[K] / (1 - rho)
    np.testing.assert_allclose(g_rho - g0_rho, leftover, rtol=1e-10)
    np.testing.assert_allclose(g_omega, g0_omega, rtol=1e-14)
    fd = richardson(
        lambda v: surrogate_objective(v, omega, T, D, alpha, gamma),
        rho,
        1e-3 * np.minimum(rho, 1 - rho),
    )
    np.testing.assert_allclose(g_rho, fd, rtol=1e-6)
    # without the leftover term the gradient is off by far more than the tolerance
    assert np.all(np.abs(g0_rho - fd) > 1e-3 * np.abs(fd))


# --------------------------------------------------------------- optimization


@pytest.fixture(autouse=False)
def one_blas_thread():
    # L-BFGS-B's small BLAS calls only contend on a loaded machine
    with threadpool_limits(1):
        yield


def starts(rng: np.random.Generator, K: int, gamma: float):
    yield init_sticks(K, gamma, mode="prior")
    yield init_sticks(K, gamma, mode="uniform")
    yield rng.uniform(0.01, 0.99, K), np.exp(rng.uniform(-2.0, 12.0, K))


def on_bound(rho: np.ndarray, omega: np.ndarray) -> np.ndarray:
    """Entries of (c, d) on the optimizer's box."""
    c, d = logit(rho), np.log(omega)
    return np.concatenate(
        (np.abs(c) >= C_BOUND - 1e-9, (d <= D_BOUNDS[0] + 1e-9) | (d >= D_BOUNDS[1] - 1e-9))
    )


def gradient_and_diagonal_curvature(rho, omega, T, D, alpha, gamma):
    """The (c, d) gradient and the diagonal of the Hessian by central differences of it."""
    K = rho.size

    def grad(x: np.ndarray) -> np.ndarray:
        g_c, g_d = unconstrained_gradient(expit(x[:K]), np.exp(x[K:]), T, D, alpha, gamma)
        return np.concatenate((g_c, g_d))

    x = np.concatenate((logit(rho), np.log(omega)))
    curv = np.empty(2 * K)
    for i in range(2 * K):
        e = np.zeros(2 * K)
        e[i] = 1e-5
        curv[i] = (grad(x + e)[i] - grad(x - e)[i]) / 2e-5
    return grad(x), curv


@pytest.mark.usefixtures("one_blas_thread")
@pytest.mark.parametrize(
    ("K", "D", "alpha", "gamma"),
    [(1, 1.0, 1.0, 1.0), (8, 40.0, 0.5, 3.0), (30, 1e4, 0.05, 0.5), (100, 1e6, 2.0, 10.0)],
)
def test_optimize_raises_objective_and_reaches_a_stationary_point(K, D, alpha, gamma) -> None:
    rng = np.random.default_rng(int(K + D))
    T = realistic_sum_log_pi(rng, K, D)
    assert np.all(T < 0)
    values = []
    for rho0, omega0 in starts(rng, K, gamma):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            rho, omega, value = optimize_sticks(T, D, alpha, gamma, rho0, omega0)
        start = surrogate_objective(rho0, omega0, T, D, alpha, gamma)
        assert value >= start
        assert value == surrogate_objective(rho, omega, T, D, alpha, gamma)
        assert np.all((rho > 0) & (rho < 1)) and np.all(omega > 0)
        # stationary in (c, d): the gradient is small, and a Newton step along any
        # one coordinate (curvature from differences of the analytic gradient)
        # would gain next to nothing. In c the curvature grows like omega rho (1 - rho)
        # (up to ~D K), so a bare gradient bound alone would be meaningless there.
        assert not np.any(on_bound(rho, omega))  # the box is not active here
        grad, curv = gradient_and_diagonal_curvature(rho, omega, T, D, alpha, gamma)
        assert np.abs(grad).max() <= 1e-4 * (D + 1)
        assert np.all(curv < 0)
        assert np.sum(grad**2 / (2 * np.abs(curv))) <= 1e-12 * abs(value) + 1e-9
        values.append(value)
    # every start lands on the same optimum
    np.testing.assert_allclose(values, values[0], rtol=1e-10, atol=1e-8)


@pytest.mark.usefixtures("one_blas_thread")
@pytest.mark.parametrize("K", [1, 4, 25])
def test_optimize_without_coupling_gives_the_closed_form(K: int) -> None:
    """With T = 0 each stick's terms are -KL(Beta(a_k, b_k) || Beta(A_k, B_k)) +
    const, A_k = D + 1, B_k = D (K + 1 - k) + gamma: the optimum is a = A, b = B."""
    rng = np.random.default_rng(40 + K)
    D, gamma = 250.0, 1.7
    A = D + 1
    B = D * (K + 1 - np.arange(1, K + 1)) + gamma
    for rho0, omega0 in starts(rng, K, gamma):
        rho, omega, value = optimize_sticks(np.zeros(K + 1), D, 0.8, gamma, rho0, omega0)
        np.testing.assert_allclose(rho, A / (A + B), rtol=1e-6)
        # log omega is a flat direction (curvature ~ 1/2 against ~ D K for logit rho):
        # an error of 1e-5 in omega changes the objective by ~1e-11 only
        np.testing.assert_allclose(omega, A + B, rtol=1e-5)
        opt = surrogate_objective(A / (A + B), A + B, np.zeros(K + 1), D, 0.8, gamma)
        np.testing.assert_allclose(value, opt, rtol=1e-13)


@pytest.mark.usefixtures("one_blas_thread")
def test_optimize_returns_the_start_when_it_cannot_improve() -> None:
    K, D, gamma = 5, 30.0, 2.0
    A = D + 1
    B = D * (K + 1 - np.arange(1, K + 1)) + gamma
    rho0, omega0 = A / (A + B), A + B  # the exact optimum for T = 0
    rho, omega, value = optimize_sticks(np.zeros(K + 1), D, 1.0, gamma, rho0, omega0)
    assert value == surrogate_objective(rho0, omega0, np.zeros(K + 1), D, 1.0, gamma)
    np.testing.assert_array_equal(rho, rho0)
    np.testing.assert_array_equal(omega, omega0)
    # D = 0, T = 0, started at the prior: the prior is the optimum
    rho0, omega0 = init_sticks(K, gamma)
    rho, omega, value = optimize_sticks(np.zeros(K + 1), 0.0, 1.0, gamma, rho0, omega0)
    np.testing.assert_array_equal(rho, rho0)
    np.testing.assert_array_equal(omega, omega0)
    # without the constant K c_B(1, gamma) = K log gamma, L_u(prior) = 0 reads -K log gamma
    np.testing.assert_allclose(value, -K * np.log(gamma), rtol=1e-14)


@pytest.mark.usefixtures("one_blas_thread")
def test_optimize_is_robust_on_extreme_statistics() -> None:
    rng = np.random.default_rng(99)
    K, D = 40, 1e5
    T = realistic_sum_log_pi(rng, K, D)
    T[::3] = -1e8  # topics no document uses: E[beta_k] is pushed to zero
    T[-1] = -1e9
    for rho0, omega0 in [
        init_sticks(K, 1.0),
        (np.full(K, 1e-14), np.full(K, 1e-12)),  # outside the optimizer's box
        (np.full(K, 1 - 1e-12), np.full(K, 1e14)),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            rho, omega, value = optimize_sticks(T, D, 1.0, 1.0, rho0, omega0, max_iters=50)
        assert np.isfinite(value)
        assert value >= surrogate_objective(rho0, omega0, T, D, 1.0, 1.0)
        assert np.all((rho > 0) & (rho < 1)) and np.all(np.isfinite(omega) & (omega > 0))


# ---------------------------------------------------------------- start values


def test_init_sticks() -> None:
    rho, omega = init_sticks(4, 3.0)
    np.testing.assert_allclose(rho, 0.25)
    np.testing.assert_allclose(omega, 4.0)
    for K in [1, 2, 10, 300]:
        rho, omega = init_sticks(K, 0.5, mode="uniform")
        r = min(0.1, 1.0 / K**2)
        Eb = expected_beta(rho)
        np.testing.assert_allclose(Eb[:K], (1 - r) / K, rtol=1e-10)
        np.testing.assert_allclose(Eb[K], r, rtol=1e-8)
        assert np.all((rho > 0) & (rho < 1)) and np.all(omega == 1.5)


# ------------------------------------------------------------------ bad input


def test_bad_scalars_raise_naming_the_parameter() -> None:
    rho, omega, T = np.full(3, 0.5), np.ones(3), -np.ones(4)
    with pytest.raises(ValueError, match=r"gamma must be a positive finite number; got 0"):
        surrogate_objective(rho, omega, T, 5, 1.0, 0.0)
    with pytest.raises(ValueError, match=r"gamma must be a positive finite number; got -1"):
        optimize_sticks(T, 5, 1.0, -1.0, rho, omega)
    with pytest.raises(ValueError, match=r"alpha must be a positive finite number; got -2"):
        surrogate_gradient(rho, omega, T, 5, -2.0, 1.0)
    with pytest.raises(ValueError, match=r"alpha must be a positive finite number; got nan"):
        unconstrained_gradient(rho, omega, T, 5, float("nan"), 1.0)
    with pytest.raises(ValueError, match=r"alpha must be a positive finite number; got 0"):
        surrogate_log_norm(np.full((2, 3), 0.5), 0)
    with pytest.raises(ValueError, match=r"D \(number of documents\) must be .*>= 0; got -1"):
        surrogate_objective(rho, omega, T, -1, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"K \(number of topics\) must be an integer >= 1; got 0"):
        init_sticks(0, 1.0)
    with pytest.raises(ValueError, match=r"gamma must be a positive finite number; got 0"):
        init_sticks(3, 0)
    with pytest.raises(ValueError, match=r"mode must be 'prior' or 'uniform'; got 'flat'"):
        init_sticks(3, 1.0, mode="flat")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"max_iters must be an integer >= 1; got 0"):
        optimize_sticks(T, 5, 1.0, 1.0, rho, omega, max_iters=0)


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.2, float("nan")])
def test_rho_outside_the_open_interval_raises(bad: float) -> None:
    rho = np.array([0.3, bad, 0.6])
    msg = r"rho must (lie strictly between 0 and 1|be finite); got rho\[1\] = "
    with pytest.raises(ValueError, match=msg):
        expected_beta(rho)
    with pytest.raises(ValueError, match=msg):
        optimize_sticks(-np.ones(4), 3, 1.0, 1.0, rho, np.ones(3))


def test_disagreeing_shapes_raise() -> None:
    rho = np.full(3, 0.5)
    with pytest.raises(
        ValueError, match=r"omega must have the shape of rho, \(3,\); got shape \(4,\)"
    ):
        surrogate_objective(rho, np.ones(4), -np.ones(4), 3, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"omega must be positive; got omega\[2\] = 0.0"):
        expected_log_sticks(rho, np.array([1.0, 2.0, 0.0]))
    with pytest.raises(
        ValueError, match=r"sum_log_pi must have K \+ 1 = 4 entries .*; got shape \(3,\)"
    ):
        surrogate_gradient(rho, np.ones(3), -np.ones(3), 3, 1.0, 1.0)
    with pytest.raises(
        ValueError, match=r"sum_log_pi must have K \+ 1 = 4 entries .*; got shape \(4, 1\)"
    ):
        optimize_sticks(-np.ones((4, 1)), 3, 1.0, 1.0, rho, np.ones(3))
    with pytest.raises(ValueError, match=r"rho must be a non-empty 1-D array .*got shape \(1, 3\)"):
        expected_beta(rho[None, :])
    with pytest.raises(ValueError, match=r"rho must be a non-empty 1-D array .*got shape \(0,\)"):
        expected_beta(np.array([]))
    with pytest.raises(ValueError, match=r"sum_log_pi must be finite; got sum_log_pi\[0\] = -inf"):
        surrogate_objective(rho, np.ones(3), [-np.inf, -1, -1, -1], 3, 1.0, 1.0)


def test_trigamma_and_tetragamma_are_scipys_polygamma_to_the_bit():
    from scipy.special import polygamma

    from lsdask.models.hdp_sticks import tetragamma, trigamma

    x = np.concatenate([np.exp(np.linspace(-25.0, 30.0, 20001)), [1e-300, 0.5, 1.0, 2.0, 1e300]])
    assert np.array_equal(trigamma(x), polygamma(1, x))
    assert np.array_equal(tetragamma(x), polygamma(2, x))
