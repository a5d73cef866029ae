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


def test_a_fitted_mixture_pickles_and_unpickles_with_the_same_outputs(X):
    """The estimator classes stay where pickles of fitted models name them."""
    import pickle

    model = lsdask.GaussianMixture(3, sparsity=2, n_laps=2, client="sync", random_state=0)
    model.fit(X)
    blob = pickle.dumps(model)
    assert b"lsdask.estimators.gaussian" in blob
    copy = pickle.loads(blob)
    assert type(copy) is lsdask.GaussianMixture
    assert (model.predict_proba(X) != copy.predict_proba(X)).nnz == 0
    assert copy.score(X) == model.score(X)
    np.testing.assert_array_equal(copy.means_, model.means_)


def test_the_old_module_path_still_works_and_warns():
    import importlib
    import sys

    with pytest.warns(DeprecationWarning, match=r"lsdask.persist_gmm is deprecated"):
        if "lsdask.persist_gmm" in sys.modules:
            old = importlib.reload(sys.modules["lsdask.persist_gmm"])
        else:
            old = importlib.import_module("lsdask.persist_gmm")
    assert (old.save_gmm, old.load_gmm) == (save_gmm, load_gmm)
    assert (old.FORMAT, old.VERSION) == ("lsdask-gmm", 1)


def test_a_file_that_names_an_unknown_posterior_is_refused(X, tmp_path):
    import json

    model = lsdask.GaussianMixture(2, n_laps=1, client="sync", random_state=0).fit(X)
    path = save_gmm(model, tmp_path / "m")
    meta = json.loads((path / "params.json").read_text())
    (path / "params.json").write_text(json.dumps({**meta, "posterior": "os.system"}))
    with pytest.raises(ValueError, match=r"model '.*m': unknown posterior 'os.system'"):
        load_gmm(path)
    meta["params"]["n_components"] = 5
    (path / "params.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"params.json says n_components=5 but the model has K=2"):
        load_gmm(path)


def test_load_drops_run_time_settings_found_in_params_json(X, tmp_path):
    """Issue 25, finding 6: checkpoint_dir/resume in a (hand-edited) params.json
    were kept by load_gmm."""
    import json

    model = lsdask.GaussianMixture(2, n_laps=1, client="sync", random_state=0).fit(X)
    path = save_gmm(model, tmp_path / "m")
    meta = json.loads((path / "params.json").read_text())
    assert not {"checkpoint_dir", "resume", "client"} & set(meta["params"])  # never saved
    meta["params"].update(checkpoint_dir=str(tmp_path / "ckpt"), resume=True)
    (path / "params.json").write_text(json.dumps(meta))
    with pytest.warns(UserWarning) as got:
        loaded = load_gmm(path)
    messages = sorted(str(w.message) for w in got)
    assert len(messages) == 2
    assert "params.json holds checkpoint_dir=" in messages[0]
    assert "params.json holds resume=True" in messages[1]
    assert all(f"model {str(path)!r}" in m and "ignored" in m for m in messages)
    assert loaded.checkpoint_dir is None and loaded.resume is False
