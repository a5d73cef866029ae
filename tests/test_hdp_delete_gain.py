"""The cheap parts of the HDP's move judgement (lsdask.models.hdp_delete_gain and
the pieces it uses).

A delete candidate's gain computed from what it changes equals the gain of the
proposal built whole, candidate by candidate over a judged lap (rejected and
accepted ones); the topics' terms by topic equal the Dirichlet terms of the
posterior and change as a plain recomputation does; the E[log phi] of a subset
of topics equals the globals' own columns; the topic cosines from the stored
entries equal those of the dense topics.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import gammaln

import lsdask
from lsdask.models import hdp_moves
from lsdask.models.dirichlet_logs import DirichletPosterior
from lsdask.models.hdp_delete_gain import TopicTerms, words_delta
from lsdask.models.hdp_deletes import judge_deletes
from lsdask.models.hdp_move_stats import MoveJudge
from lsdask.models.hdp_moves import MoveSettings, topic_cosines
from lsdask.models.stats import SparseBlock, sum_stats
from lsdask.synthetic import make_bars_corpus


def _g(words: np.ndarray, eta: float) -> float:
    """``sum_k g(w_k)`` written out (the module docstring's formula)."""
    V = words.shape[1]
    return float(
        np.sum(gammaln(eta + words) - gammaln(eta))
        - np.sum(gammaln(V * eta + words.sum(axis=1)) - gammaln(V * eta))
    )


def _sparse_words(rng, K, V, density=0.2):
    return rng.gamma(0.5, 4.0, size=(K, V)) * (rng.random((K, V)) < density)


def test_topic_terms_are_the_dirichlet_terms_of_the_posterior():
    rng = np.random.default_rng(0)
    words = _sparse_words(rng, 7, 40)
    terms = TopicTerms.of(words, 0.1)
    post = DirichletPosterior.from_counts(words, 0.1)
    assert terms.terms.sum() == pytest.approx(post.elbo_terms(words), rel=1e-11)
    assert terms.terms.sum() == pytest.approx(_g(words, 0.1), rel=1e-12)
    each = [terms.term(k) for k in range(words.shape[0])]
    np.testing.assert_array_equal(each, terms.terms)  # one topic's alone: the same bits


def test_topic_terms_change_equals_a_recomputation():
    rng = np.random.default_rng(1)
    K, V, eta, gone = 8, 50, 0.05, 3
    words = _sparse_words(rng, K, V)
    # a change that moves tokens between the other topics and adds new entries
    delta = _sparse_words(rng, K, V, density=0.1) - 0.5 * words * (rng.random((K, V)) < 0.3)
    after = np.delete(words + delta, gone, axis=0)
    got = TopicTerms.of(words, eta).change(gone, sp.csr_matrix(delta))
    assert got == pytest.approx(_g(after, eta) - _g(words, eta), rel=1e-10)


def test_words_delta_maps_each_part_to_the_kept_topics():
    rng = np.random.default_rng(2)
    K, V = 6, 30
    a, b = _sparse_words(rng, K, V), _sparse_words(rng, K - 1, V)
    keep = [0, 2, 3, 5]  # topics 1 and 4 gone (the parts hold none of them here)
    a[[1, 4]] = 0.0
    block = SparseBlock(*np.nonzero(a), a[np.nonzero(a)], (K, V))
    b_topics = [0, 2, 3, 4, 5]
    b[3] = 0.0  # b's row 3 is topic 4
    got = words_delta([(block, list(range(K)), 1.0), (b, b_topics, -1.0)], keep, V).toarray()
    want = a[keep] - b[[0, 1, 2, 4]]
    np.testing.assert_allclose(got, want, rtol=1e-15)


def test_a_subset_of_the_logs_is_the_globals_own_columns():
    rng = np.random.default_rng(3)
    words = _sparse_words(rng, 9, 60)
    logs = DirichletPosterior.from_counts(words, 0.1).logs
    keep = [0, 2, 3, 7, 8]
    sub = logs.subset(keep)
    np.testing.assert_array_equal(sub.dense(), logs.dense()[:, keep])
    assert sub.shape == (60, 5)


def test_topic_cosines_from_the_stored_entries_equal_the_dense_ones():
    rng = np.random.default_rng(4)
    words = _sparse_words(rng, 10, 80)
    post = DirichletPosterior.from_counts(words, 0.1)
    topics = post.topics
    unit = topics / np.linalg.norm(topics, axis=1, keepdims=True)
    np.testing.assert_allclose(topic_cosines(post.concentrations), unit @ unit.T, rtol=1e-12)


def test_topic_cosines_in_column_blocks_equal_one_block(monkeypatch):
    rng = np.random.default_rng(5)
    post = DirichletPosterior.from_counts(_sparse_words(rng, 12, 97), 0.05)
    whole = topic_cosines(post.concentrations)
    monkeypatch.setattr(hdp_moves, "COSINE_BLOCK", 12 * 10)  # 10 columns a block, the last 7
    topics = post.topics
    unit = topics / np.linalg.norm(topics, axis=1, keepdims=True)
    blocks = topic_cosines(post.concentrations)
    np.testing.assert_allclose(blocks, whole, rtol=1e-13)
    np.testing.assert_allclose(blocks, unit @ unit.T, rtol=1e-12)


@pytest.fixture(scope="module")
def judged():
    """A lap of an HDP with 24 topics on the bars (10 true) visited with a plan of
    delete candidates, and the globals of its last global step."""
    X, _ = make_bars_corpus(800, doc_topic_prior=0.3, random_state=3)
    est = lsdask.HDP(24, moves=(), n_laps=3, sparsity=3, client="sync", random_state=1,
                     batch_size=200, tol=0.0, init="kmeans++").fit(X)  # fmt: skip
    moves = MoveSettings(delete=True, merge=False, max_deletes=20, delete_work=1.0)
    model = dataclasses.replace(est.model_, moves=moves)
    glob = est.posterior_
    parts = np.array_split(np.arange(X.shape[0]), 4)
    first = sum_stats(model.local_step(X[i], glob, 3) for i in parts)
    planned = model.plan_moves(first, glob, lap=2)
    entries = [model.local_step(X[i], planned, 3) for i in parts]
    total = sum_stats(entries)
    stepped = model.global_step_from(total, model.carry(planned))
    return model, total, stepped, entries, X


def test_the_quick_gain_of_each_delete_equals_the_whole_proposals(judged):
    model, total, stepped, entries, _ = judged
    current = model.elbo(total, stepped)

    def judge(quick):
        return judge_deletes(MoveJudge(model, stepped, 3), total, entries, stepped.plan,
                             current, np.inf, quick=quick)  # fmt: skip

    fast, whole = judge(True), judge(False)
    assert len(whole.records) >= 6
    accepted = [ok for _, _, ok in whole.records]
    assert any(accepted) and not all(accepted), whole.records
    assert [(j, ok) for j, _, ok in fast.records] == [(j, ok) for j, _, ok in whole.records]
    for (_, got, _), (_, want, _) in zip(fast.records, whole.records, strict=True):
        assert got == pytest.approx(want, rel=1e-7, abs=1e-9 * abs(current))
    assert fast.deleted == whole.deleted
    assert fast.objective == whole.objective
    assert fast.stats.allclose(whole.stats, rtol=0.0, atol=0.0)


def test_a_rerun_in_blocks_sums_to_the_whole_rerun(judged, monkeypatch):
    from lsdask.models import hdp_move_stats

    model, _, stepped, _, X = judged
    monkeypatch.setattr(hdp_move_stats, "usable_threads", lambda: 3)
    judge = MoveJudge(model, stepped, 3)
    keep = [t for t in range(model.n_components) if t not in (2, 5)]
    rows = X[:400]
    whole, _ = judge.rerun(rows, keep, stepped.plan)
    blocks = judge.rerun_in_blocks(rows, keep, stepped.plan)
    assert len(blocks) == 3
    assert sum(b.array("n_docs")[0] for b in blocks) == 400
    summed = sum_stats(blocks)
    for name in ("words", "H", "N", "S", "W", "Cdir"):
        np.testing.assert_allclose(summed.array(name), whole.array(name), rtol=1e-12, atol=1e-12)
