"""SVI-Gibbs's global state: topics stored as eta plus a lazily decayed sparse Ñ.

Mimno, Hoffman & Blei (2012) update the topics by their Eq. 11,

    lambda_t = (1 - rho_t) lambda_{t-1} + rho_t (eta + (D / |B|) N-hat_t),

where ``N-hat_t`` is the minibatch's sampled topic-word counts. With lambda
started at eta, ``lambda_t = eta + Ñ_t`` and ``Ñ_t = (1 - rho_t) Ñ_{t-1} +
rho_t (D/|B|) N-hat_t`` (App. A, Eq. 14). Every entry of Ñ decays at each step,
so a plain update touches all K x V entries; their Eq. 19 keeps instead the
scaled ``M_t = Ñ_t / pi_t`` with ``pi_t = prod_{i<=t} (1 - rho_i)``:

    M_t = M_{t-1} + (rho_t / pi_t) (D/|B|) N-hat_t,

which changes only the entries the minibatch's counts touch. ``pi_t`` falls
towards zero, so before it would underflow (``pi_t < reset_below``) the scale
is folded back into the entries (``M <- pi M``, ``pi <- 1``). Entries never
vanish by decay alone, so the learner drops those that have decayed to a
negligible part of ``eta`` now and then (:meth:`SparseTopics.prune`).

The state knows nothing of how the counts were sampled; the minibatch's
:class:`SamplerView` is the part of it that the sampling kernel reads: the
topics' weights ``phi_kw`` for the minibatch's words, either the paper's
``exp E[log phi_kw]`` (``"geometric"``, Eq. 9: the coordinate step of the
ELBO) or the posterior mean ``E[phi_kw] = lambda_kw / lambda_k.`` (``"mean"``,
the weight collapsed Gibbs sampling and SCVB0 draw against; see
docs/algorithms.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.special import digamma

from lsdask.kernels.svi_gibbs import merge_counts
from lsdask.models.collapsed import StreamPrior

#: the running scale ``pi_t`` is folded into the entries when it falls below this
RESET_BELOW = 1e-100

#: the estimators of N-hat: each kept sweep counts every token's conditional,
#: rounded (unbiased; its word bucket exactly, the rest on one drawn topic), the
#: same with the document bucket exactly too, or the token's drawn topic (one-hot)
ESTIMATORS = ("rao-blackwell", "rao-blackwell-doc", "draws")

#: quanta per token of the Rao-Blackwellised estimator (a contribution is kept in
#: whole 1/Q of a token). Rounding moves a piece by less than 1/Q of a token, so
#: it adds at most 1/(4 Q^2) ~ 0.001 to the variance of a token's count on a
#: topic (a draw's is p (1 - p), up to 0.25), while a token still adds at most
#: Q entries and a topic's share under 1/Q is mostly dropped: the counts stay
#: sparse. Larger Q buys little variance for more entries.
RB_QUANTA = 16


#: the topics' weights a minibatch is sampled against: the posterior mean
#: ``E[phi_kw] = lambda_kw / lambda_k.`` or the geometric ``exp E[log phi_kw]``
WEIGHTS = ("mean", "geometric")


def quanta_per_token(estimator: str, quanta: int = RB_QUANTA) -> int:
    """What one token adds to the counts per kept sweep: ``quanta`` for the
    Rao-Blackwellised estimator, 1 for the draws."""
    return int(quanta) if estimator.startswith("rao-blackwell") else 1


@dataclass(frozen=True)
class TopicWordCounts:
    """Integer topic-word counts as sorted keys ``word * K + topic`` and their counts.

    Sums of these are exact in any order (integers), so partial sums of a
    minibatch's parts can be added in a tree on any workers.
    """

    n_topics: int
    keys: np.ndarray  # int64, sorted, distinct
    counts: np.ndarray  # int64

    @classmethod
    def from_draws(cls, n_topics: int, words: np.ndarray, topics: np.ndarray) -> TopicWordCounts:
        """Count the (word, topic) pairs of sampled assignments."""
        keys, counts = np.unique(
            words.astype(np.int64) * n_topics + topics.astype(np.int64), return_counts=True
        )
        return cls(n_topics, keys, counts.astype(np.int64))

    @classmethod
    def empty(cls, n_topics: int) -> TopicWordCounts:
        return cls(n_topics, np.zeros(0, np.int64), np.zeros(0, np.int64))

    def __add__(self, other: TopicWordCounts) -> TopicWordCounts:
        if other.n_topics != self.n_topics:
            raise ValueError(f"adding counts over {self.n_topics} and {other.n_topics} topics")
        # both keys sorted and distinct: one merging pass, no sort
        keys, counts = merge_counts(self.keys, self.counts, other.keys, other.counts)
        return TopicWordCounts(self.n_topics, keys, counts)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def as_matrix(self, vocab_size: int) -> sp.csr_matrix:
        """The counts as a (V, K) CSR matrix of float64 (a word's topics in a row)."""
        return sum_as_matrix([self], vocab_size)


def sum_as_matrix(terms: list[TopicWordCounts], vocab_size: int) -> sp.csr_matrix:
    """The sum of ``terms`` (by ``+``, a merge of their sorted keys) as a (V, K)
    CSR matrix of float64 in canonical form (sorted, distinct entries), laid out
    directly from the merged keys. The counts are whole numbers below 2**53, so
    the matrix is the same whichever order the terms come in."""
    if not terms:
        raise ValueError("sum_as_matrix needs at least one term")
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    K, keys, counts = total.n_topics, total.keys, total.counts
    rows = keys // K
    indptr = np.zeros(vocab_size + 1, np.int64)
    np.cumsum(np.bincount(rows, minlength=vocab_size), out=indptr[1:])
    # sorted, distinct keys word * K + topic: a word's topics in a row, in order
    return sp.csr_matrix(
        (counts.astype(np.float64), (keys % K).astype(np.int64), indptr), shape=(vocab_size, K)
    )


@dataclass(frozen=True)
class SamplerView:
    """What the sampling kernel reads of the topics for one minibatch: its words'
    stored entries and the per-topic constants of Eq. 15 (see
    :mod:`lsdask.kernels.svi_gibbs`), and the step that keys the draws."""

    word_ids: np.ndarray  # (W,) int64, sorted: the minibatch's words
    w_indptr: np.ndarray  # (W + 1,) int64
    w_topics: np.ndarray  # (nnz,) int32
    w_excess: np.ndarray  # (nnz,) float64: (exp psi(eta + Ñ_kw) - exp psi(eta)) / Z_k
    smooth: np.ndarray  # (K,) exp psi(eta) / Z_k
    alpha: np.ndarray  # (K,) per-topic prior a_k
    cum_smooth: np.ndarray  # (K,) cumsum(alpha * smooth)
    step: int

    @property
    def n_topics(self) -> int:
        return int(self.smooth.size)

    def dense_weights(self, local_word: int) -> np.ndarray:
        """The weights ``f(eta + Ñ_kw) / Z_k`` over all K topics for a local word (tests)."""
        w = self.smooth.copy()
        start, stop = self.w_indptr[local_word], self.w_indptr[local_word + 1]
        w[self.w_topics[start:stop]] += self.w_excess[start:stop]
        return w


@dataclass
class SparseTopics:
    """``lambda = eta + pi * M``: the topics as a sparse (V, K) ``M`` and a scale.

    Attributes
    ----------
    eta : float
        The topic-word prior.
    scaled : scipy.sparse.csr_matrix, shape (V, K)
        ``M = Ñ / pi``; a word's stored topics are one row.
    scaled_totals : (K,) ``sum_w M_kw``.
    pi : float
        The running product of ``(1 - rho)`` since the last reset.
    n_resets : int
        Times the scale was folded back into ``M``.
    prior : StreamPrior or None
        The document-topic prior where the stream learns it (it then travels
        with the topics, so every replica samples against the same); None
        where it is fixed.
    """

    eta: float
    scaled: sp.csr_matrix
    scaled_totals: np.ndarray
    pi: float = 1.0
    n_resets: int = 0
    prior: StreamPrior | None = None

    @classmethod
    def at_prior(cls, n_topics: int, vocab_size: int, eta: float) -> SparseTopics:
        """lambda = eta: no entry stored (a dense random start would never become
        sparse again: entries only decay, they never vanish)."""
        return cls(float(eta), sp.csr_matrix((vocab_size, n_topics)), np.zeros(n_topics))

    @property
    def n_topics(self) -> int:
        return int(self.scaled.shape[1])

    @property
    def vocab_size(self) -> int:
        return int(self.scaled.shape[0])

    @property
    def n_stored(self) -> int:
        """Stored (non-zero) entries of Ñ."""
        return int(self.scaled.nnz)

    def step(
        self, rho: float, scaled_counts: sp.csr_matrix, reset_below: float = RESET_BELOW
    ) -> None:
        """One update, Eq. 11 by Eq. 19: ``scaled_counts`` is ``(D/|B|) N-hat`` (V, K).

        Only ``M``'s entries where ``scaled_counts`` is non-zero change; the
        scale is folded into ``M`` when it falls below ``reset_below``.
        """
        if not 0.0 < rho < 1.0:
            raise ValueError(f"rho must be in (0, 1) for the lazy update; got {rho}")
        pi = self.pi * (1.0 - rho)
        delta = scaled_counts.tocsr() * (rho / pi)
        self.scaled = (self.scaled + delta).tocsr()
        self.scaled_totals = self.scaled_totals + np.asarray(delta.sum(axis=0)).ravel()
        self.pi = pi
        if pi < reset_below:
            self.scaled = (self.scaled * pi).tocsr()
            self.scaled_totals = np.asarray(self.scaled.sum(axis=0)).ravel()
            self.pi = 1.0
            self.n_resets += 1

    def prune(self, below: float) -> int:
        """Drop the stored entries of Ñ below ``below`` (their ``lambda_kw`` is
        within ``below`` of ``eta``); returns how many were dropped.

        An entry decays by ``(1 - rho)`` at every step and never reaches zero,
        so without this every (word, topic) pair ever counted stays stored, and
        a stream's topics fill up. The topic totals are recomputed from the
        entries kept, so ``lambda`` stays the Dirichlet of its entries.
        """
        if below <= 0.0:
            return 0
        m = self.scaled
        drop = m.data * self.pi < below
        n = int(drop.sum())
        if n:
            m.data[drop] = 0.0
            m.eliminate_zeros()
            self.scaled_totals = np.asarray(m.sum(axis=0)).ravel()
        return n

    def n_tilde(self) -> np.ndarray:
        """Ñ as a dense (K, V) array."""
        return np.ascontiguousarray(self.scaled.T.toarray()) * self.pi

    def lam(self) -> np.ndarray:
        """lambda = eta + Ñ, dense (K, V)."""
        return self.eta + self.n_tilde()

    def topic_totals(self) -> np.ndarray:
        """``Ñ_k.`` (K,)."""
        return self.scaled_totals * self.pi

    def view(
        self, word_ids: np.ndarray, alpha: np.ndarray, step: int, weights: str = "mean"
    ) -> SamplerView:
        """The kernel's view of the topics for a minibatch over ``word_ids`` (sorted,
        distinct): only those words' entries, and the per-topic constants, for the
        ``weights`` of :data:`WEIGHTS`."""
        V = self.vocab_size
        word_ids = np.asarray(word_ids, dtype=np.int64)
        rows = self.scaled[word_ids]
        rows.sort_indices()
        n = rows.data * self.pi
        topics = rows.indices.astype(np.int32)
        totals = V * self.eta + self.topic_totals()
        if weights == "mean":
            z = totals
            excess = n / z[topics]
            smooth = self.eta / z
        elif weights == "geometric":
            exp_eta = np.exp(digamma(self.eta))
            z = np.exp(digamma(totals))
            excess = (np.exp(digamma(self.eta + n)) - exp_eta) / z[topics]
            smooth = exp_eta / z
        else:
            raise ValueError(f"weights must be one of {WEIGHTS}; got {weights!r}")
        alpha = np.asarray(alpha, dtype=np.float64)
        return SamplerView(
            word_ids=word_ids,
            w_indptr=rows.indptr.astype(np.int64),
            w_topics=topics,
            w_excess=excess,
            smooth=smooth,
            alpha=alpha,
            cum_smooth=np.cumsum(alpha * smooth),
            step=int(step),
        )


def doc_topic_histogram(n_topics: int, topics: np.ndarray, counts: np.ndarray) -> TopicWordCounts:
    """Document-topic counts by their distinct values, as keys ``count * K + topic``
    and how many (document, kept sweep) pairs hold ``count`` tokens of ``topic``:
    whole numbers, so the parts' histograms add exactly in any order (by
    :class:`TopicWordCounts`' ``+``), and what a learned document-topic prior is
    fitted to (:class:`lsdask.models.collapsed.StreamPrior`)."""
    return TopicWordCounts.from_draws(n_topics, np.asarray(counts), np.asarray(topics))


def sample_counts(
    rows: sp.csr_matrix,
    doc_ids: np.ndarray,
    view: SamplerView,
    burnin: int,
    samples: int,
    seed: int,
    estimator: str = "draws",
    quanta: int = RB_QUANTA,
    doc_topics: bool = False,
) -> tuple[TopicWordCounts, TopicWordCounts | None]:
    """The kept sweeps' topic-word counts of documents ``rows`` (CSR of whole
    counts over the vocabulary), summed over the ``samples`` kept sweeps, each
    document's draws keyed by ``(seed, view.step, doc_ids[d])``: ``S`` times
    Eq. 10's N-hat for ``estimator="draws"`` (a token's drawn topic), ``S Q``
    times it for ``"rao-blackwell"`` and ``"rao-blackwell-doc"`` (a token's
    conditional in quanta of ``1 / Q``, ``Q = quanta``; the chains are the same);
    and, where ``doc_topics``, the documents' topic counts at the end of each
    kept sweep (:func:`doc_topic_histogram`; else None).

    Raises ValueError where a count is not a whole number or a word is not
    among the view's (the minibatch's) words.
    """
    from lsdask.kernels.svi_gibbs import sample_documents

    rows = rows.tocsr()
    counts = rows.data
    whole = counts.astype(np.int64)
    if (whole != counts).any() or (whole < 0).any():
        bad = counts[(whole != counts) | (whole < 0)][0]
        raise ValueError(
            f"SVI-Gibbs samples whole tokens; a document holds the count {bad!r}. Give word "
            "counts (whole numbers), not weights or frequencies"
        )
    local = np.searchsorted(view.word_ids, rows.indices)
    if rows.nnz and (
        local.max() >= view.word_ids.size or (view.word_ids[local] != rows.indices).any()
    ):
        raise ValueError("a document's word is not among the minibatch's words of the view")
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}; got {estimator!r}")
    if estimator != "draws" and not (isinstance(quanta, int | np.integer) and quanta >= 1):
        raise ValueError(f"quanta must be a whole number >= 1; got {quanta!r}")
    if estimator != "draws":
        from lsdask.kernels.svi_gibbs import sample_documents_rb

        keys, vals, topics_of_docs, counts_of_docs = sample_documents_rb(
            rows.indptr.astype(np.int64), local.astype(np.int64), whole,
            np.asarray(doc_ids, dtype=np.int64), np.uint64(seed), np.uint64(view.step),
            int(burnin), int(samples), int(quanta), estimator == "rao-blackwell-doc",
            view.w_indptr, view.w_topics, view.w_excess, view.smooth, view.alpha, view.cum_smooth,
            doc_topics,
        )  # fmt: skip
        K = view.n_topics
        merged, at = np.unique(view.word_ids[keys // K] * K + keys % K, return_inverse=True)
        histogram = None
        if doc_topics:
            histogram = doc_topic_histogram(K, topics_of_docs, counts_of_docs)
        return (
            TopicWordCounts(K, merged, np.bincount(at, vals, merged.size).astype(np.int64)),
            histogram,
        )
    T = int(whole.sum())
    out_words = np.empty(T * samples, np.int64)
    out_topics = np.empty(T * samples, np.int64)
    sample_documents(
        rows.indptr.astype(np.int64), local.astype(np.int64), whole,
        np.asarray(doc_ids, dtype=np.int64), np.uint64(seed), np.uint64(view.step),
        int(burnin), int(samples), view.w_indptr, view.w_topics, view.w_excess, view.smooth,
        view.alpha, view.cum_smooth, out_words, out_topics,
    )  # fmt: skip
    K = view.n_topics
    counted = TopicWordCounts.from_draws(K, view.word_ids[out_words], out_topics)
    if not doc_topics:
        return counted, None
    # the draws of kept sweep s are out_*[s T : (s + 1) T], the documents' tokens in order
    n_docs = rows.shape[0]
    entry_doc = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(rows.indptr))
    per_doc = np.bincount(entry_doc, weights=whole, minlength=n_docs).astype(np.int64)
    doc_of_token = np.repeat(np.arange(n_docs, dtype=np.int64), per_doc)
    sweep_doc = np.repeat(np.arange(samples, dtype=np.int64) * n_docs, T)
    sweep_doc += np.tile(doc_of_token, samples)
    pairs, n_dk = np.unique(sweep_doc * K + out_topics, return_counts=True)
    return counted, doc_topic_histogram(K, pairs % K, n_dk)
