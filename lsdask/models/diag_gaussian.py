"""Diagonal Gaussian with a Normal-Gamma prior on each dimension.

``x_nd ~ N(mu_kd, 1/lambda_kd)``, ``lambda_kd ~ Gamma(a, b)`` (shape, rate),
``mu_kd | lambda_kd ~ N(m_d, 1/(kappa lambda_kd))``. Statistics ``N_k``,
``x = sum r x``, ``x2 = sum r x**2``. Posterior: ``kappa_k = kappa + N_k``,
``m_k = (kappa m + x_k)/kappa_k``, ``a_k = a + N_k/2``,
``b_kd = b + (x2_kd + kappa m_d^2 - kappa_k m_kd^2)/2``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Self

import numpy as np
from scipy.special import digamma

from lsdask.kernels import dense_weighted_rows, sparse_weighted_rows
from lsdask.models.gaussian_base import (
    as_dense_rows,
    default_scale,
    squared_euclidean,
)
from lsdask.models.observation import ObservationModel, Parts, Rows, configured
from lsdask.models.special import LOG_2PI, gamma_kl
from lsdask.models.stats import SuffStats
from lsdask.models.workspace import Workspace, take


@dataclass(frozen=True)
class NormalGammaPosterior:
    kappa: np.ndarray  # (K,)
    m: np.ndarray  # (K, D)
    a: np.ndarray  # (K,)
    b: np.ndarray  # (K, D)
    E_lam: np.ndarray  # (K, D)
    E_loglam: np.ndarray  # (K, D)
    sq_coef: np.ndarray  # (D, K): x**2 @ sq_coef = -1/2 sum_d E[lam] x_d^2
    lin_coef: np.ndarray  # (D, K)
    const: np.ndarray  # (K,)

    @property
    def means(self) -> np.ndarray:
        return self.m

    @property
    def variances(self) -> np.ndarray:
        return self.b / (self.a - 1.0)[:, None]


@dataclass(frozen=True)
class DiagGaussian(ObservationModel[NormalGammaPosterior]):
    """Gaussian likelihood with unknown mean and diagonal covariance.

    Parameters
    ----------
    a : float
        Gamma shape of each precision (> 1 so the prior variance is finite).
    prior_scale : float or None
        Prior expected variance ``b / (a - 1)``; default the mean
        per-dimension variance of a data sample.
    kappa : float
        Prior pseudo-count of the mean.
    prior_mean : ndarray or None
        Default the sample mean.
    """

    a: float = 2.0
    prior_scale: float | None = None
    kappa: float = 1e-4
    prior_mean: np.ndarray | None = None
    dim: int | None = None

    stat_names = ("x", "x2")

    @property
    def data_dim(self) -> int | None:
        return self.dim

    # the parameters with_data_defaults sets
    @property
    def _D(self) -> int:
        return configured(self, "dim", self.dim)

    @property
    def _m0(self) -> np.ndarray:
        return configured(self, "prior_mean", self.prior_mean)

    def with_data_defaults(self, sample: Rows) -> Self:
        X = as_dense_rows(sample, self.dim)
        if not self.a > 1:
            raise ValueError(f"a must be > 1 for a finite prior variance; got {self.a}")
        if not self.kappa > 0:
            raise ValueError(f"kappa must be a positive float; got {self.kappa}")
        scale = default_scale(X, centered=True) if self.prior_scale is None else self.prior_scale
        m0 = X.mean(axis=0) if self.prior_mean is None else np.asarray(self.prior_mean, float)
        return replace(self, prior_scale=float(scale), prior_mean=m0, dim=X.shape[1])

    @property
    def b0(self) -> float:
        return configured(self, "prior_scale", self.prior_scale) * (self.a - 1.0)

    def check_data(self, X: Rows) -> None:
        as_dense_rows(X, self.dim)

    def prepare(self, X: Rows, ws: Workspace | None = None) -> tuple[np.ndarray, np.ndarray]:
        X = as_dense_rows(X, self.dim)
        return X, np.multiply(X, X, out=take(ws, "squares", X.shape))

    def expected_log_lik(
        self,
        block: tuple[np.ndarray, np.ndarray],
        post: NormalGammaPosterior,
        ws: Workspace | None = None,
    ) -> np.ndarray:
        X, X2 = block
        shape = (X.shape[0], post.const.size)
        W = np.matmul(X2, post.sq_coef, out=take(ws, "W", shape))
        W += np.matmul(X, post.lin_coef, out=take(ws, "W_linear", shape))
        W += post.const
        return W

    def summarize_sparse(
        self, block: tuple[np.ndarray, np.ndarray], resp: np.ndarray, idx: np.ndarray, out: Parts
    ) -> None:
        X, X2 = block
        sparse_weighted_rows(X, resp, idx, out["x"])
        sparse_weighted_rows(X2, resp, idx, out["x2"])

    def summarize_dense(
        self, block: tuple[np.ndarray, np.ndarray], R: np.ndarray, out: Parts
    ) -> None:
        X, X2 = block
        dense_weighted_rows(X, R, out["x"])
        dense_weighted_rows(X2, R, out["x2"])

    def empty_stats(self, K: int) -> dict[str, np.ndarray]:
        return {"x": np.zeros((K, self._D)), "x2": np.zeros((K, self._D))}

    def global_step(self, stats: SuffStats) -> NormalGammaPosterior:
        N = stats.array("N")
        m0 = self._m0
        kappa = self.kappa + N
        m = (self.kappa * m0 + stats.array("x")) / kappa[:, None]
        a = self.a + 0.5 * N
        b = self.b0 + 0.5 * (stats.array("x2") + self.kappa * m0**2 - kappa[:, None] * m**2)
        b = np.maximum(b, 1e-300)
        E_lam = a[:, None] / b
        E_loglam = digamma(a)[:, None] - np.log(b)
        sq_coef = np.ascontiguousarray((-0.5 * E_lam).T)
        lin_coef = np.ascontiguousarray((E_lam * m).T)
        const = (
            -0.5 * self._D * LOG_2PI
            + 0.5 * E_loglam.sum(1)
            - 0.5 * (E_lam * m**2).sum(1)
            - 0.5 * self._D / kappa
        )
        return NormalGammaPosterior(kappa, m, a, b, E_lam, E_loglam, sq_coef, lin_coef, const)

    def elbo(self, stats: SuffStats, post: NormalGammaPosterior) -> float:
        expected_loglik = (
            stats.array("N") @ post.const
            + np.sum(stats.array("x2") * post.sq_coef.T)
            + np.sum(stats.array("x") * post.lin_coef.T)
        )
        kl_gamma = gamma_kl(post.a[:, None], post.b, self.a, self.b0)
        diff = post.m - self._m0
        kl_mean = (
            0.5 * np.log(post.kappa / self.kappa)[:, None]
            - 0.5
            + 0.5 * self.kappa * (1.0 / post.kappa[:, None] + diff**2 * post.E_lam)
        )
        return float(expected_loglik - kl_gamma.sum() - kl_mean.sum())

    def point_log_lik(self, X: Rows, post: NormalGammaPosterior) -> np.ndarray:
        X = as_dense_rows(X, self.dim)
        var = post.variances
        out = -0.5 * (self._D * LOG_2PI + np.log(var).sum(1))[None, :]
        inv = 1.0 / var
        quad = (X * X) @ inv.T - 2.0 * X @ (post.m * inv).T + (post.m**2 * inv).sum(1)[None, :]
        return out - 0.5 * quad

    def divergence(self, X: Rows, seeds: Rows) -> np.ndarray:
        """Squared Euclidean distance: the Bregman divergence of the mean parameter."""
        return squared_euclidean(as_dense_rows(X, self.dim), as_dense_rows(seeds, self.dim))
