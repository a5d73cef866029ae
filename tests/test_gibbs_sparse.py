"""The collapsed Gibbs kernel's draw orders (SparseLDA's word lists, the document
first, the two-bucket draw without lists): each draw is the exact conditional,
the counts and lists stay those of the topics, and the sampler uses the lists
when a large prior makes them pay. The two-bucket draw's own tests, and the
sampler's, are in ``test_lda_gibbs.py``."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from scipy.special import gammaln
from scipy.stats import chi2

import lsdask.learn.gibbs_start as gibbs_start
from lsdask.kernels.gibbs import (
    DOCUMENT_BUCKET,
    FULL_SUMS,
    SMOOTHING_BUCKET,
    WORD_BUCKET,
    apply_moves,
    gibbs_sweep_moves,
    sparse_gibbs_sweep,
    word_topic_lists,
)
from lsdask.learn.gibbs_start import gibbs_sample, tokens_of
from lsdask.synthetic import make_bars_corpus

#: the ways a draw can be found: without word lists (the two-bucket draw), and
#: with them in each order
MODES = ("two-bucket", "word", "document", "auto")


def _counts(doc_ptr, words, z, K, V):
    doc_of = np.repeat(np.arange(doc_ptr.shape[0] - 1), np.diff(doc_ptr))
    ndk = np.zeros((doc_ptr.shape[0] - 1, K), dtype=np.int32)
    nwk = np.zeros((V, K), dtype=np.int32)
    np.add.at(ndk, (doc_of, z), 1)
    np.add.at(nwk, (words, z), 1)
    return ndk, nwk, np.bincount(z, minlength=K).astype(np.int64)


def _listed(lists):
    """Each word's listed topics (the lists' used part)."""
    head, topics = lists
    return [topics[start : start + n].tolist() for start, n in head]


def _assert_lists_are_of(lists, nwk):
    assert _listed(lists) == [np.flatnonzero(row).tolist() for row in nwk]


def _sweep(mode, doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, uniforms, lists=None):
    """A sweep in ``mode``; the word lists built from ``nwk`` unless given."""
    if mode == "two-bucket":
        return sparse_gibbs_sweep(doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, uniforms)
    if lists is None:
        lists = word_topic_lists(nwk, word_total)
    counts = (ndk, nwk, nk, word_total)
    return sparse_gibbs_sweep(doc_ptr, words, z, *counts, a, eta, uniforms, lists, order=mode)


def _conditional(ndk_row, nwk_row, nk, a, eta, V):
    """p(z = k | rest) of one token whose counts are already out of the table."""
    weights = (ndk_row + a) * (nwk_row + eta) / (nk + V * eta)
    return weights / weights.sum()


def _state(K, V, seed):
    """A document of 12 tokens over topics 0-3 (4+ hold none of it) and 400
    other tokens over all topics; token 0's word has tokens in several topics."""
    rng = np.random.default_rng(seed)
    doc_words = np.concatenate([[0], rng.integers(V, size=11)]).astype(np.int32)
    doc_z = rng.integers(4, size=12).astype(np.int32)
    other = rng.integers(V, size=400).astype(np.int32)
    other[:12] = 0  # word 0, token 0's, in several topics
    other_z = rng.integers(K, size=400).astype(np.int32)
    words = np.concatenate([doc_words, other])
    z = np.concatenate([doc_z, other_z])
    doc_ptr = np.array([0, 12, words.shape[0]], dtype=np.int64)
    return doc_ptr, words, z


