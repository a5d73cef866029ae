"""GaussianMixture save/load: a round trip is exact; bad folders get clear errors."""

from __future__ import annotations

import numpy as np
import pytest

import lsdask
from lsdask.persist.gmm import load_gmm, save_gmm


@pytest.fixture(scope="module")
def X():
    return np.random.default_rng(0).standard_t(3, size=(600, 4))


@pytest.mark.parametrize("covariance_type", ["zero-mean", "diag", "full"])
@pytest.mark.parametrize("algorithm", ["memo", "svi"])
def test_round_trip_is_exact(X, tmp_path, covariance_type, algorithm):
    model = lsdask.GaussianMixture(
        3, sparsity=2, covariance_type=covariance_type, algorithm=algorithm, n_laps=3,
        client="sync", random_state=0, batch_size=200,
    )  # fmt: skip
    model.fit(X)
    loaded = load_gmm(save_gmm(model, tmp_path / "m"), client="sync")
    assert (model.predict_proba(X) != loaded.predict_proba(X)).nnz == 0
    assert loaded.score(X) == model.score(X)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    for name in ("weights_", "covariances_", "precisions_", "means_", "elbo_trace_", "lap_trace_"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(model, name), err_msg=name)
    assert loaded.get_params() == model.get_params()
    assert (loaded.n_laps_, loaded.converged_, loaded.n_features_in_) == (3, model.converged_, 4)


def test_bad_targets_and_folders(X, tmp_path):
    model = lsdask.GaussianMixture(2, n_laps=1, client="sync", random_state=0)
    from lsdask.errors import NotFittedError

    with pytest.raises(NotFittedError, match="not fitted yet"):
        save_gmm(model, tmp_path / "m")
    model.fit(X)
    with pytest.raises(TypeError, match=r"save_gmm saves an lsdask\.GaussianMixture; got LDA"):
        save_gmm(lsdask.LDA(2), tmp_path / "m")
    save_gmm(model, tmp_path / "m")
    with pytest.raises(FileExistsError, match="a model already exists"):
        save_gmm(model, tmp_path / "m")
    save_gmm(model, tmp_path / "m", overwrite=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("x")
    with pytest.raises(FileExistsError, match="is not an lsdask model directory"):
        save_gmm(model, tmp_path / "other", overwrite=True)
    with pytest.raises(FileNotFoundError, match=r"no GaussianMixture model at .*params\.json"):
        load_gmm(tmp_path / "nowhere")
    (tmp_path / "m" / "arrays.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"arrays\.npz cannot be read .*corrupt"):
        load_gmm(tmp_path / "m")
    (tmp_path / "lda").mkdir()
    (tmp_path / "lda" / "params.json").write_text('{"format": "lsdask-lda", "version": 1}')
    with pytest.raises(
        ValueError, match=r"not an lsdask GaussianMixture model \(format 'lsdask-lda'"
    ):
        load_gmm(tmp_path / "lda")
