"""The HDP topic model: ``lsdask.HDP`` and :mod:`lsdask.models.hdp`.

Its local step is LDA's (equal to it at LDA's prior), no global step lowers the
surrogate ELBO recomputed from the memo, that ELBO equals a direct computation
from per-document quantities (plain numpy), a Dask cluster fit equals the
in-process one, checkpoint + resume equals an uninterrupted run, save/load is
exact, bad input is refused clearly, and on the bars corpus the ten heaviest of
twenty topics are the ten bars.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import betaln, digamma, gammaln

import lsdask
from lsdask.engine import SerialExecutor
from lsdask.estimators.lda import TransformTask
from lsdask.estimators.params import clone
from lsdask.io.sources import as_batch_source
from lsdask.learn import MemoizedVI
from lsdask.learn.vb import FullBatchVB
from lsdask.models import SuffStats
from lsdask.models.dirichlet_logs import DirichletPosterior
from lsdask.models.hdp import HDPGlobals, HDPModel
from lsdask.models.hdp_sticks import expected_log_sticks, init_sticks
from lsdask.models.lda import LDAGlobals, LDAModel, LocalStepOptions
from lsdask.models.stats import as_dense
from lsdask.persist import load_lda, load_model, save_lda, save_model
from lsdask.synthetic import make_bars_corpus, match_topics
from tests import naive
from tests.resume_mid_lap import stopped_and_resumed

FIT = dict(sparsity=3, client="sync", random_state=0, batch_size=250, tol=0.0, init="kmeans++")
WORDS = [f"pixel{v}" for v in range(25)]


@pytest.fixture(scope="module")
def bars():
    """1,000 bars documents (10 true topics over 25 words), few bars per document."""
    return make_bars_corpus(1000, doc_topic_prior=0.1, random_state=0)


@pytest.fixture(scope="module")
def fitted(bars):
    """Without moves: K stays 20."""
    X, _ = bars
    return lsdask.HDP(20, n_laps=15, moves=(), **FIT).fit(X, vocabulary=WORDS)


def _init_stats(K: int, V: int, seed: int) -> SuffStats:
    start = np.random.default_rng(seed).gamma(0.3, 10.0, size=(K, V))
    return SuffStats(words=start, H=np.zeros(1), alloc=np.zeros(1), N=start.sum(1),
                     n_docs=np.zeros(1))  # fmt: skip


def _random_globals(K: int, V: int, rng: np.random.Generator, alpha: float) -> HDPGlobals:
    topics = DirichletPosterior.from_counts(rng.gamma(0.5, 4.0, size=(K, V)), 0.2)
    rho = rng.uniform(0.05, 0.6, size=K)
    omega = rng.uniform(2.0, 50.0, size=K)
    return HDPGlobals.of_sticks(topics, alpha, rho, omega)


# --------------------------------------------------------------------------- the math


@pytest.mark.parametrize("sparsity", [None, 2])
def test_the_local_step_at_lda_s_prior_without_leftover_is_lda_s(bars, sparsity, rng):
    """With ``a_k = alpha / K`` and no leftover mass the HDP's local step is LDA's
    (the same statistics); with the leftover ``a_rest > 0`` the responsibilities
    stay LDA's at the same ``a`` (a_rest cancels), and S (K + 1), W, Cdir and alloc
    are those of the documents' ``q(pi_d)`` over K + 1 entries (plain numpy)."""
    X, _ = bars
    X = X[:150]
    K, V = 6, X.shape[1]
    topics = DirichletPosterior.from_counts(rng.gamma(1.0, 5.0, size=(K, V)), 0.1)
    rho, omega = init_sticks(K, 2.0)
    hdp = HDPModel(K, V, 0.5, 0.1, gamma=2.0)
    lda = LDAModel(K, V, 0.5, 0.1, learn_alpha=True)
    a = np.full(K, 0.5 / K)
    ours = hdp.local_step(X, HDPGlobals(topics.logs, topics.stored, a, rho, omega, 0.0), sparsity)
    theirs = lda.local_step(X, LDAGlobals.of(topics, a), sparsity)
    for name in ("words", "H", "alloc", "N", "n_docs", "W", "Cdir"):
        np.testing.assert_array_equal(as_dense(ours[name]), as_dense(theirs[name]), err_msg=name)
    np.testing.assert_array_equal(ours.array("S")[:K], theirs.array("S"))
    assert ours.array("S")[K] == 0.0

    glob = _random_globals(K, V, rng, 0.5)
    pieces, doc_topic, _ = hdp.doc_topic_step(X, glob, sparsity)
    lda_pieces, lda_doc_topic, _ = lda.doc_topic_step(X, LDAGlobals.of(glob, glob.alpha), sparsity)
    np.testing.assert_allclose(doc_topic, lda_doc_topic, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        as_dense(pieces["words"]), as_dense(lda_pieces["words"]), rtol=1e-12, atol=1e-12
    )
    assert pieces["S"].shape == (K + 1,)
    S, W, Cdir, alloc = naive.lda_prior_stats(doc_topic, glob.alpha, glob.alpha_rest)
    np.testing.assert_allclose(pieces["S"], S, rtol=1e-10, atol=1e-8)
    assert float(pieces["W"][0]) == pytest.approx(W, rel=1e-10)
    assert float(pieces["Cdir"][0]) == pytest.approx(Cdir, rel=1e-10)
    assert float(pieces["alloc"][0]) == pytest.approx(alloc, rel=1e-10, abs=1e-8)


