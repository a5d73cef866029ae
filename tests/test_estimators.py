"""The scikit-learn-style estimators: recovery, scoring, conventions."""

from __future__ import annotations

import inspect
import logging

import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from scipy import stats
from scipy.optimize import linear_sum_assignment
from scipy.special import logsumexp

import lsdask
from lsdask import config
from lsdask.estimators.params import clone


def _mixture(rng, n=4000, d=3, k=4, zero_mean=False):
    means = np.zeros((k, d)) if zero_mean else rng.normal(scale=6.0, size=(k, d))
    covs = []
    for _ in range(k):
        A = rng.normal(size=(d, d))
        covs.append(A @ A.T + 0.3 * np.eye(d))
    weights = rng.dirichlet(np.full(k, 5.0))
    z = rng.choice(k, size=n, p=weights)
    X = np.stack([rng.multivariate_normal(means[j], covs[j]) for j in z])
    return X, z, means, np.asarray(covs), weights


@pytest.mark.parametrize("covariance_type", ["full", "diag"])
def test_recovers_known_gaussian_components(rng, covariance_type):
    X, z, means, covs, weights = _mixture(rng)
    model = lsdask.GaussianMixture(
        4, covariance_type=covariance_type, sparsity=2, n_laps=30, client="sync", n_init=3,
        random_state=1, batch_size=1000,
    ).fit(X)  # fmt: skip
    cost = ((model.means_[:, None, :] - means[None]) ** 2).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    assert np.sqrt(cost[rows, cols]).max() < 0.3
    np.testing.assert_allclose(model.weights_[rows], weights[cols], atol=0.03)
    if covariance_type == "full":
        np.testing.assert_allclose(model.covariances_[rows], covs[cols], atol=0.35)
    # cluster labels agree with the truth up to the matching
    relabel = np.empty(4, int)
    relabel[rows] = cols
    assert np.mean(relabel[model.predict(X)] == z) > 0.97


def test_recovers_zero_mean_covariances(rng):
    """Image-patch style: zero-mean clusters that differ only in their covariance.

    Every cluster has mass at the origin here, so dense responsibilities are
    used: with L = 2 < K = 3 the truncation near the origin biases the fit
    (weights off by about 0.03), which is the L-sparse objective, not a bug.
    """
    R = np.array([[1.0, 1.0], [-1.0, 1.0]]) / np.sqrt(2.0)
    covs = np.array([np.diag([9.0, 0.1]), np.diag([0.1, 9.0]), R @ np.diag([9.0, 0.1]) @ R.T])
    weights = np.array([0.5, 0.3, 0.2])
    z = rng.choice(3, size=6000, p=weights)
    X = np.stack([rng.multivariate_normal(np.zeros(2), covs[j]) for j in z])
    model = lsdask.GaussianMixture(
        3, sparsity=None, n_laps=60, client="sync", random_state=3, batch_size=2000, tol=1e-9
    ).fit(X)
    cost = np.array([[np.abs(a - b).sum() for b in covs] for a in model.covariances_])
    rows, cols = linear_sum_assignment(cost)
    np.testing.assert_allclose(model.covariances_[rows], covs[cols], rtol=0.1, atol=0.1)
    np.testing.assert_allclose(model.weights_[rows], weights[cols], atol=0.03)


def test_recovers_multinomial_clusters(rng):
    topics = rng.dirichlet(np.full(50, 0.1), size=3)
    z = rng.integers(3, size=600)
    C = np.stack([rng.multinomial(60, topics[j]) for j in z])
    model = lsdask.MultinomialMixture(3, sparsity=2, client="sync", random_state=0).fit(
        sp.csr_matrix(C)
    )
    cost = np.abs(model.components_[:, None, :] - topics[None]).sum(-1)
    rows, cols = linear_sum_assignment(cost)
    assert cost[rows, cols].max() < 0.2


def test_score_samples_is_log_mixture_density(rng):
    X, *_ = _mixture(rng, n=500)
    model = lsdask.GaussianMixture(3, covariance_type="full", client="sync", random_state=0)
    model.fit(X)
    logp = np.stack(
        [
            np.log(w) + stats.multivariate_normal(m, c).logpdf(X[:20])
            for w, m, c in zip(model.weights_, model.means_, model.covariances_, strict=True)
        ],
        axis=1,
    )
    np.testing.assert_allclose(model.score_samples(X[:20]), logsumexp(logp, axis=1), rtol=1e-10)
    assert model.score(X[:20]) == pytest.approx(model.score_samples(X[:20]).mean())


