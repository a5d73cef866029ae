"""LDA topics from collapsed Gibbs sampling on a corpus or a sample of it.

A start for variational LDA (``LDA(init="gibbs")``): mean-field coordinate
ascent keeps the basin it starts in, and from document seeds (k-means++) it
settles with near-duplicate topics; token-level sampling (Griffiths &
Steyvers 2004) explores first, and memoized VI from its topics keeps most of
what the sampler reached (``pipelines/benchmarks/README_lda.md`` compares
the starts).

The sampler runs in the driver on the whole corpus or, beyond
``config.GIBBS_SAMPLE_*``, a sample of whole documents (whole tokens: counts
are rounded). A token's draw costs its document's topics or its word's
(``lsdask.kernels.gibbs``): each part of the sampler starts with the
two-bucket draw, which sums over all K topics only on the draws that fall
past the document's topics, and switches to SparseLDA's per-word topic lists
(nothing over all K topics) once those draws cost more than the lists' upkeep
(a large document-topic prior sends many draws there).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from lsdask import config
from lsdask.config import PROGRESS
from lsdask.kernels.gibbs import (
    DOCUMENT_BUCKET,
    FULL_SUMS,
    SMOOTHING_BUCKET,
    WORD_BUCKET,
    WordTopics,
    apply_moves,
    gibbs_sweep_moves,
    word_topic_lists,
)
from lsdask.learn.base import progress_bar, shows_bar
from lsdask.models.collapsed import DocTopicCounts, fit_alpha_to_doc_counts, joint_log_likelihood

logger = logging.getLogger(__name__)

#: a part switches to the word topic lists after a sweep whose draws summed,
#: on average, more than this many topics' weights over all K topics (the
#: draws that summed over all K, times K, per draw). Measured on the 20
#: Newsgroups training documents at K = 200, one thread, the two draws cost the
#: same at about 40 per draw (alpha = 40-50 in total); below, the two-bucket
#: draw is faster (LDA's alpha = 0.5: 3 per draw), above, the lists (alpha =
#: 100: 60 per draw; 0.5 per topic at K = 800: 400 per draw).
LISTS_FROM = 40.0


def tokens_of(X: sp.csr_matrix) -> tuple[np.ndarray, np.ndarray]:
    """``(doc_ptr, words)``: each document's word ids repeated by their counts
    rounded to the nearest whole token (halves to even; 0.5 gives none)."""
    X = sp.csr_matrix(X)
    repeats = np.rint(np.asarray(X.data, dtype=np.float64)).astype(np.int64)
    words = np.repeat(X.indices.astype(np.int32), repeats)
    doc_ptr = np.concatenate([[0], np.cumsum(tokens_per_doc(X))]).astype(np.int64)
    return doc_ptr, words


def tokens_per_doc(X: sp.csr_matrix) -> np.ndarray:
    """(n_docs,) int64: each document's tokens, counts rounded as in :func:`tokens_of`."""
    X = sp.csr_matrix(X)
    repeats = np.rint(np.asarray(X.data, dtype=np.float64))
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    return np.bincount(rows, weights=repeats, minlength=X.shape[0]).astype(np.int64)


