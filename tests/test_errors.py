"""Bad input gets a clear error that names the parameter or the chunk."""

from __future__ import annotations

import numpy as np
import pytest
import zarr

import lsdask
from lsdask.errors import DataError


def _fit(X, **kw):
    params = dict(n_components=3, sparsity=2, n_laps=2, client="sync", random_state=0)
    params.update(kw)
    return lsdask.GaussianMixture(**params).fit(X)


@pytest.fixture
def X(rng):
    return rng.normal(size=(300, 4))


def _zarr(path, X, chunk=100):
    z = zarr.create_array(str(path), shape=X.shape, chunks=(chunk, X.shape[1]), dtype=X.dtype)
    z[:] = X
    return str(path)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_name_the_batch_and_row(X, bad):
    X[250, 2] = bad
    with pytest.raises(
        DataError, match=r"X batch 2 \(rows 200:300\).*non-finite.*row 50, column 2"
    ):
        _fit(X, batch_size=100)


def test_non_finite_in_a_zarr_chunk_names_the_store_and_chunk(tmp_path, X, dask_client):
    X[150, 0] = np.nan
    path = _zarr(tmp_path / "bad.zarr", X)
    with pytest.raises(DataError, match=r"bad\.zarr.*chunk 1 \(rows 100:200\).*non-finite"):
        _fit(path)
    # the same message comes back from a task on a Dask worker
    with pytest.raises(DataError, match=r"chunk 1 \(rows 100:200\).*non-finite"):
        _fit(path, client=dask_client, init="random")


@pytest.mark.parametrize("shape", [(10,), (4, 5, 6)])
def test_wrong_dimensionality(shape):
    with pytest.raises(DataError, match=r"expected a 2-D array \(rows, features\); got shape"):
        _fit(np.ones(shape))


def test_predict_with_other_number_of_features(X):
    model = _fit(X)
    with pytest.raises(ValueError, match="X has 3 features, but this model was fitted with 4"):
        model.predict(X[:, :3])


@pytest.mark.parametrize("sparsity", [0, 4, -1, 2.5])
def test_sparsity_out_of_range(X, sparsity):
    with pytest.raises(ValueError, match=r"sparsity must be an integer in \[1, 3\].*sparsity=None"):
        _fit(X, sparsity=sparsity)


def test_empty_store(tmp_path):
    path = _zarr(tmp_path / "empty.zarr", np.zeros((0, 4), dtype="f4"))
    with pytest.raises(DataError, match=r"empty\.zarr.*has no rows"):
        _fit(path)
    with pytest.raises(DataError, match="has no rows"):
        _fit(np.zeros((0, 4)))


def test_non_numeric_dtype():
    with pytest.raises(DataError, match=r"expected a numeric dtype.*got <U1"):
        _fit(np.full((20, 3), "a"))
    with pytest.raises(DataError, match=r"expected a numeric dtype.*got object"):
        _fit(np.array([[1, None]] * 10, dtype=object))


def test_missing_path(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"X: no Zarr array at .*nowhere\.zarr"):
        _fit(str(tmp_path / "nowhere.zarr"))


def test_path_that_is_not_zarr(tmp_path):
    (tmp_path / "junk").mkdir()
    with pytest.raises(DataError, match="is not a readable Zarr array"):
        _fit(str(tmp_path / "junk"))


def test_more_components_than_rows():
    with pytest.raises(ValueError, match="n_components=3 exceeds the 2 observations"):
        _fit(np.ones((2, 4)), sparsity=None)


@pytest.mark.parametrize(
    "param,value,message",
    [
        ("n_components", 0, r"n_components must be an integer >= 1; got 0"),
        ("algorithm", "em", r"algorithm must be one of 'memo', 'svi', 'vb', 'esvi'; got 'em'"),
        ("covariance_type", "tied", r"covariance_type must be one of 'zero-mean', 'full', 'diag'"),
        ("n_laps", -1, r"n_laps must be an integer >= 0"),
        ("n_laps", 0, r"n_laps=0 trains nothing: it exports a checkpoint as it is; pass"),
        ("alpha", -1.0, r"alpha must be a positive finite number; got -1.0"),
        ("batch_size", 0, r"batch_size must be an integer >= 1"),
        ("init", "kmeans", r"init must be one of 'kmeans\+\+', 'random'"),
        ("svi_kappa", 1.5, r"svi_kappa must be in \(0, 1\]"),
        ("prior_scale", 0.0, r"prior_scale must be a positive finite number"),
        ("nu", 3.0, r"nu must be > D \+ 1 = 5"),
    ],
)
def test_parameter_errors(X, param, value, message):
    with pytest.raises(ValueError, match=message):
        _fit(X, **{param: value})


def test_multinomial_rejects_negative_counts(rng):
    C = rng.poisson(1.0, size=(50, 8)).astype(float)
    C[33, 2] = -1
    with pytest.raises(ValueError, match=r"X batch 1 \(rows 20:40\): word counts must be finite"):
        lsdask.MultinomialMixture(2, client="sync", batch_size=20).fit(C)


def test_unfitted_model():
    from lsdask.errors import NotFittedError

    with pytest.raises(NotFittedError, match="not fitted yet; call fit"):
        lsdask.GaussianMixture(2).predict(np.ones((3, 2)))


@pytest.mark.parametrize("name", ["does/not/exist", "plain_folder"])
def test_lda_on_a_path_that_is_no_corpus_names_the_corpus(tmp_path, name):
    (tmp_path / "plain_folder").mkdir()
    with pytest.raises((FileNotFoundError, DataError), match=r"corpus.*lsdask ingest"):
        lsdask.LDA(3, client="sync").fit(tmp_path / name)


def test_a_zarr_array_in_memory_is_refused_with_what_to_do():
    import zarr

    z = zarr.create_array(zarr.storage.MemoryStore(), shape=(50, 3), chunks=(25, 3), dtype="f8")
    z[:] = np.random.default_rng(0).normal(size=(50, 3))
    with pytest.raises(ValueError, match=r"a Zarr array in a MemoryStore, .* pass the path, or "
                       r"pass its values \(X\[:\]\)"):  # fmt: skip
        lsdask.GaussianMixture(2, client="sync").fit(z)
    lsdask.GaussianMixture(2, n_laps=1, client="sync").fit(z[:])  # as the message says


def test_exceptions_keep_their_old_import_homes():
    """The exceptions moved into lsdask.errors are the same classes where they
    were defined before, imported without a warning."""
    import warnings

    import lsdask.errors

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from lsdask.engine import ClusterError
        from lsdask.io.sources import DataError as OldDataError
        from lsdask.learn.state import FitInterrupted
        from lsdask.validation import NotFittedError as OldNotFittedError

    assert OldNotFittedError is lsdask.errors.NotFittedError
    assert FitInterrupted is lsdask.errors.FitInterrupted
    assert OldDataError is lsdask.errors.DataError
    assert ClusterError is lsdask.errors.ClusterError
