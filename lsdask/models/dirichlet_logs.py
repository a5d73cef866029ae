"""E[log phi] of K Dirichlet posteriors over V outcomes, stored sparsely.

``q(phi_k) = Dir(lambda_k)`` gives ``E[log phi_kv] = psi(lambda_kv) -
psi(sum_v lambda_kv)``. Wherever ``lambda_kv`` still equals the prior ``b``
(no token of word v was ever given to topic k: most entries under the
L-sparse step) this is ``psi(b) - psi(sum_v lambda_kv)``, the same for the
whole row k. So only the other entries are stored:

- the driver finds them straight from the statistics ``S`` (``lambda = b +
  S``) without building a K x V array, computes one digamma per stored
  entry, and keeps them by topic (:class:`StoredConcentrations`) for the ELBO,
  whose Dirichlet terms then cost one lgamma per stored entry and one pass
  over ``S`` in memory order;
- the workers receive them grouped by word (:class:`SparseDirichletLogs`,
  a fraction of the dense K x V array's bytes) and rebuild only
  their batch's rows, bit for bit equal to the dense ``psi(lambda) -
  psi(row sums)``;
- the dense ``lambda`` is built only when asked for (fitted attributes,
  topic inspection, saving).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.special import digamma, gammaln

from lsdask.kernels.preselect import stack_candidates
from lsdask.kernels.sparse_columns import (
    entries_unequal_to,
    fill_transposed_columns,
    row_sums_at_entries,
    rows_to_columns,
)
from lsdask.models.row_threads import map_blocks, row_blocks


@dataclass(frozen=True)
class SparseDirichletLogs:
    """``E[log phi]`` (as a (V, K) matrix) of ``Dir(lambda_k)``, k = 1..K.

    Build it with :meth:`from_concentrations` (or through
    :class:`DirichletPosterior`). ``base[k]`` is the value of every entry of
    row k where ``lambda_kv == prior``; word v's other entries are
    ``values[p]`` at topics ``topics[p]``, ``p in indptr[v]:indptr[v + 1]``.
    """

    base: np.ndarray  # (K,)
    indptr: np.ndarray  # (V + 1,) int64
    topics: np.ndarray  # (nnz,) int32
    values: np.ndarray  # (nnz,)
    prior: float

    @classmethod
    def from_concentrations(cls, lam: np.ndarray, prior: float) -> SparseDirichletLogs:
        """From the concentrations ``lam`` (K, V); entries equal to ``prior`` are not stored."""
        return DirichletPosterior.from_lam(lam, prior).logs

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

    def subset(self, topics: Sequence[int]) -> SparseDirichletLogs:
        """The columns ``topics`` only (renumbered 0, 1, ... in that order): the
        same values, without rebuilding them from the concentrations."""
        kept = np.asarray(topics, dtype=np.int64)
        where = np.full(self.shape[1], -1, dtype=np.int64)
        where[kept] = np.arange(kept.shape[0])
        new = where[self.topics]
        keep = new >= 0
        before = np.zeros(self.nnz + 1, dtype=np.int64)  # kept entries before each entry
        np.cumsum(keep, out=before[1:])
        indptr = before[self.indptr]
        return SparseDirichletLogs(
            self.base[kept], indptr, new[keep].astype(self.topics.dtype),
            self.values[keep], self.prior,
        )  # fmt: skip


@dataclass(frozen=True)
class StoredConcentrations:
    """The entries of ``lambda`` (K, V) that differ from the prior, by topic
    (CSR), with ``E[log phi]`` there and the row sums of ``lambda``: what the
    driver needs for the ELBO and to rebuild ``lambda``."""

    row_ptr: np.ndarray  # (K + 1,) int64
    cols: np.ndarray  # (nnz,) int32, increasing within a row
    conc: np.ndarray  # (nnz,) lambda at the entries
    elog: np.ndarray  # (nnz,) E[log phi] at the entries
    row_sums: np.ndarray  # (K,) sum_v lambda_kv
    prior: float
    n_cols: int

    def entry_rows(self) -> np.ndarray:
        """(nnz,) the row (topic) of each entry."""
        return np.repeat(np.arange(self.row_sums.shape[0]), np.diff(self.row_ptr))

    def dense(self) -> np.ndarray:
        """``lambda`` as a (K, V) array."""
        lam = np.full((self.row_sums.shape[0], self.n_cols), self.prior)
        lam[self.entry_rows(), self.cols] = self.conc
        return lam

    def kl(self) -> float:
        """``sum_k KL(Dir(lambda_k) || Dir(prior))``, one lgamma per stored entry."""
        K = self.row_sums.shape[0]
        V, b = self.n_cols, self.prior
        rows = self.entry_rows()
        n = np.diff(self.row_ptr).astype(np.float64)
        lgamma_sum = np.bincount(rows, weights=gammaln(self.conc), minlength=K)
        excess_elog = np.bincount(rows, weights=(self.conc - b) * self.elog, minlength=K)
        log_norm_q = gammaln(self.row_sums) - (lgamma_sum + (V - n) * gammaln(b))
        log_norm_p = gammaln(V * b) - V * gammaln(b)
        return float(np.sum(log_norm_q - log_norm_p + excess_elog))

    def data(self, words: np.ndarray, base: np.ndarray) -> float:
        """``sum_kv words_kv E[log phi_kv]``, ``base[k]`` being E[log phi] off the entries."""
        words = np.ascontiguousarray(words, dtype=np.float64)
        total, at, weighted = row_sums_at_entries(self.row_ptr, self.cols, self.elog, words)
        return float(np.sum(base * (total - at) + weighted))


@dataclass(frozen=True, eq=False)
class DirichletPosterior:
    """``q(phi_k) = Dir(lambda_k)`` for K topics (or clusters) over V words: its
    expected log stored sparsely by word (:class:`SparseDirichletLogs`, all a
    worker receives) and, on the driver, its stored entries by topic
    (:class:`StoredConcentrations`). Build it with :meth:`from_counts` or
    :meth:`from_lam`."""

    logs: SparseDirichletLogs  # E[log phi] as a (V, K) matrix
    stored: StoredConcentrations | None  # None in the copy sent to workers

    def __post_init__(self) -> None:
        if not isinstance(self.logs, SparseDirichletLogs) or not (
            self.stored is None or isinstance(self.stored, StoredConcentrations)
        ):
            raise TypeError(
                "DirichletPosterior(logs, stored): build it with from_counts or from_lam"
            )

    @classmethod
    def from_counts(
        cls, counts: np.ndarray, prior: float, threads: int | None = None
    ) -> DirichletPosterior:
        """The posterior ``lambda = prior + counts`` (K, V), without building it;
        ``threads``: see :meth:`_build`."""
        counts = np.ascontiguousarray(counts, dtype=np.float64)
        return cls._build(counts, float(prior), prior, threads)

    @classmethod
    def from_lam(
        cls, lam: np.ndarray, prior: float, threads: int | None = None
    ) -> DirichletPosterior:
        """The posterior of the concentrations ``lam`` (K, V); entries equal to
        ``prior`` are not stored."""
        return cls._build(np.ascontiguousarray(lam, dtype=np.float64), 0.0, prior, threads)

    @classmethod
    def _build(
        cls, A: np.ndarray, shift: float, prior: float, threads: int | None = None
    ) -> DirichletPosterior:
        """The posterior of ``shift + A``; the passes over A (and the digamma of
        its entries) run over blocks of rows in up to ``threads`` threads (default:
        the usable cores, for arrays of 2M entries or more), with the serial
        result bit for bit."""
        b = float(prior)
        K, V = A.shape
        blocks = row_blocks(K, A.size, threads)

        def find_entries(
            start: int, stop: int
        ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
            rows = A[start:stop]
            return entries_unequal_to(rows, shift, b), rows.sum(axis=1)

        found = map_blocks(find_entries, blocks)
        if len(found) == 1:
            row_ptr, cols, conc = found[0][0]
        else:
            row_ptr, cols = stack_candidates([entries[:2] for entries, _ in found])
            conc = np.concatenate([entries[2] for entries, _ in found])
        row_sums = np.concatenate([sums for _, sums in found]) + shift * V  # without lambda
        row_term = digamma(row_sums)
        elog = np.empty_like(conc)
        map_blocks(
            lambda lo, hi: digamma(conc[lo:hi], out=elog[lo:hi]),
            [(int(row_ptr[start]), int(row_ptr[stop])) for start, stop in blocks],
        )
        elog -= np.repeat(row_term, np.diff(row_ptr))
        indptr, topics, position = rows_to_columns(row_ptr, cols, V)
        values = np.empty_like(elog)
        values[position] = elog
        base = digamma(b) - row_term
        logs = SparseDirichletLogs(base, indptr, topics, values, b)
        return cls(logs, StoredConcentrations(row_ptr, cols, conc, elog, row_sums, b, V))

    def for_workers(self) -> DirichletPosterior:
        """What a local step reads: the stored entries of E[log phi] only."""
        return DirichletPosterior(self.logs, None)

    @cached_property
    def lam(self) -> np.ndarray:
        """The concentrations ``lambda`` (K, V), built at first access."""
        return self._stored().dense()

    @property
    def E_log_phi_t(self) -> np.ndarray:
        """``E[log phi]`` as a dense (V, K) array, built at every access (local
        steps use ``logs.rows`` of their own words instead)."""
        return self.logs.dense()

    @property
    def topics(self) -> np.ndarray:
        """Point estimate ``E[phi_k]`` (K, V)."""
        return self.lam / self.lam.sum(axis=1, keepdims=True)

    def data_and_kl(self, words: np.ndarray) -> tuple[float, float]:
        """``sum_kv words_kv E[log phi_kv]`` and ``sum_k KL(q(phi_k) || p(phi_k))``
        for statistics ``words`` (K, V)."""
        stored = self._stored()
        return stored.data(words, self.logs.base), stored.kl()

    def elbo_terms(self, words: np.ndarray) -> float:
        """``sum_kv words_kv E[log phi_kv] - sum_k KL(q(phi_k) || p(phi_k))``."""
        data, kl = self.data_and_kl(words)
        return data - kl

    @property
    def concentrations(self) -> StoredConcentrations:
        """The entries of ``lambda`` that differ from the prior, by topic (the
        driver's posterior only)."""
        return self._stored()

    def _stored(self) -> StoredConcentrations:
        if self.stored is None:
            raise ValueError(
                "this copy of the posterior holds E[log phi] only (as sent to the workers); "
                "use the driver's posterior for lambda, topics or the ELBO"
            )
        return self.stored