def random_start(
    X: sp.csr_matrix, K: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(doc_ptr, words, z, ndk, nwk, nk)``: the tokens of ``X`` (see
    :func:`tokens_of`), each in a topic drawn uniformly at random, and their
    document-topic (n_docs, K), word-topic (V, K) and topic counts."""
    n_docs, V = X.shape
    doc_ptr, words = tokens_of(X)
    z = rng.integers(K, size=int(words.shape[0])).astype(np.int32)
    doc_of = np.repeat(np.arange(n_docs), np.diff(doc_ptr))
    ndk = np.zeros((n_docs, K), dtype=np.int32)
    nwk = np.zeros((V, K), dtype=np.int32)
    np.add.at(ndk, (doc_of, z), 1)
    np.add.at(nwk, (words, z), 1)
    return doc_ptr, words, z, ndk, nwk, np.bincount(z, minlength=K).astype(np.int64)


def gibbs_refusal(X: sp.csr_matrix, K: int) -> str | None:
    """Why the sampler cannot start from the documents of ``X`` with ``K``
    topics (fractional counts that round away, as frequencies or tf-idf do;
    fewer tokens than topics; more tokens than its int32 counts hold), or
    None when it can."""
    X = sp.csr_matrix(X)
    total_count = float(X.sum())
    n_tokens = int(np.rint(np.asarray(X.data, dtype=np.float64)).sum())
    if n_tokens < 0.5 * total_count:
        return (
            f"init='gibbs' samples whole tokens, but the initialization sample's counts "
            f"(total {total_count:.6g}) round to {n_tokens} tokens: the counts look fractional "
            "(frequencies or weights). Use init='kmeans++' for such data, or pass word counts."
        )
    if n_tokens < K:
        return (
            f"init='gibbs' needs at least as many tokens as topics in the initialization "
            f"sample; it has {n_tokens} tokens for n_components={K}. Use fewer topics or more "
            "documents."
        )
    if n_tokens >= 2**31:
        return (
            f"init='gibbs': the initialization sample has {n_tokens} tokens, more than its "
            "int32 counts hold; use init='kmeans++' for documents this long."
        )
    return None


def within_tokens(X: sp.csr_matrix, max_tokens: int, rng: np.random.Generator) -> sp.csr_matrix:
    """``X``, or where its counts round to more than ``max_tokens`` tokens, the
    documents of a random order up to the last that keeps the total within it
    (at least one document), in their order in ``X``."""
    X = sp.csr_matrix(X)
    per_doc = tokens_per_doc(X)
    if per_doc.sum() <= max_tokens:
        return X
    order = rng.permutation(X.shape[0])
    keep = max(1, int(np.searchsorted(np.cumsum(per_doc[order]), max_tokens, side="right")))
    return X[np.sort(order[:keep])]


def gibbs_sample_docs(n_components: int) -> int:
    """The most documents the Gibbs start samples with ``n_components`` topics:
    as many as ``config.GIBBS_SAMPLE_DOC_TOPIC_BYTES`` of int32 document-topic
    counts hold (at least one)."""
    return max(1, config.GIBBS_SAMPLE_DOC_TOPIC_BYTES // (4 * max(1, int(n_components))))


def split_by_tokens(doc_ptr: np.ndarray, parts: int) -> np.ndarray:
    """Document boundaries (parts + 1,) that cut the documents into ``parts``
    runs of about equal token counts (a run may be empty)."""
    targets = np.linspace(0, doc_ptr[-1], parts + 1)
    bounds = np.searchsorted(doc_ptr, targets, side="left")
    bounds[0], bounds[-1] = 0, doc_ptr.shape[0] - 1
    return np.maximum.accumulate(bounds)


#: how often (in sweeps) the sampler's joint log-likelihood is computed for its
#: stopping rule, and how many of those values one window of it averages
CHECK_EVERY = 10
CHECK_WINDOW = 5


class GibbsSample(NamedTuple):
    """What :func:`gibbs_sample` leaves: each token's word id and topic, the
    topic-word counts (K, V) and document-topic counts (documents, K) they
    make, the document-topic prior at the end (learned, or the one given), the
    sweeps made, and the mean topic-word counts (K, V) of the chain's recent
    samples (:class:`RecentMean`)."""

    words: np.ndarray
    z: np.ndarray
    topic_word: np.ndarray
    doc_topic: np.ndarray
    alpha: np.ndarray
    sweeps: int
    topic_word_mean: np.ndarray


class RecentMean:
    """The mean of the word-topic counts of the chain's recent samples.

    One sample of a collapsed Gibbs chain scatters its topics' rare words at
    random; the mean of samples a few sweeps apart estimates the posterior mean
    of the topics, which predicts held-out words better once the chain has
    settled (the sample is not yet settled early on, when the latest sample
    alone is the better guess). A sample is added every ``CHECK_EVERY`` sweeps
    to one of two running sums; the sum under way closes once its samples
    span a quarter of the sweeps made, and a closed sum is dropped when the
    next one closes: the mean covers the latest quarter to half of the chain.
    Memory: two float32 arrays of the counts' shape (float32 sums are exact up
    to 2**24 and within 1e-7 of the sum beyond, far below the samples' spread).
    """

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.sums = [np.zeros(shape, np.float32), np.zeros(shape, np.float32)]
        self.counts = [0, 0]
        self.current = 0
        self.last = -1  # the sweep of the latest sample

    def add(self, counts: np.ndarray, made: int) -> None:
        """Take in the counts after ``made`` sweeps."""
        c = self.current
        self.sums[c] += counts
        self.counts[c] += 1
        self.last = made
        if self.counts[c] * CHECK_EVERY >= made / 4:
            self.current = other = 1 - c
            self.sums[other][:] = 0.0
            self.counts[other] = 0

    def mean_transposed(self, counts: np.ndarray, made: int) -> np.ndarray:
        """The mean of the samples, transposed (C order, float64), with ``counts``
        (after ``made`` sweeps) among them where they are not the latest sample."""
        total = self.sums[0] + self.sums[1]
        n = self.counts[0] + self.counts[1]
        if self.last != made:
            total += counts
            n += 1
        out = np.empty(total.shape[::-1])
        np.divide(total.T, n, out=out)
        return out


class _Stopping:
    """The sampler's stopping rule: every ``CHECK_EVERY`` sweeps the joint
    log-likelihood per token is computed; the run stops once the mean of the
    last ``CHECK_WINDOW`` values rose by less than ``tol`` over the mean of the
    window before (``tol=0``: never)."""

    def __init__(self, tol: float) -> None:
        self.tol = tol
        self.values: list[float] = []

    def converged(self, value: float) -> bool:
        self.values.append(value)
        n = CHECK_WINDOW
        if self.tol <= 0 or len(self.values) < 2 * n:
            return False
        last, before = self.values[-n:], self.values[-2 * n : -n]
        return float(np.mean(last) - np.mean(before)) < self.tol


class _Part:
    """One run of documents swept in its own thread, with its own copy of the
    topic-word and topic counts (the first part uses the shared arrays) and,
    once they pay (``LISTS_FROM``), their word topic lists, and its own
    stream of uniforms (the first part draws from the caller's generator, so
    one part makes the serial sampler's draws)."""

    def __init__(
        self,
        doc_ptr: np.ndarray,
        first: int,
        last: int,
        ndk: np.ndarray,
        nwk: np.ndarray,
        nk: np.ndarray,
        word_total: np.ndarray,
        copy: bool,
        rng: np.random.Generator,
        record: bool,
    ) -> None:
        self.doc_ptr = doc_ptr[first : last + 1]
        self.n_tokens = int(doc_ptr[last] - doc_ptr[first])
        self.ndk = ndk[first:last]
        self.nwk = nwk.copy() if copy else nwk
        self.nk = nk.copy() if copy else nk
        self.lists: WordTopics | None = None  # built when they pay, then kept current
        self.rng = rng
        # the moves are for the other parts: none to record when there are none
        self._moves = np.empty((3, self.n_tokens if record else 0), dtype=np.int32)
        # (words, old topics, new topics) of the last sweep
        self.moves: tuple[np.ndarray, np.ndarray, np.ndarray] = (self._moves[0, :0],) * 3

    def sweep(
        self, words: np.ndarray, z: np.ndarray, word_total: np.ndarray, a: np.ndarray, eta: float
    ) -> np.ndarray:
        """One collapsed Gibbs sweep over the part's tokens (its moves kept for the
        other parts); returns its draw counts (``lsdask.kernels.gibbs``). After
        a sweep whose draws summed over all K topics too often, the word topic
        lists are built for the next ones."""
        uniforms = self.rng.random(self.n_tokens)
        draws, n = gibbs_sweep_moves(
            self.doc_ptr, words, z, self.ndk, self.nwk, self.nk, word_total, a, eta, uniforms,
            self._moves, self.lists,
        )  # fmt: skip
        self.moves = (self._moves[0, :n], self._moves[1, :n], self._moves[2, :n])
        K = self.nk.shape[0]
        if self.lists is None and draws[FULL_SUMS] * K > LISTS_FROM * max(1, self.n_tokens):
            # built before the other parts' moves are taken in: those keep it current
            self.lists = word_topic_lists(self.nwk, word_total)
        return draws


def gibbs_sample(
    X: sp.csr_matrix,
    n_components: int,
    alpha: float | np.ndarray,
    eta: float,
    sweeps: int,
    rng: np.random.Generator,
    progress: bool | None = None,
    parts: int = 2,
    *,
    learn_alpha: bool = False,
    alpha_every: int = 10,
    alpha_from: int = 20,
    tol: float = 0.0,
    on_snapshot: Callable[[GibbsSample], None] | None = None,
    snapshot_every: float = 0.0,
) -> GibbsSample:
    """The tokens' word ids and topics, and the topic-word counts, after
    ``sweeps`` collapsed Gibbs sweeps over the documents of ``X`` from topics
    drawn uniformly at random; ``alpha`` is the
    total document-topic concentration (a float: alpha / K per topic) or the
    per-topic prior itself (a positive (K,) vector a_k, summing to the total).

    ``learn_alpha``: from sweep ``alpha_from`` on, every ``alpha_every``
    sweeps, the per-topic prior is refitted to the document-topic counts
    (:func:`~lsdask.models.collapsed.fit_alpha_to_doc_counts`, Minka's fixed
    point on their Dirichlet-multinomial evidence, as MALLET's and tomotopy's
    ``optim_interval`` do); ``alpha`` is then where it starts. ``tol`` > 0
    stops the run before ``sweeps`` once the joint log-likelihood per token
    (:func:`~lsdask.models.collapsed.joint_log_likelihood`), computed every
    ``CHECK_EVERY`` sweeps, rose by less than ``tol`` from one window of
    ``CHECK_WINDOW`` values to the next (averaged, as single values are noisy).

    ``topic_word_mean`` is the mean of the recent samples' counts
    (:class:`RecentMean`), the topics a start should take.

    ``on_snapshot``, if given, is called with the sample so far after the
    first sweep that ends at least ``snapshot_every`` seconds after the start
    (or the last snapshot), and with the last sweep's, so that a caller can
    score or keep the topics while the sampler runs; its arrays are the
    sampler's own (``topic_word`` an integer view), to be copied, not kept.

    The documents are cut into ``parts`` runs of about equal tokens, swept at
    the same time in threads, each against its own topic counts (the first
    run's are the shared ones, the others' are copies), which equal at the
    start of every sweep; after the sweep every run's counts take in the
    other runs' moves (approximate distributed LDA, Newman et al. 2009: a
    part does not see the others' moves of the same sweep). With ``parts=1``
    the sampler is exact. The result depends on ``parts`` and the seed, not on
    the machine."""
    K = int(n_components)
    n_docs = X.shape[0]
    refusal = gibbs_refusal(X, K)
    if refusal is not None:
        raise ValueError(refusal)
    a = np.asarray(alpha, dtype=np.float64)
    if a.ndim == 0:
        a = np.full(K, float(a) / K)
    if a.shape != (K,) or not (np.all(np.isfinite(a)) and np.all(a > 0)):
        raise ValueError(
            f"gibbs_sample: alpha must be a positive total or a positive vector of "
            f"n_components={K} per-topic values; got shape {a.shape}"
        )
    doc_ptr, words, z, ndk, nwk, nk = random_start(X, K, rng)
    word_total = nwk.sum(axis=1, dtype=np.int64)
    bounds = split_by_tokens(doc_ptr, parts)
    # the other parts' generators are seeded from rng (Generator.spawn is not
    # available for every bit generator)
    streams = [rng]
    if parts > 1:
        seeds = np.random.SeedSequence(rng.integers(2**63, size=4)).spawn(parts - 1)
        streams += [np.random.default_rng(s) for s in seeds]
    counts = (ndk, nwk, nk, word_total)
    runs = [
        _Part(doc_ptr, bounds[p], bounds[p + 1], *counts, p > 0, streams[p], parts > 1)
        for p in range(parts)
    ]
    start = time.perf_counter()
    draws = np.zeros(4, dtype=np.int64)  # the kernel's draw counts, summed
    lists_from: int | None = None
    bar = progress_bar(sweeps, "Gibbs init", progress)
    log_every = 0 if shows_bar(progress) else -(-sweeps // 10)  # no bar: every tenth
    stopping = _Stopping(tol)
    made = 0
    snapped, snapped_at = start, 0
    recent = RecentMean(nwk.shape)

    def sample() -> GibbsSample:
        return GibbsSample(words, z, nwk.T, ndk, a, made, recent.mean_transposed(nwk, made))

    with ThreadPoolExecutor(max_workers=parts) as pool:
        for sweep in range(sweeps):
            done = [pool.submit(r.sweep, words, z, word_total, a, eta) for r in runs]
            for f in done:
                draws += f.result()
            if lists_from is None and any(r.lists is not None for r in runs):
                lists_from = sweep + 2  # 1-based: the next sweep is the first with lists
            if parts > 1:
                list(pool.map(lambda r: _take_in_moves(r, runs), runs))
            bar.update(1)
            made = sweep + 1
            refit = learn_alpha and made >= alpha_from and (made - alpha_from) % alpha_every == 0
            checked = tol > 0 and made % CHECK_EVERY == 0
            if made % CHECK_EVERY == 0:
                recent.add(nwk, made)
            if refit or checked:
                doc_counts = DocTopicCounts.of(ndk)
            if refit:
                a = fit_alpha_to_doc_counts(doc_counts, a)
            if checked:
                per_token = joint_log_likelihood(nwk, doc_counts, a, eta) / max(1, words.size)
                if stopping.converged(per_token):
                    break
            if on_snapshot is not None and time.perf_counter() - snapped >= snapshot_every:
                on_snapshot(sample())
                snapped, snapped_at = time.perf_counter(), made
            if log_every and (sweep + 1) % log_every == 0 and sweep + 1 < sweeps:
                logger.info(
                    "Gibbs init: %d of %d sweeps in %.1f s",
                    sweep + 1, sweeps, time.perf_counter() - start, extra=PROGRESS,
                )  # fmt: skip
    bar.close()
    drawn = sample()
    if on_snapshot is not None and snapped_at < made:
        on_snapshot(drawn)
    n_draws = max(1, made * words.shape[0])
    logger.info(
        "Gibbs init: %d sweeps (of %d at most) over %d documents (%d tokens, %d parts) in "
        "%.1f s; prior total %.4g; topics drawn from the word's part %.1f%%, the document's "
        "%.1f%%, the smoothing tree %.1f%%; %.1f%% of the draws summed over all topics; "
        "word topic lists from sweep %s",
        made, sweeps, n_docs, words.shape[0], parts, time.perf_counter() - start, a.sum(),
        *(100.0 * draws[b] / n_draws for b in (WORD_BUCKET, DOCUMENT_BUCKET, SMOOTHING_BUCKET)),
        100.0 * draws[FULL_SUMS] / n_draws,
        "none" if lists_from is None else lists_from, extra=PROGRESS,
    )  # fmt: skip
    return drawn._replace(topic_word=np.ascontiguousarray(nwk.T, dtype=np.float64))


def _take_in_moves(run: _Part, runs: list[_Part]) -> None:
    """Bring ``run``'s counts up to date with every other part's moves."""
    for other in runs:
        if other is not run:
            words, old, new = other.moves
            apply_moves(run.nwk, run.nk, words, old, new, run.lists)
