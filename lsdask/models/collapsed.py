"""Collapsed LDA (``pi`` and ``phi`` integrated out): the likelihood of sampled
topics, and the document-topic prior fitted to them (math only).

Collapsed Gibbs sampling of LDA integrates ``pi_d`` and ``phi_k`` out. Given the
topics ``z`` of every token, the topic-word counts ``n_wk`` give the words'
evidence under ``Dir(eta)``::

    sum_k [ lnGamma(V eta) - lnGamma(n_k + V eta)
            + sum_w lnGamma(n_wk + eta) - lnGamma(eta) ]

and the document-topic counts ``n_dk`` follow a Dirichlet-multinomial (Polya)
distribution, whose evidence under the prior ``alpha`` is::

    E(alpha) = sum_d [ lnGamma(A) - lnGamma(N_d + A)
                       + sum_k lnGamma(n_dk + alpha_k) - lnGamma(alpha_k) ]

with ``A = sum_k alpha_k`` and ``N_d = sum_k n_dk``. Minka's fixed point
(*Estimating a Dirichlet distribution*, 2000, Sec. 3) raises it at every step::

    alpha_k <- alpha_k  sum_d [psi(n_dk + alpha_k) - psi(alpha_k)]
                      / sum_d [psi(N_d + A) - psi(A)]

This is what MALLET's and tomotopy's samplers do every few sweeps
(``optim_interval``). A document with ``n_dk = 0`` adds nothing to topic k's
numerator, so only the non-zero counts enter, and they enter through their
distinct values: ``psi(n + a) - psi(a)`` is summed once per distinct
(topic, count) pair, times how many documents share it, and likewise for the
document lengths. A step then costs the number of distinct pairs, which is
far below the number of non-zero counts.

A stream (SVI-Gibbs) never holds every document's counts at once. The
evidence depends on the documents only through the counts' distinct values,
so a stream keeps a running estimate of the corpus's histogram of them, as
it keeps one of the topic-word counts (Eq. 11): after each minibatch
``H <- (1 - rho_t) H + rho_t (D / |B|) H_B``, and the prior is refitted to
``H`` by a few fixed point steps from where it was (:class:`StreamPrior`).
This is online EM (Cappe & Moulines 2009): the sufficient statistics are
averaged, and the M-step maximizes the evidence they give; warm-started,
the few steps per minibatch add up to the fixed point as ``H`` settles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma, gammaln

__all__ = [
    "DocTopicCounts",
    "StreamPrior",
    "doc_topic_evidence",
    "fit_alpha_to_doc_counts",
    "joint_log_likelihood",
    "posterior_prior_stats",
    "word_evidence",
]

#: iterations of the fixed point at most per fit
MAX_ITERS = 200

#: the smallest a fitted per-topic prior a_k may become (a topic no document
#: takes keeps a chance to be drawn)
ALPHA_FLOOR = 1e-4


class DocTopicCounts(NamedTuple):
    """Document-topic counts by their distinct values: ``mult[i]`` documents hold
    ``value[i]`` tokens of topic ``topic[i]``; ``n_docs_of_length[j]`` documents
    hold ``length[j]`` tokens; ``n_docs`` documents (of any length) in all."""

    topic: np.ndarray
    value: np.ndarray
    mult: np.ndarray
    length: np.ndarray
    n_docs_of_length: np.ndarray
    n_docs: int
    n_topics: int

    @classmethod
    def of(cls, counts: Any) -> DocTopicCounts:
        """The distinct values of a (documents, topics) matrix of non-negative whole
        counts, dense or scipy sparse."""
        if sp.issparse(counts):
            m = sp.coo_matrix(counts)
            rows, topics, values = m.row, m.col, np.asarray(m.data)
            shape = m.shape
            lengths = np.asarray(m.sum(axis=1)).ravel()
        else:
            dense = np.asarray(counts)
            if dense.ndim != 2:
                raise ValueError(f"counts must be 2-D (documents x topics); got {dense.shape}")
            rows, topics = np.nonzero(dense)
            values = dense[rows, topics]
            shape = dense.shape
            lengths = dense.sum(axis=1)
        values = np.asarray(values, dtype=np.int64)
        if values.size and values.min() < 0:
            raise ValueError("counts must be non-negative whole numbers of tokens")
        keep = values > 0
        topics, values = topics[keep].astype(np.int64), values[keep]
        top = int(values.max()) + 1 if values.size else 1
        pairs, mult = np.unique(topics * top + values, return_counts=True)
        length, n_of = np.unique(np.asarray(lengths, dtype=np.int64), return_counts=True)
        return cls(
            pairs // top, pairs % top, mult.astype(np.float64),
            length, n_of.astype(np.float64), int(shape[0]), int(shape[1]),
        )  # fmt: skip

    @classmethod
    def of_histogram(
        cls, n_topics: int, keys: Any, mult: Any, lengths: Any, times: int = 1
    ) -> DocTopicCounts:
        """The counts of documents of ``lengths`` tokens each, given by their
        distinct values: ``mult[i]`` documents hold ``keys[i] // K`` tokens of
        topic ``keys[i] % K``. Each document is counted ``times`` times (the
        kept sweeps that ``mult`` adds up)."""
        keys = np.asarray(keys, dtype=np.int64)
        length, n_of = np.unique(np.asarray(lengths, dtype=np.int64), return_counts=True)
        return cls(
            keys % n_topics, keys // n_topics, np.asarray(mult, dtype=np.float64),
            length, n_of.astype(np.float64) * times, int(np.size(lengths)) * times, n_topics,
        )  # fmt: skip


def doc_topic_evidence(counts: DocTopicCounts, alpha: Any) -> float:
    """``E(alpha)``, the log evidence of the counts under ``Dir(alpha)`` (see the module
    docstring), without the multinomial coefficients (they do not depend on alpha)."""
    a = np.asarray(alpha, dtype=np.float64)
    A = float(a.sum())
    lengths = counts.n_docs_of_length @ (gammaln(A) - gammaln(counts.length + A))
    tops = a[counts.topic]
    return float(lengths + counts.mult @ (gammaln(counts.value + tops) - gammaln(tops)))


def _step(counts: DocTopicCounts, a: np.ndarray, floor: float) -> np.ndarray:
    A = float(a.sum())
    den = counts.n_docs_of_length @ (digamma(counts.length + A) - digamma(A))
    tops = a[counts.topic]
    terms = counts.mult * (digamma(counts.value + tops) - digamma(tops))
    num = np.bincount(counts.topic, weights=terms, minlength=counts.n_topics)
    if not den > 0:  # no document holds a token
        return a
    return np.maximum(a * num / den, floor)


#: fixed point steps a stream's prior takes after each minibatch
STREAM_STEPS = 5

#: a running histogram drops the entries whose weight fell below this many documents
STREAM_DROP_BELOW = 1e-6


@dataclass
class StreamPrior:
    """A document-topic prior learned from a stream of minibatches (online EM;
    see the module docstring).

    ``keys`` (``count * K + topic``, sorted) and ``mult`` are the running
    histogram of the documents' topic counts, ``lengths`` and
    ``n_docs_of_length`` that of their lengths, each scaled to the corpus;
    ``alpha`` the prior fitted to them.
    """

    alpha: np.ndarray
    keys: np.ndarray
    mult: np.ndarray
    lengths: np.ndarray
    n_docs_of_length: np.ndarray

    @classmethod
    def start(cls, alpha: Any) -> StreamPrior:
        """The prior ``alpha`` before any document."""
        a = np.array(alpha, dtype=np.float64)
        if a.ndim != 1 or not (np.isfinite(a).all() and a.min() > 0):
            raise ValueError("alpha must be a vector of positive finite values, one per topic")
        empty_i, empty_f = np.zeros(0, np.int64), np.zeros(0)
        return cls(a, empty_i, empty_f, empty_i.copy(), empty_f.copy())

    @property
    def n_topics(self) -> int:
        return int(self.alpha.size)

    def counts(self) -> DocTopicCounts:
        """The running histogram as :class:`DocTopicCounts` (fractional documents)."""
        K = self.n_topics
        n_docs = round(float(self.n_docs_of_length.sum()))
        return DocTopicCounts(
            self.keys % K, self.keys // K, self.mult, self.lengths, self.n_docs_of_length,
            n_docs, K,
        )  # fmt: skip

    def update(
        self, batch: DocTopicCounts, rho: float, scale: float, floor: float = ALPHA_FLOOR
    ) -> None:
        """Mix a minibatch's counts ``batch``, scaled by ``scale`` (``D / |B|``
        over the times each document is counted), into the running histogram
        with weight ``rho``; then refit alpha by :data:`STREAM_STEPS` fixed point
        steps from where it was (each alpha_k at least ``floor``)."""
        if not 0.0 < rho <= 1.0:
            raise ValueError(f"rho must be in (0, 1]; got {rho!r}")
        if batch.n_topics != self.n_topics:
            raise ValueError(f"counts over {batch.n_topics} topics, prior over {self.n_topics}")
        K = self.n_topics
        self.keys, self.mult = _mix(
            self.keys, self.mult, batch.value * K + batch.topic, batch.mult, rho, scale
        )
        self.lengths, self.n_docs_of_length = _mix(
            self.lengths, self.n_docs_of_length, batch.length, batch.n_docs_of_length, rho, scale
        )
        self.alpha = fit_alpha_to_doc_counts(
            self.counts(), self.alpha, floor=floor, max_iters=STREAM_STEPS
        )


def _mix(
    keys: np.ndarray, mult: np.ndarray, new_keys: Any, new_mult: Any, rho: float, scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(1 - rho) old + rho scale new`` of two histograms given as keys and
    weights, as sorted distinct keys; entries under :data:`STREAM_DROP_BELOW` are dropped."""
    both = np.concatenate([keys, np.asarray(new_keys, dtype=np.int64)])
    weights = np.concatenate([(1.0 - rho) * mult, rho * scale * np.asarray(new_mult, np.float64)])
    merged, at = np.unique(both, return_inverse=True)
    summed = np.bincount(at, weights=weights, minlength=merged.size)
    keep = summed >= STREAM_DROP_BELOW
    return merged[keep], summed[keep]


