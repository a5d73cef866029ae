"""What the three Gaussian observation models share: dense float data of a
fixed dimension, data-driven prior scale, and point-estimate scoring."""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

from lsdask.models.special import LOG_2PI


def as_dense_rows(X, D: int | None) -> np.ndarray:
    """Check a dense (n, D) block and return it as C-contiguous float64."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"expected a 2-D array of observations (n, D); got shape {X.shape}")
    if D is not None and X.shape[1] != D:
        raise ValueError(f"expected observations of dimension D={D}; got {X.shape[1]} columns")
    return np.ascontiguousarray(X, dtype=np.float64)


def default_scale(sample: np.ndarray, centered: bool) -> float:
    """Mean per-dimension variance of a data sample (about zero if not centered).

    Used as the prior's expected covariance scale ``E[Sigma] = scale * I``;
    falls back to 1.0 for constant data.
    """
    X = np.asarray(sample, dtype=np.float64)
    Xc = X - X.mean(axis=0) if centered else X
    scale = float(np.mean(Xc * Xc))
    return scale if scale > 0 and np.isfinite(scale) else 1.0


def gaussian_log_pdf(X: np.ndarray, means: np.ndarray | None, covs: np.ndarray) -> np.ndarray:
    """``log N(x_n | mu_k, Sigma_k)`` for all n, k: (n, K). ``means=None`` is zero-mean."""
    K, D, _ = covs.shape
    chol = np.linalg.cholesky(covs)
    logdet = 2.0 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
    out = np.empty((X.shape[0], K))
    for k in range(K):
        diff = X if means is None else X - means[k]
        z = solve_triangular(chol[k], diff.T, lower=True, check_finite=False)
        out[:, k] = -0.5 * (D * LOG_2PI + logdet[k] + np.einsum("dn,dn->n", z, z))
    return out


def squared_euclidean(X: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """``||x_n - s_j||^2`` for all pairs: (n, n_seeds), clipped at zero."""
    d2 = (X * X).sum(1)[:, None] - 2.0 * X @ seeds.T + (seeds * seeds).sum(1)[None, :]
    return np.maximum(d2, 0.0)