def _draws_of_token_0(mode, doc_ptr, words, z0, K, V, a, eta, uniforms):
    """Token 0's topic drawn from the same state once per uniform (only
    token 0 is swept), and the draw counts summed over the draws."""
    ndk0, nwk0, nk0 = _counts(doc_ptr, words, z0, K, V)
    word_total = nwk0.sum(axis=1, dtype=np.int64)
    lists0 = word_topic_lists(nwk0, word_total)
    drawn = np.empty(uniforms.shape[0], dtype=np.int64)
    counts = np.zeros(4, dtype=np.int64)
    one = np.array([0, 1], dtype=np.int64)
    for g, u in enumerate(uniforms):
        z, ndk, nwk, nk = z0.copy(), ndk0.copy(), nwk0.copy(), nk0.copy()
        lists = type(lists0)(*(x.copy() for x in lists0))
        counts += _sweep(
            mode, one, words, z, ndk, nwk, nk, word_total, a, eta, np.array([u]), lists
        )
        drawn[g] = z[0]
    return drawn, counts


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("prior", ["small", "large", "vector"])
def test_draws_have_the_exact_conditional_chi_square(mode, prior):
    """20,000 draws of one token from a fixed state, with uniforms from a fixed
    seed, against the normalised conditional (K = 9): Pearson's chi-square
    stays below its 1 - 1e-6 quantile (it cannot fail by chance at this seed)
    but is far above it against each wrong conditional, one bucket left out
    or the prior 1.5 times too large (each 0.05-0.17 from the true one in
    total variation; at the small prior, the smoothing bucket and the prior's
    size weigh under 0.01 and are not checked), at a small prior (alpha / K =
    0.01), a large one (2.0) and a vector prior, in every way of drawing."""
    K, V, eta = 9, 30, 1.0
    a = {
        "small": 0.01,
        "large": 2.0,
        "vector": np.array([0.05, 3.0, 0.2, 1.0, 0.01, 2.5, 0.5, 0.1, 4.0]),
    }[prior]
    doc_ptr, words, z0 = _state(K, V, seed=1)
    uniforms = np.random.default_rng(7).random(20_000)
    drawn, counts = _draws_of_token_0(mode, doc_ptr, words, z0, K, V, a, eta, uniforms)
    ndk, nwk, nk = _counts(doc_ptr, words, z0, K, V)
    k0 = z0[0]
    ndk[0, k0] -= 1
    nwk[0, k0] -= 1
    nk[k0] -= 1
    a_k = np.broadcast_to(a, (K,))
    want = _conditional(ndk[0], nwk[0], nk, a_k, eta, V)
    seen = np.bincount(drawn, minlength=K)
    n = uniforms.shape[0]

    def chi_square(p):
        return float(((seen - n * p) ** 2 / (n * p)).sum())

    limit = chi2.isf(1e-6, K - 1)
    assert chi_square(want) < limit, (seen / n, want)
    # the test's power: each conditional with a bucket left out, or a prior 1.5 times
    # too large, is rejected where it differs from the true one by 0.03 or more in total
    # variation (a small bucket, or the prior when it is small, may differ by less)
    inverse = 1.0 / (nk + V * eta)
    buckets = {
        "word": (a_k + ndk[0]) * nwk[0] * inverse,
        "document": ndk[0] * eta * inverse,
        "smoothing": a_k * eta * inverse,
    }
    wrong = {
        f"no {name} bucket": sum(w for b, w in buckets.items() if b != name) for name in buckets
    }
    wrong["prior x 1.5"] = (ndk[0] + 1.5 * a_k) * (nwk[0] + eta) * inverse
    checked = 0
    for name, weights in wrong.items():
        p = weights / weights.sum()
        if 0.5 * np.abs(p - want).sum() >= 0.03:
            assert chi_square(p) > limit, name
            checked += 1
    assert checked == (2 if prior == "small" else 4)  # at a small prior, a_k hardly weighs
    # every way to the topic ran: the word's part, the document's, and (with lists) the tree
    assert counts[WORD_BUCKET] > 0 and counts[DOCUMENT_BUCKET] > 0
    if mode == "two-bucket":
        assert counts[FULL_SUMS] > 0  # the prior's part summed over all K topics
    else:
        assert counts[FULL_SUMS] == 0 and counts[SMOOTHING_BUCKET] > 0


