"""SVI-Gibbs's lazy sparse update (Eq. 19) against the dense Eq. 11."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma

from lsdask.models.sparse_topics import WEIGHTS, SparseTopics, TopicWordCounts


@pytest.mark.parametrize("reset_below", [1e-3, 1e-100])
def test_lazy_update_equals_dense_eq11(rng, reset_below) -> None:
    K, V, eta, D, size = 5, 40, 0.2, 1000, 10
    delay, kappa = 1.0, 0.6
    state = SparseTopics.at_prior(K, V, eta)
    lam = np.full((K, V), eta)
    for t in range(1, 401):
        rho = (delay + t) ** -kappa
        # a minibatch touches a few words: N-hat (S=3 kept sweeps, so thirds)
        words = rng.choice(V, size=6, replace=False)
        nhat = np.zeros((V, K))
        nhat[words] = rng.poisson(1.0, size=(6, K)) / 3.0
        lam = (1 - rho) * lam + rho * (eta + (D / size) * nhat.T)  # Eq. 11
        state.step(rho, sp.csr_matrix(nhat * (D / size)), reset_below=reset_below)
        if t % 25 == 0 or t < 5:
            np.testing.assert_allclose(state.lam(), lam, rtol=1e-9, atol=0)
            np.testing.assert_allclose(state.topic_totals(), (lam - eta).sum(axis=1), rtol=1e-9)
    np.testing.assert_allclose(state.lam(), lam, rtol=1e-9, atol=0)
    if reset_below == 1e-3:
        assert state.n_resets >= 3
    else:
        assert state.n_resets == 0
    # entries only where some minibatch counted: the rest stays at eta exactly
    assert np.array_equal(state.lam() == eta, lam == eta)


@pytest.mark.parametrize("reset_below", [1e-3, 1e-100])
def test_pruned_updates_equal_dense_eq11_with_small_entries_zeroed(rng, reset_below) -> None:
    """Every 16 steps the entries of Ñ below ``below`` are dropped: the same as the
    dense Eq. 11 with those entries set back to eta, resets included."""
    K, V, eta, D, size, below = 5, 40, 0.2, 1000, 10, 0.02
    state = SparseTopics.at_prior(K, V, eta)
    n_tilde = np.zeros((K, V))
    dropped = 0
    for t in range(1, 401):
        rho = (1.0 + t) ** -0.6
        words = rng.choice(V, size=6, replace=False)
        nhat = np.zeros((V, K))
        nhat[words] = rng.poisson(0.3, size=(6, K)) / 3.0
        n_tilde = (1 - rho) * n_tilde + rho * (D / size) * nhat.T  # Eq. 11 less eta
        state.step(rho, sp.csr_matrix(nhat * (D / size)), reset_below=reset_below)
        if t % 16 == 0:
            small = (n_tilde > 0) & (n_tilde < below)
            n_tilde[small] = 0.0
            assert state.prune(below) == small.sum()
            dropped += small.sum()
            np.testing.assert_allclose(state.lam(), eta + n_tilde, rtol=1e-9, atol=0)
            np.testing.assert_allclose(state.topic_totals(), n_tilde.sum(axis=1), rtol=1e-9)
            assert state.n_stored == (n_tilde > 0).sum()
    assert dropped > 20  # the run did drop entries, and kept others
    assert state.n_stored > 0
    assert state.prune(0.0) == 0


def test_an_update_touches_only_the_minibatchs_words(rng) -> None:
    K, V = 4, 30
    state = SparseTopics.at_prior(K, V, 0.1)
    state.step(0.5, sp.csr_matrix(np.eye(V, K) * 3.0))
    before = state.scaled.toarray().copy()
    nhat = np.zeros((V, K))
    nhat[[2, 7]] = 1.0
    state.step(0.3, sp.csr_matrix(nhat))
    after = state.scaled.toarray()
    untouched = np.ones(V, bool)
    untouched[[2, 7]] = False
    assert np.array_equal(after[untouched], before[untouched])


def test_rho_of_one_is_refused() -> None:
    state = SparseTopics.at_prior(2, 3, 0.1)
    with pytest.raises(ValueError, match="rho must be in"):
        state.step(1.0, sp.csr_matrix((3, 2)))


def test_counts_add_exactly_in_any_order(rng) -> None:
    K = 7
    parts = [
        TopicWordCounts.from_draws(K, rng.integers(0, 50, 200), rng.integers(0, K, 200))
        for _ in range(5)
    ]
    left = parts[0] + parts[1] + parts[2] + parts[3] + parts[4]
    tree = (parts[3] + parts[1]) + ((parts[4] + parts[0]) + parts[2])
    np.testing.assert_array_equal(left.keys, tree.keys)
    np.testing.assert_array_equal(left.counts, tree.counts)
    assert left.total == 1000
    dense = sum(p.as_matrix(50).toarray() for p in parts)
    np.testing.assert_array_equal(left.as_matrix(50).toarray(), dense)


@pytest.mark.parametrize("weights", WEIGHTS)
def test_view_is_the_weights_computed_densely(rng, weights) -> None:
    """The kernel's view (Z_k, excess, smooth) against the topics' weights computed
    from lambda: exp E[log phi] ("geometric") or E[phi] ("mean")."""
    K, V, eta = 6, 50, 0.3
    state = SparseTopics.at_prior(K, V, eta)
    for t in range(1, 30):
        nhat = np.zeros((V, K))
        words = rng.choice(V - 5, size=8, replace=False)  # words 45-49 never counted
        nhat[words] = rng.poisson(0.7, size=(8, K)) * 20.0
        state.step((2.0 + t) ** -0.7, sp.csr_matrix(nhat), reset_below=1e-2)
    assert state.n_resets >= 1 and state.pi < 1.0  # the scale enters the view
    lam = state.lam()
    if weights == "geometric":
        expected = np.exp(digamma(lam) - digamma(lam.sum(axis=1, keepdims=True)))  # (K, V)
    else:
        expected = lam / lam.sum(axis=1, keepdims=True)
    words = np.array([0, 3, 7, 8, 21, 22, 40, 49])
    alpha = rng.uniform(0.05, 0.5, K)
    view = state.view(words, alpha, step=30, weights=weights)
    for local, w in enumerate(words):
        np.testing.assert_allclose(view.dense_weights(local), expected[:, w], rtol=1e-12)
    # a word with no stored entry weighs f(eta) / Z_k: the smoothing term
    assert (lam[:, 49] == eta).all()
    np.testing.assert_allclose(view.smooth, expected[:, 49], rtol=1e-12)
    np.testing.assert_allclose(view.cum_smooth, np.cumsum(alpha * expected[:, 49]), rtol=1e-12)
    assert view.step == 30 and np.array_equal(view.word_ids, words)
    # only stored entries are listed, each with a positive excess
    stored = state.n_tilde()[:, words] > 0
    assert view.w_topics.size == stored.sum() and (view.w_excess > 0).all()


def test_unknown_weights_are_refused() -> None:
    with pytest.raises(ValueError, match="weights must be one of"):
        SparseTopics.at_prior(3, 4, 0.1).view(np.arange(4), np.full(3, 0.1), 1, "arithmetic")
