"""The gain of a delete proposal, from what the delete changes only.

Judging a delete candidate j (:func:`~lsdask.models.hdp_deletes.judge_deletes`)
asks whether the surrogate ELBO of the proposal beats the current one. Built
whole, a proposal costs several passes over K x V arrays (its topic-word
statistics, ``lambda`` and the Dirichlet terms) for every candidate, although
it differs from the current state in little: topic j's row (gone), the entries
of the topics and words that the touched documents' rerun moves, the entropy of
those documents, and the allocation terms (vectors of K).

With eta fixed and ``lambda = eta + words`` (the topic step's optimum), the
topics' part of the objective (the data term less the KL) is a sum over topics
of::

    g(w_k) = sum_v [lnG(eta + w_kv) - lnG(eta)] - lnG(V eta + sum_v w_kv) + lnG(V eta)

so its change costs one lgamma per changed entry (:class:`TopicTerms`). The
entropy changes by the reruns' less the touched documents' current one; the
allocation terms, with the sticks re-optimized for the proposal, are evaluated
whole. The gain so computed equals the whole proposal's objective less the
current one up to rounding; the judgement uses it to pass over candidates that
lose, and judges any that gains in full, so an accepted delete's objective is
always the one recomputed from its statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import gammaln

from lsdask.kernels.sparse_columns import entries_unequal_to
from lsdask.models.stats import SparseBlock, Stat


@dataclass
class TopicTerms:
    """The topics' part of the objective at ``lambda = eta + words``, by topic.

    ``words`` (K, V) are the current topic-word statistics and ``row_sums`` (K,)
    their row sums; ``g(w_k)`` of a topic is computed when asked for
    (:meth:`term`: a judgement needs only the deleted topic's), of all of them by
    :attr:`terms`.
    """

    words: np.ndarray
    eta: float
    row_sums: np.ndarray

    @classmethod
    def of(cls, words: np.ndarray, eta: float) -> TopicTerms:
        words = np.ascontiguousarray(words, dtype=np.float64)
        return cls(words, float(eta), words.sum(axis=1))

    @property
    def terms(self) -> np.ndarray:
        """``g(w_k)`` (K,) of every topic."""
        K, V = self.words.shape
        eta = self.eta
        row_ptr, _, values = entries_unequal_to(self.words, 0.0, 0.0)
        rows = np.repeat(np.arange(K), np.diff(row_ptr))
        lg = np.bincount(rows, weights=gammaln(eta + values) - gammaln(eta), minlength=K)
        return np.asarray(lg - gammaln(V * eta + self.row_sums) + gammaln(V * eta))

    def term(self, k: int) -> float:
        """``g(w_k)`` of topic k, the same to the bit as ``terms[k]`` (its entries
        summed in the same order)."""
        V, eta = self.words.shape[1], self.eta
        row = self.words[k]
        values = row[row != 0.0]
        lg = np.bincount(np.zeros(values.size, dtype=np.int64),
                         weights=gammaln(eta + values) - gammaln(eta), minlength=1)  # fmt: skip
        return float(lg[0] - gammaln(V * eta + self.row_sums[k]) + gammaln(V * eta))

    def change(self, removed: int, delta: sp.csr_matrix) -> float:
        """The change of ``sum_k g(w_k)`` when topic ``removed`` goes and ``delta``
        (K, V, in the current numbering; its row ``removed`` ignored) is added to
        the others' statistics."""
        coo = delta.tocoo()
        keep = coo.row != removed
        r, c, d = coo.row[keep], coo.col[keep], coo.data[keep]
        eta, Veta = self.eta, self.words.shape[1] * self.eta
        old = self.words[r, c]
        out = float(np.sum(gammaln(eta + old + d) - gammaln(eta + old)))
        moved = np.bincount(r, weights=d, minlength=self.row_sums.shape[0])
        rows = np.flatnonzero(moved)
        before = self.row_sums[rows]
        out -= float(np.sum(gammaln(Veta + before + moved[rows]) - gammaln(Veta + before)))
        return out - self.term(removed)


def entries(value: Stat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(rows, cols, values)`` of a topic-word statistic's nonzero entries."""
    if isinstance(value, SparseBlock):
        return value.rows.astype(np.int64), value.cols.astype(np.int64), value.values
    r, c = np.nonzero(value)
    return r, c, value[r, c]


def words_delta(
    parts: Sequence[tuple[Stat, Sequence[int], float]], keep: Sequence[int], V: int
) -> sp.csr_matrix:
    """``sum sign * words`` over ``parts = (words, their topics, sign)`` in the
    numbering of ``keep`` (rows of topics not in ``keep`` are left out: they hold
    no tokens), as a (len(keep), V) matrix with duplicate entries summed."""
    where = {t: i for i, t in enumerate(keep)}
    rows: list[np.ndarray] = [np.zeros(0, np.int64)]
    cols: list[np.ndarray] = [np.zeros(0, np.int64)]
    vals: list[np.ndarray] = [np.zeros(0)]
    for value, topics, sign in parts:
        r, c, v = entries(value)
        to = np.array([where.get(int(t), -1) for t in topics], dtype=np.int64)[r]
        ok = to >= 0
        rows.append(to[ok])
        cols.append(c[ok])
        vals.append(sign * v[ok])
    return sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(len(keep), V),
    )
