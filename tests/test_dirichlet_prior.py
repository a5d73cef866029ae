"""Learned Dirichlet priors of LDA (lsdask.models.dirichlet_prior).

References are written out here independently of the module: loops with ``math.lgamma``,
dense ``E[log phi]`` arrays, the full allocation and topic terms of the ELBO (lsparse
Eq. 43, 47-49), central differences and scipy's general-purpose optimizers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import brentq, minimize, minimize_scalar
from scipy.special import digamma, gammaln

from lsdask.models.dirichlet_prior import (
    dirichlet_prior_gradient,
    dirichlet_prior_hessian,
    dirichlet_prior_objective,
    expected_log_pi_sums,
    fit_asymmetric_alpha,
    fit_symmetric_eta,
    inverse_digamma,
    sum_expected_log_phi,
    symmetric_eta_derivatives,
    symmetric_eta_objective,
)
from lsdask.models.special import dirichlet_kl, dirichlet_log_norm

# ------------------------------------------------------------------ helpers


def document_posteriors(
    rng: np.random.Generator, D: int, alpha: np.ndarray, tokens: int = 40
) -> tuple[np.ndarray, np.ndarray]:
    """Doc-topic counts N_d and posteriors theta_d = alpha + N_d, as a local step leaves them."""
    pi = rng.dirichlet(alpha, size=D)
    N = np.vstack([rng.multinomial(tokens, p) for p in pi]).astype(np.float64)
    N = N * rng.uniform(0.5, 1.0, size=N.shape)  # soft responsibilities: fractional counts
    return N, alpha + N


def random_S(rng: np.random.Generator, D: int, K: int) -> np.ndarray:
    """S of D real Dirichlet posteriors (their E[log pi] summed) around a random prior."""
    alpha = rng.gamma(1.0, 1.0, K) + 0.05
    return expected_log_pi_sums(document_posteriors(rng, D, alpha)[1])


def naive_f(alpha: np.ndarray, S: np.ndarray, D: float) -> float:
    total = math.lgamma(float(sum(alpha)))
    for a in alpha:
        total -= math.lgamma(float(a))
    return D * total + sum(float(a) * float(s) for a, s in zip(alpha, S, strict=True))


def central_differences(
    f: Callable[[np.ndarray], float], x: np.ndarray, rel_step: float = 1e-5
) -> np.ndarray:
    """Central differences with one Richardson step (error O(h^4))."""
    out = np.empty(x.size)
    for i in range(x.size):
        h = rel_step * x[i]

        def central(h: float, i: int = i) -> float:
            e = np.zeros_like(x)
            e[i] = h
            return (f(x + e) - f(x - e)) / (2.0 * h)

        out[i] = (4.0 * central(h / 2.0) - central(h)) / 3.0
    return out


def direct_alpha_maximum(S: np.ndarray, D: float, start: float = 1.0) -> np.ndarray:
    """f maximized over log(alpha) by scipy's BFGS (gradient by the chain rule only)."""

    def fun(u: np.ndarray) -> tuple[float, np.ndarray]:
        a = np.exp(u)
        value = D * (gammaln(a.sum()) - gammaln(a).sum()) + a @ S
        grad = D * (digamma(a.sum()) - digamma(a)) + S
        return -value / D, -(a * grad) / D

    res = minimize(
        fun,
        np.full(S.size, np.log(start)),
        jac=True,
        method="BFGS",
        options={"gtol": 1e-13, "maxiter": 100_000},
    )
    return np.exp(res.x)


def dense_T(eta: float, counts: np.ndarray) -> float:
    lam = eta + counts
    return float((digamma(lam) - digamma(lam.sum(axis=1, keepdims=True))).sum())


def topic_counts(rng: np.random.Generator, K: int, V: int, eta: float, tokens: int) -> np.ndarray:
    phi = rng.dirichlet(np.full(V, eta), size=K)
    return np.vstack([rng.multinomial(tokens, p) for p in phi]).astype(np.float64)


# ----------------------------------------------------------------- objective