def _naive_surrogate_elbo(batches, visited, glob, alpha, gamma, eta):
    """The surrogate ELBO at the globals ``glob`` with every document's q(z_d) and
    q(pi_d) as fitted under the globals of its batch's visit (``visited``), document
    by document (plain numpy; the dense local step without restarts)."""
    K, V = glob.alpha.shape[0], batches[0].shape[1]
    beta = glob.topic_weights
    elog_u, elog_1mu = expected_log_sticks(glob.rho, glob.omega)
    bound = K * np.log(alpha) + elog_u.sum() + (K + 1.0 - np.arange(1, K + 1)) @ elog_1mu
    words = np.zeros((K, V))
    entropy = alloc = 0.0
    for X, visit in zip(batches, visited, strict=True):
        C = visit.E_log_phi_t
        for d in range(X.shape[0]):
            row = X[d]
            R, N, _ = naive.lda_dense_doc(row.indices, row.data, C, visit.alpha)
            np.add.at(words.T, row.indices, row.data[:, None] * R)
            entropy -= float((row.data[:, None] * R * np.log(np.where(R > 0, R, 1.0))).sum())
            theta = np.append(N + visit.alpha, visit.alpha_rest)
            elog_pi = digamma(theta) - digamma(theta.sum())
            alloc += bound - naive.c_dir(theta)
            alloc += float(((np.append(N, 0.0) + alpha * beta - theta) * elog_pi).sum())
    a, b = glob.rho * glob.omega, (1.0 - glob.rho) * glob.omega
    log_p_u = np.log(gamma) + (gamma - 1.0) * elog_1mu  # Beta(1, gamma)
    log_q_u = -betaln(a, b) + (a - 1.0) * elog_u + (b - 1.0) * elog_1mu
    lam = glob.lam
    elog_phi = digamma(lam) - digamma(lam.sum(axis=1, keepdims=True))
    kl = (gammaln(lam.sum(1)) - gammaln(lam).sum(1) - gammaln(V * eta) + V * gammaln(eta)
          + ((lam - eta) * elog_phi).sum(1))  # fmt: skip
    topic_terms = float((words * elog_phi).sum() - kl.sum())
    return topic_terms + entropy + alloc + float((log_p_u - log_q_u).sum())


