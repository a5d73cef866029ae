"""Tests for lsdask.persist: saving and loading fitted LDA models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import lsdask
from lsdask.persist import load_lda, save_lda
from lsdask.synthetic import make_bars_corpus

VOCAB = [f"px{i}" for i in range(25)]


@pytest.fixture(scope="module")
def bars():
    X, _ = make_bars_corpus(n_docs=240, doc_topic_prior=0.1, random_state=3)
    return X[:200], X[200:]


def _fit(X, **kw) -> lsdask.LDA:
    params = dict(sparsity=3, n_laps=3, batch_size=50, alpha=1.0, random_state=0)
    params.update(kw)
    return lsdask.LDA(10, client="sync", progress=False, **params).fit(X)


@pytest.fixture(scope="module")
def fitted(bars) -> lsdask.LDA:
    model = _fit(bars[0])
    model.vocabulary_ = list(VOCAB)
    return model


def _assert_same(a: lsdask.LDA, b: lsdask.LDA, X) -> None:
    assert np.array_equal(a.components_, b.components_)
    assert np.array_equal(a.topic_word_, b.topic_word_)
    Ta, Tb = a.transform(X), b.transform(X)
    assert np.array_equal(Ta.indptr, Tb.indptr)
    assert np.array_equal(Ta.indices, Tb.indices)
    assert np.array_equal(Ta.data, Tb.data)
    assert a.top_words(5) == b.top_words(5)
    assert a.score(X) == b.score(X)


def test_round_trip_is_exact(fitted: lsdask.LDA, bars, tmp_path: Path) -> None:
    path = save_lda(fitted, tmp_path / "model")
    assert path == tmp_path / "model"
    assert sorted(p.name for p in path.iterdir()) == ["arrays.npz", "params.json", "vocab.txt"]
    loaded = load_lda(path, client="sync")
    assert isinstance(loaded, lsdask.LDA)
    _assert_same(fitted, loaded, bars[1])
    assert loaded.vocabulary_ == VOCAB
    assert loaded.top_words(3)[0][0].startswith("px")
    assert np.array_equal(loaded.elbo_trace_, fitted.elbo_trace_)
    assert np.array_equal(loaded.lap_trace_, fitted.lap_trace_)
    assert loaded.n_laps_ == fitted.n_laps_ and loaded.converged_ == fitted.converged_
    assert loaded.n_features_in_ == 25
    expected = {k: v for k, v in fitted.get_params().items() if k != "client"}
    assert {k: v for k, v in loaded.get_params().items() if k != "client"} == expected
    assert loaded.client == "sync"
    np.testing.assert_array_equal(loaded.coherence(bars[1], 4), fitted.coherence(bars[1], 4))
    # no temporary folders left next to the model
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


def test_params_json_is_readable(fitted: lsdask.LDA, tmp_path: Path) -> None:
    save_lda(fitted, tmp_path / "m")
    meta = json.loads((tmp_path / "m" / "params.json").read_text())
    assert meta["format"] == "lsdask-lda" and meta["version"] == 1
    assert "client" not in meta["params"]
    assert meta["params"]["n_components"] == 10 and meta["params"]["sparsity"] == 3
    assert meta["fitted"]["vocab_size"] == 25
    assert meta["fitted"]["n_laps_"] == fitted.n_laps_
    with np.load(tmp_path / "m" / "arrays.npz", allow_pickle=False) as arrays:
        assert arrays["stats_words"].shape == (10, 25)
        assert arrays["components_"].dtype == np.float64


def test_loaded_model_keeps_learning_like_the_saved_one(bars, tmp_path: Path) -> None:
    a = _fit(bars[0])
    save_lda(a, tmp_path / "m")
    b = load_lda(tmp_path / "m", client="sync")
    a.partial_fit(bars[1])
    b.partial_fit(bars[1])
    assert np.array_equal(a.components_, b.components_)
    assert np.array_equal(a.elbo_trace_, b.elbo_trace_)
    assert b.vocabulary_ is None


@pytest.mark.parametrize("algorithm", ["svi", "vb"])
def test_round_trip_other_algorithms(bars, tmp_path: Path, algorithm: str) -> None:
    model = _fit(bars[0], algorithm=algorithm, n_laps=2, sparsity=None)
    loaded = load_lda(save_lda(model, tmp_path / algorithm), client="sync")
    _assert_same(model, loaded, bars[1])
    assert not (tmp_path / algorithm / "vocab.txt").exists()


def test_partial_fit_only_model_round_trip(bars, tmp_path: Path) -> None:
    model = lsdask.LDA(5, sparsity=2, batch_size=100, random_state=1, client="sync")
    model.partial_fit(bars[0])
    assert len(model.lap_trace_) == len(model.time_trace_) == len(model.elbo_trace_) == 1
    loaded = load_lda(save_lda(model, tmp_path / "p"), client="sync")
    _assert_same(model, loaded, bars[1])


def test_overwrite(fitted: lsdask.LDA, bars, tmp_path: Path) -> None:
    path = tmp_path / "m"
    save_lda(fitted, path)
    with pytest.raises(FileExistsError, match=r"a model already exists at .*m'.*overwrite=True"):
        save_lda(fitted, path)
    other = _fit(bars[0], random_state=5)
    save_lda(other, path, overwrite=True)
    assert np.array_equal(load_lda(path).components_, other.components_)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]
    folder = tmp_path / "not_a_model"
    folder.mkdir()
    (folder / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError, match="not an lsdask model directory"):
        save_lda(fitted, folder, overwrite=True)
    assert (folder / "keep.txt").exists()


def test_save_errors(bars, tmp_path: Path) -> None:
    from lsdask.errors import NotFittedError

    with pytest.raises(NotFittedError, match="not fitted"):
        save_lda(lsdask.LDA(3), tmp_path / "m")
    with pytest.raises(TypeError, match=r"save_lda saves an lsdask\.LDA; got GaussianMixture"):
        save_lda(lsdask.GaussianMixture(2), tmp_path / "m")
    # the parameters saved are the fit's: one fitted with a Generator cannot be saved
    model = _fit(bars[0], n_laps=1, random_state=np.random.default_rng(0))
    with pytest.raises(ValueError, match="cannot save parameter random_state"):
        save_lda(model, tmp_path / "m")
    model = _fit(bars[0], n_laps=1)
    model.random_state = np.random.default_rng(0)  # set after the fit: the fit's 0 is saved
    save_lda(model, tmp_path / "ok")
    assert load_lda(tmp_path / "ok").random_state == 0
    shutil.rmtree(tmp_path / "ok")
    model.vocabulary_ = ["a\nb", *VOCAB[1:]]
    with pytest.raises(ValueError, match=r"vocabulary_\[0\].*line break"):
        save_lda(model, tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


# loading errors ---------------------------------------------------------------


@pytest.fixture
def saved(fitted: lsdask.LDA, tmp_path: Path) -> Path:
    return save_lda(fitted, tmp_path / "model")


def test_load_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no LDA model at '.*nowhere'"):
        load_lda(tmp_path / "nowhere")


def test_load_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match=r"'.*f' is a file, not an lsdask model directory"):
        load_lda(tmp_path / "f")


@pytest.mark.parametrize("name", ["params.json", "arrays.npz", "vocab.txt"])
def test_load_missing_file(saved: Path, name: str) -> None:
    (saved / name).unlink()
    with pytest.raises(FileNotFoundError, match=rf"model '.*model': {name} is missing"):
        load_lda(saved)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda meta: "{not json", r"model '.*model': params.json is not valid JSON"),
        (lambda meta: {**meta, "format": "other"}, r"params.json is not an lsdask LDA model"),
        (lambda meta: {**meta, "version": 99}, r"params.json has version 99"),
        (lambda meta: {**meta, "fitted": {}}, r"params.json lacks fitted\['n_components'\]"),
        (
            lambda meta: {**meta, "params": {**meta["params"], "bogus": 1}},
            r"model '.*model': bad parameters in params.json",
        ),
        (
            lambda meta: {**meta, "fitted": {**meta["fitted"], "vocab_size": 24}},
            r"arrays.npz: components_ has shape \(10, 25\), expected \(10, 24\)",
        ),
    ],
)
def test_load_corrupt_params(saved: Path, edit, match: str) -> None:
    file = saved / "params.json"
    meta = json.loads(file.read_text())
    new = edit(meta)
    file.write_text(new if isinstance(new, str) else json.dumps(new))
    with pytest.raises(ValueError, match=match):
        load_lda(saved)


def test_load_drops_run_time_settings_found_in_params_json(saved: Path, tmp_path: Path) -> None:
    """Issue 25, finding 6: checkpoint_dir/resume in a (hand-edited) params.json
    were kept, and a later fit of the loaded model cleaned that folder."""
    file = saved / "params.json"
    meta = json.loads(file.read_text())
    assert not {"checkpoint_dir", "resume", "client"} & set(meta["params"])  # never saved
    folder = tmp_path / "someone-elses-checkpoint"
    meta["params"].update(checkpoint_dir=str(folder), resume=True)
    file.write_text(json.dumps(meta))
    with pytest.warns(UserWarning) as got:
        loaded = load_lda(saved)
    messages = sorted(str(w.message) for w in got)
    assert len(messages) == 2
    assert "params.json holds checkpoint_dir=" in messages[0]
    assert "params.json holds resume=True" in messages[1]
    assert all(f"model {str(saved)!r}" in m and "ignored" in m for m in messages)
    assert loaded.checkpoint_dir is None and loaded.resume is False
    assert loaded.get_params()["checkpoint_dir"] is None


def test_load_truncated_arrays(saved: Path) -> None:
    file = saved / "arrays.npz"
    file.write_bytes(file.read_bytes()[:100])
    with pytest.raises(ValueError, match=r"model '.*model': arrays.npz cannot be read.*corrupt"):
        load_lda(saved)


def test_load_arrays_missing_a_field(saved: Path) -> None:
    with np.load(saved / "arrays.npz") as data:
        arrays = {k: data[k] for k in data.files if k != "stats_N"}
    np.savez(saved / "arrays.npz", **arrays)
    with pytest.raises(ValueError, match=r"arrays.npz lacks the array 'stats_N'"):
        load_lda(saved)


def test_load_refuses_pickled_arrays(saved: Path) -> None:
    with np.load(saved / "arrays.npz") as data:
        arrays = {k: data[k] for k in data.files}
    arrays["elbo_trace_"] = np.array([object()], dtype=object)
    np.savez(saved / "arrays.npz", **arrays)
    with pytest.raises(ValueError, match=r"'elbo_trace_' holds values of type object"):
        load_lda(saved)


def test_load_vocab_of_wrong_size(saved: Path) -> None:
    (saved / "vocab.txt").write_text("a\nb\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"vocab.txt has 2 words but the model has V=25"):
        load_lda(saved)


# one package for every kind: state, registry, generic save and load ------------


def test_state_is_plain_data_and_rebuilds_the_model(fitted: lsdask.LDA, bars) -> None:
    """The estimator hands persist plain values (JSON-able parameters, named
    arrays, word lists) and is rebuilt from them without any file."""
    from lsdask.persist.registry import entry, kind_of

    assert kind_of(fitted) == "lda"
    found = entry("lda")
    state = found.get_state(fitted)
    assert state.kind == "lda" and state.texts == {"vocabulary": VOCAB}
    assert all(isinstance(a, np.ndarray) for a in state.arrays.values())
    json.dumps({k: v for k, v in state.params.items() if k != "client"})
    json.dumps([state.fitted, state.info])
    rebuilt = found.from_state(found.cls, state, "sync")
    _assert_same(fitted, rebuilt, bars[1])
    assert not rebuilt.components_.flags.writeable


def test_save_model_and_load_model_dispatch_on_the_kind(fitted: lsdask.LDA, bars, tmp_path):
    from lsdask.persist import load_model, save_model

    path = save_model(fitted, tmp_path / "lda")
    assert json.loads((path / "params.json").read_text())["format"] == "lsdask-lda"
    _assert_same(fitted, load_model(path, client="sync"), bars[1])
    X = np.random.default_rng(0).normal(size=(60, 2))
    gmm = lsdask.GaussianMixture(2, n_laps=2, client="sync", random_state=0).fit(X)
    loaded = load_model(save_model(gmm, tmp_path / "gmm"))
    assert isinstance(loaded, lsdask.GaussianMixture)
    np.testing.assert_array_equal(loaded.predict(X), gmm.predict(X))
    # a folder saved by the kind's own function loads too
    assert isinstance(load_model(save_lda(fitted, tmp_path / "own")), lsdask.LDA)


def test_save_model_and_load_model_errors(tmp_path: Path) -> None:
    from lsdask.persist import load_model, save_model
    from lsdask.persist.registry import entry

    with pytest.raises(TypeError, match=r"cannot save a MultinomialMixture; lsdask saves LDA, "):
        save_model(lsdask.MultinomialMixture(2), tmp_path / "m")
    with pytest.raises(FileNotFoundError, match=r"no lsdask model at '.*nowhere': params.json"):
        load_model(tmp_path / "nowhere")
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "params.json").write_text('{"format": "lsdask-ctm", "version": 1}')
    with pytest.raises(ValueError, match=r"has format 'lsdask-ctm'; this lsdask reads \['lsdask-g"):
        load_model(tmp_path / "odd")
    with pytest.raises(LookupError, match=r"no estimator is registered for models of kind 'ctm'"):
        entry("ctm")


def test_a_fitted_lda_pickles_and_unpickles_with_the_same_outputs(fitted, bars) -> None:
    """The estimator classes stay where pickles of fitted models name them."""
    import pickle

    blob = pickle.dumps(fitted)
    assert b"lsdask.estimators.lda" in blob
    copy = pickle.loads(blob)
    assert type(copy) is lsdask.LDA
    _assert_same(fitted, copy, bars[1])
    assert copy.vocabulary_ == VOCAB