def test_objective_matches_the_loop_reference(rng: np.random.Generator) -> None:
    for K in (2, 5, 40):
        S = random_S(rng, 30, K)
        alpha = rng.gamma(1.0, 1.0, K) + 1e-3
        assert dirichlet_prior_objective(alpha, S, 30) == pytest.approx(
            naive_f(alpha, S, 30), rel=1e-12, abs=1e-9
        )


def test_objective_differences_are_the_elbo_allocation_differences(
    rng: np.random.Generator,
) -> None:
    """With q (r, theta) fixed, L_alloc(alpha') - L_alloc(alpha) = f(alpha') - f(alpha)."""
    D, K = 60, 6
    alpha = rng.gamma(1.0, 1.0, K) + 0.1
    N, theta = document_posteriors(rng, D, alpha)
    theta = theta * rng.uniform(0.8, 1.2, size=theta.shape)  # any q, not only the optimal one
    elog = digamma(theta) - digamma(theta.sum(axis=1, keepdims=True))

    def alloc(prior: np.ndarray) -> float:
        """lsparse Eq. 47-48 with alpha_k in place of alpha/K, document by document."""
        total = 0.0
        for d in range(D):
            total += float(dirichlet_log_norm(prior) - dirichlet_log_norm(theta[d]))
            total += float((N[d] + prior - theta[d]) @ elog[d])
        return total

    S = expected_log_pi_sums(theta)
    for _ in range(3):
        new = rng.gamma(1.0, 1.0, K) + 0.01
        expected = alloc(new) - alloc(alpha)
        got = dirichlet_prior_objective(new, S, D) - dirichlet_prior_objective(alpha, S, D)
        assert got == pytest.approx(expected, rel=1e-10, abs=1e-8)


def test_gradient_matches_central_differences(rng: np.random.Generator) -> None:
    for K, D in ((2, 10), (7, 500), (30, 3)):
        S = random_S(rng, D, K)
        alpha = np.exp(rng.uniform(-2.0, 2.0, K))
        numeric = central_differences(lambda a, S=S, D=D: dirichlet_prior_objective(a, S, D), alpha)
        # relative to the size of the terms D psi(sum alpha), D psi(alpha_k), S_k, as an entry
        # of the gradient can be a small difference of them
        size = D * (abs(digamma(alpha.sum())) + np.abs(digamma(alpha))) + np.abs(S)
        gradient = dirichlet_prior_gradient(alpha, S, D)
        assert np.all(np.abs(gradient - numeric) <= 1e-6 * size)


def test_hessian_is_diagonal_plus_rank_one_of_the_gradient(rng: np.random.Generator) -> None:
    K, D = 6, 40
    S = random_S(rng, D, K)
    alpha = np.exp(rng.uniform(-1.5, 1.5, K))
    q, z = dirichlet_prior_hessian(alpha, D)
    H = np.diag(q) + z
    numeric = np.column_stack(
        [
            central_differences(lambda a, j=j: float(dirichlet_prior_gradient(a, S, D)[j]), alpha)
            for j in range(K)
        ]
    )
    np.testing.assert_allclose(H, numeric, rtol=1e-6)
    assert np.all(np.linalg.eigvalsh(H) < 0)  # f is strictly concave


# ----------------------------------------------------------- inverse digamma


def test_inverse_digamma_inverts_digamma() -> None:
    y = np.concatenate(
        (
            -np.logspace(-6, 12, 300),
            np.linspace(-10.0, 10.0, 401),
            [0.0, -2.22, -2.2200001, float(digamma(1.0)), 50.0, 300.0, 700.0],
        )
    )
    x = inverse_digamma(y)
    assert x.shape == y.shape and np.all(x > 0)
    np.testing.assert_allclose(digamma(x), y, rtol=1e-12, atol=1e-12)
    # and back: x -> psi(x) -> x
    xs = np.exp(np.linspace(-25.0, 25.0, 200))
    np.testing.assert_allclose(inverse_digamma(digamma(xs)), xs, rtol=1e-11)
    assert inverse_digamma(0.0).shape == ()
    assert float(inverse_digamma(0.0)) == pytest.approx(1.4616321449683623, rel=1e-14)


