"""The interface every observation model implements.

An observation model owns the likelihood ``F(x | phi_k)``, its conjugate prior,
and everything that needs their formulas: expected log-likelihoods for the
local step, sufficient statistics, the global step, the data term of the ELBO
(lsparse App. A-B), point estimates for scoring, and the Bregman divergence
used by k-means++ initialization. It knows nothing of batches or Dask.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Generic, Self, TypeAlias, TypeVar

import numpy as np
import scipy.sparse as sp

from lsdask.kernels.preselect import float32_blocks, float32_dot_error_factor
from lsdask.models.stats import Stat, SuffStats
from lsdask.models.workspace import Workspace

#: rows of observations: a dense (n, D) array, or a CSR matrix of counts (n, V)
Rows: TypeAlias = "np.ndarray | sp.csr_matrix"

#: a batch's statistics while they accumulate, by name (the model's ``stat_names``)
Parts: TypeAlias = dict[str, np.ndarray]

#: an observation model's posterior q(phi) (its global parameters)
P = TypeVar("P")


T = TypeVar("T")


def configured(model: object, name: str, value: T | None) -> T:
    """``value`` of a parameter that ``model`` sets from the data
    (:meth:`ObservationModel.with_data_defaults`); a ValueError while it is unset."""
    if value is None:
        raise ValueError(
            f"{type(model).__name__}.{name} is not set; configure the model from a data "
            "sample first (with_data_defaults)"
        )
    return value


def kept(value: np.ndarray | None, name: str) -> np.ndarray:
    """A posterior's array ``name``, which the copy sent to the local step leaves
    out (``for_local_step``); a ValueError when asked of that copy."""
    if value is None:
        raise ValueError(
            f"the posterior's {name} is left out of the copy the local step receives "
            "(for_local_step); use the global step's posterior"
        )
    return value


@dataclass(frozen=True)
class BoundedWeights:
    """A posterior's log weights as a float32 product plus exact float64 offsets.

    ``coef_blocks`` (rows ``edges[b]:edges[b + 1]`` of an (M, K) float32
    coefficient matrix) multiply a block's float32 features
    (:func:`lsdask.kernels.float32_product`); ``offset`` (K,) is added exactly;
    ``col_err`` (K,) and ``factor`` give the error bound (``row_err[n] =
    factor * |features_n|``, plus an absolute term for underflow, see
    :mod:`lsdask.kernels.preselect`).
    """

    coef_blocks: tuple[np.ndarray, ...]
    edges: np.ndarray
    offset: np.ndarray
    col_err: np.ndarray
    factor: float

    @classmethod
    def from_coef(cls, coef: np.ndarray, offset: np.ndarray) -> BoundedWeights:
        """From float64 coefficients (M, K): float32 blocks, column norms, the factor."""
        edges = float32_blocks(coef.shape[0])
        blocks = tuple(
            np.ascontiguousarray(coef[a:b], dtype=np.float32) for a, b in pairwise(edges)
        )
        col_err = np.sqrt(np.einsum("mk,mk->k", coef, coef))
        return cls(blocks, edges, offset, col_err, float32_dot_error_factor(edges))


class ObservationModel(ABC, Generic[P]):
    """Likelihood plus conjugate prior; subclasses are small frozen dataclasses.

    ``P`` is the type of the posterior ``q(phi)`` the global step returns. A
    *block* is what :meth:`prepare` makes of some rows (features shared by the
    weights and the summaries); its type is the model's own.
    """

    #: names of the statistics this model adds to a batch's SuffStats
    stat_names: tuple[str, ...] = ()

    #: True where :meth:`summarize_sparse_rows` summarizes a whole batch at
    #: once from its raw rows, cheaper than block by block from the features
    sparse_summary_from_rows: bool = False

    @abstractmethod
    def with_data_defaults(self, sample: Rows) -> Self:
        """Return a copy with the data dimension and data-driven prior defaults set."""

    @abstractmethod
    def check_data(self, X: Rows) -> None:
        """Raise ValueError, saying what is wrong, for rows this model cannot take."""

    @abstractmethod
    def prepare(self, X: Rows, ws: Workspace | None = None) -> Any:
        """Per-block features shared by the weights and the summaries; with a
        :class:`Workspace` they may live in its arrays (valid for this block)."""

    @abstractmethod
    def expected_log_lik(self, block: Any, post: P, ws: Workspace | None = None) -> np.ndarray:
        """``E_q[log F(x_n | phi_k)]`` for every row of the block: (n, K) float64
        (in the workspace's arrays when one is given)."""

    #: True where the model gives float32 log weights with a rigorous error
    #: bound and exact weights of chosen (row, cluster) pairs, so an L-sparse
    #: step can find the exact top L at about half the cost of all K weights in
    #: float64 (:mod:`lsdask.kernels.preselect`); the three methods below
    bounded_log_lik: bool = False

    def bounded_setup(self, post: P) -> BoundedWeights:
        """What :meth:`bounded_expected_log_lik` needs of the posterior, made once per batch."""
        raise NotImplementedError(f"{type(self).__name__} has no bounded float32 log weights")

    def bounded_expected_log_lik(
        self, X: Rows, setup: BoundedWeights, ws: Workspace | None = None
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """``(W32, row_err, abs_err)`` for a block of raw rows: ``E_q[log F(x_n | phi_k)]``
        differs from ``W32[n, k] + setup.offset[k]`` by at most
        ``row_err[n] * setup.col_err[k] + abs_err``."""
        raise NotImplementedError(f"{type(self).__name__} has no bounded float32 log weights")

    def expected_log_lik_pairs(
        self, X: Rows, post: P, indptr: np.ndarray, cand: np.ndarray
    ) -> np.ndarray:
        """Exact ``E_q[log F(x_n | phi_k)]`` for the pairs (n, cand[p]),
        p in ``indptr[n]:indptr[n + 1]``, of a whole batch of raw rows X."""
        raise NotImplementedError(f"{type(self).__name__} has no pairwise log weights")

    @abstractmethod
    def summarize_sparse(self, block: Any, resp: np.ndarray, idx: np.ndarray, out: Parts) -> None:
        """Add the block's statistics from L-sparse responsibilities into ``out``."""

    def summarize_sparse_rows(self, X: Rows, resp: np.ndarray, idx: np.ndarray, out: Parts) -> None:
        """Add a whole batch's statistics from its raw rows and L-sparse
        responsibilities (models with ``sparse_summary_from_rows``)."""
        raise NotImplementedError(f"{type(self).__name__} summarizes block by block")

    def batch_rows(self, X: Rows) -> Rows:
        """A whole batch converted once into what the model's methods read
        (default: as given)."""
        return X

    def for_local_step(self, post: P) -> P:
        """The part of the posterior the local step reads (default: all of it)."""
        return post

    def compact_stats(self, out: Parts) -> Mapping[str, Stat]:
        """A batch's finished statistics in the form they travel and are
        memoized in (default: as accumulated)."""
        return out

    @abstractmethod
    def summarize_dense(self, block: Any, R: np.ndarray, out: Parts) -> None:
        """Add the block's statistics from dense responsibilities (N, K) into ``out``."""

    @abstractmethod
    def empty_stats(self, K: int) -> Parts:
        """Zero statistics for K clusters."""

    @abstractmethod
    def global_step(self, stats: SuffStats) -> P:
        """Optimal ``q(phi)`` given whole-data statistics (the posterior)."""

    @abstractmethod
    def elbo(self, stats: SuffStats, post: P) -> float:
        """``L_data``: ``E[log p(x | z, phi)] + E[log p(phi) - log q(phi)]``."""

    @abstractmethod
    def point_log_lik(self, X: Rows, post: P) -> np.ndarray:
        """``log F(x_n | phi_hat_k)`` at point estimates (Sec. 4 heldout score)."""

    @abstractmethod
    def divergence(self, X: Any, seeds: Rows) -> np.ndarray:
        """Bregman divergence from each row of X to each seed's cluster: (n, n_seeds).

        ``X`` may also be what :meth:`divergence_sample` returned for it."""

    def divergence_sample(self, X: Rows) -> Any:
        """X in the form :meth:`divergence` takes fastest, for many calls on
        the same rows (k-means++); by default X itself."""
        return X

    @property
    @abstractmethod
    def data_dim(self) -> int | None:
        """Dimension of one observation, once known."""