def test_the_surrogate_elbo_from_the_memo_equals_a_direct_computation(bars, rng):
    """Two batches visited under different globals, the objective evaluated at a
    third: the memo's statistics give the same surrogate ELBO as the documents'
    own q(z_d), q(pi_d) summed up directly."""
    X, _ = bars
    K, V, alpha, gamma, eta = 5, X.shape[1], 0.7, 2.5, 0.2
    model = HDPModel(K, V, alpha, eta, LocalStepOptions(restarts=False), gamma=gamma)
    batches = [X[:40], X[40:90]]
    visited = [_random_globals(K, V, rng, alpha) for _ in batches]
    stats = model.local_step(batches[0], visited[0], None) + model.local_step(
        batches[1], visited[1], None
    )
    at = _random_globals(K, V, rng, alpha)  # topics of the prior eta = 0.2
    expected = _naive_surrogate_elbo(batches, visited, at, alpha, gamma, eta)
    assert model.elbo(stats, at) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    ("algorithm", "learn_eta"), [("memo", False), ("memo", True), ("vb", False)]
)
def test_no_global_step_lowers_the_surrogate_elbo_recomputed_from_the_memo(
    bars, algorithm, learn_eta
):
    """At every global step, from the statistics it is given: the new globals'
    surrogate ELBO is at least the previous globals' (which the loops pass on), and
    so is each part on its own (the sticks' terms, the topic terms); the sticks
    move in many steps."""
    X, _ = bars
    K, V = 12, X.shape[1]
    model = HDPModel(K, V, 0.5, 0.1, gamma=3.0, learn_eta=learn_eta)
    step = model.global_step_from
    returned: list[HDPGlobals] = []
    seen: list[tuple[float, float]] = []

    def checked(stats, carried):
        new = step(stats, carried)
        if carried is not None:  # the loops start the sticks from the globals they replace
            old = returned[-1]
            np.testing.assert_array_equal(carried["rho"], old.rho)
            np.testing.assert_array_equal(carried["omega"], old.omega)
            before, after = model.elbo(stats, old), model.elbo(stats, new)
            assert after >= before - 1e-12 * abs(before)
            sticks_old = model.surrogate_allocation(stats, old)
            assert model.surrogate_allocation(stats, new) >= sticks_old - 1e-12 * abs(sticks_old)
            words = stats.array("words")
            topics_old = old.elbo_terms(words)
            assert new.elbo_terms(words) >= topics_old - 1e-12 * abs(topics_old)
            seen.append((sticks_old, model.surrogate_allocation(stats, new)))
        returned.append(new)
        return new

    object.__setattr__(model, "global_step_from", checked)  # the model is frozen
    try:
        source = as_batch_source(X[:600], 150)
        learner = (
            MemoizedVI(n_laps=4, tol=0.0, batches_per_update=1)
            if algorithm == "memo"
            else FullBatchVB(n_laps=4, tol=0.0)
        )
        glob = model.global_step(_init_stats(K, V, 3))
        learner.run(model, SerialExecutor(), source.batches, glob, np.random.default_rng(3), 3)
    finally:
        object.__delattr__(model, "global_step_from")
    assert len(seen) >= 4
    assert sum(after > before for before, after in seen) >= len(seen) // 2


# --------------------------------------------------------------------------- runs