# --------------------------------------------------------------- fitting alpha


@pytest.mark.parametrize("K", [2, 5, 20])
def test_newton_fixed_point_and_direct_maximum_agree(K: int) -> None:
    rng = np.random.default_rng(40 + K)
    for D in (25, 2000):
        S = random_S(rng, D, K)
        newton = fit_asymmetric_alpha(S, D, 1.0)
        fixed = fit_asymmetric_alpha(S, D, 1.0, method="fixed-point")
        np.testing.assert_allclose(newton, fixed, rtol=1e-8)
        np.testing.assert_allclose(newton, direct_alpha_maximum(S, D), rtol=1e-6)
        # the first-order condition, relative to the size of the two terms of the gradient
        g = dirichlet_prior_gradient(newton, S, D)
        assert np.max(np.abs(g) / np.abs(S)) < 1e-9


def test_large_alpha_newton_and_fixed_point_agree() -> None:
    """Large alpha: f is a small difference of large terms and the fixed point is slow."""
    rng = np.random.default_rng(3)
    alpha_true = np.array([4.0, 30.0, 120.0])
    D = 400
    S = expected_log_pi_sums(document_posteriors(rng, D, alpha_true, tokens=400)[1])
    newton = fit_asymmetric_alpha(S, D, 1.0)
    fixed = fit_asymmetric_alpha(S, D, 1.0, method="fixed-point")
    np.testing.assert_allclose(newton, fixed, rtol=1e-8)
    assert newton.max() > 50.0


@pytest.mark.parametrize("alpha0", [1e-9, 1e-3, 0.5, 1e3, 1e8])
@pytest.mark.parametrize("method", ["newton", "fixed-point"])
def test_fit_never_decreases_f_and_reaches_the_maximum_from_extreme_starts(
    alpha0: float, method: str
) -> None:
    rng = np.random.default_rng(7)
    for K, D in ((3, 10), (8, 300), (25, 5000)):
        S = random_S(rng, D, K)
        reference = fit_asymmetric_alpha(S, D, 1.0)
        start = alpha0 * np.exp(rng.uniform(-1.0, 1.0, K))
        alpha = fit_asymmetric_alpha(S, D, start, method=method)  # type: ignore[arg-type]
        assert dirichlet_prior_objective(alpha, S, D) >= dirichlet_prior_objective(start, S, D)
        np.testing.assert_allclose(alpha, reference, rtol=1e-8)


def test_fit_never_decreases_f_with_few_iterations(rng: np.random.Generator) -> None:
    for _ in range(20):
        K = int(rng.integers(2, 12))
        D = int(rng.integers(1, 500))
        S = random_S(rng, D, K)
        start = np.exp(rng.uniform(-8.0, 8.0, K))
        for method in ("newton", "fixed-point"):
            for iters in (1, 2, 5):
                alpha = fit_asymmetric_alpha(S, D, start, method=method, max_iters=iters)  # type: ignore[arg-type]
                assert dirichlet_prior_objective(alpha, S, D) >= dirichlet_prior_objective(
                    start, S, D
                )


def test_start_at_the_maximum_is_returned_unchanged(rng: np.random.Generator) -> None:
    S = random_S(rng, 100, 5)
    best = fit_asymmetric_alpha(S, 100, 1.0)
    again = fit_asymmetric_alpha(S, 100, best)
    np.testing.assert_array_equal(again, best)
    assert again is not best


def test_recovers_the_prior_from_dirichlet_draws() -> None:
    """S = sum_d log pi_d with pi_d ~ Dir(alpha_true): the maximum-likelihood estimate."""
    rng = np.random.default_rng(2024)
    alpha_true = np.array([0.3, 0.8, 1.5, 3.0, 6.0])
    D = 20_000
    pi = rng.dirichlet(alpha_true, size=D)
    S = np.log(pi).sum(axis=0)
    for method in ("newton", "fixed-point"):
        alpha = fit_asymmetric_alpha(S, D, 1.0, method=method)  # type: ignore[arg-type]
        np.testing.assert_allclose(alpha, alpha_true, rtol=0.02)  # 0.6% at this seed


