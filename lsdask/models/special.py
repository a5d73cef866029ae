"""Log-normalizers, expectations and KL divergences of the conjugate priors.

Shapes: ``K`` clusters, ``D`` dimensions. Wishart densities are written with
the *inverse* scale matrix ``B`` (so ``E[Phi] = nu B^{-1}``), as in lsparse
App. B.1 where ``B = Lambda^{-1}``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import digamma, gammaln

LOG_2PI = float(np.log(2.0 * np.pi))


def dirichlet_log_norm(a: np.ndarray) -> np.ndarray:
    """``c_Dir(a) = log Gamma(sum a) - sum log Gamma(a)`` over the last axis (Eq. 23)."""
    return gammaln(a.sum(axis=-1)) - gammaln(a).sum(axis=-1)


def dirichlet_expected_log(a: np.ndarray) -> np.ndarray:
    """``E[log pi]`` under Dir(a), over the last axis."""
    return digamma(a) - digamma(a.sum(axis=-1, keepdims=True))


def dirichlet_kl(a_q: np.ndarray, a_p: np.ndarray, elog: np.ndarray | None = None) -> np.ndarray:
    """``KL(Dir(a_q) || Dir(a_p))`` over the last axis (``elog``: E[log pi] under
    Dir(a_q) where already at hand)."""
    if elog is None:
        elog = dirichlet_expected_log(a_q)
    return dirichlet_log_norm(a_q) - dirichlet_log_norm(a_p) + ((a_q - a_p) * elog).sum(axis=-1)


def logdet_spd(B: np.ndarray) -> np.ndarray:
    """log |B| of a stack of symmetric positive definite matrices, via Cholesky."""
    chol = np.linalg.cholesky(B)
    return 2.0 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(axis=-1)


def wishart_log_norm(nu: np.ndarray, logdet_B: np.ndarray, D: int) -> np.ndarray:
    """``c_W(nu, B) = -nu D/2 log 2 - log Gamma_D(nu/2) + nu/2 log|B|`` (Eq. 28)."""
    nu = np.asarray(nu, dtype=np.float64)
    return -0.5 * nu * D * np.log(2.0) - multigammaln_stack(nu / 2.0, D) + 0.5 * nu * logdet_B


def multigammaln_stack(a: np.ndarray, D: int) -> np.ndarray:
    """``log Gamma_D(a)`` elementwise (``scipy.special.multigammaln`` takes one
    scalar at a time): ``D (D - 1) / 4 log pi + sum_j log Gamma(a - j / 2)``, j < D."""
    a = np.asarray(a, dtype=np.float64)
    terms = gammaln(a[..., None] - 0.5 * np.arange(D))
    return 0.25 * D * (D - 1) * np.log(np.pi) + terms.sum(axis=-1)


def wishart_expected_logdet(nu: np.ndarray, logdet_B: np.ndarray, D: int) -> np.ndarray:
    """``E[log |Phi|] = sum_d psi((nu + 1 - d) / 2) + D log 2 - log |B|``."""
    nu = np.asarray(nu, dtype=np.float64)
    d = np.arange(1, D + 1, dtype=np.float64)
    return digamma((nu[..., None] + 1.0 - d) / 2.0).sum(axis=-1) + D * np.log(2.0) - logdet_B


def wishart_kl(
    nu_q: np.ndarray,
    B_q: np.ndarray,
    logdet_q: np.ndarray,
    E_phi_q: np.ndarray,
    E_logdet_q: np.ndarray,
    nu_p: float,
    B_p: np.ndarray,
    logdet_p: float,
) -> np.ndarray:
    """``KL(W(nu_q, B_q) || W(nu_p, B_p))`` for a stack of q's, one p."""
    D = B_p.shape[-1]
    trace = np.einsum("kij,kji->k", E_phi_q, B_q - B_p)
    return (
        wishart_log_norm(nu_q, logdet_q, D)
        - wishart_log_norm(np.full_like(nu_q, nu_p), np.full_like(nu_q, logdet_p), D)
        + 0.5 * (nu_q - nu_p) * E_logdet_q
        - 0.5 * trace
    )


def gamma_kl(a_q: np.ndarray, b_q: np.ndarray, a_p: float, b_p: float) -> np.ndarray:
    """``KL(Gamma(a_q, b_q) || Gamma(a_p, b_p))``, shape-rate, elementwise."""
    return (
        (a_q - a_p) * digamma(a_q)
        - gammaln(a_q)
        + gammaln(a_p)
        + a_p * (np.log(b_q) - np.log(b_p))
        + a_q * (b_p - b_q) / b_q
    )


def wishart_expectations(
    nu: np.ndarray, B: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(log|B|, E[Phi], E[log|Phi|])`` for a stack of Wishart(nu_k, B_k)."""
    D = B.shape[-1]
    logdet = logdet_spd(B)
    E_phi = nu[:, None, None] * np.linalg.inv(B)
    E_phi = 0.5 * (E_phi + np.swapaxes(E_phi, -1, -2))
    return logdet, E_phi, wishart_expected_logdet(nu, logdet, D)