def fit_alpha_to_doc_counts(
    counts: DocTopicCounts,
    alpha0: Any,
    *,
    floor: float = ALPHA_FLOOR,
    max_iters: int = MAX_ITERS,
    tol: float = 1e-6,
) -> np.ndarray:
    """The per-topic prior that Minka's fixed point reaches from ``alpha0`` on the
    counts (at most ``max_iters`` steps; stops when no alpha_k moves by more than
    ``tol`` relative), each alpha_k at least ``floor``. Every step raises the
    evidence (a minorize-maximize step); the result is returned only where the
    evidence rose over ``alpha0``, else a copy of ``alpha0``."""
    a0 = np.asarray(alpha0, dtype=np.float64)
    if a0.shape != (counts.n_topics,) or not (np.isfinite(a0).all() and a0.min() > 0):
        raise ValueError(
            f"alpha0 must hold {counts.n_topics} positive finite values, one per topic; "
            f"got shape {a0.shape}"
        )
    if not floor > 0:
        raise ValueError(f"floor must be positive; got {floor!r}")
    a = np.maximum(a0, floor)
    for _ in range(max_iters):
        new = _step(counts, a, floor)
        moved = np.max(np.abs(new - a) / a)
        a = new
        if moved <= tol:
            break
    if doc_topic_evidence(counts, a) > doc_topic_evidence(counts, a0):
        return a
    return a0.copy()