def test_floor_is_respected_and_the_maximum_on_it_is_found(rng: np.random.Generator) -> None:
    D, K = 100, 4
    theta = rng.gamma(1.0, 1.0, (D, K)) + 0.01
    theta[:, 0] = 1e-3  # topic 0 unused: its unconstrained alpha would be below the floor
    S = expected_log_pi_sums(theta)
    free = fit_asymmetric_alpha(S, D, 1.0, floor=1e-8)
    assert free[0] < 0.01
    for method in ("newton", "fixed-point"):
        alpha = fit_asymmetric_alpha(S, D, 1.0, floor=0.01, method=method)  # type: ignore[arg-type]
        assert alpha.min() >= 0.01
        assert alpha[0] == 0.01
        g = dirichlet_prior_gradient(alpha, S, D)
        assert g[0] < 0.0  # pushed into the floor
        assert np.max(np.abs(g[1:]) / np.abs(S[1:])) < 1e-9  # stationary elsewhere
    newton = fit_asymmetric_alpha(S, D, 1.0, floor=0.01)
    fixed = fit_asymmetric_alpha(S, D, 1.0, floor=0.01, method="fixed-point")
    np.testing.assert_allclose(newton, fixed, rtol=1e-8)
    # a start below the floor is raised to it
    low = fit_asymmetric_alpha(S, D, 1e-6, floor=0.01)
    np.testing.assert_allclose(low, newton, rtol=1e-8)


def test_one_newton_step_is_gensims_update_dir_prior(rng: np.random.Generator) -> None:
    """gensim's alpha='auto' takes the same (undamped, rho=1) Newton step."""
    ldamodel = pytest.importorskip("gensim.models.ldamodel")
    D, K = 500, 6
    S = random_S(rng, D, K)
    best = fit_asymmetric_alpha(S, D, 1.0)
    start = best * rng.uniform(0.9, 1.1, K)  # close enough that the full step is taken
    ours = fit_asymmetric_alpha(S, D, start, max_iters=1)
    theirs = ldamodel.update_dir_prior(start.copy(), D, S / D, 1.0)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


# ----------------------------------------------------------------------- eta


def test_sparse_T_equals_the_dense_computation(rng: np.random.Generator) -> None:
    for K, V, eta in ((3, 20, 0.5), (10, 400, 0.01), (40, 2000, 1e-4)):
        counts = topic_counts(rng, K, V, 0.05, tokens=500)
        counts[0] = 0.0  # an empty topic
        expected = dense_T(eta, counts)
        X = sp.csr_matrix(counts)
        for T in (
            sum_expected_log_phi(eta, X),
            sum_expected_log_phi(eta, X, row_totals=counts.sum(axis=1)),
            sum_expected_log_phi(eta, counts),
            sum_expected_log_phi(eta, sp.coo_matrix(counts)),
            sum_expected_log_phi(eta, sp.csr_array(counts)),
        ):
            assert T == pytest.approx(expected, rel=1e-12)


def test_sparse_T_with_explicit_zeros_and_duplicates(rng: np.random.Generator) -> None:
    K, V, eta = 4, 30, 0.2
    counts = topic_counts(rng, K, V, 0.1, tokens=100)
    # row by row: every entry split into two duplicates, two explicit zeros, shuffled
    data, indices, indptr = [], [], [0]
    for k in range(K):
        cols = np.flatnonzero(counts[k])
        row_cols = np.concatenate((cols, cols, rng.integers(0, V, 2)))
        row_data = np.concatenate((0.25 * counts[k, cols], 0.75 * counts[k, cols], [0.0, 0.0]))
        order = rng.permutation(row_cols.size)
        indices.append(row_cols[order])
        data.append(row_data[order])
        indptr.append(indptr[-1] + row_cols.size)
    X = sp.csr_matrix(
        (np.concatenate(data), np.concatenate(indices), np.array(indptr)), shape=(K, V)
    )
    assert not X.has_canonical_format
    before = X.data.copy()
    assert sum_expected_log_phi(eta, X) == pytest.approx(dense_T(eta, counts), rel=1e-12)
    np.testing.assert_array_equal(X.data, before)  # the caller's matrix is left as it was
    assert X.nnz == before.size


