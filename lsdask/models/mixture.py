"""A mixture model: the finite allocation model times an observation model.

Holds the whole local step of lsparse Sec. 2-3 for one batch (log weights,
dense or top-L responsibilities, summaries, entropy), the global step and the
exact ELBO (App. A), all in terms of additive :class:`SuffStats`. It knows
nothing of batches' storage or of Dask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic

import numpy as np

from lsdask import config
from lsdask.kernels import (
    bounded_candidates,
    dense_counts,
    dense_entropy,
    dense_resp_from_log_weights,
    dense_resp_into,
    sparse_counts,
    sparse_entropy,
    stack_candidates,
    topl_resp_from_candidates,
    topl_resp_from_log_weights,
)
from lsdask.models.allocation import FiniteMixtureAllocation
from lsdask.models.observation import ObservationModel, P, Rows
from lsdask.models.stats import SuffStats
from lsdask.models.workspace import Workspace


@dataclass(frozen=True)
class MixtureGlobals(Generic[P]):
    """Global variational parameters: ``q(pi) = Dir(theta)`` and ``q(phi)``."""

    theta: np.ndarray  # (K,)
    elogpi: np.ndarray  # (K,) E[log pi_k], cached for the local step
    obs: P  # the observation model's posterior


@dataclass(frozen=True)
class MixtureModel(Generic[P]):
    """Finite mixture with L-sparse local step.

    Parameters
    ----------
    observation : ObservationModel
        Likelihood and prior, already configured for the data
        (:meth:`ObservationModel.with_data_defaults`).
    n_components : int
        K.
    alpha : float
        Dirichlet concentration of the cluster weights (``pi ~ Dir(alpha/K)``).
    block_rows : int
        Rows processed at once inside a batch (bounds temporaries).
    preselect : bool or None
        Whether an L-sparse step takes its top L from float32 log weights with
        a rigorous error bound, weighing only the candidates exactly (the same
        responsibilities, about half the cost of all K float64 weights; models
        with ``bounded_log_lik``). None decides by cost: the float32 product
        saves about a quarter of ``D^2 K`` per row, the exact candidates cost
        about ``2 D^2`` each (L plus a few), so it pays from ``K >= 8 (L + 3)``.
    """

    observation: ObservationModel[P]
    n_components: int
    alpha: float
    block_rows: int = config.BLOCK_ROWS
    preselect: bool | None = None

    def __post_init__(self) -> None:
        for name in ("n_components", "block_rows"):
            value = getattr(self, name)
            if (
                not (isinstance(value, int | np.integer) and not isinstance(value, bool))
                or value < 1
            ):
                raise ValueError(f"{name} must be a whole number >= 1; got {value!r}")
        alpha = self.alpha
        if (
            isinstance(alpha, bool)
            or not isinstance(alpha, int | float)
            or not (np.isfinite(alpha) and alpha > 0)
        ):
            raise ValueError(f"alpha must be a positive finite number; got {alpha!r}")
        if self.preselect not in (None, True, False):
            raise ValueError(f"preselect must be true, false or null; got {self.preselect!r}")

    @property
    def allocation(self) -> FiniteMixtureAllocation:
        return FiniteMixtureAllocation(self.n_components, self.alpha)

    # local step -------------------------------------------------------------
    def log_weights(
        self, block: object, glob: MixtureGlobals[P], ws: Workspace | None = None
    ) -> np.ndarray:
        """``W[n, k] = E[log pi_k] + E[log F(x_n | phi_k)]`` (Eq. 5), an (n, K) array."""
        W = self.observation.expected_log_lik(block, glob.obs, ws)
        W += glob.elogpi
        return W

    def local_step(self, X: Rows, glob: MixtureGlobals[P], sparsity: int | None) -> SuffStats:
        """Responsibilities for every row of X, summarized into statistics.

        ``sparsity=None`` uses dense responsibilities (Alg. 1 left); an integer
        L keeps the top L per row (Alg. 1 right). Returns ``N``, ``H``
        (per-cluster entropy) and the observation model's statistics.
        """
        K = self.n_components
        obs = self.observation
        parts = {"N": np.zeros(K), "H": np.zeros(K), **obs.empty_stats(K)}
        if sparsity is not None and self._preselects(sparsity):
            X = obs.batch_rows(X)  # converted once, read three times
            resp, idx = self._preselected_topl(X, glob, sparsity)
            parts["N"] += sparse_counts(resp, idx, K)
            parts["H"] += sparse_entropy(resp, idx, K)
            obs.summarize_sparse_rows(X, resp, idx, parts)
            return SuffStats(**obs.compact_stats(parts))
        n = X.shape[0]
        # models that summarize a whole batch from its raw rows keep every
        # block's responsibilities (N x L) until the end of the batch
        L_whole = sparsity if obs.sparse_summary_from_rows else None
        whole = L_whole is not None
        if L_whole is not None:
            resp_all = np.empty((n, L_whole))
            idx_all = np.empty((n, L_whole), dtype=np.int32)
        ws = Workspace()  # the blocks' temporaries, reused block after block
        for start in range(0, n, self.block_rows):
            block = obs.prepare(X[start : start + self.block_rows], ws)
            W = self.log_weights(block, glob, ws)
            if sparsity is None:
                R = dense_resp_into(W, W)  # the weights are not needed afterwards
                parts["N"] += dense_counts(R)
                parts["H"] += dense_entropy(R)
                obs.summarize_dense(block, R, parts)
            else:
                resp, idx = topl_resp_from_log_weights(W, sparsity)
                parts["N"] += sparse_counts(resp, idx, K)
                parts["H"] += sparse_entropy(resp, idx, K)
                if whole:
                    resp_all[start : start + resp.shape[0]] = resp
                    idx_all[start : start + resp.shape[0]] = idx
                else:
                    obs.summarize_sparse(block, resp, idx, parts)
        if whole:
            obs.summarize_sparse_rows(X, resp_all, idx_all, parts)
        return SuffStats(**obs.compact_stats(parts))

    def _preselects(self, sparsity: int | None) -> bool:
        """Whether an L-sparse step takes its top L from float32 weights (exactly)."""
        obs = self.observation
        if sparsity is None or sparsity >= self.n_components or self.preselect is False:
            return False
        if not (obs.bounded_log_lik and obs.sparse_summary_from_rows):
            return False
        return self.preselect or self.n_components >= 8 * (sparsity + 3)

    def _preselected_topl(
        self, X: Rows, glob: MixtureGlobals[P], L: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """``topl_resp_from_log_weights`` of the exact log weights of a whole
        batch, without computing all of them in float64: float32 weights with
        an error bound give each row's candidates, only those are weighed
        exactly (:mod:`lsdask.kernels.preselect`)."""
        obs = self.observation
        setup = obs.bounded_setup(glob.obs)
        offset = setup.offset + glob.elogpi
        ws = Workspace()
        parts = []
        for start in range(0, X.shape[0], self.block_rows):
            W32, row_err, abs_err = obs.bounded_expected_log_lik(
                X[start : start + self.block_rows], setup, ws
            )
            parts.append(bounded_candidates(W32, offset, row_err, setup.col_err, abs_err, L))
        indptr, cand = stack_candidates(parts)
        exact = obs.expected_log_lik_pairs(X, glob.obs, indptr, cand)
        exact += glob.elogpi[cand]
        return topl_resp_from_candidates(indptr, cand, exact, L)

    def responsibilities(
        self, X: Rows, glob: MixtureGlobals[P], sparsity: int | None
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Dense (n, K) responsibilities, or ``(resp, idx)`` when sparse."""
        if sparsity is not None and self._preselects(sparsity):
            return self._preselected_topl(X, glob, sparsity)
        block = self.observation.prepare(X)
        W = self.log_weights(block, glob)
        if sparsity is None:
            return dense_resp_from_log_weights(W)
        return topl_resp_from_log_weights(W, sparsity)

    # global step and objective ---------------------------------------------
    def empty_stats(self) -> SuffStats:
        K = self.n_components
        return SuffStats(N=np.zeros(K), H=np.zeros(K), **self.observation.empty_stats(K))

    def for_local_step(self, glob: MixtureGlobals[P]) -> MixtureGlobals[P]:
        """What the workers need for the local step (what the observation model
        sends of its posterior: fewer bytes broadcast per global step)."""
        return MixtureGlobals(glob.theta, glob.elogpi, self.observation.for_local_step(glob.obs))

    def row_count(self, stats: SuffStats) -> float:
        """Observations summarized in the statistics (responsibilities sum to one)."""
        return float(stats.array("N").sum())

    def data_size(self, stats: SuffStats) -> float:
        """What the ELBO is reported per: observations."""
        return self.row_count(stats)

    def global_step(self, stats: SuffStats) -> MixtureGlobals[P]:
        """Optimal ``q(pi), q(phi)`` given whole-data statistics."""
        alloc = self.allocation
        theta = alloc.global_step(stats.array("N"))
        return MixtureGlobals(
            theta, alloc.expected_log_weights(theta), self.observation.global_step(stats)
        )

    def elbo(self, stats: SuffStats, glob: MixtureGlobals[P]) -> float:
        """Exact ELBO (Eq. 18) from statistics: data + entropy + allocation terms."""
        return (
            self.observation.elbo(stats, glob.obs)
            + float(stats.array("H").sum())
            + self.allocation.elbo(stats.array("N"), glob.theta)
        )
