"""LDA's estimator conventions: the fitted state against later parameters,
pickling, read-only fitted arrays, scoring invariants, small API checks."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.errors import DataError, NotFittedError
from lsdask.persist import load_lda, save_lda
from tests.test_lda import _corpus


@pytest.fixture(scope="module")
def docs() -> sp.csr_matrix:
    X, _ = _corpus(np.random.default_rng(7), n_docs=240, K=5, V=80, length=40)
    return X


@pytest.fixture(scope="module")
def fitted(docs) -> lsdask.LDA:
    return lsdask.LDA(5, sparsity=3, n_laps=3, client="sync", random_state=0).fit(docs[:200])


def test_parameters_changed_after_fit_leave_the_fitted_model_as_it_was(fitted, docs, tmp_path):
    """set_params(n_components=...) counts from the next fit: transform keeps the
    fitted K (a CSR of the new K's columns could not hold the fitted topic ids),
    and save/load keeps the fitted K, alpha, eta."""
    model = pickle.loads(pickle.dumps(fitted))
    before = model.transform(docs[200:])
    model.set_params(n_components=2, alpha=3.0, eta=0.7)
    after = model.transform(docs[200:])
    after.check_format(full_check=True)
    assert after.shape == (40, 5) and model.topics_per_document == 3
    assert (after != before).nnz == 0
    model.set_params(init=np.ones((2, 80)))  # the fit's init ("auto") is what is saved
    save_lda(model, tmp_path / "m")
    loaded = load_lda(tmp_path / "m", client="sync")
    assert (loaded.n_components, loaded.alpha, loaded.eta) == (5, 0.5, 0.1)
    assert loaded.init == "auto"
    assert (loaded.transform(docs[200:]) != before).nnz == 0


def test_fitted_arrays_are_read_only_views(fitted, docs):
    """components_ is the model's lambda: an in-place edit (components_ /= ...)
    would change what a saved and reloaded model computes, so it fails."""
    assert not fitted.components_.flags.writeable and not fitted.topic_word_.flags.writeable
    before = np.array(fitted.posterior_.lam)
    with pytest.raises(ValueError, match="read-only"):
        fitted.components_ /= fitted.components_.sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(fitted.posterior_.lam, before)  # the model is untouched
    gmm = lsdask.GaussianMixture(
        2, sparsity=1, n_laps=2, covariance_type="diag", client="sync", random_state=0
    )
    gmm.fit(np.random.default_rng(0).normal(size=(60, 3)))
    assert not gmm.means_.flags.writeable and not gmm.covariances_.flags.writeable


def test_a_model_fitted_on_a_dask_client_pickles_without_it(docs, dask_client):
    model = lsdask.LDA(5, sparsity=3, n_laps=2, client=dask_client, random_state=0)
    model.fit(docs[:200])
    copy = pickle.loads(pickle.dumps(model))
    assert copy.client is None and model.client is dask_client
    assert (copy.transform(docs[200:]) != model.transform(docs[200:])).nnz == 0
    assert pickle.loads(pickle.dumps(lsdask.LDA(5, client="sync"))).client == "sync"


def test_score_does_not_depend_on_how_the_matrix_is_stored(fitted, docs):
    """The heldout split is over word types in id order: entries stored in
    another order, or a word stored twice, score as the canonical matrix."""
    X = sp.csr_matrix(docs[200:])
    reference = fitted.score(X)
    rows = []
    for d in range(X.shape[0]):
        lo, hi = X.indptr[d], X.indptr[d + 1]
        rows.append((X.indices[lo:hi][::-1], X.data[lo:hi][::-1]))
    reversed_ = sp.csr_matrix(
        (np.concatenate([r[1] for r in rows]), np.concatenate([r[0] for r in rows]), X.indptr),
        shape=X.shape,
    )
    assert not reversed_.has_sorted_indices
    assert fitted.score(reversed_) == reference
    # each entry stored as two halves: the same counts, twice the entries
    doubled = sp.csr_matrix(
        (np.repeat(X.data / 2, 2), np.repeat(X.indices, 2), X.indptr * 2), shape=X.shape
    )
    assert doubled.nnz == 2 * X.nnz
    assert fitted.score(doubled) == pytest.approx(reference, rel=1e-12)
    assert not reversed_.has_canonical_format  # the caller's matrix is not changed


def test_small_api(fitted, docs):
    np.testing.assert_array_equal(fitted.get_feature_names_out(), [f"lda{k}" for k in range(5)])
    model = lsdask.LDA(5, sparsity=3, n_laps=3, client="sync", random_state=0)
    T = model.fit_transform(docs[:200])
    assert (T != fitted.transform(docs[:200])).nnz == 0
    for bad in (0, -1, 2.5):
        with pytest.raises(ValueError, match=r"^n must be"):
            fitted.top_words(bad)
    assert len(fitted.top_words(10_000)[0]) == 80  # at most the vocabulary
    unfitted = lsdask.LDA(5)
    with pytest.raises(NotFittedError, match="not fitted yet; call fit"):
        unfitted.transform(docs)
    assert issubclass(NotFittedError, ValueError) and issubclass(NotFittedError, AttributeError)


def test_tol_zero_runs_every_lap(docs):
    model = lsdask.LDA(5, n_laps=4, tol=0, client="sync", random_state=0, init="kmeans++")
    model.fit(docs[:200])
    assert model.n_laps_ == 4 and not model.converged_
    with pytest.raises(ValueError, match=r"tol must be a finite number >= 0; got -1"):
        lsdask.LDA(5, tol=-1, client="sync").fit(docs[:200])


def test_partial_fit_keeps_the_traces_in_step_and_checks_its_first_documents(fitted, docs):
    model = pickle.loads(pickle.dumps(fitted))
    n = len(model.elbo_trace_)
    model.partial_fit(docs[200:220])
    model.partial_fit(docs[220:240])
    assert len(model.elbo_trace_) == len(model.lap_trace_) == len(model.time_trace_) == n + 2
    np.testing.assert_array_equal(model.lap_trace_[n:], [model.n_laps_] * 2)
    assert np.all(np.diff(model.time_trace_[n - 1 :]) >= 0)
    with pytest.raises(DataError, match=r"hold no tokens"):
        lsdask.LDA(5, client="sync").partial_fit(sp.csr_matrix((4, 80)))


def test_inference_checks_a_sparsity_changed_after_fit(fitted, docs):
    """predict_proba checks L against the fitted K: sparsity=4 on a K=3 mixture
    would index past the end in the kernel, and 0 divide by zero."""
    X = np.random.default_rng(3).normal(size=(50, 2))
    gmm = lsdask.GaussianMixture(3, sparsity=2, n_laps=2, client="sync", random_state=0).fit(X)
    for bad, match in ((4, r"sparsity must be an integer in \[1, 3\]; got 4"), (0, r"got 0"),
                       (-1, r"got -1")):  # fmt: skip
        gmm.set_params(sparsity=bad)
        with pytest.raises(ValueError, match=match):
            gmm.predict_proba(X)
    gmm.set_params(sparsity=3)
    np.testing.assert_allclose(gmm.predict_proba(X).sum(axis=1), 1.0)
    gmm.set_params(sparsity=None)
    assert gmm.predict_proba(X).shape == (50, 3)
    assert not gmm.weights_.flags.writeable  # score reads it: no silent edits
    model = pickle.loads(pickle.dumps(fitted))
    model.set_params(sparsity=0)
    with pytest.raises(ValueError, match=r"sparsity must be"):
        model.transform(docs[:5])


def test_a_mixture_saves_the_covariance_type_it_was_fitted_with(tmp_path):
    """save_gmm stores the covariance_type of the fit, not one set since: the
    saved posterior is of that type, and load_gmm reads it so."""
    from lsdask.persist.gmm import load_gmm, save_gmm

    X = np.random.default_rng(2).normal(size=(80, 3))
    gmm = lsdask.GaussianMixture(3, n_laps=2, client="sync", random_state=0).fit(X)
    gmm.set_params(covariance_type="diag", n_laps=9)
    loaded = load_gmm(save_gmm(gmm, tmp_path / "g"), client="sync")
    assert loaded.covariance_type == "zero-mean" and loaded.n_laps == 2
    np.testing.assert_array_equal(loaded.predict(X), gmm.predict(X))
    assert not loaded.weights_.flags.writeable


def test_a_mixture_keeps_its_fitted_k_after_set_params(tmp_path):
    from lsdask.persist.gmm import load_gmm, save_gmm

    X = np.random.default_rng(1).normal(size=(90, 3))
    gmm = lsdask.GaussianMixture(4, sparsity=2, n_laps=2, client="sync", random_state=0).fit(X)
    before = gmm.predict_proba(X)
    gmm.set_params(n_components=2, alpha=7.0)
    after = gmm.predict_proba(X)
    after.check_format(full_check=True)
    assert after.shape == (90, 4) and (after != before).nnz == 0
    save_gmm(gmm, tmp_path / "g")
    loaded = load_gmm(tmp_path / "g", client="sync")
    assert (loaded.n_components, loaded.alpha) == (4, 1.0)
    assert (loaded.predict_proba(X) != before).nnz == 0


def test_a_matrix_fit_takes_the_words_of_its_columns(docs, tmp_path):
    words = [f"word{i}" for i in range(80)]
    model = lsdask.LDA(5, sparsity=3, n_laps=2, client="sync", random_state=0)
    model.fit(docs[:200], vocabulary=np.array(words))
    assert model.vocabulary_ == words
    assert all(w.startswith("word") for w in model.top_words(3)[0])
    loaded = load_lda(save_lda(model, tmp_path / "m"), client="sync")
    assert loaded.top_words(3) == model.top_words(3)
    with pytest.raises(ValueError, match=r"over another vocabulary than this model's"):
        model.partial_fit(docs[200:], vocabulary=words[::-1])
    model.partial_fit(docs[200:], vocabulary=words)  # the same words, or none, go on
    model.partial_fit(docs[200:])
    with pytest.raises(ValueError, match=r"vocabulary has 79 words, but X has 80 columns"):
        lsdask.LDA(5, client="sync").fit(docs, vocabulary=words[:79])
    with pytest.raises(ValueError, match=r"vocabulary\[0\] and vocabulary\[1\] are both 'a'"):
        lsdask.LDA(5, client="sync").fit(docs, vocabulary=["a"] * 80)
    with pytest.raises(TypeError, match="got a string"):
        lsdask.LDA(5, client="sync").fit(docs, vocabulary="abc")
    # gensim's id2word: a mapping from column to word (iterating it gives the ids)
    id2word = {i: w for i, w in reversed(list(enumerate(words)))}
    mapped = lsdask.LDA(5, n_laps=1, client="sync", random_state=0)
    assert mapped.fit(docs[:50], vocabulary=id2word).vocabulary_ == words
    with pytest.raises(ValueError, match=r"map the columns 0, 1, \.\.\., V-1 to words"):
        lsdask.LDA(5, client="sync").fit(docs, vocabulary={i + 1: w for i, w in enumerate(words)})
    with pytest.raises(TypeError, match=r"vocabulary\[0\] is 0, not a word"):
        lsdask.LDA(5, client="sync").fit(docs, vocabulary=list(range(80)))
    T = lsdask.LDA(5, n_laps=2, client="sync", random_state=0).fit_transform(
        docs[:200], vocabulary=words
    )
    assert T.shape == (200, 5)
    from lsdask.io.corpus import Corpus

    Corpus.write(tmp_path / "c", docs[:50], words)
    with pytest.raises(ValueError, match=r"vocabulary= is given, but Parquet corpus .* differ"):
        lsdask.LDA(5, client="sync").fit(str(tmp_path / "c"), vocabulary=words[::-1])


@pytest.mark.parametrize("algorithm", ["memo", "svi", "vb"])
def test_every_algorithm_traces_the_data_size_of_each_elbo(docs, algorithm):
    """Documents of different lengths: SVI's size is its estimate of the whole
    data from the batch's rows (exact for memo and vb)."""
    X = sp.vstack([docs[:100], docs[100:200] * 3], format="csr")
    model = lsdask.LDA(5, n_laps=2, algorithm=algorithm, client="sync", random_state=0,
                       batch_size=50, init="kmeans++")  # fmt: skip
    model.fit(X)
    assert len(model.size_trace_) == len(model.elbo_trace_) == len(model.lap_trace_)
    if algorithm == "svi":
        # each update's estimate: its batch's tokens times 200 / 50 documents
        batch_tokens = {float(X[i : i + 50].sum()) * 4 for i in range(0, 200, 50)}
        assert {float(s) for s in np.round(model.size_trace_, 6)} <= {
            round(t, 6) for t in batch_tokens
        }
    else:
        np.testing.assert_allclose(model.size_trace_[-1], X.sum(), rtol=1e-9)


def test_elbo_per_token_divides_by_the_tokens_of_each_update():
    from types import SimpleNamespace

    from lsdask.jobs.corpus_lda import _elbo_per_token

    model = SimpleNamespace(elbo_trace_=np.array([-10.0, -20.0, -30.0, -40.0]),
                            size_trace_=np.array([np.nan, 4.0, 5.0]))  # fmt: skip
    # values the size trace does not reach (or holds nan for): the corpus's tokens now (10)
    np.testing.assert_allclose(_elbo_per_token(model, 10.0), [-1.0, -2.0, -7.5, -8.0])
