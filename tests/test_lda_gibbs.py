"""LDA(init="gibbs"): the collapsed Gibbs kernel, the sampler on a sample, the option."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.kernels.gibbs import gibbs_sweep
from lsdask.models.lda_gibbs import gibbs_topic_counts, tokens_of
from lsdask.persist import load_lda, save_lda
from lsdask.synthetic import make_bars_corpus, match_topics
from tests import naive


def _counts(doc_ptr, words, z, K, V):
    doc_of = np.repeat(np.arange(doc_ptr.shape[0] - 1), np.diff(doc_ptr))
    ndk = np.zeros((doc_ptr.shape[0] - 1, K), dtype=np.int32)
    nwk = np.zeros((V, K), dtype=np.int32)
    np.add.at(ndk, (doc_of, z), 1)
    np.add.at(nwk, (words, z), 1)
    return ndk, nwk, np.bincount(z, minlength=K).astype(np.int64)


def test_sweep_equals_plain_reference():
    """Three sweeps draw exactly the topics of a token-by-token numpy reference
    given the same uniforms, and keep the counts equal to those of z."""
    rng = np.random.default_rng(3)
    K, V, a, eta = 4, 9, 0.3, 0.2
    lengths = [5, 1, 0, 7, 3]
    docs = [list(rng.integers(V, size=n)) for n in lengths]
    z_ref = [list(rng.integers(K, size=n)) for n in lengths]
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    words = np.concatenate([np.asarray(d, np.int32) for d in docs])
    z = np.concatenate([np.asarray(zd, np.int32) for zd in z_ref])
    ndk, nwk, nk = _counts(doc_ptr, words, z, K, V)
    for _ in range(3):
        u = rng.random(words.shape[0])
        gibbs_sweep(doc_ptr, words, z, ndk, nwk, nk, a, eta, u)
        z_ref = naive.gibbs_sweep(docs, z_ref, K, V, a, eta, u)
        np.testing.assert_array_equal(z, np.concatenate([np.asarray(zd, int) for zd in z_ref]))
        for got, want in zip((ndk, nwk, nk), _counts(doc_ptr, words, z, K, V), strict=True):
            np.testing.assert_array_equal(got, want)


def test_tokens_round_counts_and_keep_empty_documents():
    X = sp.csr_matrix(np.array([[2.0, 0, 1], [0, 0, 0], [0, 3.4, 0], [0, 0, 0.2], [0, 0, 0]]))
    doc_ptr, words = tokens_of(X)
    np.testing.assert_array_equal(doc_ptr, [0, 3, 3, 6, 6, 6])
    np.testing.assert_array_equal(words, [0, 0, 2, 1, 1, 1])


def test_sampler_recovers_bars():
    """On the bars corpus the sampler's topics alone are the true bars."""
    X, true_topics = make_bars_corpus(n_docs=500, doc_length=50, random_state=1)
    rng = np.random.default_rng(0)
    counts = gibbs_topic_counts(X, 10, alpha=10.0, eta=0.1, sweeps=200, rng=rng)
    assert counts.shape == (10, 25)
    assert counts.sum() == X.sum()  # every token in exactly one topic
    _, distances = match_topics(true_topics, counts + 0.1)
    assert distances.max() < 0.2, distances


def test_init_gibbs_fit_is_seeded_and_beats_kmeans_start_after_one_lap():
    X, _ = make_bars_corpus(n_docs=400, doc_length=40, random_state=2)
    kw = dict(alpha=10.0, n_laps=1, random_state=0, client="sync", sparsity=4)
    a = lsdask.LDA(10, init="gibbs", gibbs_sweeps=40, **kw).fit(X)
    b = lsdask.LDA(10, init="gibbs", gibbs_sweeps=40, **kw).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    kmeans = lsdask.LDA(10, init="kmeans++", **kw).fit(X)
    assert a.elbo_trace_[-1] > kmeans.elbo_trace_[-1]


def test_gibbs_sweeps_is_checked_and_saved(tmp_path):
    X, _ = make_bars_corpus(n_docs=50, doc_length=20, random_state=0)
    with pytest.raises(ValueError, match="gibbs_sweeps"):
        lsdask.LDA(10, init="gibbs", gibbs_sweeps=0, client="sync").fit(X)
    model = lsdask.LDA(10, init="gibbs", gibbs_sweeps=3, n_laps=1, client="sync").fit(X)
    save_lda(model, tmp_path / "m")
    loaded = load_lda(tmp_path / "m")
    assert (loaded.init, loaded.gibbs_sweeps) == ("gibbs", 3)
    np.testing.assert_array_equal(loaded.components_, model.components_)


def test_init_gibbs_refuses_fractional_counts_and_too_few_tokens():
    X, _ = make_bars_corpus(n_docs=50, doc_length=20, random_state=0)
    frequencies = sp.csr_matrix(X.multiply(1.0 / X.sum(axis=1)))
    with pytest.raises(ValueError, match=r"round to 0 tokens: the counts look fractional"):
        lsdask.LDA(10, init="gibbs", client="sync").fit(frequencies)
    short = np.zeros((1, 25))
    short[0, :3] = 2.0
    with pytest.raises(ValueError, match=r"has 6 tokens for n_components=10"):
        lsdask.LDA(10, init="gibbs", client="sync").fit(sp.csr_matrix(short))