def test_a_two_process_cluster_fit_equals_the_in_process_fit(bars, dask_client):
    X, _ = bars
    kw = {k: v for k, v in FIT.items() if k != "client"}
    kw.update(n_laps=3, batches_per_update=2)
    here = lsdask.HDP(12, client="sync", **kw).fit(X[:600])
    there = lsdask.HDP(12, client=dask_client, **kw).fit(X[:600])
    np.testing.assert_allclose(there.elbo_trace_, here.elbo_trace_, rtol=1e-10)
    np.testing.assert_allclose(there.components_, here.components_, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(there.topic_weights_, here.topic_weights_, rtol=1e-9)


def test_resume_equals_uninterrupted(bars, tmp_path):
    """A finished run taken up again continues as one run; so does one stopped in
    the middle of a lap, whose checkpoint carries the sticks its next global step
    starts from."""
    X, _ = bars
    X = X[:750]
    kw = dict(FIT)
    whole = lsdask.HDP(10, n_laps=4, checkpoint_dir=str(tmp_path / "whole"), **kw).fit(X)
    ckpt = str(tmp_path / "ckpt")
    lsdask.HDP(10, n_laps=2, checkpoint_dir=ckpt, **kw).fit(X)
    resumed = lsdask.HDP(10, n_laps=2, checkpoint_dir=ckpt, resume=True, **kw).fit(X)
    assert resumed.n_laps_ == whole.n_laps_ == 4
    np.testing.assert_allclose(resumed.elbo_trace_, whole.elbo_trace_, rtol=1e-12)
    np.testing.assert_allclose(resumed.topic_weights_, whole.topic_weights_, rtol=1e-12)
    np.testing.assert_allclose(resumed.components_, whole.components_, rtol=1e-12)
    np.testing.assert_array_equal(resumed.n_components_trace_, whole.n_components_trace_)

    K, V = 10, X.shape[1]
    model = HDPModel(K, V, 0.5, 0.1, gamma=3.0)
    uninterrupted, rest, saved = stopped_and_resumed(
        model, X, _init_stats(K, V, 5), tmp_path / "mid"
    )
    assert len(saved["state"].carried["rho"]) == K  # the sticks, through JSON
    np.testing.assert_allclose(rest.elbo_trace, uninterrupted.elbo_trace, rtol=1e-10)
    # a resumed run re-sums S from the memo (the other updated it in place): from S
    # equal to rounding, the sticks' search (L-BFGS-B, gtol 1e-9) stops within its
    # tolerance, where the objective is flat (in omega most, in some rho too): both
    # sticks are the optimum of the same objective to that tolerance, and close
    stats = uninterrupted.stats
    D, S = model.row_count(stats), stats.array("S")
    W, Cdir = float(stats.array("W")[0]), float(stats.array("Cdir")[0])
    at_rest = model.allocation_value(rest.globals.rho, rest.globals.omega, S, D, W, Cdir)
    at_whole = model.allocation_value(
        uninterrupted.globals.rho, uninterrupted.globals.omega, S, D, W, Cdir
    )
    assert abs(at_rest - at_whole) <= 1e-12 * abs(at_whole)
    np.testing.assert_allclose(rest.globals.rho, uninterrupted.globals.rho, rtol=1e-7)
    np.testing.assert_allclose(rest.globals.omega, uninterrupted.globals.omega, rtol=1e-5)
    # the lap after it starts from those sticks: S (sums of psi(a_k)) follows them
    assert rest.stats.allclose(uninterrupted.stats, rtol=1e-7, atol=1e-10)


def test_save_load_round_trip_is_exact(bars, fitted, tmp_path):
    X, _ = bars
    path = save_model(fitted, tmp_path / "m")
    meta = json.loads((path / "params.json").read_text())
    assert meta["format"] == "lsdask-hdp" and meta["params"]["max_components"] == 20
    back = load_model(path)
    assert type(back) is lsdask.HDP and back.client is None  # a client is not saved
    assert back.get_params() == {**fitted.get_params(), "client": None}
    for name in ("components_", "topic_word_", "topic_weights_", "topic_order_", "alpha_",
                 "elbo_trace_", "lap_trace_", "n_components_trace_", "alpha_trace_"):  # fmt: skip
        np.testing.assert_array_equal(getattr(back, name), getattr(fitted, name), err_msg=name)
    np.testing.assert_array_equal(back.posterior_.rho, fitted.posterior_.rho)
    np.testing.assert_array_equal(back.posterior_.omega, fitted.posterior_.omega)
    assert back.leftover_weight_ == fitted.leftover_weight_
    assert back.vocabulary_ == WORDS and back.top_words(3) == fitted.top_words(3)
    assert back.model_ == fitted.model_
    assert back.score(X[900:]) == fitted.score(X[900:])
    assert (back.transform(X[900:950]) != fitted.transform(X[900:950])).nnz == 0
    # the objective of the loaded model's memo is the saved one's last value
    assert back.model_.elbo(back.stats_, back.posterior_) == fitted.elbo_trace_[-1]

    with pytest.raises(TypeError, match=r"saved as 'hdp', not as an LDA model"):
        save_lda(fitted, tmp_path / "as_lda")
    with pytest.raises(ValueError, match=r"not an lsdask LDA model \(format 'lsdask-hdp'"):
        load_lda(path)

    counts = fitted.components_[np.argsort(fitted.topic_order_)] - fitted.eta_
    started = lsdask.HDP(20, n_laps=1, **{**FIT, "init": counts}).fit(X[:300])
    again = load_model(save_model(started, tmp_path / "init"))
    np.testing.assert_array_equal(again.init, counts)
    np.testing.assert_array_equal(again.components_, started.components_)


def test_topics_are_ordered_by_weight_and_the_api_follows_that_order(bars, fitted):
    X, _ = bars
    K = 20
    weights = fitted.topic_weights_
    assert fitted.n_components_ == K and weights.shape == (K,)
    assert np.all(np.diff(weights) <= 0)
    np.testing.assert_allclose(weights.sum() + fitted.leftover_weight_, 1.0, rtol=1e-12)
    beta = fitted.posterior_.topic_weights
    np.testing.assert_array_equal(weights, beta[fitted.topic_order_])
    np.testing.assert_array_equal(fitted.components_, fitted.posterior_.lam[fitted.topic_order_])
    np.testing.assert_allclose(fitted.alpha_, 0.5 * weights, rtol=1e-14)
    np.testing.assert_array_equal(fitted.n_components_trace_, np.full(fitted.n_laps_, 20.0))
    # transform's columns are those of components_
    internal = TransformTask(fitted.model_, 3, 3).weights(X[:200], fitted.posterior_)
    ours = fitted.transform(X[:200])
    assert ours.shape == (200, K) and ours.has_canonical_format
    assert (ours != internal[:, fitted.topic_order_]).nnz == 0
    assert list(fitted.get_feature_names_out()[:2]) == ["hdp0", "hdp1"]
    assert np.isfinite(fitted.score(X[900:]))
    assert fitted.coherence(X[:500], n=5).shape == (K,)
    assert len(fitted.top_words(4)) == K
    # the parameters: scikit-learn's conventions
    params = fitted.get_params()
    assert params["max_components"] == 20 and params["moves"] == () and "n_components" not in params
    twin = clone(fitted)
    assert twin.get_params() == params and not hasattr(twin, "components_")
    assert repr(lsdask.HDP(30, gamma=2.0)) == "HDP(gamma=2.0, max_components=30)"


def test_on_bars_the_heaviest_topics_are_the_bars_and_the_rest_weigh_little(bars, fitted):
    """Started at K=20 on 10 true bars: the 10 heaviest topics are the bars; the
    other 10 hold no tokens and little weight, but they stay (moves=())."""
    _, topics = bars
    _, distance = match_topics(topics, fitted.components_[:10])
    assert distance.max() < 0.2  # L1 distance (at most 2) of each bar to its topic
    weights = fitted.topic_weights_
    assert weights[:10].min() > 0.07 and weights[10:].max() < 0.02
    assert weights[10:].sum() + fitted.leftover_weight_ < 0.15
    N = fitted.stats_.array("N")[fitted.topic_order_]
    assert N[10:].sum() < 0.01 * N.sum()  # a few tokens left after 15 laps, none after 60
    assert fitted.n_components_ == 20  # K itself does not fall without moves


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"gamma": 0}, r"gamma must be a positive finite number; got 0"),
        ({"gamma": float("inf")}, r"gamma must be a positive finite number; got inf"),
        ({"alpha": -1.0}, r"alpha must be a positive finite number; got -1.0"),
        ({"alpha": "auto"}, r"alpha must be a positive finite number; got 'auto'"),
        ({"max_components": 1}, r"max_components must be an integer >= 2; got 1"),
        ({"max_components": 0}, r"max_components must be an integer >= 2; got 0"),
        ({"moves": ("delete", "birth")}, r"moves=\('delete', 'birth'\): expected a tuple of"),
        ({"moves": "merge"}, r"moves='merge': expected a tuple of distinct move names"),
        ({"moves": ("merge", "merge")}, r"expected a tuple of distinct move names"),
        ({"algorithm": "svi"}, r"algorithm='svi' is not supported by HDP"),
        ({"algorithm": "gibbs"}, r"algorithm must be one of 'memo', 'vb'; got 'gibbs'"),
        ({"eta": 0.0}, r"eta must be a positive finite number; got 0.0"),
    ],
)
def test_bad_parameters_are_refused_with_a_message_that_names_them(bars, params, match):
    X, _ = bars
    with pytest.raises(ValueError, match=match):
        lsdask.HDP(**{"max_components": 5, **params}).fit(X[:50])


