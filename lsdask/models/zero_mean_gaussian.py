"""Zero-mean full-covariance Gaussian with a Wishart prior (lsparse App. B.1).

``x_n ~ N(0, Phi_k^{-1})``, ``Phi_k ~ W(nu, B^{-1})`` (``B`` the inverse scale).
Statistics ``N_k`` and ``S_k = sum_n r_nk x_n x_n^T`` (stored as vech, Eq. 30).
Posterior ``nu_k = nu + N_k``, ``B_k = B + S_k``. Point estimate
``Sigma_k = E[Sigma_k] = B_k / (nu_k - D - 1)`` (Sec. 4).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Self

import numpy as np

from lsdask import config
from lsdask.kernels import (
    dense_weighted_rows,
    outer_features_into,
    pack_quadratic,
    pair_quadratic_forms,
    sparse_outer_sums,
    sparse_weighted_rows,
    unpack_quadratic,
    unpack_symmetric,
)
from lsdask.models.gaussian_base import (
    as_dense_rows,
    default_scale,
    float32_quadratic_weights,
    gaussian_log_pdf,
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

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WishartPosterior:
    """``q(Phi_k) = W(nu_k, B_k^{-1})`` plus the expectations the local step needs."""

    nu: np.ndarray  # (K,)
    B: np.ndarray | None  # (K, D, D); None in what the local step receives
    logdet_B: np.ndarray  # (K,)
    E_phi: np.ndarray | None  # (K, D, D); None in what the local step receives
    E_logdet: np.ndarray  # (K,)
    quad_coef: np.ndarray  # (D(D+1)/2, K): vech(x x^T) @ quad_coef = -1/2 x^T E[Phi] x
    const: np.ndarray  # (K,)

    @property
    def covariances(self) -> np.ndarray:
        """``E[Sigma_k] = B_k / (nu_k - D - 1)``."""
        B = kept(self.B, "B")
        D = B.shape[-1]
        return B / (self.nu - D - 1.0)[:, None, None]


def _warn_if_not_centered(X: np.ndarray) -> None:
    """Warn when rows are far from centered at 0: every cluster of this model is
    centered there (image patches with their mean removed), so such data (e.g.
    clusters along a line through the origin) cannot be told apart."""
    if X.shape[0] < 2:
        return
    mean = X.mean(axis=0)
    spread = float(np.sqrt(((X - mean) ** 2).sum(axis=1).mean()))
    offset = float(np.linalg.norm(mean))
    if offset > config.ZERO_MEAN_OFFSET_WARNING * spread:
        logger.warning(
            "covariance_type='zero-mean' models rows centered at 0 (as image patches with "
            "their mean removed), but the sample's mean lies %.3g from 0, %.2g times the rows' "
            "spread around it; for data that is not centered pass covariance_type='full' or "
            "'diag' (or subtract the mean)",
            offset, offset / spread if spread > 0 else float("inf"),
        )  # fmt: skip


@dataclass(frozen=True)
class ZeroMeanGaussian(ObservationModel[WishartPosterior]):
    """Zero-mean Gaussian likelihood with Wishart prior on the precision.

    Parameters
    ----------
    nu : float or None
        Prior degrees of freedom; default D + 2 (the weakest with a finite
        prior mean covariance).
    prior_scale : float or None
        Prior expected covariance ``E[Sigma] = prior_scale * I``; default the
        mean of x**2 over a data sample.
    dim : int or None
        Data dimension D; set from the data by :meth:`with_data_defaults`.
    """

    nu: float | None = None
    prior_scale: float | None = None
    dim: int | None = None

    stat_names = ("xx",)

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

    def with_data_defaults(self, sample: Rows) -> Self:
        X = as_dense_rows(sample, self.dim)
        D = X.shape[1]
        nu = float(D + 2) if self.nu is None else float(self.nu)
        if nu <= D + 1:
            raise ValueError(
                f"nu must be > D + 1 = {D + 1} for a finite prior mean covariance; got {nu}"
            )
        scale = default_scale(X, centered=False) if self.prior_scale is None else self.prior_scale
        _warn_if_not_centered(X)
        return replace(self, nu=nu, prior_scale=float(scale), dim=D)

    # prior --------------------------------------------------------------
    @property
    def B0(self) -> np.ndarray:
        D = self._D
        return np.eye(D) * configured(self, "prior_scale", self.prior_scale) * (self._nu - D - 1.0)

    # local step ---------------------------------------------------------
    def check_data(self, X: Rows) -> None:
        as_dense_rows(X, self.dim)

    def prepare(self, X: Rows, ws: Workspace | None = None) -> np.ndarray:
        X = as_dense_rows(X, self.dim)
        D = self._D
        return outer_features_into(X, take(ws, "features", (X.shape[0], D * (D + 1) // 2)))

    def expected_log_lik(
        self, block: np.ndarray, post: WishartPosterior, ws: Workspace | None = None
    ) -> np.ndarray:
        W = np.matmul(block, post.quad_coef, out=take(ws, "W", (block.shape[0], post.nu.size)))
        W += post.const
        return W

    bounded_log_lik = True

    def bounded_setup(self, post: WishartPosterior) -> BoundedWeights:
        return BoundedWeights.from_coef(post.quad_coef, post.const)

    def bounded_expected_log_lik(
        self, X: Rows, setup: BoundedWeights, ws: Workspace | None = None
    ) -> tuple[np.ndarray, np.ndarray, float]:
        return float32_quadratic_weights(as_dense_rows(X, self.dim), None, False, setup, ws)

    def expected_log_lik_pairs(
        self, X: Rows, post: WishartPosterior, indptr: np.ndarray, cand: np.ndarray
    ) -> np.ndarray:
        X = as_dense_rows(X, self.dim)
        E_phi = post.E_phi if post.E_phi is not None else unpack_quadratic(-2.0 * post.quad_coef.T)
        zero = np.zeros((E_phi.shape[0], self._D))
        quad = pair_quadratic_forms(X, E_phi, zero, indptr, cand, np.empty(cand.shape[0]))
        return post.const[cand] - 0.5 * quad

    def batch_rows(self, X: Rows) -> np.ndarray:
        return as_dense_rows(X, self.dim)

    def for_local_step(self, post: WishartPosterior) -> WishartPosterior:
        """Without ``B`` and ``E_phi`` (two K x D x D arrays): the local step needs
        ``quad_coef``, which holds E_phi exactly (:func:`unpack_quadratic`)."""
        return replace(post, B=None, E_phi=None)

    def summarize_sparse(
        self, block: np.ndarray, resp: np.ndarray, idx: np.ndarray, out: Parts
    ) -> None:
        sparse_weighted_rows(block, resp, idx, out["xx"])

    sparse_summary_from_rows = True

    def summarize_sparse_rows(self, X: Rows, resp: np.ndarray, idx: np.ndarray, out: Parts) -> None:
        sparse_outer_sums(as_dense_rows(X, self.dim), resp, idx, out["xx"])

    def summarize_dense(self, block: np.ndarray, R: np.ndarray, out: Parts) -> None:
        dense_weighted_rows(block, R, out["xx"])

    def empty_stats(self, K: int) -> dict[str, np.ndarray]:
        D = self._D
        return {"xx": np.zeros((K, D * (D + 1) // 2))}

    # global step --------------------------------------------------------
    def global_step(self, stats: SuffStats) -> WishartPosterior:
        D = self._D
        nu = self._nu + stats.array("N")
        B = self.B0 + unpack_symmetric(np.ascontiguousarray(stats.array("xx")), D)
        logdet, E_phi, E_logdet = wishart_expectations(nu, B)
        quad_coef = np.ascontiguousarray((-0.5 * pack_quadratic(E_phi)).T)
        const = -0.5 * D * LOG_2PI + 0.5 * E_logdet
        return WishartPosterior(nu, B, logdet, E_phi, E_logdet, quad_coef, const)

    def elbo(self, stats: SuffStats, post: WishartPosterior) -> float:
        N = stats.array("N")
        # sum_n r_nk E[log N(x_n | 0, Phi_k^-1)] = N_k const_k - 1/2 tr(E[Phi_k] S_k)
        expected_loglik = N @ post.const + np.sum(stats.array("xx") * post.quad_coef.T)
        B0 = self.B0
        kl = wishart_kl(
            post.nu, kept(post.B, "B"), post.logdet_B, kept(post.E_phi, "E_phi"), post.E_logdet,
            self._nu, B0, float(logdet_spd(B0)),
        )  # fmt: skip
        return float(expected_loglik - kl.sum())

    # scoring and initialization -------------------------------------------
    def point_log_lik(self, X: Rows, post: WishartPosterior) -> np.ndarray:
        return gaussian_log_pdf(as_dense_rows(X, self.dim), None, post.covariances)

    def _smoothed_covariances(self, seeds: np.ndarray) -> np.ndarray:
        # posterior mean covariance of a cluster holding one example
        return (self.B0 + seeds[:, :, None] * seeds[:, None, :]) / (self._nu + 1.0 - self._D - 1.0)

    def divergence(self, X: Rows, seeds: Rows) -> np.ndarray:
        """Burg (log-det) divergence between smoothed one-example covariances.

        ``D(Sigma_x, Sigma_j) = tr(Sigma_x P_j) - log|Sigma_x P_j| - D`` with
        ``Sigma_x = (B + x x^T) / (nu - D)`` and ``P_j`` the inverse of the seed's.
        """
        X = as_dense_rows(X, self.dim)
        seeds = as_dense_rows(seeds, self.dim)
        D = self._D
        c = self._nu - D
        B0 = self.B0
        B0inv = np.linalg.inv(B0)
        logdet_x = float(logdet_spd(B0)) + np.log1p(((X @ B0inv) * X).sum(axis=1))
        logdet_x -= D * np.log(c)
        P = np.linalg.inv(self._smoothed_covariances(seeds))
        logdet_P = logdet_spd(P)
        trace_B0P = np.einsum("de,jed->j", B0, P)
        quad = np.einsum("jne,ne->nj", X @ P, X)
        div = (trace_B0P[None, :] + quad) / c - logdet_x[:, None] - logdet_P[None, :] - D
        return np.maximum(div, 0.0)
