"""The collapsed-LDA math of the Gibbs start (lsdask.models.collapsed) and the
sampler's learned prior and stopping rule (lsdask.learn.gibbs_start).

References are written out densely here: every document and topic with
``math.lgamma`` / scipy's digamma, Minka's fixed point on the full count matrix,
and the q(pi_d) statistics through ``expected_log_pi_sums``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma, gammaln

import lsdask
from lsdask import config
from lsdask.learn import gibbs_start
from lsdask.learn.gibbs_start import gibbs_sample
from lsdask.models.collapsed import (
    DocTopicCounts,
    doc_topic_evidence,
    fit_alpha_to_doc_counts,
    joint_log_likelihood,
    posterior_prior_stats,
    word_evidence,
)
from lsdask.models.dirichlet_prior import (
    allocation_at,
    expected_log_pi_sums,
    fit_asymmetric_alpha,
)


def polya_counts(rng: np.random.Generator, D: int, alpha: np.ndarray, lengths=(5, 60)):
    """Document-topic counts drawn from Dirichlet-multinomials with prior ``alpha``."""
    n = rng.integers(*lengths, size=D)
    pi = rng.dirichlet(alpha, size=D)
    return np.stack([rng.multinomial(n[d], pi[d]) for d in range(D)])


def dense_evidence(ndk: np.ndarray, a: np.ndarray) -> float:
    total = 0.0
    A = float(a.sum())
    for row in ndk:
        total += math.lgamma(A) - math.lgamma(row.sum() + A)
        total += sum(math.lgamma(n + ak) - math.lgamma(ak) for n, ak in zip(row, a, strict=True))
    return total


def dense_fixed_point_step(ndk: np.ndarray, a: np.ndarray) -> np.ndarray:
    num = (digamma(ndk + a) - digamma(a)).sum(axis=0)
    den = (digamma(ndk.sum(axis=1) + a.sum()) - digamma(a.sum())).sum()
    return a * num / den


@pytest.mark.parametrize("sparse", [False, True])
def test_evidence_equals_the_dense_sum(sparse):
    rng = np.random.default_rng(0)
    a = rng.uniform(0.05, 2.0, size=7)
    ndk = polya_counts(rng, 40, a)
    ndk[3] = 0  # an empty document
    counts = DocTopicCounts.of(sp.csr_matrix(ndk) if sparse else ndk)
    assert counts.n_docs == 40 and counts.n_topics == 7
    assert doc_topic_evidence(counts, a) == pytest.approx(dense_evidence(ndk, a), rel=1e-12)


def test_one_fixed_point_step_equals_minkas_update_on_the_full_matrix():
    rng = np.random.default_rng(1)
    a = rng.uniform(0.1, 1.0, size=5)
    ndk = polya_counts(rng, 30, a)
    got = fit_alpha_to_doc_counts(DocTopicCounts.of(ndk), a, max_iters=1, floor=1e-12)
    np.testing.assert_allclose(got, dense_fixed_point_step(ndk, a), rtol=1e-12)


def test_fixed_point_raises_the_evidence_every_step_and_reaches_its_maximum():
    rng = np.random.default_rng(2)
    a0 = np.full(6, 1.0)
    ndk = polya_counts(rng, 60, rng.uniform(0.05, 0.8, size=6))
    counts = DocTopicCounts.of(ndk)
    values, a = [doc_topic_evidence(counts, a0)], a0
    for _ in range(50):
        a = fit_alpha_to_doc_counts(counts, a, max_iters=1, floor=1e-12)
        values.append(doc_topic_evidence(counts, a))
    assert np.all(np.diff(values) >= -1e-9)
    assert values[-1] > values[0] + 1.0
    best = fit_alpha_to_doc_counts(counts, a0, max_iters=5000, tol=1e-12, floor=1e-12)
    h = 1e-6
    for k in range(6):  # the gradient of the evidence vanishes at the fit
        up, down = best.copy(), best.copy()
        up[k] += h * best[k]
        down[k] -= h * best[k]
        grad = (doc_topic_evidence(counts, up) - doc_topic_evidence(counts, down)) / (
            2 * h * best[k]
        )
        assert abs(grad) < 1e-4


def test_fit_recovers_an_asymmetric_prior_from_many_documents():
    rng = np.random.default_rng(3)
    truth = np.array([0.05, 0.1, 0.3, 0.6, 1.2])
    ndk = polya_counts(rng, 4000, truth, lengths=(20, 100))
    got = fit_alpha_to_doc_counts(DocTopicCounts.of(ndk), np.full(5, 1.0), tol=1e-10)
    np.testing.assert_allclose(got, truth, rtol=0.12)


def test_fit_keeps_the_start_where_the_evidence_would_not_rise_and_honours_the_floor():
    rng = np.random.default_rng(4)
    ndk = polya_counts(rng, 50, np.full(4, 0.5))
    counts = DocTopicCounts.of(ndk)
    best = fit_alpha_to_doc_counts(counts, np.full(4, 1.0), tol=1e-13, max_iters=10_000)
    again = fit_alpha_to_doc_counts(counts, best, tol=1e-13)
    np.testing.assert_allclose(again, best, rtol=1e-6)  # the maximizer stays where it is
    ndk[:, 2] = 0  # a topic no document uses goes to the floor
    floored = fit_alpha_to_doc_counts(DocTopicCounts.of(ndk), np.full(4, 1.0), floor=1e-3)
    assert floored[2] == pytest.approx(1e-3) and floored.min() >= 1e-3
    with pytest.raises(ValueError, match="alpha0 must hold 4 positive"):
        fit_alpha_to_doc_counts(counts, np.ones(3))


def test_posterior_statistics_equal_those_of_the_dense_posteriors():
    rng = np.random.default_rng(5)
    a = rng.uniform(0.01, 0.5, size=8)
    ndk = polya_counts(rng, 50, a)
    theta = ndk + a
    S, W, Cdir = posterior_prior_stats(DocTopicCounts.of(ndk), a)
    S_ref = expected_log_pi_sums(theta)
    elog = digamma(theta) - digamma(theta.sum(axis=1, keepdims=True))
    W_ref = float(((ndk - theta) * elog).sum())
    C_ref = float((gammaln(theta.sum(axis=1)) - gammaln(theta).sum(axis=1)).sum())
    np.testing.assert_allclose(S, S_ref, rtol=1e-12)
    assert W == pytest.approx(W_ref, rel=1e-12)
    assert Cdir == pytest.approx(C_ref, rel=1e-12)
    # the allocation term of these posteriors at their own prior: sum_d c(a) - c(theta_d)
    direct = sum(
        math.lgamma(a.sum()) - sum(math.lgamma(x) for x in a)
        - math.lgamma(t.sum()) + sum(math.lgamma(x) for x in t)
        for t in theta
    )  # fmt: skip
    assert allocation_at(a, S, W, Cdir, 50) == pytest.approx(direct, rel=1e-10)


def test_joint_log_likelihood_equals_the_dense_sum():
    rng = np.random.default_rng(6)
    V, K, eta = 12, 4, 0.07
    nwk = rng.integers(0, 4, size=(V, K)) * (rng.random((V, K)) < 0.5)
    ref = 0.0
    for k in range(K):
        ref += math.lgamma(V * eta) - math.lgamma(nwk[:, k].sum() + V * eta)
        ref += sum(math.lgamma(n + eta) - math.lgamma(eta) for n in nwk[:, k])
    assert word_evidence(nwk, eta) == pytest.approx(ref, rel=1e-12)
    a = rng.uniform(0.1, 1.0, size=K)
    ndk = polya_counts(rng, 9, a)
    joint = joint_log_likelihood(nwk, DocTopicCounts.of(ndk), a, eta)
    assert joint == pytest.approx(ref + dense_evidence(ndk, a), rel=1e-12)


def corpus(rng: np.random.Generator, D: int = 60, V: int = 30, K: int = 3) -> sp.csr_matrix:
    topics = rng.dirichlet(np.full(V, 0.1), size=K)
    pi = rng.dirichlet(np.full(K, 0.3), size=D)
    return sp.csr_matrix(np.stack([rng.multinomial(40, p @ topics) for p in pi]).astype(float))


def test_the_sampler_refits_its_prior_to_its_own_document_counts():
    """With parts=1 the sampler is a pure function of its seed, so a run of 20 sweeps
    is the first 20 sweeps of a run of 30; the 30-sweep run's prior is the fixed point
    from the 20-sweep one's, on its own final document-topic counts."""
    X = corpus(np.random.default_rng(7))
    start = np.full(3, 0.1)
    kw = dict(parts=1, learn_alpha=True, alpha_every=10, alpha_from=20)
    at20 = gibbs_sample(X, 3, start, 0.1, 20, np.random.default_rng(8), **kw)
    at30 = gibbs_sample(X, 3, start, 0.1, 30, np.random.default_rng(8), **kw)
    assert not np.allclose(at20.alpha, start)
    expected = fit_alpha_to_doc_counts(DocTopicCounts.of(at30.doc_topic), at20.alpha)
    np.testing.assert_array_equal(at30.alpha, expected)
    fixed = gibbs_sample(X, 3, start, 0.1, 30, np.random.default_rng(8), parts=1)
    np.testing.assert_array_equal(fixed.alpha, start)
    doc_of = np.repeat(np.arange(X.shape[0]), np.diff(gibbs_start.tokens_of(X)[0]))
    rebuilt = np.zeros_like(at30.doc_topic)
    np.add.at(rebuilt, (doc_of, at30.z), 1)
    np.testing.assert_array_equal(at30.doc_topic, rebuilt)


