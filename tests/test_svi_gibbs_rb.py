"""SVI-Gibbs's Rao-Blackwellised N-hat: each kept token's conditional in quanta."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from lsdask.kernels.svi_gibbs import (
    conditional_pieces,
    sample_documents,
    sample_documents_rb,
    token_quanta,
    token_quanta_many,
    uniforms,
)
from lsdask.models.sparse_topics import RB_QUANTA, SparseTopics, sample_counts
from tests import naive
from tests.test_svi_gibbs_kernel import _topics


def _doc_state(K: int):
    ndk = np.zeros(K, np.int64)
    active = np.array([5, 2, 9, 0])
    ndk[active] = [3, 1, 4, 2]
    return ndk, active


@pytest.mark.parametrize("word", [0, 3, 7])
def test_expected_contribution_is_the_conditional(rng, word) -> None:
    """The word and document pieces, plus the smoothing bucket's total spread by
    its own weights (what the one drawn topic gets on average), are Eq. 9's
    normalised conditional, computed densely over all K topics."""
    K, V = 12, 9
    view = _topics(rng, K, V).view(np.arange(V), rng.gamma(1.0, 0.2, K) + 0.01, step=1)
    ndk, active = _doc_state(K)
    topics = np.empty(V + K, np.int64)
    weights = np.empty(V + K)
    n = conditional_pieces(
        word, ndk, active, active.size, view.w_indptr, view.w_topics, view.w_excess,
        view.smooth, view.alpha, topics, weights,
    )  # fmt: skip
    smooth_total = view.cum_smooth[-1]
    total = weights[:n].sum() + smooth_total
    expected = np.bincount(topics[:n], weights[:n], minlength=K) / total
    expected += (smooth_total / total) * (view.alpha * view.smooth) / smooth_total
    reference = naive.eq9_weights(view, word, ndk)
    np.testing.assert_allclose(expected, reference / reference.sum(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("spread", [False, True])
@pytest.mark.parametrize("word", [0, 4])
def test_rounding_is_whole_unbiased_and_bounded(rng, word, spread) -> None:
    """Over 20,000 independent roundings of one token's conditional: every token
    adds exactly Q quanta to at most Q topics, and the mean share of each topic
    is its probability within 5 standard errors."""
    K, V, n = 12, 9, 20_000
    view = _topics(rng, K, V).view(np.arange(V), rng.gamma(1.0, 0.2, K) + 0.01, step=1)
    ndk, active = _doc_state(K)
    got = token_quanta_many(
        np.uint64(17), n, RB_QUANTA, spread, word, ndk, active, view.w_indptr, view.w_topics,
        view.w_excess, view.smooth, view.alpha, view.cum_smooth,
    )  # fmt: skip
    assert got.dtype == np.int64 and (got >= 0).all()
    assert (got.sum(axis=1) == RB_QUANTA).all()
    assert ((got > 0).sum(axis=1) <= RB_QUANTA).all()
    p = naive.eq9_weights(view, word, ndk)
    p = p / p.sum()
    share = got / RB_QUANTA
    se = share.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(share.mean(axis=0) - p) <= 5 * se + 1e-12), (share.mean(axis=0), p)


def test_each_piece_gets_floor_or_one_more_quanta() -> None:
    """Pieces on distinct topics: with the rest's probability (here the
    smoothing bucket's 0.05) the token goes whole to the rest's topic, as a
    draw would; otherwise a piece of share ``w`` of the exact part gets
    ``floor(w Q)`` or ``floor(w Q) + 1`` quanta. On average ``p_k Q``."""
    weights = np.array([0.3, 0.5, 0.15])
    cum_smooth = np.cumsum([0.0, 0.0, 0.0, 0.05])
    Q, n = RB_QUANTA, 4000
    seen = np.zeros((n, 4), np.int64)
    topics = np.empty(Q + 1, np.int64)
    quanta = np.empty(Q + 1, np.int64)
    us = uniforms(np.uint64(9), 2 * n)
    for r in range(n):
        m = token_quanta(
            us[2 * r], us[2 * r + 1], Q, 3, 3, np.arange(3), weights, cum_smooth, topics, quanta
        )
        seen[r, topics[:m]] += quanta[:m]
    assert (seen.sum(axis=1) == Q).all()
    rest = seen[:, 3] > 0
    assert (seen[rest, 3] == Q).all()
    share = weights / weights.sum() * Q
    exact = seen[~rest, :3]
    assert ((exact == np.floor(share)) | (exact == np.floor(share) + 1)).all()
    assert abs(rest.mean() - 0.05) <= 5 * np.sqrt(0.05 * 0.95 / n)
    want = np.append(weights, 0.05) * Q
    se = seen.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(seen.mean(axis=0) - want) <= 5 * se + 1e-12), seen.mean(axis=0)


@pytest.mark.parametrize("spread", [False, True])
def test_mean_rb_counts_match_the_enumerated_posterior_with_less_variance(rng, spread) -> None:
    """The 3-token, K=3 document of test_svi_gibbs_kernel: the mean RB N-hat over
    20,000 chains matches the enumerated q*(z_d) within 5 SE, and its variance
    is below the draws' of the very same chains."""
    K, V = 3, 2
    state = SparseTopics.at_prior(K, V, 0.5)
    state.step(0.5, sp.csr_matrix(np.array([[4.0, 0.0, 1.0], [0.5, 3.0, 2.0]])))
    alpha = np.array([0.3, 0.2, 0.6])
    view = state.view(np.arange(V), alpha, step=4)
    doc_words = np.array([0, 1, 0])
    phi_w = np.array([view.dense_weights(w) for w in doc_words])
    exact = naive.enumerated_doc_counts(alpha, phi_w)
    expected = np.zeros((V, K))
    for i, w in enumerate(doc_words):
        expected[w] += exact[i]
    n_docs, burnin = 20_000, 8
    args = (
        np.arange(n_docs + 1, dtype=np.int64) * 2,
        np.tile(np.array([0, 1], np.int64), n_docs),
        np.tile(np.array([2, 1], np.int64), n_docs),
        np.arange(n_docs, dtype=np.int64),
        np.uint64(11),
        np.uint64(4),
        burnin,
        1,
    )
    tables = (view.w_indptr, view.w_topics, view.w_excess, view.smooth, view.alpha)
    keys, vals, _, _ = sample_documents_rb(*args, RB_QUANTA, spread, *tables, view.cum_smooth)
    # keys are merged per document: document d's keys follow d - 1's, in order
    doc = np.cumsum(np.r_[1, np.diff(keys) <= 0]) - 1
    assert doc[-1] == n_docs - 1
    rb = np.zeros((n_docs, V, K))
    np.add.at(rb, (doc, keys // K, keys % K), vals / RB_QUANTA)
    assert (rb.sum(axis=(1, 2)) == 3).all()
    out_w = np.empty(3 * n_docs, np.int64)
    out_z = np.empty(3 * n_docs, np.int64)
    sample_documents(*args, *tables, view.cum_smooth, out_w, out_z)
    draws = np.zeros((n_docs, V, K))
    np.add.at(draws, (np.repeat(np.arange(n_docs), 3), out_w, out_z), 1.0)
    for per_doc in (rb, draws):
        se = per_doc.std(axis=0) / np.sqrt(n_docs)
        assert np.all(np.abs(per_doc.mean(axis=0) - expected) <= 5 * se + 1e-12)
    assert np.all(rb.var(axis=0) < draws.var(axis=0)), (rb.var(axis=0), draws.var(axis=0))


@pytest.mark.parametrize("estimator", ["rao-blackwell", "rao-blackwell-doc"])
def test_rb_counts_do_not_depend_on_how_documents_are_split(rng, estimator) -> None:
    K, V = 6, 20
    state = _topics(rng, K, V)
    X = sp.csr_matrix(rng.poisson(0.8, size=(9, V)).astype(float))
    ids = np.arange(100, 109)
    view = state.view(np.arange(V), np.full(K, 0.1), step=7)

    def counts(rows, doc_ids):
        return sample_counts(rows, doc_ids, view, 2, 3, seed=5, estimator=estimator)[0]

    whole = counts(X, ids)
    parts = counts(X[:4], ids[:4]) + counts(X[4:], ids[4:])
    np.testing.assert_array_equal(whole.keys, parts.keys)
    np.testing.assert_array_equal(whole.counts, parts.counts)
    assert whole.counts.dtype == np.int64
    assert whole.total == 3 * RB_QUANTA * X.sum()


def test_an_unknown_estimator_is_refused(rng) -> None:
    view = SparseTopics.at_prior(3, 4, 0.1).view(np.arange(4), np.full(3, 0.1), step=1)
    X = sp.csr_matrix(np.array([[1.0, 0.0, 2.0, 0.0]]))
    with pytest.raises(ValueError, match="estimator must be one of"):
        sample_counts(X, np.array([0]), view, 1, 1, seed=0, estimator="mean")
    with pytest.raises(ValueError, match="quanta must be a whole number"):
        sample_counts(X, np.array([0]), view, 1, 1, seed=0, estimator="rao-blackwell", quanta=0)


def _fit_data(rng, n_docs=80, V=30):
    return sp.csr_matrix(rng.poisson(0.6, size=(n_docs, V)).astype(float))


def test_lda_refuses_an_unknown_estimator(rng) -> None:
    import lsdask

    X = _fit_data(rng)
    with pytest.raises(ValueError, match="gibbs_estimator must be one of"):
        lsdask.LDA(3, algorithm="svi-gibbs", gibbs_estimator="mean", client="sync").fit(X)


def rewrite_checkpoint(folder, edit) -> Path:
    """Rewrite the svi-gibbs checkpoint in ``folder`` after ``edit(arrays, meta)``
    changed its arrays and its JSON member in place (an old or damaged file)."""
    import json

    from lsdask.persist.svi_gibbs import checkpoint_path

    path = checkpoint_path(folder)
    with np.load(path) as f:
        arrays = dict(f)
    meta = json.loads(arrays["meta"].tobytes().decode())
    edit(arrays, meta)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(path.with_suffix(".tmp.npz"), **arrays)
    path.with_suffix(".tmp.npz").replace(path)
    return path


def resumes_as_before_the_choice(X, K, kw, setting, asked, tmp_path) -> None:
    """A checkpoint written by ``LDA(K, **kw)`` before ``setting`` existed (the
    setting dropped from its meta) resumes as ``kw[setting]`` (the value the old
    code used), equal to an uninterrupted fit, and is refused naming the
    setting when ``asked`` for another value."""
    import lsdask

    kw = {k: v for k, v in kw.items() if k != "n_laps"}
    straight = lsdask.LDA(K, n_laps=3, **kw).fit(X)
    ck = tmp_path / "ck"
    lsdask.LDA(K, n_laps=2, checkpoint_dir=str(ck), **kw).fit(X)
    rewrite_checkpoint(ck, lambda arrays, meta: meta["settings"].pop(setting))
    with pytest.raises(ValueError, match=f"{setting}: checkpoint {kw[setting]!r}, asked {asked!r}"):
        lsdask.LDA(K, n_laps=1, checkpoint_dir=str(ck), resume=True,
                   **{**kw, setting: asked}).fit(X)  # fmt: skip
    again = lsdask.LDA(K, n_laps=1, checkpoint_dir=str(ck), resume=True, **kw).fit(X)
    np.testing.assert_array_equal(straight.components_, again.components_)


def test_a_checkpoint_from_before_the_choice_resumes_as_draws(rng, tmp_path) -> None:
    """Checkpoints hold no N-hat, only the topics; one written before
    ``gibbs_estimator`` existed was made by the draws, so it resumes with
    ``"draws"`` and is refused (naming the setting) with the RB estimator."""
    kw = dict(
        algorithm="svi-gibbs", alpha=1.0, minibatch_size=20, gibbs_burnin=1, gibbs_samples=1,
        random_state=0, client="sync", gibbs_estimator="draws",
    )  # fmt: skip
    resumes_as_before_the_choice(
        _fit_data(rng), 3, kw, "gibbs_estimator", "rao-blackwell", tmp_path
    )