def test_predict_proba_is_top_l_sparse(rng):
    X, *_ = _mixture(rng, n=400)
    model = lsdask.GaussianMixture(
        4, covariance_type="diag", sparsity=2, client="sync", random_state=0
    ).fit(X)
    P = model.predict_proba(X)
    assert sp.issparse(P) and P.shape == (400, 4)
    assert np.all(np.diff(P.indptr) == 2)
    np.testing.assert_allclose(np.asarray(P.sum(1)).ravel(), 1.0)
    dense = clone(model).set_params(sparsity=None).fit(X).predict_proba(X)
    assert isinstance(dense, np.ndarray) and dense.shape == (400, 4)


def test_zarr_dask_and_numpy_inputs_agree(rng, tmp_path):
    X, *_ = _mixture(rng, n=900)
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(300, 3), dtype="f8")
    z[:] = X
    import dask.array as da

    kw = dict(covariance_type="full", sparsity=2, client="sync", random_state=0, n_laps=3)
    a = lsdask.GaussianMixture(3, batch_size=300, **kw).fit(X)
    b = lsdask.GaussianMixture(3, **kw).fit(str(tmp_path / "x.zarr"))
    c = lsdask.GaussianMixture(3, **kw).fit(da.from_array(X, chunks=(300, 3)))
    d = lsdask.GaussianMixture(3, **kw).fit(z)
    for other in (b, c, d):
        np.testing.assert_allclose(other.elbo_trace_, a.elbo_trace_, rtol=1e-12)
    np.testing.assert_allclose(b.score_samples(str(tmp_path / "x.zarr")), a.score_samples(X))
    filtered = da.from_array(X, chunks=(300, 3))
    filtered = filtered[filtered[:, 0] > 0]  # chunks of unknown size
    with pytest.raises(ValueError, match=r"unknown size .* call X.compute_chunk_sizes\(\)"):
        lsdask.GaussianMixture(3, **kw).fit(filtered)
    c.predict(filtered.compute_chunk_sizes())


def test_sklearn_conventions(rng):
    model = lsdask.GaussianMixture(7, sparsity=3, covariance_type="diag", alpha=2.0)
    cloned = clone(model)
    assert cloned.get_params() == model.get_params()
    X, *_ = _mixture(rng, n=300)
    assert model.set_params(client="sync", random_state=0).fit(X) is model
    for attr in ("weights_", "covariances_", "precisions_", "means_", "elbo_trace_", "n_laps_"):
        assert hasattr(model, attr)
    assert model.covariances_.shape == (7, 3)
    np.testing.assert_allclose(model.precisions_ * model.covariances_, 1.0)
    assert model.weights_.sum() == pytest.approx(1.0)
    assert "sparsity=3" in repr(model) and "n_laps" not in repr(model)  # defaults left out
    with pytest.raises(ValueError, match=r"invalid parameter 'sparsty' for GaussianMixture"):
        model.set_params(sparsty=2)
    unfitted = clone(model)
    assert not hasattr(unfitted, "weights_") and unfitted.get_params() == model.get_params()
    seeded = model.set_params(random_state=np.random.default_rng(1))
    assert clone(seeded).random_state is not seeded.random_state  # copied, not shared


def test_scikit_learn_tools_take_the_estimators(rng):
    """scikit-learn is not a dependency, but its model-selection tools work
    with lsdask estimators where it is installed."""
    model_selection = pytest.importorskip("sklearn.model_selection")
    base = pytest.importorskip("sklearn.base")
    X, *_ = _mixture(rng, n=400)
    model = lsdask.GaussianMixture(3, sparsity=2, n_laps=2, client="sync", random_state=0)
    assert base.clone(model).get_params() == model.get_params()
    scores = model_selection.cross_val_score(model, X, cv=2)
    assert scores.shape == (2,) and np.all(np.isfinite(scores))


def test_same_seed_same_result_and_other_seed_differs(rng):
    X, *_ = _mixture(rng, n=600)
    kw = dict(covariance_type="full", sparsity=2, client="sync", n_laps=3)
    a = lsdask.GaussianMixture(4, random_state=5, **kw).fit(X)
    b = lsdask.GaussianMixture(4, random_state=5, **kw).fit(X)
    c = lsdask.GaussianMixture(4, random_state=6, **kw).fit(X)
    np.testing.assert_array_equal(a.elbo_trace_, b.elbo_trace_)
    assert not np.array_equal(a.elbo_trace_, c.elbo_trace_)


