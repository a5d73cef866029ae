"""Global stick-breaking part of the HDP allocation model (math only).

Notation follows the HDP memoized-VI supplement (Hughes, Kim and Sudderth,
AISTATS 2015, ``papers/hdp-memoized-hughes-kim-sudderth-supplement.txt``):

- global sticks ``u_k ~ Beta(1, gamma)``, ``k = 1..K``, with variational
  posterior ``q(u_k) = Beta(rho_k omega_k, (1 - rho_k) omega_k)``,
  ``0 < rho_k < 1``, ``omega_k > 0``;
- topic weights ``beta_k = u_k prod_{l<k} (1 - u_l)`` and the leftover mass
  ``beta_{K+1} = prod_{l<=K} (1 - u_l)``;
- documents ``pi_d ~ Dir(alpha beta_1, ..., alpha beta_K, alpha beta_{K+1})``.

``E_q[c_Dir(alpha beta)]`` has no closed form; it is replaced by the
supplement's lower bound (Eq. 13-16), which is linear in ``E[log u_k]`` and
``E[log (1 - u_k)]``. What the sticks need from the documents is then only
``D`` (the number of documents) and ``sum_log_pi[k] = T_k = sum_d E[log pi_dk]``,
``k = 1..K+1`` (the last entry for the leftover mass).

The objective of the global step for ``(rho, omega)`` is Eq. 21,
:func:`surrogate_objective`; its gradient is Eq. 24-26 (with two corrections,
see :func:`surrogate_gradient`) and, in the unconstrained variables
``c = logit(rho)``, ``d = log(omega)`` of Eq. 27, Eq. 29-30
(:func:`unconstrained_gradient`). :func:`optimize_sticks` maximizes it by
L-BFGS-B. Everything here is plain numpy/scipy on float64 arrays of length K.
"""

from __future__ import annotations

import numbers
from typing import Any, Literal

import numpy as np
from scipy.optimize import minimize
from scipy.special import digamma, expit, gammaln, logit, zeta
from threadpoolctl import ThreadpoolController

# Box on the unconstrained variables of Eq. 27 during the optimization, so that
# rho = sigmoid(c) stays strictly inside (0, 1) in float64 (sigmoid(30) = 1 - 9e-14)
# and omega = exp(d) stays finite and positive, whatever the line search tries.
C_BOUND = 30.0
D_BOUNDS = (float(np.log(1e-8)), float(np.log(1e12)))
# optimize_sticks keeps its answer only if it beats the start by more than this
# (relative): gains below it are rounding in the sums of Eq. 21.
GAIN_RTOL = 1e-13

__all__ = [
    "C_BOUND",
    "D_BOUNDS",
    "GAIN_RTOL",
    "expected_beta",
    "expected_log_sticks",
    "expected_surrogate_log_norm",
    "init_sticks",
    "optimize_sticks",
    "surrogate_gradient",
    "surrogate_log_norm",
    "surrogate_objective",
    "surrogate_objective_constant",
    "unconstrained_gradient",
]


# --------------------------------------------------------------------- checks


def _check_positive(name: str, value: Any) -> float:
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not ok or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive finite number; got {value!r}")
    return float(value)


def _check_n_docs(D: Any) -> float:
    ok = isinstance(D, numbers.Real) and not isinstance(D, bool)
    if not ok or not np.isfinite(D) or D < 0:
        raise ValueError(f"D (number of documents) must be a finite number >= 0; got {D!r}")
    return float(D)