def test_eta_objective_differences_are_the_elbo_topic_differences(
    rng: np.random.Generator,
) -> None:
    """With lambda fixed, -sum_k KL(Dir(lambda_k) || Dir(eta')) + sum_k KL(... || Dir(eta))
    equals g(eta') - g(eta) (the data term sum n E[log phi] does not involve eta)."""
    K, V, eta = 5, 60, 0.3
    counts = topic_counts(rng, K, V, 0.1, tokens=300)
    lam = eta + counts
    T = sum_expected_log_phi(eta, counts)
    for new in (0.01, 0.29, 4.0):
        kl_old = dirichlet_kl(lam, np.full(V, eta)).sum()
        kl_new = dirichlet_kl(lam, np.full(V, new)).sum()
        got = symmetric_eta_objective(new, T, K, V) - symmetric_eta_objective(eta, T, K, V)
        assert got == pytest.approx(kl_old - kl_new, rel=1e-10, abs=1e-8)


def test_eta_derivatives_match_central_differences() -> None:
    for eta, T, K, V in ((0.05, -5e4, 10, 500), (2.0, -400.0, 3, 30)):
        g1, g2 = symmetric_eta_derivatives(eta, T, K, V)
        h = 1e-5 * eta
        fd1 = (
            symmetric_eta_objective(eta + h, T, K, V) - symmetric_eta_objective(eta - h, T, K, V)
        ) / (2 * h)
        fd2 = (
            symmetric_eta_derivatives(eta + h, T, K, V)[0]
            - symmetric_eta_derivatives(eta - h, T, K, V)[0]
        ) / (2 * h)
        assert g1 == pytest.approx(fd1, rel=1e-6, abs=1e-6 * abs(T) / eta)
        assert g2 == pytest.approx(fd2, rel=1e-6)
        assert g2 < 0


@pytest.mark.parametrize(("K", "V", "eta_true"), [(10, 500, 0.05), (5, 50, 1.0), (3, 20, 20.0)])
def test_fit_symmetric_eta_agrees_with_a_direct_maximum(K: int, V: int, eta_true: float) -> None:
    rng = np.random.default_rng(int(10 * K + V))
    counts = topic_counts(rng, K, V, eta_true, tokens=2000)
    T = sum_expected_log_phi(0.1, counts)
    eta = fit_symmetric_eta(T, K, V, 0.1)

    def neg(u: float) -> float:
        return -symmetric_eta_objective(float(np.exp(u)), T, K, V)

    direct = minimize_scalar(neg, bounds=(-20.0, 10.0), method="bounded", options={"xatol": 1e-12})
    assert eta == pytest.approx(float(np.exp(direct.x)), rel=1e-6)
    root = brentq(lambda e: symmetric_eta_derivatives(e, T, K, V)[0], 1e-8, 1e6, xtol=1e-300)
    assert eta == pytest.approx(root, rel=1e-10)
    for eta0 in (1e-9, 1e-6, 1e-3, 0.5, 1e3, 1e9):
        fitted = fit_symmetric_eta(T, K, V, eta0)
        assert symmetric_eta_objective(fitted, T, K, V) >= symmetric_eta_objective(eta0, T, K, V)
        assert fitted == pytest.approx(eta, rel=1e-10)
        for iters in (1, 2):
            few = fit_symmetric_eta(T, K, V, eta0, max_iters=iters)
            assert symmetric_eta_objective(few, T, K, V) >= symmetric_eta_objective(eta0, T, K, V)


