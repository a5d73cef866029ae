"""The interface every observation model implements.

An observation model owns the likelihood ``F(x | phi_k)``, its conjugate prior,
and everything that needs their formulas: expected log-likelihoods for the
local step, sufficient statistics, the global step, the data term of the ELBO
(lsparse App. A-B), point estimates for scoring, and the Bregman divergence
used by k-means++ initialization. It knows nothing of batches or Dask.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from lsdask.models.stats import SuffStats
from lsdask.models.workspace import Workspace


class ObservationModel(ABC):
    """Likelihood plus conjugate prior; subclasses are small frozen dataclasses."""

    #: names of the statistics this model adds to a batch's SuffStats
    stat_names: tuple[str, ...] = ()

    #: True where :meth:`summarize_sparse_rows` summarizes a whole batch at
    #: once from its raw rows, cheaper than block by block from the features
    sparse_summary_from_rows: bool = False

    @abstractmethod
    def with_data_defaults(self, sample: Any) -> ObservationModel:
        """Return a copy with the data dimension and data-driven prior defaults set."""

    @abstractmethod
    def check_data(self, X: Any) -> None:
        """Raise ValueError, saying what is wrong, for rows this model cannot take."""

    @abstractmethod
    def prepare(self, X: Any, ws: Workspace | None = None) -> Any:
        """Per-block features shared by the weights and the summaries; with a
        :class:`Workspace` they may live in its arrays (valid for this block)."""

    @abstractmethod
    def expected_log_lik(self, block: Any, post: Any, ws: Workspace | None = None) -> np.ndarray:
        """``E_q[log F(x_n | phi_k)]`` for every row of the block: (n, K) float64
        (in the workspace's arrays when one is given)."""

    @abstractmethod
    def summarize_sparse(self, block: Any, resp: np.ndarray, idx: np.ndarray, out: dict) -> None:
        """Add the block's statistics from L-sparse responsibilities into ``out``."""

    def summarize_sparse_rows(self, X: Any, resp: np.ndarray, idx: np.ndarray, out: dict) -> None:
        """Add a whole batch's statistics from its raw rows and L-sparse
        responsibilities (models with ``sparse_summary_from_rows``)."""
        raise NotImplementedError(f"{type(self).__name__} summarizes block by block")

    @abstractmethod
    def summarize_dense(self, block: Any, R: np.ndarray, out: dict) -> None:
        """Add the block's statistics from dense responsibilities (N, K) into ``out``."""

    @abstractmethod
    def empty_stats(self, K: int) -> dict:
        """Zero statistics for K clusters."""

    @abstractmethod
    def global_step(self, stats: SuffStats) -> Any:
        """Optimal ``q(phi)`` given whole-data statistics (the posterior)."""

    @abstractmethod
    def elbo(self, stats: SuffStats, post: Any) -> float:
        """``L_data``: ``E[log p(x | z, phi)] + E[log p(phi) - log q(phi)]``."""

    @abstractmethod
    def point_log_lik(self, X: Any, post: Any) -> np.ndarray:
        """``log F(x_n | phi_hat_k)`` at point estimates (Sec. 4 heldout score)."""

    @abstractmethod
    def divergence(self, X: Any, seeds: Any) -> np.ndarray:
        """Bregman divergence from each row of X to each seed's cluster: (n, n_seeds)."""

    @property
    @abstractmethod
    def data_dim(self) -> int | None:
        """Dimension of one observation, once known."""