def test_the_stopping_rule_compares_windows_of_the_log_likelihood():
    rule = gibbs_start._Stopping(0.01)
    n = gibbs_start.CHECK_WINDOW
    rising = [-9.0 + 0.1 * i for i in range(2 * n)]
    assert not any(rule.converged(v) for v in rising)  # windows 0.5 apart
    flat = gibbs_start._Stopping(0.01)
    assert [flat.converged(-8.0 + 0.001 * i) for i in range(2 * n)][-1]
    never = gibbs_start._Stopping(0.0)
    assert not any(never.converged(-8.0) for _ in range(50))


def test_the_sampler_stops_when_converged_and_runs_every_sweep_without_a_tolerance():
    X = corpus(np.random.default_rng(9))
    rng = lambda: np.random.default_rng(10)  # noqa: E731
    first_check = 2 * gibbs_start.CHECK_WINDOW * gibbs_start.CHECK_EVERY
    stopped = gibbs_sample(X, 3, 0.5, 0.1, 1000, rng(), parts=1, tol=1e9)
    assert stopped.sweeps == first_check
    whole = gibbs_sample(X, 3, 0.5, 0.1, 130, rng(), parts=1, tol=0.0)
    assert whole.sweeps == 130
    # stopping changes when the run ends, not its draws
    np.testing.assert_array_equal(
        gibbs_sample(X, 3, 0.5, 0.1, first_check, rng(), parts=1).z, stopped.z
    )