def test_fit_symmetric_eta_respects_the_floor(rng: np.random.Generator) -> None:
    K, V = 8, 300
    counts = topic_counts(rng, K, V, 0.002, tokens=5000)  # very peaked topics
    T = sum_expected_log_phi(1e-5, counts)
    free = fit_symmetric_eta(T, K, V, 0.1, floor=1e-12)
    assert free < 1e-3
    eta = fit_symmetric_eta(T, K, V, 0.1, floor=1e-3)
    assert eta == 1e-3
    assert symmetric_eta_derivatives(eta, T, K, V)[0] < 0
    assert fit_symmetric_eta(T, K, V, 1e-3, floor=1e-3) == 1e-3


# --------------------------------------------------------------------- errors


def test_expected_log_pi_sums_matches_a_loop(rng: np.random.Generator) -> None:
    theta = rng.gamma(0.5, 2.0, (7, 4)) + 1e-3
    expected = np.zeros(4)
    for row in theta:
        expected += digamma(row) - digamma(row.sum())
    np.testing.assert_allclose(expected_log_pi_sums(theta), expected, rtol=1e-13)
    np.testing.assert_array_equal(expected_log_pi_sums(np.zeros((0, 3))), np.zeros(3))


S3 = np.array([-10.0, -20.0, -15.0])
COUNTS = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]])
T_OK = -20.0  # < -K V log V = -6.59 for K = 2, V = 3

