"""Tests for lsdask.synthetic: the bars corpus and topic matching."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lsdask.synthetic import bars_topics, make_bars_corpus, match_topics


def test_bars_topics_are_bars() -> None:
    topics = bars_topics(4)
    assert topics.shape == (8, 16)
    np.testing.assert_allclose(topics.sum(axis=1), 1.0)
    images = topics.reshape(8, 4, 4)
    for i in range(4):
        np.testing.assert_array_equal(images[i, i, :], 0.25)  # horizontal bar, row i
        assert images[i].sum() == pytest.approx(images[i, i, :].sum())
        np.testing.assert_array_equal(images[4 + i, :, i], 0.25)  # vertical bar, column i
        assert images[4 + i].sum() == pytest.approx(images[4 + i, :, i].sum())


def test_make_bars_corpus_shapes_and_counts() -> None:
    X, topics = make_bars_corpus(n_docs=120, side=3, doc_length=30, random_state=1)
    assert sp.issparse(X) and X.format == "csr"
    assert X.shape == (120, 9)
    assert topics.shape == (6, 9)
    np.testing.assert_array_equal(np.asarray(X.sum(axis=1)).ravel(), 30.0)
    assert X.data.min() > 0 and np.all(X.data == np.round(X.data))
    assert X.has_sorted_indices
    np.testing.assert_array_equal(topics, bars_topics(3))


def test_make_bars_corpus_is_deterministic() -> None:
    X1, _ = make_bars_corpus(n_docs=50, random_state=7)
    X2, _ = make_bars_corpus(n_docs=50, random_state=7)
    X3, _ = make_bars_corpus(n_docs=50, random_state=8)
    assert (X1 != X2).nnz == 0
    assert (X1 != X3).nnz > 0


def test_defaults_match_griffiths_steyvers_sizes() -> None:
    X, topics = make_bars_corpus()
    assert X.shape == (2000, 25) and topics.shape == (10, 25)
    assert X.sum() == 2000 * 50


def test_small_prior_gives_few_bars_per_document() -> None:
    """With a small per-topic prior most documents use one or two bars' pixels."""
    X, _ = make_bars_corpus(n_docs=200, doc_topic_prior=0.05, random_state=0)
    X_mixed, _ = make_bars_corpus(n_docs=200, doc_topic_prior=5.0, random_state=0)
    pixels = np.diff(X.indptr).mean()
    pixels_mixed = np.diff(X_mixed.indptr).mean()
    assert pixels < 12 < pixels_mixed


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_docs": 0}, "n_docs must be a positive integer"),
        ({"side": 2.5}, "side must be a positive integer"),
        ({"doc_length": True}, "doc_length must be a positive integer"),
        ({"doc_topic_prior": 0.0}, "doc_topic_prior must be a positive number"),
        ({"doc_topic_prior": float("nan")}, "doc_topic_prior must be a positive number"),
    ],
)
def test_make_bars_corpus_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_bars_corpus(**kwargs)


def test_match_topics_recovers_a_permutation() -> None:
    true = bars_topics(5)
    perm = np.random.default_rng(0).permutation(10)
    learned = 3.0 * true[perm]  # unnormalized rows are fine
    match, dist = match_topics(true, learned)
    np.testing.assert_array_equal(perm[match], np.arange(10))
    np.testing.assert_allclose(dist, 0.0, atol=1e-12)


def test_match_topics_rectangular() -> None:
    true = bars_topics(3)
    match, dist = match_topics(true, true[[4, 1]])
    assert match.tolist().count(-1) == 4
    assert match[1] == 1 and match[4] == 0
    assert np.isnan(dist[match == -1]).all()
    # Disjoint bars are at distance 2; a horizontal and a vertical bar share a pixel.
    _, far = match_topics(true[:1], true[1:2])
    assert far[0] == pytest.approx(2.0)
    _, cross = match_topics(true[:1], true[3:4])
    assert cross[0] == pytest.approx(2 * (1 - 1 / 3))


@pytest.mark.parametrize(
    ("true", "learned", "match"),
    [
        (np.ones((2, 4)), np.ones((2, 5)), r"same number of words.*\(2, 4\) and \(2, 5\)"),
        (np.ones(4), np.ones((2, 4)), r"true_topics must have shape \(K, V\)"),
        (np.ones((2, 4)), -np.ones((2, 4)), "learned_topics must hold finite, non-negative"),
        (np.ones((2, 4)), np.zeros((2, 4)), "learned_topics has a row of zeros"),
    ],
)
def test_match_topics_errors(true, learned, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        match_topics(true, learned)