def test_zero_mean_model_warns_of_data_far_from_centered(rng, caplog):
    """The default zero-mean model cannot fit clusters along a line through the
    origin; it says so, and says nothing for centered data or another model."""
    X = np.concatenate([rng.normal(c, 1, size=(100, 2)) for c in (10, -10, 20)])
    with caplog.at_level(logging.WARNING, logger="lsdask.models"):
        lsdask.GaussianMixture(3, n_laps=1, client="sync", random_state=0).fit(X)
    assert "covariance_type='zero-mean' models rows centered at 0" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lsdask.models"):
        lsdask.GaussianMixture(3, n_laps=1, client="sync", random_state=0).fit(X - X.mean(0))
        lsdask.GaussianMixture(3, n_laps=1, client="sync", random_state=0,
                               covariance_type="full").fit(X)  # fmt: skip
    assert "zero-mean" not in caplog.text


def test_scikit_learn_members_of_the_gaussian_mixture(rng):
    X = np.concatenate([rng.normal(-4, 1, size=(200, 2)), rng.normal(4, 0.5, size=(100, 2))])
    kw = dict(covariance_type="full", sparsity=1, n_laps=5, client="sync", random_state=0)
    gmm = lsdask.GaussianMixture(2, **kw)
    labels = gmm.fit_predict(X)
    np.testing.assert_array_equal(labels, gmm.predict(X))
    # per row, as scikit-learn's
    assert gmm.lower_bound_ == pytest.approx(gmm.elbo_trace_[-1] / 300, rel=1e-12)
    assert gmm.n_iter_ == gmm.n_laps_
    assert not hasattr(lsdask.GaussianMixture(2), "lower_bound_")  # NotFittedError
    P = gmm.predict_proba(X)
    assert P.has_canonical_format and (P.data > 0).all()  # no stored zeros, sorted columns
    S, z = gmm.sample(40_000, random_state=1)
    assert S.shape == (40_000, 2) and set(np.unique(z)) <= {0, 1}
    mean = gmm.weights_ @ gmm.means_  # the mixture's mean and each cluster's share
    np.testing.assert_allclose(S.mean(axis=0), mean, atol=0.05)
    np.testing.assert_allclose(np.bincount(z, minlength=2) / 40_000, gmm.weights_, atol=0.01)
    k = int(np.argmax(gmm.weights_))
    np.testing.assert_allclose(np.cov(S[z == k].T), gmm.covariances_[k], atol=0.06)
    diag = lsdask.GaussianMixture(2, **{**kw, "covariance_type": "diag"}).fit(X)
    assert diag.sample(5, random_state=0)[0].shape == (5, 2)
    with pytest.raises(ValueError, match=r"X: the data has no rows; give at least one"):
        gmm.predict(np.zeros((0, 2)))


@pytest.mark.parametrize(
    "cls", [lsdask.LDA, lsdask.HDP, lsdask.GaussianMixture, lsdask.MultinomialMixture]
)
def test_every_signature_is_its_parameter_table(cls):
    """``__init__``'s explicit signature (what scikit-learn reads) and the table
    (what fit checks and the command line offers) list the same parameters, in
    the same order, with the same defaults; every one has help."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    table = cls.param_table
    assert [p.name for p in params] == list(table.names)
    assert params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params[1:])
    for p in params:
        assert p.default == table[p.name].default, p.name
        assert table[p.name].help, p.name
    model = cls()
    assert model.get_params() == table.defaults()
    model.check_params()  # the defaults pass their own checks
    assert lsdask.LDA().tol == config.DEFAULT_TOL == lsdask.GaussianMixture().tol


def test_the_table_checks_the_parameters_before_the_data():
    """An invalid parameter is refused by check_params, with fit's message, before
    any data is read; a valid one passes whatever the others are set to."""
    with pytest.raises(ValueError, match=r"lam must be a positive finite number; got 0"):
        lsdask.MultinomialMixture(lam=0).check_params()
    with pytest.raises(ValueError, match=r"restarts must be True or False; got 'no'"):
        lsdask.LDA(restarts="no").check_params()
    with pytest.raises(ValueError, match=r"sparsity must be an integer in \[1, 2\]"):
        lsdask.GaussianMixture(2, sparsity=3).check_params()
    lsdask.LDA(2, sparsity=50).check_params()  # L >= K keeps every active topic
    with pytest.raises(ValueError, match=r"init: expected topic-word counts of shape"):
        lsdask.LDA(2, init=np.ones((2, 5))).check_params(n_features=6)
    lsdask.LDA(2, init=np.ones((2, 5))).check_params()  # the shape waits for the data
    with pytest.raises(ValueError, match=r"gibbs_sweeps must be an integer >= 1; got 0"):
        lsdask.LDA(gibbs_sweeps=0).fit(sp.csr_matrix(np.ones((3, 4))))
