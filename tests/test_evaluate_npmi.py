"""NPMI coherence and the one-pass co-document counts, against plain numpy loops."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from lsdask.evaluate import CoDocumentCounts, npmi_coherence, top_word_ids, umass_coherence


def naive_npmi(topics: np.ndarray, X: np.ndarray, n: int) -> np.ndarray:
    """Bouma's NPMI over document co-occurrence, pair by pair, from a dense matrix."""
    present = X > 0
    N = X.shape[0]
    out = []
    for k in range(topics.shape[0]):
        top = np.argsort(-topics[k], kind="stable")[:n]
        scores = []
        for i in range(1, n):
            for j in range(i):
                a, b = present[:, top[i]], present[:, top[j]]
                p_ij = float((a & b).sum()) / N
                if p_ij == 0:
                    scores.append(-1.0)
                elif p_ij == 1:
                    scores.append(1.0)
                else:
                    pmi = math.log(p_ij / ((a.sum() / N) * (b.sum() / N)))
                    scores.append(pmi / -math.log(p_ij))
        out.append(float(np.mean(scores)))
    return np.array(out)


@pytest.fixture
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    topics = rng.dirichlet(np.full(40, 0.3), size=6)
    X = rng.poisson(0.4, size=(120, 40)) * (rng.random((120, 40)) < 0.5)
    X[:, 39] = 0  # a word no document holds
    topics[0, 39] = 1.0  # ... among topic 0's top words
    topics /= topics.sum(axis=1, keepdims=True)
    return topics, X


def test_npmi_matches_naive(data: tuple[np.ndarray, np.ndarray]) -> None:
    topics, X = data
    got = npmi_coherence(topics, sp.csr_matrix(X), top_n=8)
    np.testing.assert_allclose(got, naive_npmi(topics, X, 8), rtol=1e-12, atol=1e-12)
    assert np.all((got >= -1) & (got <= 1))


def test_npmi_batches_add_up(data: tuple[np.ndarray, np.ndarray]) -> None:
    topics, X = data
    batches = [sp.csr_matrix(X[i : i + 25]) for i in range(0, X.shape[0], 25)]
    np.testing.assert_allclose(
        npmi_coherence(topics, batches, top_n=6), naive_npmi(topics, X, 6), atol=1e-12
    )


def test_one_pass_umass_equals_umass_coherence(data: tuple[np.ndarray, np.ndarray]) -> None:
    topics, X = data
    counts = CoDocumentCounts(top_word_ids(topics, 7))
    for i in range(0, X.shape[0], 50):
        counts.add(sp.csr_matrix(X[i : i + 50]))
    np.testing.assert_allclose(counts.umass(), umass_coherence(topics, sp.csr_matrix(X), 7))


def test_npmi_extremes() -> None:
    # words 0 and 1 always together, in half the documents; word 2 never with them
    X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1], [0, 0, 1]])
    together = np.array([[0.5, 0.4, 0.1]])
    apart = np.array([[0.5, 0.1, 0.4]])
    assert npmi_coherence(together, sp.csr_matrix(X), 2)[0] == pytest.approx(1.0)
    assert npmi_coherence(apart, sp.csr_matrix(X), 2)[0] == pytest.approx(-1.0)
    # independent words: each in half the documents, together in a quarter
    Y = np.array([[1, 1], [1, 0], [0, 1], [0, 0]])
    assert npmi_coherence(np.array([[0.6, 0.4]]), sp.csr_matrix(Y), 2)[0] == pytest.approx(0.0)
