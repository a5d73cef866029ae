"""SVI-Gibbs's sampling kernel (Eq. 9 by Eq. 15's buckets) against plain references."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lsdask.kernels.svi_gibbs import document_key, draw_many, sample_documents, sequential_start
from lsdask.models.sparse_topics import WEIGHTS, SparseTopics, sample_counts
from tests import naive


def _topics(rng, K: int, V: int, eta: float = 0.3, steps: int = 3) -> SparseTopics:
    """A state with a few sparse updates: some words hold topics, some none."""
    state = SparseTopics.at_prior(K, V, eta)
    for t in range(1, steps + 1):
        dense = rng.poisson(0.4, size=(V, K)) * (rng.random((V, K)) < 0.3)
        state.step((10.0 + t) ** -0.6, sp.csr_matrix(dense.astype(float) * 5.0))
    return state


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("word", [0, 3, 7])
def test_stratified_uniforms_pick_the_plain_samplers_topics(rng, word, weights) -> None:
    K, V, M = 12, 9, 20_000
    state = _topics(rng, K, V)
    alpha = rng.gamma(1.0, 0.2, K) + 0.01
    view = state.view(np.arange(V), alpha, step=1, weights=weights)
    ndk = np.zeros(K, np.int64)
    active = np.array([5, 2, 9, 0])
    ndk[active] = [3, 1, 4, 2]
    us = (np.arange(M) + 0.5) / M
    got = draw_many(
        us, word, ndk, active, view.w_indptr, view.w_topics, view.w_excess, view.smooth,
        view.alpha, view.cum_smooth,
    )  # fmt: skip
    # the O(K) sampler over the same layout picks exactly the same topics
    topics, weights = naive.eq9_pieces(view, word, ndk, active)
    plain = np.array([topics[naive.plain_draw(u, weights)] for u in us])
    np.testing.assert_array_equal(got, plain)
    # each piece (one interval of [0, 1)) gets within 1 of M times its mass, so a
    # topic within its number of pieces (<= 3) of M p_k
    p = naive.eq9_weights(view, word, ndk)
    p = p / p.sum()
    pieces = np.bincount(topics[weights > 0], minlength=K)
    counts = np.bincount(got, minlength=K)
    assert np.all(np.abs(counts - M * p) <= np.maximum(pieces, 1))
    # the plain sampler in topic order (one interval per topic): within 1 of M p_k
    natural = np.bincount([naive.plain_draw(u, p) for u in us], minlength=K)
    assert np.all(np.abs(natural - M * p) <= 1)
    # the pieces' masses add up to Eq. 9's weights
    np.testing.assert_allclose(
        np.bincount(topics, weights, minlength=K), naive.eq9_weights(view, word, ndk), rtol=1e-12
    )


@pytest.mark.parametrize("weights", WEIGHTS)
def test_mean_counts_match_the_enumerated_posterior(rng, weights) -> None:
    """A 3-token document with K=3: E[N-hat] under q*(z_d) (Eq. 3, with the topics'
    weights in place of exp E[log phi] for ``"mean"``), enumerated, against the
    mean over 20,000 independent chains (one document id each)."""
    K, V = 3, 2
    state = SparseTopics.at_prior(K, V, 0.5)
    state.step(0.5, sp.csr_matrix(np.array([[4.0, 0.0, 1.0], [0.5, 3.0, 2.0]])))
    alpha = np.array([0.3, 0.2, 0.6])
    view = state.view(np.arange(V), alpha, step=4, weights=weights)
    doc_words = np.array([0, 1, 0])  # tokens in order: word 0 twice (stored as one entry)
    phi_w = np.array([view.dense_weights(w) for w in doc_words])
    exact = naive.enumerated_doc_counts(alpha, phi_w)  # (token, topic)
    n_docs, burnin = 20_000, 8
    indptr = np.arange(n_docs + 1, dtype=np.int64) * 2
    words = np.tile(np.array([0, 1], np.int64), n_docs)
    counts = np.tile(np.array([2, 1], np.int64), n_docs)
    out_w = np.empty(3 * n_docs, np.int64)
    out_z = np.empty(3 * n_docs, np.int64)
    sample_documents(
        indptr, words, counts, np.arange(n_docs, dtype=np.int64), np.uint64(11), np.uint64(4),
        burnin, 1, view.w_indptr, view.w_topics, view.w_excess, view.smooth, view.alpha,
        view.cum_smooth, out_w, out_z,
    )  # fmt: skip
    per_doc = np.zeros((n_docs, V, K))
    np.add.at(per_doc, (np.repeat(np.arange(n_docs), 3), out_w, out_z), 1.0)
    mean = per_doc.mean(axis=0)
    se = per_doc.std(axis=0) / np.sqrt(n_docs)
    expected = np.zeros((V, K))
    for i, w in enumerate(doc_words):
        expected[w] += exact[i]
    assert np.all(np.abs(mean - expected) <= 5 * se + 1e-12), (mean, expected, se)


def test_sequential_start_draws_each_token_given_the_ones_before(rng) -> None:
    """footnote 3: p(z_0) ∝ a_k phi_k(w_0), p(z_1 | z_0) ∝ (a_k + [z_0 = k]) phi_k(w_1):
    the joint frequencies of 40,000 starts against the exact joint, within 5 SE."""
    K, V = 4, 3
    state = _topics(rng, K, V, eta=0.4)
    alpha = np.array([0.1, 0.5, 0.2, 0.3])
    view = state.view(np.arange(V), alpha, step=2)
    tokens = np.array([2, 0], np.int64)
    w0, w1 = view.dense_weights(2), view.dense_weights(0)
    p0 = alpha * w0 / (alpha * w0).sum()
    joint = np.zeros((K, K))
    for k in range(K):
        cond = (alpha + (np.arange(K) == k)) * w1
        joint[k] = p0[k] * cond / cond.sum()
    n = 40_000
    seen = np.zeros((K, K))
    for d in range(n):
        key = np.uint64(document_key(np.uint64(3), np.uint64(2), np.uint64(d)))
        z = sequential_start(
            tokens, key, view.w_indptr, view.w_topics, view.w_excess, view.smooth,
            view.alpha, view.cum_smooth,
        )  # fmt: skip
        seen[z[0], z[1]] += 1
    freq = seen / n
    se = np.sqrt(joint * (1 - joint) / n)
    assert np.all(np.abs(freq - joint) <= 5 * se + 1e-12)


def test_tiny_per_topic_prior_makes_starts_sticky() -> None:
    """With every topic at the prior, the sequential start is a Polya urn: at
    a_k = 0.5 / 1000 (LDA's total alpha 0.5 at K = 1,000) about two thirds of a
    document's tokens land on its first token's topic (Beta(1 + a, (K - 1) a)),
    at the paper's a_k = 0.1 about 1%: why svi-gibbs wants a larger alpha at
    large K (docs/algorithms.md)."""
    K, V = 1000, 50
    tokens = np.arange(40, dtype=np.int64) % V
    shares = {}
    for a in (0.5 / K, 0.1):
        view = SparseTopics.at_prior(K, V, 0.1).view(np.arange(V), np.full(K, a), step=1)
        share = []
        for d in range(300):
            key = np.uint64(document_key(np.uint64(0), np.uint64(1), np.uint64(d)))
            z = sequential_start(
                tokens, key, view.w_indptr, view.w_topics, view.w_excess, view.smooth,
                view.alpha, view.cum_smooth,
            )  # fmt: skip
            share.append(np.mean(z == z[0]))
        shares[a] = float(np.mean(share))
    assert shares[0.5 / K] > 0.55
    assert shares[0.1] < 0.1


def test_draws_do_not_depend_on_how_documents_are_split(rng) -> None:
    K, V = 6, 20
    state = _topics(rng, K, V)
    X = sp.csr_matrix(rng.poisson(0.8, size=(9, V)).astype(float))
    ids = np.arange(100, 109)
    view = state.view(np.arange(V), np.full(K, 0.1), step=7)

    def counts(rows, doc_ids, seed=5):
        return sample_counts(rows, doc_ids, view, 2, 3, seed=seed)[0]

    whole = counts(X, ids)
    parts = counts(X[:4], ids[:4]) + counts(X[4:], ids[4:])
    np.testing.assert_array_equal(whole.keys, parts.keys)
    np.testing.assert_array_equal(whole.counts, parts.counts)
    assert whole.total == 3 * X.sum()
    other = counts(X, ids, seed=6)
    assert not np.array_equal(other.counts, whole.counts) or not np.array_equal(
        other.keys, whole.keys
    )


def test_fractional_counts_are_refused(rng) -> None:
    view = SparseTopics.at_prior(3, 4, 0.1).view(np.arange(4), np.full(3, 0.1), step=1)
    X = sp.csr_matrix(np.array([[1.5, 0.0, 2.0, 0.0]]))
    with pytest.raises(ValueError, match="whole tokens"):
        sample_counts(X, np.array([0]), view, 1, 1, seed=0)


def test_merge_counts_is_the_sum_of_two_sparse_count_vectors(rng) -> None:
    """Against numpy's unique-and-add: overlapping, disjoint and empty inputs."""
    from lsdask.kernels.svi_gibbs import merge_counts

    def reference(ka, ca, kb, cb):
        keys, at = np.unique(np.concatenate([ka, kb]), return_inverse=True)
        counts = np.zeros(keys.size, np.int64)
        np.add.at(counts, at, np.concatenate([ca, cb]))
        return keys, counts

    empty = np.zeros(0, np.int64)
    for size_a, size_b, span in ((50, 70, 100), (30, 40, 10**12), (0, 20, 50), (0, 0, 5)):
        ka = np.unique(rng.integers(0, span, size_a))
        kb = np.unique(rng.integers(0, span, size_b))
        ca, cb = rng.integers(1, 9, ka.size), rng.integers(1, 9, kb.size)
        for args in ((ka, ca, kb, cb), (kb, cb, ka, ca), (ka, ca, empty, empty)):
            got, want = merge_counts(*args), reference(*args)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])
