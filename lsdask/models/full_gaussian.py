"""Full Gaussian (unknown mean and covariance) with a Normal-Wishart prior.

``x_n ~ N(mu_k, Phi_k^{-1})``, ``Phi_k ~ W(nu, B^{-1})``,
``mu_k | Phi_k ~ N(m, (kappa Phi_k)^{-1})``. Statistics ``N_k``,
``x = sum r x``, ``xx = vech(sum r x x^T)``. Posterior:
``kappa_k = kappa + N_k``, ``m_k = (kappa m + x_k) / kappa_k``,
``nu_k = nu + N_k``, ``B_k = B + xx_k + kappa m m^T - kappa_k m_k m_k^T``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Self

import numpy as np

from lsdask.kernels import (
    dense_weighted_rows,
    outer_features_into,
    pack_quadratic,
    pair_quadratic_forms,
    sparse_outer_sums,
    sparse_weighted_rows,
    unpack_symmetric,
)
from lsdask.models.gaussian_base import (
    as_dense_rows,
    default_scale,
    float32_quadratic_weights,
    gaussian_log_pdf,
    squared_euclidean,
)
from lsdask.models.observation import (
    BoundedWeights,
    ObservationModel,
    Parts,
    Rows,
    configured,
    kept,
)
from lsdask.models.special import LOG_2PI, logdet_spd, wishart_expectations, wishart_kl
from lsdask.models.stats import SuffStats
from lsdask.models.workspace import Workspace, take


@dataclass(frozen=True)
class NormalWishartPosterior:
    kappa: np.ndarray  # (K,)
    m: np.ndarray  # (K, D)
    nu: np.ndarray  # (K,)
    B: np.ndarray | None  # (K, D, D); None in what the local step receives
    logdet_B: np.ndarray
    E_phi: np.ndarray
    E_logdet: np.ndarray
    quad_coef: np.ndarray  # (D(D+1)/2, K)
    lin_coef: np.ndarray  # (D, K): x @ lin_coef = x^T E[Phi] m
    const: np.ndarray  # (K,)

    @property
    def means(self) -> np.ndarray:
        return self.m

    @property
    def covariances(self) -> np.ndarray:
        """``E[Sigma_k] = B_k / (nu_k - D - 1)``."""
        B = kept(self.B, "B")
        D = B.shape[-1]
        return B / (self.nu - D - 1.0)[:, None, None]


@dataclass(frozen=True)
class FullGaussian(ObservationModel[NormalWishartPosterior]):
    """Gaussian likelihood with unknown mean and full covariance.

    Parameters
    ----------
    nu : float or None
        Wishart degrees of freedom; default D + 2.
    prior_scale : float or None
        Prior expected covariance ``prior_scale * I``; default the mean
        per-dimension variance of a data sample.
    kappa : float
        Prior pseudo-count of the mean (weak by default).
    prior_mean : ndarray or None
        ``m``; default the sample mean.
    dim : int or None
        D, set from the data.
    """

    nu: float | None = None
    prior_scale: float | None = None
    kappa: float = 1e-4
    prior_mean: np.ndarray | None = None
    dim: int | None = None

    stat_names = ("x", "xx")

    @property
    def data_dim(self) -> int | None:
        return self.dim

    # the parameters with_data_defaults sets
    @property
    def _D(self) -> int:
        return configured(self, "dim", self.dim)

    @property
    def _nu(self) -> float:
        return configured(self, "nu", self.nu)

    @property
    def _m0(self) -> np.ndarray:
        return configured(self, "prior_mean", self.prior_mean)

    def with_data_defaults(self, sample: Rows) -> Self:
        X = as_dense_rows(sample, self.dim)
        D = X.shape[1]
        nu = float(D + 2) if self.nu is None else float(self.nu)
        if nu <= D + 1:
            raise ValueError(f"nu must be > D + 1 = {D + 1}; got {nu}")
        if not self.kappa > 0:
            raise ValueError(f"kappa must be a positive float; got {self.kappa}")
        scale = default_scale(X, centered=True) if self.prior_scale is None else self.prior_scale
        m0 = X.mean(axis=0) if self.prior_mean is None else np.asarray(self.prior_mean, float)
        return replace(self, nu=nu, prior_scale=float(scale), prior_mean=m0, dim=D)

    @property
    def B0(self) -> np.ndarray:
        scale = configured(self, "prior_scale", self.prior_scale)
        return np.eye(self._D) * scale * (self._nu - self._D - 1.0)

    def check_data(self, X: Rows) -> None:
        as_dense_rows(X, self.dim)

    def prepare(self, X: Rows, ws: Workspace | None = None) -> tuple[np.ndarray, np.ndarray]:
        X = as_dense_rows(X, self.dim)
        D = self._D
        return X, outer_features_into(X, take(ws, "features", (X.shape[0], D * (D + 1) // 2)))

    def expected_log_lik(
        self,
        block: tuple[np.ndarray, np.ndarray],
        post: NormalWishartPosterior,
        ws: Workspace | None = None,
    ) -> np.ndarray:
        X, F = block
        shape = (X.shape[0], post.nu.size)
        W = np.matmul(F, post.quad_coef, out=take(ws, "W", shape))
        W += np.matmul(X, post.lin_coef, out=take(ws, "W_linear", shape))
        W += post.const
        return W

    # float32 preselection (MixtureModel.preselect) --------------------------
    # E[log N(x | mu_k, Phi_k^-1)] = c0_k - 1/2 (x - m_k)^T E[Phi_k] (x - m_k), with
    # c0_k = -D/2 log 2 pi + 1/2 E[log |Phi_k|] - D / (2 kappa_k). The float32 weights
    # use x' = x - m0 (the prior mean: data far from the origin would otherwise make
    # the quadratic and linear terms cancel and the error bound useless):
    # vech(x' x'^T) . quad_coef + x' . E[Phi_k] d_k + c0_k - 1/2 d_k^T E[Phi_k] d_k,
    # d_k = m_k - m0.
    bounded_log_lik = True

    def _c0(self, post: NormalWishartPosterior) -> np.ndarray:
        return -0.5 * self._D * LOG_2PI + 0.5 * post.E_logdet - 0.5 * self._D / post.kappa

    def bounded_setup(self, post: NormalWishartPosterior) -> BoundedWeights:
        d = post.m - self._m0
        E_phi_d = np.einsum("kde,ke->kd", post.E_phi, d)
        coef = np.concatenate([post.quad_coef, E_phi_d.T])  # (M + D, K)
        offset = self._c0(post) - 0.5 * np.einsum("kd,kd->k", d, E_phi_d)
        return BoundedWeights.from_coef(coef, offset)

    def bounded_expected_log_lik(
        self, X: Rows, setup: BoundedWeights, ws: Workspace | None = None
    ) -> tuple[np.ndarray, np.ndarray, float]:
        X = as_dense_rows(X, self.dim)
        return float32_quadratic_weights(X, self.prior_mean, True, setup, ws)

    def expected_log_lik_pairs(
        self, X: Rows, post: NormalWishartPosterior, indptr: np.ndarray, cand: np.ndarray
    ) -> np.ndarray:
        X = as_dense_rows(X, self.dim)
        quad = pair_quadratic_forms(X, post.E_phi, post.m, indptr, cand, np.empty(cand.size))
        return self._c0(post)[cand] - 0.5 * quad

    def batch_rows(self, X: Rows) -> np.ndarray:
        return as_dense_rows(X, self.dim)

    def for_local_step(self, post: NormalWishartPosterior) -> NormalWishartPosterior:
        """Without ``B`` (K x D x D), which no part of the local step reads."""
        return replace(post, B=None)

    def summarize_sparse(
        self, block: tuple[np.ndarray, np.ndarray], resp: np.ndarray, idx: np.ndarray, out: Parts
    ) -> None:
        X, F = block
        sparse_weighted_rows(X, resp, idx, out["x"])
        sparse_weighted_rows(F, resp, idx, out["xx"])

    sparse_summary_from_rows = True

    def summarize_sparse_rows(self, X: Rows, resp: np.ndarray, idx: np.ndarray, out: Parts) -> None:
        X = as_dense_rows(X, self.dim)
        sparse_weighted_rows(X, resp, idx, out["x"])
        sparse_outer_sums(X, resp, idx, out["xx"])

    def summarize_dense(
        self, block: tuple[np.ndarray, np.ndarray], R: np.ndarray, out: Parts
    ) -> None:
        X, F = block
        dense_weighted_rows(X, R, out["x"])
        dense_weighted_rows(F, R, out["xx"])

    def empty_stats(self, K: int) -> dict[str, np.ndarray]:
        D = self._D
        return {"x": np.zeros((K, D)), "xx": np.zeros((K, D * (D + 1) // 2))}

    def global_step(self, stats: SuffStats) -> NormalWishartPosterior:
        D = self._D
        N = stats.array("N")
        m0 = self._m0
        kappa = self.kappa + N
        m = (self.kappa * m0 + stats.array("x")) / kappa[:, None]
        nu = self._nu + N
        B = (
            self.B0
            + unpack_symmetric(np.ascontiguousarray(stats.array("xx")), D)
            + self.kappa * np.outer(m0, m0)
            - kappa[:, None, None] * m[:, :, None] * m[:, None, :]
        )
        B = 0.5 * (B + np.swapaxes(B, -1, -2))
        logdet, E_phi, E_logdet = wishart_expectations(nu, B)
        quad_coef = np.ascontiguousarray((-0.5 * pack_quadratic(E_phi)).T)
        E_phi_m = np.einsum("kde,ke->kd", E_phi, m)
        lin_coef = np.ascontiguousarray(E_phi_m.T)
        const = (
            -0.5 * D * LOG_2PI
            + 0.5 * E_logdet
            - 0.5 * np.einsum("kd,kd->k", m, E_phi_m)
            - 0.5 * D / kappa
        )
        return NormalWishartPosterior(
            kappa, m, nu, B, logdet, E_phi, E_logdet, quad_coef, lin_coef, const
        )

    def elbo(self, stats: SuffStats, post: NormalWishartPosterior) -> float:
        D = self._D
        N = stats.array("N")
        # sum_n r_nk E[log N(x_n | mu_k, Phi_k^-1)], expanded in the statistics
        expected_loglik = (
            N @ post.const
            + np.sum(stats.array("xx") * post.quad_coef.T)
            + np.sum(stats.array("x") * post.lin_coef.T)
        )
        B0 = self.B0
        kl_wishart = wishart_kl(
            post.nu, kept(post.B, "B"), post.logdet_B, post.E_phi, post.E_logdet,
            self._nu, B0, float(logdet_spd(B0)),
        )  # fmt: skip
        diff = post.m - self._m0
        kl_mean = (
            0.5 * D * np.log(post.kappa / self.kappa)
            - 0.5 * D
            + 0.5
            * self.kappa
            * (D / post.kappa + np.einsum("kd,kde,ke->k", diff, post.E_phi, diff))
        )
        return float(expected_loglik - kl_wishart.sum() - kl_mean.sum())

    def point_log_lik(self, X: Rows, post: NormalWishartPosterior) -> np.ndarray:
        return gaussian_log_pdf(as_dense_rows(X, self.dim), post.means, post.covariances)

    def divergence(self, X: Rows, seeds: Rows) -> np.ndarray:
        """Squared Euclidean distance: the Bregman divergence of the mean parameter."""
        return squared_euclidean(as_dense_rows(X, self.dim), as_dense_rows(seeds, self.dim))
