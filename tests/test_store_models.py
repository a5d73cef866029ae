"""Saved models in object stores: the round trip is exact, a save that stops
keeps the previous model, versions stay readable."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lsdask
from lsdask.io.stores import is_store_url
from lsdask.persist import load_model, save_model
from lsdask.synthetic import make_bars_corpus


@pytest.fixture(scope="module")
def bars() -> tuple[Any, Any]:
    X, _ = make_bars_corpus(n_docs=160, doc_topic_prior=0.1, random_state=3)
    return X[:120], X[120:]


def _fit(X: Any, seed: int) -> lsdask.LDA:
    return lsdask.LDA(
        10, sparsity=3, n_laps=2, batch_size=40, alpha=1.0, random_state=seed,
        client="sync", progress=False,
    ).fit(X)  # fmt: skip


def test_a_model_round_trip_through_a_store_is_exact(
    store: tuple[str, dict[str, Any]], bars: tuple[Any, Any]
) -> None:
    url, options = store
    model = _fit(bars[0], 0)
    save_model(model, url, storage_options=options)
    loaded = load_model(url, storage_options=options, client="sync")
    assert np.array_equal(loaded.components_, model.components_)
    a, b = model.transform(bars[1]), loaded.transform(bars[1])
    assert (a != b).nnz == 0
    assert loaded.score(bars[1]) == model.score(bars[1])


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_overwrite_adds_a_version_and_old_ones_stay(
    store: tuple[str, dict[str, Any]], bars: tuple[Any, Any]
) -> None:
    url, options = store
    first, second = _fit(bars[0], 0), _fit(bars[0], 1)
    save_model(first, url, storage_options=options)
    with pytest.raises(FileExistsError, match="holds a saved model already"):
        save_model(second, url, storage_options=options)
    save_model(second, url, storage_options=options, overwrite=True)
    newest = load_model(url, storage_options=options, client="sync")
    oldest = load_model(url, storage_options=options, version=1, client="sync")
    assert np.array_equal(newest.components_, second.components_)
    assert np.array_equal(oldest.components_, first.components_)


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_save_that_fails_keeps_the_previous_model(
    store: tuple[str, dict[str, Any]], bars: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, options = store
    first = _fit(bars[0], 0)
    save_model(first, url, storage_options=options)
    import lsdask.io.stores.versions as versions  # the upload of a file fails

    def broken(self: Any, local: Any, suffix: str = "") -> str:
        raise OSError("connection reset (injected)")

    monkeypatch.setattr(versions.VersionLog, "put_file", broken)
    with pytest.raises(OSError, match="injected"):
        save_model(_fit(bars[0], 1), url, storage_options=options, overwrite=True)
    monkeypatch.undo()
    kept = load_model(url, storage_options=options, client="sync")
    assert np.array_equal(kept.components_, first.components_)


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_nothing_saved_is_said(store: tuple[str, dict[str, Any]]) -> None:
    url, options = store
    with pytest.raises(FileNotFoundError, match="no lsdask model at"):
        load_model(url, storage_options=options)


@pytest.mark.parametrize(
    ("path", "expected"),
    [("s3://b/m", True), ("memory://m", True), ("file:///tmp/m", False), ("/tmp/m", False)],
)
def test_store_urls_are_told_from_local_paths(path: str, expected: bool) -> None:
    assert is_store_url(path) is expected
