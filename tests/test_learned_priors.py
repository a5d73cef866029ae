"""Learned priors of LDA: ``LDA(alpha="auto", eta="auto")``.

The fits themselves (lsdask.models.dirichlet_prior) against scipy and loops, the
allocation term at a new prior against the kernel's statistics, and the estimator:
its alpha equals a direct fixed-point fit on its statistics, no prior update lowers
the objective recomputed from the memo, a known asymmetric prior is recovered,
resume, save/load, the command line, and the messages of bad input.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize_scalar
from scipy.special import digamma

import lsdask
from lsdask.cli import main
from lsdask.engine import SerialExecutor
from lsdask.estimators.params import parse_positive_or_auto
from lsdask.io.corpus import Corpus
from lsdask.io.sources import as_batch_source
from lsdask.learn import MemoizedVI
from lsdask.learn.vb import FullBatchVB
from lsdask.models import SuffStats
from lsdask.models.dirichlet_logs import DirichletPosterior
from lsdask.models.dirichlet_prior import (
    allocation_at,
    fit_asymmetric_alpha,
    fit_symmetric_eta,
    fit_symmetric_eta_to_counts,
    sum_expected_log_phi,
    symmetric_eta_evidence,
    symmetric_eta_objective,
)
from lsdask.models.lda import LDAGlobals, LDAModel
from lsdask.persist import load_lda, save_lda
from lsdask.synthetic import bars_topics, match_topics
from tests import naive
from tests.resume_mid_lap import stopped_and_resumed

#: the prior the corpus is drawn with: a few topics in most documents, others rare
ALPHA_TRUE = np.array([0.36, 0.24, 0.18, 0.12, 0.09, 0.06, 0.045, 0.03, 0.024, 0.015])


def _corpus(n_docs: int, seed: int, alpha: np.ndarray = ALPHA_TRUE, length: int = 60):
    """Bars documents (10 topics over 25 words) drawn from LDA with the prior alpha."""
    rng = np.random.default_rng(seed)
    topics = bars_topics(5)
    theta = rng.dirichlet(alpha, size=n_docs)
    probs = theta @ topics
    counts = rng.multinomial(length, probs / probs.sum(axis=1, keepdims=True))
    X = sp.csr_matrix(counts.astype(np.float64))
    X.sort_indices()
    return X, topics


@pytest.fixture(scope="module")
def bars():
    return _corpus(1500, seed=7)


FIT = dict(sparsity=3, client="sync", random_state=0, batch_size=250, tol=0.0)


@pytest.fixture(scope="module")
def learned(bars):
    X, _ = bars
    return lsdask.LDA(10, alpha="auto", eta="auto", n_laps=12, **FIT).fit(X[:1200])


# --------------------------------------------------------------------------- the math


def test_allocation_at_a_new_prior_equals_the_elbo_term_with_q_fixed(rng):
    """D c_Dir(a') + a' . S + W - Cdir from the kernel's batch statistics equals
    lsparse Eq. 45 at a' with every q(pi_d) fixed, and alloc itself at a' = a."""
    K = 6
    X, _ = _corpus(80, seed=1, alpha=np.full(10, 0.3))
    model = LDAModel(K, X.shape[1], 0.5, 0.1, learn_alpha=True)
    topics = DirichletPosterior.from_counts(rng.gamma(0.3, 10.0, size=(K, X.shape[1])), 0.1)
    a = rng.gamma(1.0, 0.2, size=K) + 1e-3
    pieces, doc_topic, _ = model.doc_topic_step(X, LDAGlobals.of(topics, a), 3)
    S, W, Cdir = pieces["S"], float(pieces["W"][0]), float(pieces["Cdir"][0])
    D = X.shape[0]
    assert allocation_at(a, S, W, Cdir, D) == pytest.approx(pieces["alloc"][0], rel=1e-12)
    for _ in range(3):
        a_new = rng.gamma(1.0, 0.3, size=K) + 1e-3
        expected = naive.lda_alloc_at(doc_topic, a, 0.0, a_new)
        assert allocation_at(a_new, S, W, Cdir, D) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize(
    "K,V,eta_true,tokens", [(5, 50, 0.05, 2000), (20, 300, 0.01, 500), (3, 4, 2.0, 300)]
)
def test_eta_fit_to_counts_maximizes_the_evidence_and_is_a_fixed_point_of_the_coordinate_step(
    K, V, eta_true, tokens
):
    """The eta of ``eta="auto"`` maximizes h(eta) = max_lambda L_data (scipy's bounded
    search agrees), and a coordinate step (fit_symmetric_eta at T from lambda = eta
    + n) does not move it; h is g at that T plus terms without eta, so g's rise of a
    coordinate step never exceeds h's."""
    rng = np.random.default_rng(K)
    phi = rng.dirichlet(np.full(V, eta_true), size=K)
    n = np.vstack([rng.multinomial(tokens, p) for p in phi]) * rng.uniform(0.5, 1.0, (K, V))
    eta = fit_symmetric_eta_to_counts(sp.csr_matrix(n), 0.1)
    best = minimize_scalar(
        lambda u: -symmetric_eta_evidence(float(np.exp(u)), n),
        bounds=(-14.0, 14.0),
        method="bounded",
        options={"xatol": 1e-10},
    )
    assert eta == pytest.approx(float(np.exp(best.x)), rel=1e-6)
    assert symmetric_eta_evidence(eta, n) >= -best.fun - 1e-9 * abs(best.fun)
    assert fit_symmetric_eta(sum_expected_log_phi(eta, n), K, V, eta) == pytest.approx(
        eta, rel=1e-9
    )
    # h(eta) = g(eta; T(eta)) - g(eta0; T(eta)) + h(eta0) at fixed q: a loop reference
    lam = eta + n
    elog = digamma(lam) - digamma(lam.sum(axis=1, keepdims=True))
    kl = sum(
        naive.c_dir(lam[k]) - naive.c_dir(np.full(V, eta)) + float((lam[k] - eta) @ elog[k])
        for k in range(K)
    )
    assert symmetric_eta_evidence(eta, n) == pytest.approx(float((n * elog).sum()) - kl, rel=1e-10)
    T = float(elog.sum())
    assert symmetric_eta_objective(eta, T, K, V) == pytest.approx(
        symmetric_eta_objective(eta, sum_expected_log_phi(eta, n), K, V), rel=1e-12
    )


def test_eta_fit_respects_its_bounds_and_keeps_a_start_it_cannot_improve():
    n = np.array([[30.0, 0.0, 1.0], [0.0, 20.0, 2.0]])
    free = fit_symmetric_eta_to_counts(n, 0.5)
    assert 1e-6 < free < 0.5
    assert fit_symmetric_eta_to_counts(n, 0.5, floor=0.3) == 0.3
    assert fit_symmetric_eta_to_counts(n, free) == free
    # counts as even as a uniform multinomial's: h rises towards eta -> inf, up to the ceiling
    even = np.full((2, 4), 50.0)
    assert fit_symmetric_eta_to_counts(even, 0.1, ceiling=100.0) == 100.0


# ---------------------------------------------------------------------- the estimator


def test_learned_alpha_equals_a_direct_fixed_point_fit_on_the_same_statistics(learned):
    """The fitted alpha_ is Newton's maximizer of f given the final whole-data S,
    from the default symmetric start: Minka's fixed point on the same S agrees."""
    K = 10
    S = learned.stats_.array("S")
    D = learned.stats_.array("n_docs")[0]
    direct = fit_asymmetric_alpha(S, D, np.full(K, 0.5 / K), method="fixed-point")
    np.testing.assert_allclose(learned.alpha_, direct, rtol=1e-8)
    assert np.ptp(learned.alpha_) > 0.1  # moved far from the symmetric 0.05 each
    assert learned.alpha_trace_.shape == (learned.n_laps_,)
    assert learned.alpha_trace_[-1] == pytest.approx(learned.alpha_.sum(), rel=1e-14)
    assert learned.eta_ == pytest.approx(
        fit_symmetric_eta_to_counts(learned.stats_.array("words"), 0.1), rel=1e-12
    )
    # transform weighs each document's top topics with the learned vector
    X = sp.csr_matrix(learned.stats_.array("words")[:3])  # any documents over the words
    _, doc_topic, _ = learned.model_.doc_topic_step(X, learned.posterior_, 3)
    weights = learned.transform(X).toarray()
    for d in range(3):
        theta = np.where(doc_topic[d] > 1e-8, doc_topic[d] + learned.alpha_, 0.0)
        theta[np.argsort(-theta, kind="stable")[3:]] = 0.0
        np.testing.assert_allclose(weights[d], theta / theta.sum(), rtol=1e-12)


@pytest.mark.parametrize("algorithm", ["memo", "vb"])
def test_no_prior_update_lowers_the_objective_recomputed_from_the_memo(bars, algorithm):
    """At every global step the ELBO recomputed from the statistics with the new
    priors (alpha, and eta with lambda = eta + n) is at least the ELBO from the same
    statistics with the previous priors; each part (the allocation term in alpha, the
    topic terms in eta) rises on its own."""
    X, _ = bars
    model = LDAModel(10, X.shape[1], 0.5, 0.1, learn_alpha=True, learn_eta=True)
    seen: list[tuple[float, float]] = []
    previous: list[tuple[np.ndarray, float]] = [(model.prior_vector(), model.eta)]
    step = model.global_step

    def checked(stats: SuffStats) -> LDAGlobals:
        new = step(stats)
        if "S" in stats.keys():
            alpha, eta = previous[-1]
            old = model.globals_at(stats, alpha, eta)
            before, after = model.elbo(stats, old), model.elbo(stats, new)
            assert after >= before - 1e-12 * abs(before)
            assert model.allocation(stats, new.alpha) >= model.allocation(stats, alpha) - 1e-9
            words = stats.array("words")
            assert symmetric_eta_evidence(new.eta, np.maximum(words, 0)) >= (
                symmetric_eta_evidence(eta, np.maximum(words, 0)) - 1e-9
            )
            seen.append((before, after))
        previous.append((new.alpha, new.eta))
        return new

    object.__setattr__(model, "global_step", checked)  # the model is frozen
    try:
        rng = np.random.default_rng(3)
        topics = rng.gamma(0.3, 10.0, size=(10, X.shape[1]))
        init = SuffStats(words=topics, H=np.zeros(1), alloc=np.zeros(1), N=topics.sum(1),
                         n_docs=np.zeros(1))  # fmt: skip
        source = as_batch_source(X[:600], 150)
        learner = (
            MemoizedVI(n_laps=4, tol=0.0, batches_per_update=1)
            if algorithm == "memo"
            else FullBatchVB(n_laps=4, tol=0.0)
        )
        learner.run(model, SerialExecutor(), source.batches, checked(init), rng, 3)
    finally:
        object.__delattr__(model, "global_step")
    assert len(seen) >= 4 and any(after > before for before, after in seen)


def test_a_known_asymmetric_prior_is_recovered_and_scores_at_least_as_well(bars, learned):
    """On documents drawn with a known asymmetric alpha, the learned alpha_k of the
    topics matched to the true ones rank as the true ones do (the big ones in
    order), and heldout document completion is at least that of the fixed prior."""
    X, topics = bars
    fixed = lsdask.LDA(10, n_laps=12, **FIT).fit(X[:1200])
    match, distance = match_topics(topics, learned.topic_word_)
    assert distance[:6].max() < 0.15  # all but the rarest topics are found
    alpha = learned.alpha_[match]
    ranks = np.argsort(np.argsort(-alpha))
    np.testing.assert_array_equal(ranks[:4], [0, 1, 2, 3])  # the four biggest, in order
    np.testing.assert_allclose(alpha[:4], ALPHA_TRUE[:4], rtol=0.25)
    corr = np.corrcoef(np.argsort(np.argsort(ALPHA_TRUE)), np.argsort(np.argsort(alpha)))[0, 1]
    assert corr > 0.9  # Spearman's rank correlation
    assert learned.score(X[1200:]) >= fixed.score(X[1200:])


def test_resume_equals_uninterrupted(bars, tmp_path):
    """A finished run taken up again continues as one run (priors included: they are
    recomputed from the memo); so does one stopped in the middle of a lap."""
    X, _ = bars
    kw = dict(alpha="auto", eta="auto", **FIT)
    whole = lsdask.LDA(10, n_laps=4, checkpoint_dir=str(tmp_path / "whole"), **kw).fit(X[:750])
    ckpt = str(tmp_path / "ckpt")
    lsdask.LDA(10, n_laps=2, checkpoint_dir=ckpt, **kw).fit(X[:750])
    resumed = lsdask.LDA(10, n_laps=2, checkpoint_dir=ckpt, resume=True, **kw).fit(X[:750])
    assert resumed.n_laps_ == whole.n_laps_ == 4
    np.testing.assert_allclose(resumed.elbo_trace_, whole.elbo_trace_, rtol=1e-12)
    np.testing.assert_allclose(resumed.alpha_, whole.alpha_, rtol=1e-12)
    assert resumed.eta_ == pytest.approx(whole.eta_, rel=1e-12)
    np.testing.assert_allclose(resumed.components_, whole.components_, rtol=1e-12)
    assert np.isnan(resumed.alpha_trace_[:2]).all()  # laps before the resume
    np.testing.assert_allclose(resumed.alpha_trace_[2:], whole.alpha_trace_[2:], rtol=1e-12)

    model = LDAModel(10, X.shape[1], 0.5, 0.1, learn_alpha=True, learn_eta=True)
    rng = np.random.default_rng(5)
    start = rng.gamma(0.3, 10.0, size=(10, X.shape[1]))
    init = SuffStats(words=start, H=np.zeros(1), alloc=np.zeros(1), N=start.sum(1),
                     n_docs=np.zeros(1))  # fmt: skip
    uninterrupted, rest, _ = stopped_and_resumed(model, X[:750], init, tmp_path / "mid")
    np.testing.assert_allclose(rest.elbo_trace, uninterrupted.elbo_trace, rtol=1e-10)
    np.testing.assert_allclose(rest.globals.alpha, uninterrupted.globals.alpha, rtol=1e-10)
    assert rest.globals.eta == pytest.approx(uninterrupted.globals.eta, rel=1e-10)


def test_save_load_round_trip_is_exact_and_older_files_load_with_their_fixed_prior(
    bars, learned, tmp_path
):
    X, _ = bars
    path = save_lda(learned, tmp_path / "m")
    params = json.loads((path / "params.json").read_text())["params"]
    assert params["alpha"] == "auto" and params["eta"] == "auto"
    back = load_lda(path)
    assert back.alpha == "auto" and back.model_.learn_alpha and back.model_.learn_eta
    np.testing.assert_array_equal(back.alpha_, learned.alpha_)
    assert back.eta_ == learned.eta_
    np.testing.assert_array_equal(back.components_, learned.components_)
    np.testing.assert_array_equal(back.alpha_trace_, learned.alpha_trace_)
    assert back.score(X[1200:]) == learned.score(X[1200:])
    assert (back.transform(X[1200:1250]) != learned.transform(X[1200:1250])).nnz == 0
    # it keeps learning: partial_fit refits the priors to the statistics it grows
    back.partial_fit(X[1200:1300])
    assert not np.array_equal(back.alpha_, learned.alpha_)

    # a fixed prior saves as a number; a file without the priors' arrays (written
    # before they were kept) loads with the prior of its parameters
    fixed = lsdask.LDA(10, alpha=0.8, n_laps=2, **FIT).fit(X[:500])
    old = save_lda(fixed, tmp_path / "old")
    assert json.loads((old / "params.json").read_text())["params"]["alpha"] == 0.8
    meta = json.loads((old / "params.json").read_text())
    with np.load(old / "arrays.npz") as data:
        arrays = {k: data[k] for k in data.files if k not in ("alpha_", "eta_", "alpha_trace_")}
    np.savez(old / "arrays.npz", **arrays)
    meta["arrays"] = sorted(arrays)
    (old / "params.json").write_text(json.dumps(meta))
    loaded = load_lda(old)
    np.testing.assert_array_equal(loaded.alpha_, np.full(10, 0.8 / 10))
    assert loaded.eta_ == 0.1
    np.testing.assert_allclose(loaded.alpha_trace_, np.full(2, 0.8), rtol=1e-15)
    assert loaded.score(X[1200:]) == fixed.score(X[1200:])


def test_fixed_priors_keep_their_statistics_and_results(bars):
    """Without learned priors the statistics carry no S, W, Cdir (old memo files and
    checkpoints stay valid) and the fit reports alpha / K and eta as its priors."""
    X, _ = bars
    fixed = lsdask.LDA(10, alpha=0.7, eta=0.2, n_laps=2, **FIT).fit(X[:500])
    assert set(fixed.stats_.keys()) == {"words", "H", "alloc", "N", "n_docs"}
    np.testing.assert_array_equal(fixed.alpha_, np.full(10, 0.7 / 10))
    assert fixed.eta_ == 0.2
    only_eta = lsdask.LDA(10, eta="auto", n_laps=2, **FIT).fit(X[:500])
    assert "S" not in only_eta.stats_.keys() and only_eta.eta_ != 0.1
    np.testing.assert_array_equal(only_eta.alpha_, np.full(10, 0.5 / 10))


def test_command_line_fits_learned_priors_and_topics_shows_them(bars, tmp_path, capsys):
    X, _ = bars
    Corpus.write(tmp_path / "c", X[:400], [f"w{i}" for i in range(25)], docs_per_row_group=200)
    out = tmp_path / "m"
    argv = ["fit", str(tmp_path / "c"), "--topics", "10", "--sparsity", "3", "--laps", "3",
            "--alpha", "auto", "--eta", "auto", "--init", "kmeans++", "--out", str(out),
            "--sync"]  # fmt: skip
    assert main(argv) == 0
    model = load_lda(out)
    assert model.alpha == "auto" and model.eta == "auto"
    capsys.readouterr()
    assert main(["topics", str(out), "--top", "3"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].split()[:3] == ["topic", "share", "alpha_k"]
    assert len(lines) == 1 + 10 + 2  # header, topics, learned alpha, learned eta
    shown = np.array([float(line.split()[2]) for line in lines[1:11]])
    np.testing.assert_allclose(shown, model.alpha_, rtol=5e-3)
    assert lines[-2].startswith("learned document-topic prior: alpha = sum_k alpha_k = ")
    assert float(lines[-2].split("= ")[2].split()[0]) == pytest.approx(model.alpha_.sum(), rel=1e-3)
    assert lines[-1] == f"learned topic-word prior: eta = {model.eta_:.4g}"


BAD = [
    (dict(alpha="automatic"), r"alpha must be a positive finite number; got 'automatic'\. "
     r"Use alpha='auto' to learn it"),
    (dict(alpha=-1.0), r"alpha must be a positive finite number; got -1\.0"),
    (dict(eta=0), r"eta must be a positive finite number; got 0\. Use eta='auto'"),
    (dict(alpha="auto", algorithm="svi"), r"alpha='auto' is not supported with "
     r"algorithm='svi': the prior is fitted to each document's E\[log pi_d\]"),
    (dict(eta="auto", algorithm="svi"), r"eta='auto' is not supported with algorithm='svi'.*"
     r"Use algorithm='memo' or 'vb'"),
]  # fmt: skip


@pytest.mark.parametrize("params,match", BAD)
def test_bad_priors_are_refused_with_a_message_that_names_them(bars, params, match):
    X, _ = bars
    with pytest.raises(ValueError, match=match):
        lsdask.LDA(4, client="sync", **params).fit(X[:50])


def test_bad_prior_values_below_the_estimator(rng):
    with pytest.raises(ValueError, match=r"alpha must be a positive number \(the total, "
                       r"alpha / K per topic\) or 3 positive values"):  # fmt: skip
        LDAModel(3, 10, alpha=[0.1, 0.2])
    with pytest.raises(ValueError, match=r"alpha must be a positive finite number; got 0\.0"):
        LDAModel(3, 10, alpha=0.0)
    topics = DirichletPosterior.from_counts(np.ones((3, 4)), 0.1)
    with pytest.raises(ValueError, match=r"alpha must hold 3 positive finite values"):
        LDAGlobals.of(topics, [0.1, -0.1, 0.1])
    with pytest.raises(ValueError, match=r"ceiling must be >= floor"):
        fit_symmetric_eta_to_counts(np.ones((2, 3)), 0.1, floor=1.0, ceiling=0.5)
    with pytest.raises(ValueError, match=r"V \(vocabulary size\) must be an integer >= 2"):
        fit_symmetric_eta_to_counts(np.ones((2, 1)), 0.1)
    with pytest.raises(ValueError, match=r"D \(number of documents\) must be a finite number"):
        allocation_at([0.1, 0.2], [-1.0, -2.0], 0.0, 0.0, -1)
    assert parse_positive_or_auto("auto") == "auto" and parse_positive_or_auto("0.5") == 0.5
    with pytest.raises(argparse.ArgumentTypeError, match=r"positive number or 'auto', got 'x'"):
        parse_positive_or_auto("x")
    model = LDAModel(3, 10, alpha=(0.1, 0.2, 0.3))
    assert model.total_alpha == pytest.approx(0.6)
    np.testing.assert_array_equal(model.prior_vector(), [0.1, 0.2, 0.3])


def test_eta_fit_falls_back_on_coordinate_steps_where_newton_fails(monkeypatch):
    """With a Newton direction that points downhill (its derivative's sign flipped),
    no halving raises h, and the coordinate steps of fit_symmetric_eta, which never
    decrease it, still reach the maximum."""
    import lsdask.models.dirichlet_prior as prior

    rng = np.random.default_rng(4)
    n = rng.gamma(2.0, 5.0, size=(4, 6))
    expected = fit_symmetric_eta_to_counts(n, 0.1)
    derivs = prior._h_derivs
    monkeypatch.setattr(prior, "_h_derivs", lambda *args: (-derivs(*args)[0], derivs(*args)[1]))
    eta = fit_symmetric_eta_to_counts(n, 0.1, max_iters=500)
    assert eta == pytest.approx(expected, rel=1e-4)
    best = symmetric_eta_evidence(expected, n)
    assert symmetric_eta_evidence(eta, n) == pytest.approx(best, rel=1e-10)


def test_the_local_step_takes_the_globals_prior_or_the_models_own(rng):
    """Topics without a prior (a plain DirichletPosterior, e.g. built by hand) run
    with the model's fixed alpha; a single topic has no alpha to learn."""
    X, _ = _corpus(60, seed=2, alpha=np.full(10, 0.3))
    model = LDAModel(5, X.shape[1], (0.1, 0.2, 0.3, 0.2, 0.1), 0.1)
    topics = DirichletPosterior.from_counts(rng.gamma(0.3, 10.0, size=(5, X.shape[1])), 0.1)
    plain = model.local_step(X, topics, 3)
    with_prior = model.local_step(X, LDAGlobals.of(topics, model.prior_vector()), 3)
    assert plain.allclose(with_prior, rtol=0.0)
    one = LDAModel(1, X.shape[1], learn_alpha=True)
    stats = one.local_step(X, one.global_step(one.empty_stats()), 1)
    np.testing.assert_array_equal(one.global_step(stats).alpha, [0.5])


def test_every_start_of_n_init_traces_its_own_alpha(bars):
    X, _ = bars
    fit = lsdask.LDA(10, alpha="auto", n_laps=3, n_init=2, **FIT).fit(X[:500])
    assert fit.alpha_trace_.shape == (3,) and np.isfinite(fit.alpha_trace_).all()
    assert fit.alpha_trace_[-1] == pytest.approx(fit.alpha_.sum(), rel=1e-14)
