"""What the three Gaussian observation models share: dense float data of a
fixed dimension, data-driven prior scale, and point-estimate scoring."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.linalg import solve_triangular

from lsdask.kernels import float32_product, float32_underflow_error, outer_features_into
from lsdask.models.observation import BoundedWeights
from lsdask.models.special import LOG_2PI
from lsdask.models.workspace import Workspace, take


def as_dense_rows(X: npt.ArrayLike, D: int | None) -> np.ndarray:
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


def float32_quadratic_weights(
    X: np.ndarray,
    center: np.ndarray | None,
    linear: bool,
    setup: BoundedWeights,
    ws: Workspace | None,
) -> tuple[np.ndarray, np.ndarray, float]:
    """``(W32, row_err, abs_err)`` of :meth:`ObservationModel.bounded_expected_log_lik` for
    weights that are one product of the features ``f = vech(x' x'^T)`` (then
    ``x'`` too, with ``linear``), ``x' = x - center``, with ``setup``'s blocks.

    ``|f|^2 = sum_{i<=j} x'_i^2 x'_j^2 (+ |x'|^2) = (|x'|^4 + sum_i x'_i^4) / 2 (+ |x'|^2)``:
    the bound's row factor in O(D) per row.
    """
    Xc = X if center is None else X - center
    n, D, K = Xc.shape[0], Xc.shape[1], setup.offset.shape[0]
    M = D * (D + 1) // 2
    F = take(ws, "features32", (n, M + D if linear else M), np.float32)
    outer_features_into(Xc, F[:, :M])
    if linear:
        F[:, M:] = Xc
    W = float32_product(
        F, setup.coef_blocks, setup.edges,
        take(ws, "W32", (n, K), np.float32), take(ws, "W32b", (n, K), np.float32),
    )  # fmt: skip
    sq = Xc * Xc
    norm2 = sq.sum(axis=1)
    f2 = 0.5 * (norm2 * norm2 + (sq * sq).sum(axis=1)) + (norm2 if linear else 0.0)
    f_norm = np.sqrt(f2)
    largest = float(f_norm.max()) if n else 0.0
    abs_err = float32_underflow_error(F.shape[1], largest, float(setup.col_err.max()))
    return W, setup.factor * f_norm, abs_err