def _grid(mode, doc_ptr, words, z0, K, V, a, eta, j, before, n_grid=4_000):
    """Token ``j``'s topic frequencies over a grid of its uniform, after tokens
    ``0..j-1`` were drawn with ``before`` (in ``mode``), and the exact
    conditional of the counts as they stand at that draw."""
    ndk0, nwk0, nk0 = _counts(doc_ptr, words, z0, K, V)
    word_total = nwk0.sum(axis=1, dtype=np.int64)
    z, ndk, nwk, nk = z0.copy(), ndk0.copy(), nwk0.copy(), nk0.copy()
    _sweep(mode, np.array([0, j]), words, z, ndk, nwk, nk, word_total, a, eta, before)
    w, k = words[j], z[j]
    ndk[0, k] -= 1
    nwk[w, k] -= 1
    nk[k] -= 1
    want = _conditional(ndk[0], nwk[w], nk, np.broadcast_to(a, (K,)), eta, V)
    drawn = np.empty(n_grid, dtype=np.int64)
    for g, u in enumerate((np.arange(n_grid) + 0.5) / n_grid):
        z, ndk, nwk, nk = z0.copy(), ndk0.copy(), nwk0.copy(), nk0.copy()
        uniforms = np.concatenate([before, [u]])
        _sweep(mode, np.array([0, j + 1]), words, z, ndk, nwk, nk, word_total, a, eta, uniforms)
        drawn[g] = z[j]
    return np.bincount(drawn, minlength=K) / n_grid, want


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", range(4))
def test_draws_are_exact_in_the_middle_of_a_document(mode, seed):
    """A token drawn after earlier tokens of its document moved (topics left
    and joined the document's and the words' lists, totals and the tree went
    down and up, some of it pending) gets the exact conditional of the counts
    as they stand then, over a grid of its uniform (resolution 1 / 4000)."""
    rng = np.random.default_rng(200 + seed)
    K, V = int(rng.integers(3, 9)), int(rng.integers(2, 6))
    a = float(rng.choice([0.01, 0.5, 3.0])) if seed < 3 else rng.uniform(0.05, 2.0, K)
    eta = float(rng.choice([0.05, 0.5]))
    n0 = int(rng.integers(4, 9))
    words = rng.integers(V, size=n0 + 60).astype(np.int32)
    z0 = rng.integers(K, size=n0 + 60).astype(np.int32)
    doc_ptr = np.array([0, n0, n0 + 60], dtype=np.int64)
    j = int(rng.integers(1, n0))
    got, want = _grid(mode, doc_ptr, words, z0, K, V, a, eta, j, rng.random(j))
    np.testing.assert_allclose(got, want, atol=1e-3)


def _log_joint(doc_of, words, z, K, V, a, eta):
    """log p(w, z) up to a constant, collapsed over pi and phi (a: (K,))."""
    ndk = np.zeros((doc_of.max() + 1, K))
    nwk = np.zeros((V, K))
    np.add.at(ndk, (doc_of, z), 1)
    np.add.at(nwk, (words, z), 1)
    return gammaln(ndk + a).sum() + gammaln(nwk + eta).sum() - gammaln(nwk.sum(0) + V * eta).sum()


@pytest.mark.parametrize("mode", ["word", "document", "auto"])
def test_sampler_with_word_lists_visits_the_exact_posterior(mode):
    """Over many sweeps with the word lists kept from sweep to sweep, how often
    two tokens share a topic equals the exact posterior probability,
    enumerated over all K^n states of a corpus of 7 tokens, for a large
    vector prior: the draws and all the upkeep keep the chain on its target;
    the counts and the lists end as those of the topics."""
    K, V, eta = 3, 4, 0.3
    a = np.array([0.4, 1.5, 0.8])
    doc_ptr = np.array([0, 3, 4, 7], dtype=np.int64)
    words = np.array([0, 1, 1, 2, 0, 3, 3], dtype=np.int32)
    doc_of = np.repeat(np.arange(3), np.diff(doc_ptr))
    n = words.shape[0]
    states = np.array(np.meshgrid(*[np.arange(K)] * n, indexing="ij")).reshape(n, -1).T
    log_p = np.array([_log_joint(doc_of, words, s, K, V, a, eta) for s in states])
    p = np.exp(log_p - log_p.max())
    p /= p.sum()
    exact = np.einsum("s,sij->ij", p, states[:, :, None] == states[:, None, :])
    rng = np.random.default_rng(0)
    z = rng.integers(K, size=n).astype(np.int32)
    ndk, nwk, nk = _counts(doc_ptr, words, z, K, V)
    word_total = nwk.sum(axis=1, dtype=np.int64)
    lists = word_topic_lists(nwk, word_total)
    sweeps = 40_000
    seen = np.zeros((n, n))
    for _ in range(sweeps):
        _sweep(mode, doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, rng.random(n), lists)
        seen += z[:, None] == z[None, :]
    for got, want in zip((ndk, nwk, nk), _counts(doc_ptr, words, z, K, V), strict=True):
        np.testing.assert_array_equal(got, want)
    _assert_lists_are_of(lists, nwk)
    np.testing.assert_allclose(seen / sweeps, exact, atol=0.015)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("a", [0.01, 2.0, "vector"])