def word_evidence(topic_word: Any, eta: float) -> float:
    """The words' log evidence given their topics (the first sum of the module
    docstring) from the counts ``n_wk``, (V, K): one row per word."""
    n = np.asarray(topic_word)
    V, K = n.shape
    nz = n[n > 0].astype(np.float64)
    totals = n.sum(axis=0, dtype=np.float64)
    return float(
        K * gammaln(V * eta) - gammaln(totals + V * eta).sum()
        + gammaln(nz + eta).sum() - nz.size * gammaln(eta)
    )  # fmt: skip


def joint_log_likelihood(word_topic: Any, counts: DocTopicCounts, alpha: Any, eta: float) -> float:
    """``log p(w, z | alpha, eta)`` of a collapsed sampler's state, without the
    multinomial coefficients: :func:`word_evidence` plus :func:`doc_topic_evidence`.
    ``word_topic`` is the (V, K) counts ``n_wk``."""
    return word_evidence(word_topic, eta) + doc_topic_evidence(counts, alpha)


def posterior_prior_stats(counts: DocTopicCounts, alpha: Any) -> tuple[np.ndarray, float, float]:
    """``(S, W, Cdir)`` of the documents' posteriors ``q(pi_d) = Dir(n_d + alpha)``
    given their sampled topic counts: the statistics a variational memo keeps
    for a learned alpha (``lsdask.models.lda``; ``S_k = sum_d E[log pi_dk]``,
    ``W = sum_d sum_k (n_dk - theta_dk) E[log pi_dk] = -alpha . S`` and
    ``Cdir = sum_d c_Dir(theta_d)``), so that variational LDA can fit its prior
    to a sampler's state as it does to a lap's. A topic absent from a document
    has ``theta_dk = alpha_k``, so only the non-zero counts are visited."""
    a = np.asarray(alpha, dtype=np.float64)
    A = float(a.sum())
    D = counts.n_docs
    holding = np.bincount(counts.topic, weights=counts.mult, minlength=counts.n_topics)
    absent = D - holding  # documents with n_dk = 0, per topic
    tops = a[counts.topic]
    theta = counts.value + tops
    psi_sum = float(counts.n_docs_of_length @ digamma(counts.length + A))
    S = (
        absent * digamma(a)
        + np.bincount(counts.topic, weights=counts.mult * digamma(theta), minlength=a.size)
        - psi_sum
    )
    lg_sum = float(counts.n_docs_of_length @ gammaln(counts.length + A))
    Cdir = lg_sum - float(absent @ gammaln(a)) - float(counts.mult @ gammaln(theta))
    return S, float(-(a @ S)), Cdir