def test_bad_models_and_unsupported_calls_are_refused(bars):
    X, _ = bars
    with pytest.raises(ValueError, match=r"alpha of the HDP is the document concentration"):
        HDPModel(3, 25, (0.1, 0.2, 0.3))
    with pytest.raises(ValueError, match=r"learn_alpha must be False for the HDP"):
        HDPModel(3, 25, 0.5, learn_alpha=True)
    with pytest.raises(ValueError, match=r"gamma must be a positive finite number; got nan"):
        HDPModel(3, 25, 0.5, gamma=float("nan"))
    with pytest.raises(ValueError, match=r"previous sticks must hold K=3 values each"):
        HDPModel(3, 25).global_step_from(_init_stats(3, 25, 0), {"rho": [0.5], "omega": [2.0]})
    with pytest.raises(NotImplementedError, match=r"HDP.partial_fit is not supported"):
        lsdask.HDP(5).partial_fit(X[:50])


def test_a_checkpoint_of_lda_is_not_resumed_as_hdp_nor_the_other_way(bars, tmp_path):
    X, _ = bars
    X = X[:300]
    kw = dict(FIT, n_laps=1)
    lda_folder, hdp_folder = str(tmp_path / "lda"), str(tmp_path / "hdp")
    lsdask.LDA(4, checkpoint_dir=lda_folder, **kw).fit(X)
    lsdask.HDP(4, checkpoint_dir=hdp_folder, **kw).fit(X)
    with pytest.raises(ValueError, match=r"was written by LDA, not HDP"):
        lsdask.HDP(4, checkpoint_dir=lda_folder, resume=True, **kw).fit(X)
    with pytest.raises(ValueError, match=r"was written by HDP, not LDA"):
        lsdask.LDA(4, checkpoint_dir=hdp_folder, resume=True, **kw).fit(X)
    with pytest.raises(ValueError, match=r"holds a model with gamma 10.0 \(asked 2.0\)"):
        lsdask.HDP(4, gamma=2.0, checkpoint_dir=hdp_folder, resume=True, **kw).fit(X)
    # the refused resumes left both checkpoints as they were
    assert lsdask.HDP(4, checkpoint_dir=hdp_folder, resume=True, **kw).fit(X).n_laps_ == 2
    assert lsdask.LDA(4, checkpoint_dir=lda_folder, resume=True, **kw).fit(X).n_laps_ == 2


def test_full_batch_vb_fits_too(bars):
    X, _ = bars
    model = lsdask.HDP(12, algorithm="vb", n_laps=3, **FIT).fit(X[:400])
    assert model.n_laps_ == 3 and np.isfinite(model.elbo_trace_).all()
    assert sp.issparse(model.transform(X[:10]))
