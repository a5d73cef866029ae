"""E[log phi] of K Dirichlet posteriors over V outcomes, stored sparsely.

``q(phi_k) = Dir(lambda_k)`` gives ``E[log phi_kv] = psi(lambda_kv) -
psi(sum_v lambda_kv)``. Wherever ``lambda_kv`` still equals the prior ``b``
(no token of word v was ever given to topic k: most entries under the
L-sparse step) this is ``psi(b) - psi(sum_v lambda_kv)``, the same for the
whole row k. So only the other entries are stored, grouped by word:

- the driver computes one digamma per stored entry, not K x V of them, and
  never transposes a K x V array;
- the workers receive the stored entries (7 MB instead of 65 MB at K=400,
  V=21k on 20 Newsgroups) and rebuild only their batch's rows, bit for bit
  equal to the dense ``psi(lambda) - psi(sum lambda)``;
- the ELBO's Dirichlet terms cost one lgamma per stored entry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import digamma, gammaln

from lsdask.kernels.sparse_columns import (
    columns_unequal_to,
    dirichlet_column_sums,
    fill_transposed_columns,
)


@dataclass(frozen=True)
class SparseDirichletLogs:
    """``E[log phi]`` (as a (V, K) matrix) of ``Dir(lambda_k)``, k = 1..K.

    Build it with :meth:`from_concentrations`. ``base[k]`` is the value of
    every entry of row k where ``lambda_kv == prior``; word v's other entries
    are ``values[p]`` at topics ``topics[p]``, ``p in indptr[v]:indptr[v + 1]``.
    """

    base: np.ndarray  # (K,)
    indptr: np.ndarray  # (V + 1,) int64
    topics: np.ndarray  # (nnz,) int32
    values: np.ndarray  # (nnz,)
    prior: float

    @classmethod
    def from_concentrations(cls, lam: np.ndarray, prior: float) -> SparseDirichletLogs:
        """From the concentrations ``lam`` (K, V); entries equal to ``prior`` are not stored."""
        lam = np.ascontiguousarray(lam, dtype=np.float64)
        indptr, topics, conc = columns_unequal_to(lam, float(prior))
        row_term = digamma(lam.sum(axis=1))
        base = digamma(np.full(lam.shape[0], float(prior))) - row_term
        return cls(base, indptr, topics, digamma(conc) - row_term[topics], float(prior))

    @property
    def shape(self) -> tuple[int, int]:
        """(V, K), the shape of the matrix it stands for."""
        return (self.indptr.shape[0] - 1, self.base.shape[0])

    @property
    def nnz(self) -> int:
        return int(self.values.shape[0])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.base, self.indptr, self.topics, self.values))

    def rows(self, words: np.ndarray) -> np.ndarray:
        """``E[log phi]`` for the given words: (len(words), K), C-contiguous."""
        words = np.ascontiguousarray(words, dtype=np.int64)
        out = np.empty((words.shape[0], self.shape[1]))
        fill_transposed_columns(words, self.base, self.indptr, self.topics, self.values, out)
        return out

    def dense(self) -> np.ndarray:
        """The whole (V, K) matrix."""
        return self.rows(np.arange(self.shape[0]))

    def data_and_kl(self, words: np.ndarray, lam: np.ndarray) -> tuple[float, float]:
        """``sum_kv words_kv E[log phi_kv]`` and ``sum_k KL(Dir(lam_k) || Dir(prior))``.

        ``lam`` (K, V) must be the concentrations this was built from; ``words``
        (K, V) any statistics. O(K V) only in plain sums; one lgamma per stored entry.
        """
        lam = np.ascontiguousarray(lam, dtype=np.float64)
        words = np.ascontiguousarray(words, dtype=np.float64)
        b = self.prior
        V = self.shape[0]
        n, words_sum, words_elog, excess_elog, lgamma_sum = dirichlet_column_sums(
            self.indptr, self.topics, self.values, lam, words, b
        )
        data = float(np.sum(self.base * (words.sum(axis=1) - words_sum) + words_elog))
        log_norm_q = gammaln(lam.sum(axis=1)) - (lgamma_sum + (V - n) * gammaln(b))
        log_norm_p = gammaln(V * b) - V * gammaln(b)
        return data, float(np.sum(log_norm_q - log_norm_p + excess_elog))


@dataclass(frozen=True)
class DirichletPosterior:
    """``q(phi_k) = Dir(lambda_k)`` for K topics (or clusters) over V words, and
    its expected log stored sparsely by word (:class:`SparseDirichletLogs`)."""

    lam: np.ndarray | None  # (K, V); None in the copy sent to workers
    logs: SparseDirichletLogs  # E[log phi] as a (V, K) matrix

    @classmethod
    def from_lam(cls, lam: np.ndarray, prior: float) -> DirichletPosterior:
        return cls(lam, SparseDirichletLogs.from_concentrations(lam, prior))

    def for_workers(self) -> DirichletPosterior:
        """What a local step reads: the stored entries of E[log phi] only."""
        return DirichletPosterior(None, self.logs)

    @property
    def E_log_phi_t(self) -> np.ndarray:
        """``E[log phi]`` as a dense (V, K) array, built at every access (local
        steps use ``logs.rows`` of their own words instead)."""
        return self.logs.dense()

    @property
    def topics(self) -> np.ndarray:
        """Point estimate ``E[phi_k]`` (K, V)."""
        return self.lam / self.lam.sum(axis=1, keepdims=True)

    def elbo_terms(self, words: np.ndarray) -> float:
        """``sum_kv words_kv E[log phi_kv] - sum_k KL(q(phi_k) || p(phi_k))``."""
        data, kl = self.logs.data_and_kl(words, self.lam)
        return data - kl