def test_counts_and_lists_stay_those_of_the_topics(mode, a):
    """After sweeps over a few hundred documents (empty ones included) at K =
    40, the counts equal those rebuilt from z, every topic is a valid id, the
    word lists kept from sweep to sweep equal the lists rebuilt from the counts,
    and the draws are the same as with lists rebuilt before every sweep (they
    depend on the counts alone)."""
    rng = np.random.default_rng(4)
    K, V = 40, 60
    if a == "vector":
        a = rng.uniform(0.01, 3.0, K)
    lengths = rng.integers(0, 40, size=200)
    doc_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    words = rng.integers(V, size=doc_ptr[-1]).astype(np.int32)
    z = rng.integers(K, size=doc_ptr[-1]).astype(np.int32)
    ndk, nwk, nk = _counts(doc_ptr, words, z, K, V)
    word_total = nwk.sum(axis=1, dtype=np.int64)
    kept = word_topic_lists(nwk, word_total)
    z_b, ndk_b, nwk_b, nk_b = z.copy(), ndk.copy(), nwk.copy(), nk.copy()
    for _ in range(6):
        uniforms = rng.random(z.shape[0])
        _sweep(mode, doc_ptr, words, z, ndk, nwk, nk, word_total, a, 0.1, uniforms, kept)
        _sweep(mode, doc_ptr, words, z_b, ndk_b, nwk_b, nk_b, word_total, a, 0.1, uniforms)
    assert z.min() >= 0 and z.max() < K
    for got, want in zip((ndk, nwk, nk), _counts(doc_ptr, words, z, K, V), strict=True):
        np.testing.assert_array_equal(got, want)
    if mode != "two-bucket":  # which leaves the lists alone
        _assert_lists_are_of(kept, nwk)
    np.testing.assert_array_equal(z, z_b)


def test_apply_moves_keeps_the_lists_current():
    rng = np.random.default_rng(5)
    nwk = rng.integers(0, 3, size=(8, 6)).astype(np.int32)
    nk = nwk.sum(axis=0).astype(np.int64)
    word_total = nwk.sum(axis=1, dtype=np.int64)
    lists = word_topic_lists(nwk, word_total)
    words, old = np.nonzero(nwk)  # one token of each listed (word, topic) moves
    words, old = words.astype(np.int32), old.astype(np.int32)
    new = rng.integers(6, size=words.shape[0]).astype(np.int32)
    apply_moves(nwk, nk, words, old, new, lists)
    assert nwk.min() >= 0
    _assert_lists_are_of(lists, nwk)


def test_bad_arguments_are_refused():
    X, _ = make_bars_corpus(n_docs=4, doc_length=10, random_state=6)
    doc_ptr, words = tokens_of(X)
    z = np.zeros(words.shape[0], dtype=np.int32)
    ndk, nwk, nk = _counts(doc_ptr, words, z, 3, X.shape[1])
    word_total = nwk.sum(axis=1, dtype=np.int64)
    args = (doc_ptr, words, z, ndk, nwk, nk, word_total)
    u = np.full(words.shape[0], 0.5)
    with pytest.raises(ValueError, match="order must be one of 'auto', 'word', 'document'"):
        sparse_gibbs_sweep(*args, 0.1, 0.1, u, word_topic_lists(nwk, word_total), order="x")
    with pytest.raises(ValueError, match="prior a must be positive"):
        sparse_gibbs_sweep(*args, np.array([0.1, 0.0, 0.1]), 0.1, u)
    with pytest.raises(ValueError, match="broadcast"):
        sparse_gibbs_sweep(*args, np.array([0.1, 0.1]), 0.1, u)
    with pytest.raises(ValueError, match="rows of nwk must sum to word_total"):
        word_topic_lists(nwk, word_total + 1)
    with pytest.raises(ValueError, match="alpha must be a positive total or a positive vector"):
        gibbs_sample(X, 3, np.array([1.0, 1.0]), 0.1, 1, np.random.default_rng(0), parts=1)
    with pytest.raises(ValueError, match="moves must be"):
        gibbs_sweep_moves(*args, 0.1, 0.1, u, np.empty((3, 1), dtype=np.int32))


