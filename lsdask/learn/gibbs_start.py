"""LDA topics from collapsed Gibbs sampling on a corpus or a sample of it.

A start for variational LDA (``LDA(init="gibbs")``): mean-field coordinate
ascent keeps the basin it starts in, and from document seeds (k-means++) it
settles with near-duplicate topics; token-level sampling (Griffiths &
Steyvers 2004) explores first, and memoized VI from its topics keeps most of
what the sampler reached (``pipelines/benchmarks/README_lda.md`` compares
the starts).

The sampler runs in the driver on the whole corpus or, beyond
``config.GIBBS_SAMPLE_*``, a sample of whole documents (whole tokens: counts
are rounded). A token's draw costs its document's topics, and all K topics
only for the small fraction of draws that fall in the prior's bucket
(``lsdask.kernels.gibbs``).
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from lsdask.kernels.gibbs import apply_moves, gibbs_sweep_moves
from lsdask.learn.base import progress_bar, shows_bar

logger = logging.getLogger(__name__)


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


def split_by_tokens(doc_ptr: np.ndarray, parts: int) -> np.ndarray:
    """Document boundaries (parts + 1,) that cut the documents into ``parts``
    runs of about equal token counts (a run may be empty)."""
    targets = np.linspace(0, doc_ptr[-1], parts + 1)
    bounds = np.searchsorted(doc_ptr, targets, side="left")
    bounds[0], bounds[-1] = 0, doc_ptr.shape[0] - 1
    return np.maximum.accumulate(bounds)


class GibbsSample(NamedTuple):
    """What :func:`gibbs_sample` leaves: each token's word id and topic, and
    the topic-word counts (K, V) they make."""

    words: np.ndarray
    z: np.ndarray
    topic_word: np.ndarray


class _Part:
    """One run of documents swept in its own thread, with its own copy of the
    topic-word and topic counts (the first part uses the shared arrays) and
    its own stream of uniforms (the first part draws from the caller's
    generator, so one part makes the serial sampler's draws)."""

    def __init__(
        self,
        doc_ptr: np.ndarray,
        first: int,
        last: int,
        ndk: np.ndarray,
        nwk: np.ndarray,
        nk: np.ndarray,
        copy: bool,
        rng: np.random.Generator,
        record: bool,
    ) -> None:
        self.doc_ptr = doc_ptr[first : last + 1]
        self.n_tokens = int(doc_ptr[last] - doc_ptr[first])
        self.ndk = ndk[first:last]
        self.nwk = nwk.copy() if copy else nwk
        self.nk = nk.copy() if copy else nk
        self.rng = rng
        # the moves are for the other parts: none to record when there are none
        self._moves = np.empty((3, self.n_tokens if record else 0), dtype=np.int32)
        self.moves: tuple[np.ndarray, ...] = ()  # (words, old topics, new topics) of the last sweep

    def sweep(
        self, words: np.ndarray, z: np.ndarray, word_total: np.ndarray, a: float, eta: float
    ) -> int:
        """One collapsed Gibbs sweep over the part's tokens (its moves kept for the
        other parts); returns how many draws summed over all K topics."""
        uniforms = self.rng.random(self.n_tokens)
        full_sums, n = gibbs_sweep_moves(
            self.doc_ptr, words, z, self.ndk, self.nwk, self.nk, word_total, a, eta, uniforms,
            self._moves,
        )  # fmt: skip
        self.moves = (self._moves[0, :n], self._moves[1, :n], self._moves[2, :n])
        return full_sums


def gibbs_sample(
    X: sp.csr_matrix,
    n_components: int,
    alpha: float,
    eta: float,
    sweeps: int,
    rng: np.random.Generator,
    progress: bool | None = None,
    parts: int = 2,
) -> GibbsSample:
    """The tokens' word ids and topics, and the topic-word counts, after
    ``sweeps`` collapsed Gibbs sweeps over the documents of ``X`` from topics
    drawn uniformly at random; ``alpha`` is the
    total document-topic concentration (alpha / K per topic).

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
    doc_ptr, words, z, ndk, nwk, nk = random_start(X, K, rng)
    word_total = nwk.sum(axis=1, dtype=np.int64)
    bounds = split_by_tokens(doc_ptr, parts)
    # the other parts' generators are seeded from rng (Generator.spawn is not
    # available for every bit generator)
    streams = [rng]
    if parts > 1:
        seeds = np.random.SeedSequence(rng.integers(2**63, size=4)).spawn(parts - 1)
        streams += [np.random.default_rng(s) for s in seeds]
    runs = [
        _Part(doc_ptr, bounds[p], bounds[p + 1], ndk, nwk, nk, p > 0, streams[p], parts > 1)
        for p in range(parts)
    ]
    start = time.perf_counter()
    full_sums = 0
    bar = progress_bar(sweeps, "Gibbs init", progress)
    log_every = 0 if shows_bar(progress) else -(-sweeps // 10)  # no bar: every tenth
    with ThreadPoolExecutor(max_workers=parts) as pool:
        for sweep in range(sweeps):
            done = [pool.submit(r.sweep, words, z, word_total, alpha / K, eta) for r in runs]
            full_sums += sum(f.result() for f in done)
            if parts > 1:
                list(pool.map(lambda r: _take_in_moves(r, runs), runs))
            bar.update(1)
            if log_every and (sweep + 1) % log_every == 0 and sweep + 1 < sweeps:
                logger.info(
                    "Gibbs init: %d of %d sweeps in %.1f s",
                    sweep + 1, sweeps, time.perf_counter() - start,
                )  # fmt: skip
    bar.close()
    logger.info(
        "Gibbs init: %d sweeps over %d documents (%d tokens, %d parts) in %.1f s; %.1f%% of "
        "the draws summed over all topics",
        sweeps, n_docs, words.shape[0], parts, time.perf_counter() - start,
        100.0 * full_sums / max(1, sweeps * words.shape[0]),
    )  # fmt: skip
    return GibbsSample(words, z, np.ascontiguousarray(nwk.T, dtype=np.float64))


def _take_in_moves(run: _Part, runs: list[_Part]) -> None:
    """Bring ``run``'s counts up to date with every other part's moves."""
    for other in runs:
        if other is not run:
            apply_moves(run.nwk, run.nk, *other.moves)
