"""Multinomial over a vocabulary with a Dirichlet prior (lsparse App. B.2).

Each observation is a row of word counts ``x_n`` (a document, or one word).
``phi_k ~ Dir(lambda)``; statistics ``words[k, v] = sum_n r_nk x_nv``;
posterior ``lambda_kv = lambda + words_kv``. The ELBO data term (Eq. 35) leaves
out each document's multinomial coefficient, a constant.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Self

import numpy as np
import scipy.sparse as sp

from lsdask.kernels import (
    csr_matmul,
    dense_weighted_csr_rows,
    sparse_weighted_csr_rows,
)
from lsdask.models.dirichlet_logs import DirichletPosterior
from lsdask.models.observation import ObservationModel, Parts, Rows, configured
from lsdask.models.stats import SparseBlock, Stat, SuffStats
from lsdask.models.workspace import Workspace


@dataclass(frozen=True)
class CSRBlock:
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    @property
    def n_rows(self) -> int:
        return self.indptr.shape[0] - 1


def as_count_block(X: Rows, V: int | None) -> CSRBlock:
    """Check a block of word counts (dense (n, V) or scipy sparse) and return CSR arrays."""
    if sp.issparse(X):
        X = sp.csr_matrix(X)
    else:
        X = np.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"expected a 2-D array of word counts (n, V); got shape {X.shape}")
        X = sp.csr_matrix(X)
    if V is not None and X.shape[1] != V:
        raise ValueError(f"expected count vectors over V={V} words; got {X.shape[1]} columns")
    data = np.asarray(X.data, dtype=np.float64)
    if data.size and (not np.all(np.isfinite(data)) or data.min() < 0):
        raise ValueError("word counts must be finite and non-negative")
    return CSRBlock(
        np.asarray(X.indptr, dtype=np.int64), np.asarray(X.indices, dtype=np.int32), data
    )


@dataclass(frozen=True)
class Multinomial(ObservationModel[DirichletPosterior]):
    """Multinomial likelihood with a symmetric Dirichlet prior.

    Parameters
    ----------
    lam : float
        Symmetric Dirichlet pseudo-count per word (``lambda-bar``).
    vocab_size : int or None
        V, set from the data.
    """

    lam: float = 0.1
    vocab_size: int | None = None

    stat_names = ("words",)

    @property
    def data_dim(self) -> int | None:
        return self.vocab_size

    @property
    def _V(self) -> int:
        """V, once with_data_defaults set it."""
        return configured(self, "vocab_size", self.vocab_size)

    def with_data_defaults(self, sample: Rows) -> Self:
        if not self.lam > 0:
            raise ValueError(f"lam (the Dirichlet pseudo-count) must be > 0; got {self.lam}")
        V = sample.shape[1]
        as_count_block(sample, self.vocab_size)
        return replace(self, vocab_size=int(V))

    def check_data(self, X: Rows) -> None:
        as_count_block(X, self.vocab_size)

    def prepare(self, X: Rows, ws: Workspace | None = None) -> CSRBlock:
        return as_count_block(X, self.vocab_size)

    def expected_log_lik(
        self, block: CSRBlock, post: DirichletPosterior, ws: Workspace | None = None
    ) -> np.ndarray:
        cols, local = np.unique(block.indices, return_inverse=True)
        C = post.logs.rows(cols)  # E[log phi] of the block's own words only
        return csr_matmul(block.indptr, local.astype(np.int32), block.data, C)

    def summarize_sparse(
        self, block: CSRBlock, resp: np.ndarray, idx: np.ndarray, out: Parts
    ) -> None:
        sparse_weighted_csr_rows(block.indptr, block.indices, block.data, resp, idx, out["words"])

    def summarize_dense(self, block: CSRBlock, R: np.ndarray, out: Parts) -> None:
        dense_weighted_csr_rows(block.indptr, block.indices, block.data, R, out["words"])

    def empty_stats(self, K: int) -> dict[str, np.ndarray]:
        return {"words": np.zeros((K, self._V))}

    def global_step(self, stats: SuffStats) -> DirichletPosterior:
        return DirichletPosterior.from_counts(stats.array("words"), self.lam)

    def for_local_step(self, post: DirichletPosterior) -> DirichletPosterior:
        return post.for_workers()

    def elbo(self, stats: SuffStats, post: DirichletPosterior) -> float:
        return post.elbo_terms(stats.array("words"))

    def compact_stats(self, out: Parts) -> dict[str, Stat]:
        """A batch's word counts per cluster as their nonzero entries: the L-sparse
        step gives each document L clusters, so most of K x V stays zero."""
        words = out["words"]
        compact: dict[str, Stat] = dict(out)
        compact["words"] = SparseBlock.from_columns(
            np.arange(words.shape[1]), words, words.shape[1]
        )
        return compact

    def point_log_lik(self, X: Rows, post: DirichletPosterior) -> np.ndarray:
        block = as_count_block(X, self.vocab_size)
        log_phi_t = np.ascontiguousarray(np.log(post.topics).T)
        return csr_matmul(block.indptr, block.indices, block.data, log_phi_t)

    def divergence_sample(self, X: Rows) -> WordDistributions:
        return WordDistributions.from_counts(as_count_block(X, self.vocab_size), self._V)

    def divergence(self, X: Rows | WordDistributions, seeds: Rows) -> np.ndarray:
        """KL divergence from each row's word distribution to each smoothed seed's.

        ``KL(x_hat || phi_j) = sum_v x_hat_v log x_hat_v - x_hat . log phi_j`` with
        ``phi_j`` the posterior mean topic of a cluster holding seed j alone.
        ``log phi_jv = log(lam) - log(total_j) + log1p(s_jv / lam)`` is sparse in
        the seed's own words, so the cross term costs O(shared words), not O(n V).
        """
        rows = X if isinstance(X, WordDistributions) else self.divergence_sample(X)
        seed_block = as_count_block(seeds, self.vocab_size)
        V, lam = self._V, self.lam
        seeds_csr = sp.csr_matrix(
            (seed_block.data, seed_block.indices, seed_block.indptr),
            shape=(seed_block.n_rows, V),
            copy=True,  # sum_duplicates works in place: never on the caller's arrays
        )
        seeds_csr.sum_duplicates()
        seed_tot = np.asarray(seeds_csr.sum(axis=1)).ravel()
        gain = seeds_csr.copy()
        gain.data = np.log1p(gain.data / lam)
        base = np.log(lam) - np.log(seed_tot + V * lam)
        shared = np.asarray((gain @ rows.by_word).todense()).T  # touches the seeds' words only
        cross = shared + rows.mass[:, None] * base[None, :]
        return np.maximum(rows.neg_entropy[:, None] - cross, 0.0)


@dataclass(frozen=True)
class WordDistributions:
    """Rows of counts as word distributions ``x_hat``: what KL divergences need of them."""

    by_word: sp.csr_matrix  # x_hat transposed, (V, n): row v holds the rows having word v
    neg_entropy: np.ndarray  # sum_v x_hat_v log x_hat_v, (n,)
    mass: np.ndarray  # sum_v x_hat_v: 1, or 0 for an empty row, (n,)

    @classmethod
    def from_counts(cls, block: CSRBlock, V: int) -> WordDistributions:
        shape = (block.n_rows, V)
        x_hat = sp.csr_matrix((block.data, block.indices, block.indptr), shape=shape, copy=True)
        x_hat.sum_duplicates()  # a word listed twice in a row is one entry of x_hat
        row_of = np.repeat(np.arange(shape[0]), np.diff(x_hat.indptr))
        row_tot = np.bincount(row_of, weights=x_hat.data, minlength=shape[0])
        x_hat.data = x_hat.data / np.where(row_tot > 0, row_tot, 1.0)[row_of]
        p = x_hat.data
        plogp = p * np.log(np.where(p > 0, p, 1.0))
        return cls(
            x_hat.T.tocsr(),
            np.bincount(row_of, weights=plogp, minlength=shape[0]),
            np.bincount(row_of, weights=p, minlength=shape[0]),
        )