def _as_vector(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(
            f"{name} must be a non-empty 1-D array (one entry per topic); got shape {arr.shape}"
        )
    if not np.isfinite(arr).all():
        bad = int(np.argmax(~np.isfinite(arr)))
        raise ValueError(f"{name} must be finite; got {name}[{bad}] = {float(arr[bad])!r}")
    return arr


def _check_rho(rho: Any) -> np.ndarray:
    rho = _as_vector("rho", rho)
    if rho.min() <= 0.0 or rho.max() >= 1.0:
        bad = int(np.argmax((rho <= 0.0) | (rho >= 1.0)))
        raise ValueError(
            f"rho must lie strictly between 0 and 1; got rho[{bad}] = {float(rho[bad])!r}"
        )
    return rho


def _check_omega(omega: Any, K: int) -> np.ndarray:
    omega = _as_vector("omega", omega)
    if omega.shape != (K,):
        raise ValueError(f"omega must have the shape of rho, ({K},); got shape {omega.shape}")
    if omega.min() <= 0.0:
        bad = int(np.argmax(omega <= 0.0))
        raise ValueError(f"omega must be positive; got omega[{bad}] = {float(omega[bad])!r}")
    return omega


def _check_sum_log_pi(sum_log_pi: Any, K: int) -> np.ndarray:
    arr = np.asarray(sum_log_pi, dtype=np.float64)
    if arr.shape != (K + 1,):
        raise ValueError(
            f"sum_log_pi must have K + 1 = {K + 1} entries (K topics of rho, then the "
            f"leftover mass), shape ({K + 1},); got shape {arr.shape}"
        )
    if not np.isfinite(arr).all():
        bad = int(np.argmax(~np.isfinite(arr)))
        raise ValueError(f"sum_log_pi must be finite; got sum_log_pi[{bad}] = {float(arr[bad])!r}")
    return arr


# ---------------------------------------------------------------- expectations


def _expected_beta(rho: np.ndarray, rho_c: np.ndarray) -> np.ndarray:
    """E[beta] of length K + 1 from rho and ``rho_c = 1 - rho`` (no checks)."""
    rest = np.concatenate(([1.0], np.cumprod(rho_c)))  # prod_{l<k} (1 - rho_l), k = 1..K+1
    return rest * np.append(rho, 1.0)


def expected_beta(rho: Any) -> np.ndarray:
    """Expected topic weights under ``q(u)``, the leftover mass last.

    Because the ``u_k`` are independent under q with ``E[u_k] = rho_k``::

        E[beta_k]     = rho_k prod_{l<k} (1 - rho_l),   k = 1..K
        E[beta_{K+1}] = prod_{l<=K} (1 - rho_l)

    (Eq. 14 in expectation; the derivatives are the matrix Delta of Eq. 25).

    Parameters
    ----------
    rho : array_like, shape (K,)
        Posterior means of the sticks, strictly inside (0, 1).

    Returns
    -------
    numpy.ndarray, shape (K + 1,)
        ``E[beta_1], ..., E[beta_K], E[beta_{K+1}]``; positive, sums to one.
    """
    rho = _check_rho(rho)
    return _expected_beta(rho, 1.0 - rho)


def trigamma(x: np.ndarray) -> np.ndarray:
    """``psi'(x) = zeta(2, x)``: scipy's ``polygamma(1, x)`` to the bit, without its
    wrapper (which also evaluates ``psi`` and the factorial for every call)."""
    return np.asarray(zeta(2.0, x))


def tetragamma(x: np.ndarray) -> np.ndarray:
    """``psi''(x) = -2 zeta(3, x)``: scipy's ``polygamma(2, x)`` to the bit."""
    return -2.0 * np.asarray(zeta(3.0, x))


def _expected_logs(
    rho: np.ndarray, rho_c: np.ndarray, omega: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    dig_omega = digamma(omega)
    return digamma(rho * omega) - dig_omega, digamma(rho_c * omega) - dig_omega


def expected_log_sticks(rho: Any, omega: Any) -> tuple[np.ndarray, np.ndarray]:
    """``E[log u_k]`` and ``E[log (1 - u_k)]`` under ``q(u_k) = Beta(rho_k omega_k,
    (1 - rho_k) omega_k)`` (Eq. 18)::

        E[log u_k]     = psi(rho_k omega_k)       - psi(omega_k)
        E[log 1 - u_k] = psi((1 - rho_k) omega_k) - psi(omega_k)

    Parameters
    ----------
    rho : array_like, shape (K,)
        Strictly inside (0, 1).
    omega : array_like, shape (K,)
        Positive.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``E[log u]`` and ``E[log (1 - u)]``, each of shape (K,).
    """
    rho = _check_rho(rho)
    omega = _check_omega(omega, rho.size)
    return _expected_logs(rho, 1.0 - rho, omega)


# ------------------------------------------------------------ surrogate bound


def surrogate_log_norm(u: Any, alpha: float) -> np.ndarray:
    """The lower bound of Eq. 13/15 on ``c_Dir(alpha beta(u))``, pointwise in u.

    ``c_Dir(alpha beta) = log Gamma(alpha) - sum_{k=1}^{K+1} log Gamma(alpha beta_k)``
    (Eq. 7) satisfies, for every alpha > 0 and every beta on the simplex
    (Eq. 10-12: the dropped infinite sum has only non-negative terms)::

        c_Dir(alpha beta) >= K log alpha + sum_{k=1}^{K+1} log beta_k             (Eq. 13)
                           = K log alpha + sum_{k=1}^{K} (log u_k + (K+1-k) log(1-u_k))  (Eq. 15)

    The bound holds for every u, hence also in expectation (Eq. 16,
    :func:`expected_surrogate_log_norm`).

    Parameters
    ----------
    u : array_like, shape (..., K)
        Stick fractions strictly inside (0, 1), the sticks on the last axis.
    alpha : float
        Document concentration, > 0.

    Returns
    -------
    numpy.ndarray, shape (...)
        The bound for each stick vector.
    """
    alpha = _check_positive("alpha", alpha)
    u = np.asarray(u, dtype=np.float64)
    if u.ndim == 0 or u.shape[-1] == 0:
        raise ValueError(f"u must have the K sticks on its last axis, K >= 1; got shape {u.shape}")
    if not (np.isfinite(u).all() and u.min() > 0.0 and u.max() < 1.0):
        raise ValueError("u must lie strictly between 0 and 1; got values outside (0, 1)")
    K = u.shape[-1]
    mult = K + 1.0 - np.arange(1, K + 1)
    return K * np.log(alpha) + (np.log(u) + mult * np.log1p(-u)).sum(axis=-1)


def expected_surrogate_log_norm(rho: Any, omega: Any, alpha: float) -> float:
    """Eq. 16, the lower bound on ``E_q[c_Dir(alpha beta)]`` used for every document::

        E_q[c_Dir(alpha beta)] >= K log alpha
                                  + sum_{k=1}^{K} (E[log u_k] + (K+1-k) E[log (1-u_k)])

    Parameters
    ----------
    rho, omega : array_like, shape (K,)
        The parameters of ``q(u)``.
    alpha : float
        Document concentration, > 0.

    Returns
    -------
    float
    """
    alpha = _check_positive("alpha", alpha)
    elog_u, elog_1mu = expected_log_sticks(rho, omega)
    K = elog_u.size
    mult = K + 1.0 - np.arange(1, K + 1)
    return float(K * np.log(alpha) + elog_u.sum() + mult @ elog_1mu)


# ------------------------------------------------------------------ objective


def _objective(
    rho: np.ndarray,
    rho_c: np.ndarray,
    omega: np.ndarray,
    T: np.ndarray,
    D: float,
    alpha: float,
    gamma: float,
) -> float:
    """Eq. 21 with the leftover term (no checks; ``rho_c = 1 - rho``)."""
    K = rho.size
    a, b = rho * omega, rho_c * omega
    elog_u, elog_1mu = _expected_logs(rho, rho_c, omega)
    A = D + 1.0
    B = D * (K + 1.0 - np.arange(1, K + 1)) + gamma
    per_stick = gammaln(a) + gammaln(b) - gammaln(omega) + (A - a) * elog_u + (B - b) * elog_1mu
    return float(per_stick.sum() + alpha * (_expected_beta(rho, rho_c) @ T))


def surrogate_objective_constant(K: int, D: float, alpha: float, gamma: float) -> float:
    """The terms of the global allocation objective that are constant in (rho, omega).

    ``D K log alpha`` (the ``K log alpha`` of Eq. 16, once per document, Eq. 20)
    plus ``K c_B(1, gamma) = K log gamma`` (the prior normalizer in Eq. 17,
    ``c_B(a, b) = log Gamma(a + b) - log Gamma(a) - log Gamma(b)``).

    Parameters
    ----------
    K : int
        Number of topics, >= 1.
    D : float
        Number of documents, >= 0.
    alpha, gamma : float
        Document and top-level concentrations, > 0.

    Returns
    -------
    float
    """
    if not isinstance(K, numbers.Integral) or isinstance(K, bool) or K < 1:
        raise ValueError(f"K (number of topics) must be an integer >= 1; got {K!r}")
    D = _check_n_docs(D)
    alpha = _check_positive("alpha", alpha)
    gamma = _check_positive("gamma", gamma)
    return float(K * (D * np.log(alpha) + np.log(gamma)))


def surrogate_objective(
    rho: Any,
    omega: Any,
    sum_log_pi: Any,
    D: float,
    alpha: float,
    gamma: float,
    *,
    include_constants: bool = False,
) -> float:
    """The surrogate objective of the global sticks, ``L_G(rho, omega)`` (Eq. 21).

    With ``a_k = rho_k omega_k``, ``b_k = (1 - rho_k) omega_k`` and
    ``T_k = sum_d E[log pi_dk]`` (``sum_log_pi``)::

        L_G = sum_{k=1}^{K} [ -c_B(a_k, b_k)
                              + (D + 1 - a_k) E[log u_k]
                              + (D (K+1-k) + gamma - b_k) E[log (1 - u_k)] ]
              + alpha sum_{k=1}^{K+1} E[beta_k] T_k

    It collects the (rho, omega)-dependent parts of

    - ``L_u = E[log p(u) - log q(u)]`` (Eq. 17): ``-c_B(a, b)``,
      ``(1 - a) E[log u]``, ``(gamma - b) E[log (1 - u)]``;
    - ``D`` times the surrogate bound (Eq. 16) on ``E[c_Dir(alpha beta)]``
      (Eq. 20): ``D E[log u_k] + D (K+1-k) E[log (1 - u_k)]``;
    - the prior-times-statistic term of Eq. 19, ``alpha E[beta_k] T_k``.

    Eq. 21 as printed sums the last term over ``k = 1..K`` only; the leftover
    ``alpha E[beta_{K+1}] T_{K+1}`` of Eq. 19 depends on rho too (Eq. 25 gives
    Delta as ``K x (K+1)`` for this reason), so it is kept here.

    Left out (``include_constants=False``):

    - constant in (rho, omega), returned by :func:`surrogate_objective_constant`
      and added with ``include_constants=True``: ``D K log alpha`` (Eq. 20) and
      ``K c_B(1, gamma) = K log gamma`` (Eq. 17);
    - terms of ``L_HDP`` (Eq. 19/20) that depend only on the local parameters
      ``theta_d`` and ``r_d`` and never here:
      ``sum_d [-c_Dir(theta_d) + sum_{k=1}^{K+1} (N_dk - theta_dk) E[log pi_dk]]``.
      The whole surrogate ``L_HDP + L_u`` is this function with
      ``include_constants=True`` plus that local sum.

    Parameters
    ----------
    rho : array_like, shape (K,)
        Strictly inside (0, 1).
    omega : array_like, shape (K,)
        Positive.
    sum_log_pi : array_like, shape (K + 1,)
        ``T_k = sum_d E[log pi_dk]``, the leftover topic last (non-positive in
        practice, but not required).
    D : float
        Number of documents summarized in ``sum_log_pi``, >= 0.
    alpha : float
        Document concentration, > 0.
    gamma : float
        Top-level stick concentration, > 0.
    include_constants : bool
        Add :func:`surrogate_objective_constant`.

    Returns
    -------
    float
    """
    rho, omega, T, D, alpha, gamma = _check_all(rho, omega, sum_log_pi, D, alpha, gamma)
    value = _objective(rho, 1.0 - rho, omega, T, D, alpha, gamma)
    if include_constants:
        value += surrogate_objective_constant(rho.size, D, alpha, gamma)
    return value


def _check_all(
    rho: Any, omega: Any, sum_log_pi: Any, D: Any, alpha: Any, gamma: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, float, float]:
    alpha = _check_positive("alpha", alpha)
    gamma = _check_positive("gamma", gamma)
    D = _check_n_docs(D)
    rho = _check_rho(rho)
    omega = _check_omega(omega, rho.size)
    T = _check_sum_log_pi(sum_log_pi, rho.size)
    return rho, omega, T, D, alpha, gamma


# ------------------------------------------------------------------ gradients


def _gradient_parts(
    rho: np.ndarray,
    rho_c: np.ndarray,
    omega: np.ndarray,
    T: np.ndarray,
    D: float,
    alpha: float,
    gamma: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pieces shared by both gradients (no checks)."""
    K = rho.size
    a, b = rho * omega, rho_c * omega
    A = D + 1.0
    B = D * (K + 1.0 - np.arange(1, K + 1)) + gamma  # (K + 1 - m), see surrogate_gradient
    tri_a, tri_b, tri_w = trigamma(a), trigamma(b), trigamma(omega)
    grad_omega = (A - a) * (rho * tri_a - tri_w) + (B - b) * (rho_c * tri_b - tri_w)
    # omega_m (D+1-a_m) psi'(a_m) - omega_m (D(K+1-m)+gamma-b_m) psi'(b_m)  (Eq. 26, 1st line)
    grad_rho_trigamma = omega * ((A - a) * tri_a - (B - b) * tri_b)
    # alpha sum_k Delta_mk T_k (Eq. 25), k = 1..K+1, without dividing by rho or 1 - rho:
    #   Delta_mm = E[beta_m] / rho_m = prod_{l<m} (1 - rho_l)
    #   Delta_mk = -E[beta_k] / (1 - rho_m) for k > m
    rest = np.concatenate(([1.0], np.cumprod(rho_c)))  # prod_{l<k} (1 - rho_l)
    Ebeta_T = rest * np.append(rho, 1.0) * T
    tail = np.cumsum(Ebeta_T[::-1])[::-1][1:]  # S_m = sum_{k>m} E[beta_k] T_k, m = 1..K
    return grad_omega, grad_rho_trigamma, rest[:-1] * T[:-1], tail, Ebeta_T[:-1]


def surrogate_gradient(
    rho: Any,
    omega: Any,
    sum_log_pi: Any,
    D: float,
    alpha: float,
    gamma: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient of :func:`surrogate_objective` (Eq. 21) in (rho, omega), Eq. 24-26.

    For ``m = 1..K``, with ``a_m = rho_m omega_m``, ``b_m = (1 - rho_m) omega_m``
    and ``psi'`` the trigamma function::

        dL/domega_m = (D + 1 - a_m) [rho_m psi'(a_m) - psi'(omega_m)]
                      + (D (K+1-m) + gamma - b_m) [(1 - rho_m) psi'(b_m) - psi'(omega_m)]

        dL/drho_m = omega_m (D + 1 - a_m) psi'(a_m)
                    - omega_m (D (K+1-m) + gamma - b_m) psi'(b_m)
                    + alpha sum_{k=1}^{K+1} Delta_mk T_k

    with ``Delta_mk = dE[beta_k]/drho_m`` (Eq. 25): ``E[beta_m]/rho_m`` for
    ``k = m``, ``-E[beta_k]/(1 - rho_m)`` for ``k > m``, 0 for ``k < m``.

    Two corrections to the supplement as printed, both confirmed by central
    finite differences (``tests/test_hdp_sticks.py``):

    - Eq. 24 and 26 write the multiplier as ``D (K+1-k)``, with ``k`` free; the
      derivative with respect to entry m involves only stick m's own term of
      Eq. 21, so it is ``D (K+1-m)``.
    - Eq. 26 sums ``Delta_mk T_k`` over ``k = 1..K``; the leftover ``k = K+1``
      (``E[beta_{K+1}] = prod_l (1 - rho_l)``, ``Delta_{m,K+1} =
      -E[beta_{K+1}]/(1 - rho_m)``) belongs in the sum as well, since the
      objective keeps ``alpha E[beta_{K+1}] T_{K+1}``.

    The digamma terms of the derivatives of ``-c_B``, of ``-a_m`` and ``-b_m``
    cancel exactly, which is why only trigamma terms remain.

    Parameters
    ----------
    rho, omega, sum_log_pi, D, alpha, gamma
        As in :func:`surrogate_objective`.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``dL/drho`` and ``dL/domega``, each of shape (K,).
    """
    rho, omega, T, D, alpha, gamma = _check_all(rho, omega, sum_log_pi, D, alpha, gamma)
    rho_c = 1.0 - rho
    g_omega, g_rho_tri, diag, tail, _ = _gradient_parts(rho, rho_c, omega, T, D, alpha, gamma)
    return g_rho_tri + alpha * (diag - tail / rho_c), g_omega


def _unconstrained_value_and_grad(
    c: np.ndarray,
    d: np.ndarray,
    T: np.ndarray,
    D: float,
    alpha: float,
    gamma: float,
) -> tuple[float, np.ndarray, np.ndarray]:
    """``L_G(rho(c), omega(d))`` and its gradient in (c, d), Eq. 27-30 (no checks).

    ``1 - rho`` is computed as ``sigmoid(-c)``, so it keeps its relative
    precision when rho is near one.
    """
    rho, rho_c, omega = expit(c), expit(-c), np.exp(d)
    value = _objective(rho, rho_c, omega, T, D, alpha, gamma)
    g_omega, g_rho_tri, _, tail, Ebeta_T = _gradient_parts(rho, rho_c, omega, T, D, alpha, gamma)
    # Eq. 29: dL/dc = rho (1 - rho) dL/drho; the Delta part times rho (1 - rho) is
    # alpha [(1 - rho_m) E[beta_m] T_m - rho_m S_m] (no division at all).
    g_c = rho * rho_c * g_rho_tri + alpha * (rho_c * Ebeta_T - rho * tail)
    g_d = omega * g_omega  # Eq. 30
    return value, g_c, g_d


def unconstrained_gradient(
    rho: Any,
    omega: Any,
    sum_log_pi: Any,
    D: float,
    alpha: float,
    gamma: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Gradient of Eq. 21 in the unconstrained variables of Eq. 27, by Eq. 29-30.

    ``c = logit(rho)``, ``d = log(omega)``; ``rho = sigmoid(c)``, ``omega = exp(d)``::

        dL/dc_m = rho_m (1 - rho_m) dL/drho_m     (Eq. 29)
        dL/dd_m = omega_m dL/domega_m              (Eq. 30)

    with ``dL/drho`` and ``dL/domega`` from :func:`surrogate_gradient`
    (corrected Eq. 24-26).

    Parameters
    ----------
    rho, omega, sum_log_pi, D, alpha, gamma
        As in :func:`surrogate_objective`, at the point ``(c, d) = (logit(rho),
        log(omega))``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``dL/dc`` and ``dL/dd``, each of shape (K,).
    """
    rho, omega, T, D, alpha, gamma = _check_all(rho, omega, sum_log_pi, D, alpha, gamma)
    _, g_c, g_d = _unconstrained_value_and_grad(logit(rho), np.log(omega), T, D, alpha, gamma)
    return g_c, g_d


# --------------------------------------------------------------- optimization


def _per_stick(
    rho: np.ndarray, rho_c: np.ndarray, omega: np.ndarray, A: float, B: np.ndarray
) -> np.ndarray:
    """Stick k's own terms of Eq. 21 (everything but the alpha E[beta] T coupling)."""
    a, b = rho * omega, rho_c * omega
    elog_u, elog_1mu = _expected_logs(rho, rho_c, omega)
    return gammaln(a) + gammaln(b) - gammaln(omega) + (A - a) * elog_u + (B - b) * elog_1mu


def _omega_step(
    rho: np.ndarray,
    rho_c: np.ndarray,
    omega: np.ndarray,
    D: float,
    gamma: float,
    iters: int = 100,
) -> np.ndarray:
    """Exact coordinate step in omega with rho held fixed, one stick at a time.

    For fixed rho the coupling ``alpha E[beta] T`` of Eq. 21 does not involve
    omega, so Eq. 21 is a sum of K one-dimensional problems in ``d_k = log omega_k``.
    Each is solved by Newton's method on ``dL/dd_k`` (Eq. 30 with Eq. 24),
    safeguarded by bisection on the box ``D_BOUNDS``; a stick keeps its old
    omega unless its own terms increase.
    """
    K = rho.size
    A = D + 1.0
    B = D * (K + 1.0 - np.arange(1, K + 1)) + gamma

    def slope_curv(x: np.ndarray, at: Any = slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """``dL/dd`` and ``d2L/dd2`` of the sticks ``at`` (an index or slice), at ``x``."""
        r, r_c, b_k = rho[at], rho_c[at], B[at]
        w = np.exp(x)
        a, b = r * w, r_c * w
        t_a, t_b, t_w = trigamma(a), trigamma(b), trigamma(w)
        u_a, u_b, u_w = tetragamma(a), tetragamma(b), tetragamma(w)
        p_a, p_b = r * t_a - t_w, r_c * t_b - t_w
        g1 = (A - a) * p_a + (b_k - b) * p_b  # dL/domega (Eq. 24, corrected)
        g2 = (
            -r * p_a
            - r_c * p_b
            + (A - a) * (r * r * u_a - u_w)
            + (b_k - b) * (r_c * r_c * u_b - u_w)
        )
        return w * g1, w * g1 + w * w * g2  # dL/dd, d2L/dd2

    lo = np.full(K, D_BOUNDS[0])
    hi = np.full(K, D_BOUNDS[1])
    g_lo, _ = slope_curv(lo)
    g_hi, _ = slope_curv(hi)
    x = np.clip(np.log(omega), lo, hi)
    done = (g_lo <= 0.0) | (g_hi >= 0.0)  # the best point of the box is an end
    x = np.where(g_lo <= 0.0, lo, np.where(g_hi >= 0.0, hi, x))
    for _ in range(iters):
        # each stick's search is its own: only the sticks still searching are evaluated
        # (element by element the same arithmetic as over all K)
        at = np.flatnonzero(~done)
        if at.size == 0:
            break
        xa, la, ha = x[at], lo[at], hi[at]
        g, h = slope_curv(xa, at)
        up = g > 0.0
        la = np.where(up, np.maximum(la, xa), la)
        ha = np.where(~up, np.minimum(ha, xa), ha)
        newton = xa - g / np.where(h < 0.0, h, -1.0)
        ok = (h < 0.0) & (newton > la) & (newton < ha)
        step = np.where(ok, newton, 0.5 * (la + ha))
        converged = (np.abs(step - xa) <= 1e-13 * (1.0 + np.abs(xa))) | (ha - la <= 1e-13)
        lo[at], hi[at], x[at] = la, ha, step
        done[at] = converged | (g == 0.0)
    new = np.exp(x)
    old_value = _per_stick(rho, rho_c, omega, A, B)
    new_value = _per_stick(rho, rho_c, new, A, B)
    keep_new = np.isfinite(new_value) & (new_value >= old_value)
    return np.where(keep_new, new, omega)


_CONTROLLER: list[ThreadpoolController] = []  # made at the first use, then kept


def one_blas_thread() -> Any:
    """A context in which BLAS runs on one thread. Its controller is made once (it
    finds the loaded BLAS libraries by walking the process's shared objects, which
    costs about a millisecond, more on a loaded machine); the global step's sticks
    search, the judgement's and the plan's products enter it several times a lap."""
    if not _CONTROLLER:
        _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")


def optimize_sticks(
    sum_log_pi: Any,
    D: float,
    alpha: float,
    gamma: float,
    rho0: Any,
    omega0: Any,
    *,
    max_iters: int = 500,
    max_rounds: int = 3,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Maximize the surrogate objective (Eq. 21-22) over (rho, omega) by L-BFGS-B.

    The constrained problem (Eq. 22-23) is solved in the unconstrained
    variables ``c = logit(rho)``, ``d = log(omega)`` (Eq. 27-28) by scipy's
    L-BFGS-B with the analytic gradient (Eq. 29-30 with the corrected
    Eq. 24-26, :func:`unconstrained_gradient`); the objective is divided by
    ``D + 1`` inside the optimizer only. For numerical safety the search is
    kept in the box ``|c| <= C_BOUND``, ``D_BOUNDS[0] <= d <= D_BOUNDS[1]``
    (rho in about [1e-13, 1 - 1e-13], omega in [1e-8, 1e12]); a start outside
    the box is moved into it.

    In (c, d) the problem is badly conditioned for large D: the curvature in
    ``c_k`` grows like ``omega_k rho_k (1 - rho_k)`` (up to about D K) while the
    curvature in ``d_k`` stays of order one, and L-BFGS-B alone may stop far
    from the best omega (its line search fails). Each L-BFGS-B run is therefore
    preceded and followed by an exact coordinate step in omega with rho fixed
    (for fixed rho, Eq. 21 separates into K one-dimensional problems in
    ``log omega_k``, solved by safeguarded Newton); up to ``max_rounds`` such
    rounds, stopping early when a round gains nothing.

    The answer is kept only if its objective exceeds the objective at
    ``(rho0, omega0)`` by more than rounding, ``GAIN_RTOL * (1 + |L_G(start)|)``;
    otherwise the start is returned unchanged (arrays equal to the inputs). So the
    objective never decreases, and a start at the optimum is not moved by noise.

    Parameters
    ----------
    sum_log_pi : array_like, shape (K + 1,)
        ``T_k = sum_d E[log pi_dk]``, the leftover topic last.
    D : float
        Number of documents, >= 0.
    alpha : float
        Document concentration, > 0.
    gamma : float
        Top-level stick concentration, > 0.
    rho0 : array_like, shape (K,)
        Start, strictly inside (0, 1).
    omega0 : array_like, shape (K,)
        Start, positive.
    max_iters : int
        Iteration cap of each L-BFGS-B run (function evaluations are capped at
        ``4 * max_iters``).
    max_rounds : int
        Cap on the (omega step, L-BFGS-B) rounds, >= 1.

    Returns
    -------
    rho : numpy.ndarray, shape (K,)
        Strictly inside (0, 1).
    omega : numpy.ndarray, shape (K,)
        Positive.
    objective : float
        :func:`surrogate_objective` (without constants) at the returned point.
    """
    rho0, omega0, T, D, alpha, gamma = _check_all(rho0, omega0, sum_log_pi, D, alpha, gamma)
    for name, cap in (("max_iters", max_iters), ("max_rounds", max_rounds)):
        if not isinstance(cap, numbers.Integral) or isinstance(cap, bool) or cap < 1:
            raise ValueError(f"{name} must be an integer >= 1; got {cap!r}")
    K = rho0.size
    start_value = _objective(rho0, 1.0 - rho0, omega0, T, D, alpha, gamma)
    scale = 1.0 / (D + 1.0)
    bounds = [(-C_BOUND, C_BOUND)] * K + [D_BOUNDS] * K
    options = {
        "maxiter": int(max_iters),
        "maxfun": 4 * int(max_iters),
        "ftol": 1e-13,
        "gtol": 1e-9,
        "maxcor": 20,
    }

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        value, g_c, g_d = _unconstrained_value_and_grad(x[:K], x[K:], T, D, alpha, gamma)
        return -scale * value, -scale * np.concatenate((g_c, g_d))

    def value_at(c: np.ndarray, d: np.ndarray) -> float:
        return _objective(expit(c), expit(-c), np.exp(d), T, D, alpha, gamma)

    c = np.clip(logit(rho0), -C_BOUND, C_BOUND)
    d = np.clip(np.log(omega0), D_BOUNDS[0], D_BOUNDS[1])
    # trial points far out may overflow (they are rejected); L-BFGS-B's BLAS calls are
    # on vectors of 2K and several BLAS threads only wait for each other (one thread
    # gives the same numbers several times sooner, above all on a loaded machine)
    with np.errstate(all="ignore"), one_blas_thread():
        d = np.log(_omega_step(expit(c), expit(-c), np.exp(d), D, gamma))
        current = value_at(c, d)
        for _ in range(int(max_rounds)):
            result = minimize(
                fun,
                np.concatenate((c, d)),
                jac=True,
                method="L-BFGS-B",
                bounds=bounds,
                options=options,
            )
            x = np.asarray(result.x, dtype=np.float64)
            if not np.isfinite(x).all():
                break
            c_new = x[:K]
            d_new = np.log(_omega_step(expit(c_new), expit(-c_new), np.exp(x[K:]), D, gamma))
            new = value_at(c_new, d_new)
            if not (np.isfinite(new) and new > current):
                break
            gain = new - current
            c, d, current = c_new, d_new, new
            if gain <= 1e-12 * abs(current):
                break

        rho, omega = expit(c), np.exp(d)
        value = float("-inf")
        if 0.0 < rho.min() and rho.max() < 1.0 and 0.0 < omega.min() and np.isfinite(omega).all():
            # the public objective's own arithmetic, so the returned value is reproducible
            value = _objective(rho, 1.0 - rho, omega, T, D, alpha, gamma)
    if np.isfinite(value) and value > start_value + GAIN_RTOL * (1.0 + abs(start_value)):
        return rho, omega, value
    return rho0.copy(), omega0.copy(), start_value


# --------------------------------------------------------------------- start


def init_sticks(
    K: int, gamma: float, *, mode: Literal["prior", "uniform"] = "prior"
) -> tuple[np.ndarray, np.ndarray]:
    """A start for (rho, omega) with K topics.

    The supplement gives no initialization, so two plain choices:

    - ``"prior"`` (default): ``q(u_k)`` equal to the prior ``Beta(1, gamma)``,
      i.e. ``rho_k = 1 / (1 + gamma)`` and ``omega_k = 1 + gamma``. ``E[beta_k]``
      then decays geometrically, ``gamma^(k-1) / (1 + gamma)^k``.
    - ``"uniform"``: nearly uniform ``E[beta_k] = (1 - r) / K`` with leftover
      ``r = min(0.1, 1 / K^2)`` (the choice of the authors' bnpy code), so
      ``rho_k = ((1 - r) / K) / (1 - (k - 1)(1 - r) / K)``; ``omega_k = 1 + gamma``.

    Parameters
    ----------
    K : int
        Number of topics, >= 1.
    gamma : float
        Top-level stick concentration, > 0.
    mode : {"prior", "uniform"}

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``rho`` strictly inside (0, 1) and ``omega`` > 0, each of shape (K,).
    """
    if not isinstance(K, numbers.Integral) or isinstance(K, bool) or K < 1:
        raise ValueError(f"K (number of topics) must be an integer >= 1; got {K!r}")
    gamma = _check_positive("gamma", gamma)
    omega = np.full(K, 1.0 + gamma)
    if mode == "prior":
        return np.full(K, 1.0 / (1.0 + gamma)), omega
    if mode == "uniform":
        r = min(0.1, 1.0 / K**2)
        w = (1.0 - r) / K
        return w / (1.0 - w * np.arange(K)), omega
    raise ValueError(f"mode must be 'prior' or 'uniform'; got {mode!r}")