BAD_INPUTS = [
    (fit_asymmetric_alpha, (S3[:, None], 5, 1.0), {}, r"S must be a 1-D array .*shape \(3, 1\)"),
    (fit_asymmetric_alpha, ([-1.0], 5, 1.0), {}, r"S must be a 1-D array .*K >= 2"),
    (fit_asymmetric_alpha, ([-1.0, np.nan], 5, 1.0), {}, r"S must be finite; got S\[1\] = nan"),
    (fit_asymmetric_alpha, ([-1.0, np.inf], 5, 1.0), {}, r"S must be finite; got S\[1\] = inf"),
    (
        fit_asymmetric_alpha,
        (S3, 0, 1.0),
        {},
        r"D \(number of documents\) must be a positive .*got 0",
    ),
    (fit_asymmetric_alpha, (S3, -3.0, 1.0), {}, r"D \(number of documents\) .*got -3.0"),
    (fit_asymmetric_alpha, (S3, True, 1.0), {}, r"D \(number of documents\) .*got True"),
    (
        fit_asymmetric_alpha,
        (S3, 5, 0.0),
        {},
        r"alpha0 must be positive and finite; got alpha0\[0\] = 0.0",
    ),
    (
        fit_asymmetric_alpha,
        (S3, 5, [1.0, -1.0, 1.0]),
        {},
        r"alpha0 must be positive .*alpha0\[1\] = -1.0",
    ),
    (
        fit_asymmetric_alpha,
        (S3, 5, [1.0, np.nan, 1.0]),
        {},
        r"alpha0 must be positive .*alpha0\[1\] = nan",
    ),
    (
        fit_asymmetric_alpha,
        (S3, 5, [1.0, 1.0]),
        {},
        r"alpha0 must have a scalar or shape \(3,\).*got shape \(2,\)",
    ),
    (
        fit_asymmetric_alpha,
        (S3, 5, 1.0),
        {"floor": 0.0},
        r"floor must be a positive finite number; got 0.0",
    ),
    (
        fit_asymmetric_alpha,
        (S3, 5, 1.0),
        {"max_iters": 0},
        r"max_iters \(iteration cap\) must be an integer >= 1; got 0",
    ),
    (
        fit_asymmetric_alpha,
        (S3, 5, 1.0),
        {"tol": -1.0},
        r"tol must be a finite number >= 0; got -1.0",
    ),
    (
        fit_asymmetric_alpha,
        (S3, 5, 1.0),
        {"method": "lbfgs"},
        r"method must be 'newton' or 'fixed-point'; got 'lbfgs'",
    ),
    (
        fit_asymmetric_alpha,
        ([0.0, -1.0], 5, 1.0),
        {},
        r"S / D must satisfy sum_k exp\(S_k / D\) < 1",
    ),
    (dirichlet_prior_objective, ([1.0, 2.0], S3, 5), {}, r"alpha must have shape \(3,\)"),
    (
        dirichlet_prior_objective,
        ([1.0, 0.0, 2.0], S3, 5),
        {},
        r"alpha must be positive .*alpha\[1\] = 0.0",
    ),
    (
        dirichlet_prior_gradient,
        (np.ones(3), S3, np.nan),
        {},
        r"D \(number of documents\) .*got nan",
    ),
    (
        dirichlet_prior_hessian,
        (np.ones((2, 2)), 5),
        {},
        r"alpha must be a non-empty 1-D array; got shape \(2, 2\)",
    ),
    (expected_log_pi_sums, (np.ones(3),), {}, r"theta must be a 2-D array .*got shape \(3,\)"),
    (
        expected_log_pi_sums,
        ([[1.0, 0.0]],),
        {},
        r"theta must be positive and finite; got theta\[0, 1\] = 0.0",
    ),
    (inverse_digamma, ([1.0, np.nan],), {}, r"y must be finite and <= 700.0 .*got nan"),
    (inverse_digamma, (800.0,), {}, r"y must be finite and <= 700.0 .*got 800.0"),
    (sum_expected_log_phi, (0.0, COUNTS), {}, r"eta must be a positive finite number; got 0.0"),
    (sum_expected_log_phi, (0.1, COUNTS[0]), {}, r"counts must be a 2-D .*got shape \(3,\)"),
    (
        sum_expected_log_phi,
        (0.1, -COUNTS),
        {},
        r"counts must be finite and non-negative; got an entry -1.0",
    ),
    (
        sum_expected_log_phi,
        (0.1, sp.csr_matrix(COUNTS * np.nan)),
        {},
        r"counts must be finite and non-negative; got an entry nan",
    ),
    (
        sum_expected_log_phi,
        (0.1, COUNTS),
        {"row_totals": [1.0]},
        r"row_totals must have shape \(2,\).*got shape \(1,\)",
    ),
    (
        sum_expected_log_phi,
        (0.1, COUNTS),
        {"row_totals": [1.0, -3.0]},
        r"row_totals must be finite and non-negative; got an entry -3.0",
    ),
    (fit_symmetric_eta, (np.nan, 2, 3, 0.1), {}, r"T must be a finite number; got nan"),
    (
        fit_symmetric_eta,
        (T_OK, 0, 3, 0.1),
        {},
        r"K \(number of topics\) must be an integer >= 1; got 0",
    ),
    (
        fit_symmetric_eta,
        (T_OK, 2, 1, 0.1),
        {},
        r"V \(vocabulary size\) must be an integer >= 2; got 1",
    ),
    (
        fit_symmetric_eta,
        (T_OK, 2, 3.0, 0.1),
        {},
        r"V \(vocabulary size\) must be an integer >= 2; got 3.0",
    ),
    (fit_symmetric_eta, (T_OK, 2, 3, -0.1), {}, r"eta0 must be a positive finite number; got -0.1"),
    (
        fit_symmetric_eta,
        (T_OK, 2, 3, 0.1),
        {"floor": -1.0},
        r"floor must be a positive finite number; got -1.0",
    ),
    (
        fit_symmetric_eta,
        (T_OK, 2, 3, 0.1),
        {"max_iters": 0},
        r"max_iters \(iteration cap\) must be an integer >= 1; got 0",
    ),
    (
        fit_symmetric_eta,
        (T_OK, 2, 3, 0.1),
        {"tol": np.inf},
        r"tol must be a finite number >= 0; got inf",
    ),
    (fit_symmetric_eta, (-1.0, 2, 3, 0.1), {}, r"T must be < -K V log V = .*got T = -1.0"),
    (
        symmetric_eta_objective,
        (0.0, T_OK, 2, 3),
        {},
        r"eta must be a positive finite number; got 0.0",
    ),
]


@pytest.mark.parametrize(("func", "args", "kwargs", "match"), BAD_INPUTS)
def test_bad_inputs_raise_a_value_error_naming_the_parameter(
    func: Callable[..., object], args: tuple, kwargs: dict, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        func(*args, **kwargs)