def test_lda_with_a_learned_prior_starts_from_the_sampled_documents():
    """LDA(alpha="auto")'s Gibbs start learns the prior from 0.1 per topic, and its
    statistics carry the sampled documents' q(pi_d), so that the first global step
    fits alpha to them as to a lap's."""
    X = corpus(np.random.default_rng(11))
    est = lsdask.LDA(3, alpha="auto", gibbs_sweeps=40, random_state=0, client="sync")
    model = est._model(X.shape[1])
    stats = est._initial_stats(model, X, np.random.default_rng(0))
    drawn = gibbs_sample(
        X, 3, np.full(3, config.GIBBS_LEARNED_ALPHA_START), model.eta, 40,
        np.random.default_rng(0), learn_alpha=True, tol=config.GIBBS_TOL_LEARNED,
    )  # fmt: skip
    S, W, Cdir = posterior_prior_stats(DocTopicCounts.of(drawn.doc_topic), drawn.alpha)
    # the topics: the mean of the chain's recent samples (RecentMean)
    np.testing.assert_array_equal(stats.array("words"), drawn.topic_word_mean)
    np.testing.assert_allclose(stats.array("S"), S, rtol=1e-12)
    assert (stats.array("W")[0], stats.array("Cdir")[0]) == (W, Cdir)
    glob = model.global_step(stats)
    expected = fit_asymmetric_alpha(S, X.shape[0], model.prior_vector())
    np.testing.assert_allclose(glob.alpha, expected, rtol=1e-12)
    assert not np.allclose(glob.alpha, model.prior_vector())
    fixed = lsdask.LDA(3, alpha=0.5, gibbs_sweeps=40, random_state=0, client="sync")
    plain = fixed._initial_stats(fixed._model(X.shape[1]), X, np.random.default_rng(0))
    assert "S" not in plain.keys()


def test_the_start_stops_early_by_default_only_where_the_prior_is_learned():
    learned, fixed = lsdask.LDA(3, alpha="auto"), lsdask.LDA(3, alpha=0.5)
    assert learned._gibbs_tol(learned._model(5)) == config.GIBBS_TOL_LEARNED
    assert fixed._gibbs_tol(fixed._model(5)) == 0.0
    chosen = lsdask.LDA(3, alpha=0.5, gibbs_tol=0.01)
    assert chosen._gibbs_tol(chosen._model(5)) == 0.01
    with pytest.raises(ValueError, match=r"gibbs_tol must be a finite number >= 0; got -1"):
        lsdask.LDA(3, gibbs_tol=-1).check_params()