def _serial(X, K, a, eta, sweeps, seed, lists_from):
    """The serial kernel's topic-word counts after ``sweeps``, from
    ``gibbs_sample``'s start and stream, with word lists from sweep
    ``lists_from`` (1-based) on."""
    rng = np.random.default_rng(seed)
    doc_ptr, words = tokens_of(X)
    z = rng.integers(K, size=words.shape[0]).astype(np.int32)
    ndk, nwk, nk = _counts(doc_ptr, words, z, K, X.shape[1])
    word_total = nwk.sum(axis=1, dtype=np.int64)
    for sweep in range(1, sweeps + 1):
        uniforms = rng.random(words.shape[0])
        mode = "auto" if sweep >= lists_from else "two-bucket"
        _sweep(mode, doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, uniforms)
    return nwk.T


def test_sampler_switches_to_word_lists_when_they_pay(caplog, monkeypatch):
    """At K = 100 the sampler starts with the two-bucket draw and, with a large
    prior (alpha / K = 0.5: many draws sum over all K topics), builds the word
    lists after the first sweep; with LDA's small one it never does. With one
    part the result is the serial kernel's, switching at the same sweep; with
    three parts every count is that of the topics, and each part's lists, kept
    through the other parts' moves, are those of its counts at every sweep."""
    X, _ = make_bars_corpus(n_docs=150, doc_length=30, random_state=8)
    K, eta, sweeps = 100, 0.1, 4
    for alpha, lists_from in ((50.0, 2), (0.5, None)):
        with caplog.at_level(logging.INFO, logger="lsdask.learn.gibbs_start"):
            caplog.clear()
            got = gibbs_sample(X, K, alpha, eta, sweeps, np.random.default_rng(3), parts=1)
        assert f"word topic lists from sweep {lists_from or 'none'}" in caplog.text
        want = _serial(X, K, alpha / K, eta, sweeps, 3, lists_from or sweeps + 1)
        np.testing.assert_array_equal(got.topic_word, want)
    checked = []
    sweep = gibbs_start._Part.sweep

    def checked_sweep(part, *args):
        if part.lists is not None:
            _assert_lists_are_of(part.lists, part.nwk)
            checked.append(part)
        return sweep(part, *args)

    monkeypatch.setattr(gibbs_start._Part, "sweep", checked_sweep)
    drawn = gibbs_sample(X, K, 50.0, eta, 5, np.random.default_rng(1), parts=3)
    words, z, topic_word = drawn.words, drawn.z, drawn.topic_word
    assert len(checked) == 3 * 4  # sweeps 2-5 of every part
    expected = np.zeros_like(topic_word)
    np.add.at(expected, (z, words), 1)
    np.testing.assert_array_equal(topic_word, expected)


def test_vector_prior_equal_to_the_symmetric_one_samples_the_same(monkeypatch):
    """``alpha`` given as the per-topic vector alpha / K makes exactly the
    draws of the total alpha, with and without the word lists."""
    X, _ = make_bars_corpus(n_docs=80, doc_length=25, random_state=9)
    K = 40
    for lists_from in (gibbs_start.LISTS_FROM, 0.0):
        monkeypatch.setattr(gibbs_start, "LISTS_FROM", lists_from)
        runs = [
            gibbs_sample(X, K, alpha, 0.1, 4, np.random.default_rng(2), parts=2).topic_word
            for alpha in (8.0, np.full(K, 8.0 / K))
        ]
        np.testing.assert_array_equal(runs[0], runs[1])
