"""Synthetic data generators (datasets/make_synthetic_*.py) and the nightly retraining demo."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pyarrow.parquet as pq
import pytest
import zarr

from lsdask.io.corpus import SCHEMA, Corpus, read_all

REPO = Path(__file__).resolve().parents[1]


def _load(relpath: str, name: str) -> ModuleType:
    """A script of the repository as a module (``datasets/`` and ``pipelines/`` are folders)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, REPO / relpath)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen_corpus() -> ModuleType:
    return _load("datasets/make_synthetic_corpus.py", "test_make_synthetic_corpus")


@pytest.fixture(scope="module")
def gen_patches() -> ModuleType:
    return _load("datasets/make_synthetic_patches.py", "test_make_synthetic_patches")


@pytest.fixture(scope="module")
def nightly() -> ModuleType:
    return _load("pipelines/nightly_retrain.py", "test_nightly_retrain")


SMALL_CORPUS = dict(
    n_docs=1100,
    vocab_size=300,
    n_topics=5,
    mean_doc_length=30,
    docs_per_row_group=100,
    docs_per_file=500,
    seed=3,
)
SMALL_PATCHES = dict(n_patches=2500, dim=16, n_components=4, chunk_rows=1000, seed=3)


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


# --------------------------------------------------------------------------- corpus


def test_corpus_shape_lengths_manifest_and_topics(tmp_path, gen_corpus):
    out = tmp_path / "corpus"
    corpus = gen_corpus.make_corpus(out, client="sync", **SMALL_CORPUS)
    assert corpus.path == str(out)
    files = sorted(p.name for p in (out / "parts").iterdir())
    assert files == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
    assert [pq.ParquetFile(out / "parts" / f).metadata.num_rows for f in files] == [500, 500, 100]
    assert pq.read_schema(out / "parts" / files[0]).remove_metadata() == SCHEMA
    reopened = Corpus.open(out)
    assert len(reopened.batches) == 11
    assert {b.n_docs for b in reopened.batches[:-1]} == {100}
    assert reopened.vocab[:2] == ["w00000", "w00001"] and reopened.vocab_size == 300

    X, doc_ids = read_all(reopened, return_doc_ids=True)
    assert X.shape == (1100, 300)
    np.testing.assert_array_equal(doc_ids, np.arange(1100))
    lengths = np.asarray(X.sum(axis=1)).ravel()
    assert lengths.min() >= 1
    assert 0.8 * 30 < lengths.mean() < 1.2 * 30
    assert lengths.std() > 5  # negative binomial lengths, not all equal
    assert X.indices.max() < 300 and X.data.min() >= 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["n_docs"] == 1100 == reopened.n_docs
    assert manifest["n_tokens"] == pytest.approx(float(X.sum()))
    assert manifest["docs_per_row_group"] == 100
    assert manifest["ingest"]["seed"] == 3 and manifest["ingest"]["n_topics"] == 5

    topics = np.load(out / gen_corpus.TRUE_TOPICS_NAME)
    assert topics.shape == (5, 300)
    np.testing.assert_allclose(topics.sum(axis=1), 1.0)
    np.testing.assert_array_equal(topics, gen_corpus.draw_topics(5, 300, 0.01, 3))
    assert _leftovers(tmp_path) == []


def test_documents_follow_the_topics(gen_corpus):
    rng = np.random.default_rng(0)
    topic = rng.dirichlet(np.full(40, 0.5))[None, :]
    indptr, word_ids, counts = gen_corpus.draw_documents(
        rng, gen_corpus.word_cdf(topic), 2000, alpha=0.1, mean_doc_length=50
    )
    assert indptr[-1] == len(word_ids) == len(counts)
    for d in range(0, 2000, 97):  # sorted, distinct word ids within a document
        assert np.all(np.diff(word_ids[indptr[d] : indptr[d + 1]]) > 0)
    freq = np.bincount(word_ids, weights=counts, minlength=40)
    assert np.abs(freq / freq.sum() - topic[0]).sum() < 0.03
    # zero-probability words are never drawn
    sparse_topic = np.zeros((1, 10))
    sparse_topic[0, [2, 7]] = [0.25, 0.75]
    _, ids, _ = gen_corpus.draw_documents(
        rng, gen_corpus.word_cdf(sparse_topic), 200, alpha=1.0, mean_doc_length=20
    )
    assert set(np.unique(ids)) == {2, 7}


def test_draw_corpus_matrix_and_seeds(gen_corpus):
    topics = gen_corpus.draw_topics(3, 50, 0.1, 0)
    A = gen_corpus.draw_corpus_matrix(topics, 30, mean_doc_length=10, seed=[0, 1])
    B = gen_corpus.draw_corpus_matrix(topics, 30, mean_doc_length=10, seed=[0, 1])
    C = gen_corpus.draw_corpus_matrix(topics, 30, mean_doc_length=10, seed=[0, 2])
    assert A.shape == (30, 50) and (A != B).nnz == 0 and (A != C).nnz > 0
    assert not np.array_equal(topics, gen_corpus.draw_topics(3, 50, 0.1, 1))


def test_corpus_failure_leaves_no_output(tmp_path, gen_corpus, monkeypatch):
    real = gen_corpus._write_part

    def failing(path, file_index, *args):
        if file_index == 1:
            raise OSError("disk full (simulated)")
        return real(path, file_index, *args)

    monkeypatch.setattr(gen_corpus, "_write_part", failing)
    out = tmp_path / "corpus"
    with pytest.raises(OSError, match="simulated"):
        gen_corpus.make_corpus(out, client="sync", **SMALL_CORPUS)
    assert not out.exists()
    assert _leftovers(tmp_path) == []

    # an existing corpus is replaced only by a complete new one
    monkeypatch.setattr(gen_corpus, "_write_part", real)
    gen_corpus.make_corpus(out, client="sync", **{**SMALL_CORPUS, "n_docs": 200})
    monkeypatch.setattr(gen_corpus, "_write_part", failing)
    with pytest.raises(OSError, match="simulated"):
        gen_corpus.make_corpus(out, client="sync", overwrite=True, **SMALL_CORPUS)
    assert Corpus.open(out).n_docs == 200
    assert _leftovers(tmp_path) == []


def test_corpus_parameter_errors(tmp_path, gen_corpus):
    gen_corpus.make_corpus(tmp_path / "c", client="sync", **{**SMALL_CORPUS, "n_docs": 100})
    with pytest.raises(FileExistsError, match="already exists"):
        gen_corpus.make_corpus(tmp_path / "c", client="sync", **SMALL_CORPUS)
    bad = [
        ({"n_docs": 0}, "n_docs must be a positive integer"),
        ({"docs_per_file": 50}, "docs_per_file"),
        ({"alpha": 0.0}, "alpha must be a positive"),
        ({"mean_doc_length": 0.5}, "mean_doc_length must be at least 1"),
    ]
    for change, message in bad:
        with pytest.raises(ValueError, match=message):
            gen_corpus.make_corpus(tmp_path / "d", client="sync", **{**SMALL_CORPUS, **change})
    assert not (tmp_path / "d").exists()


def test_corpus_cli(tmp_path, gen_corpus, capsys):
    out = tmp_path / "cli"
    argv = ["--out", str(out), "--n-docs", "300", "--vocab-size", "100", "--n-topics", "3"]
    code = gen_corpus.main([*argv, "--docs-per-row-group", "100", "--sync", "--seed", "1"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n_docs"] == 300 and summary["n_batches"] == 3
    assert gen_corpus.main([*argv, "--sync"]) == 2  # exists already
    assert "already exists" in capsys.readouterr().err


# --------------------------------------------------------------------------- patches


def test_patches_shape_chunks_dtype_and_params(tmp_path, gen_patches):
    path = gen_patches.make_patches(tmp_path / "patches", client="sync", **SMALL_PATCHES)
    assert path == str(tmp_path / "patches" / gen_patches.ARRAY_NAME)
    array = zarr.open_array(path, mode="r")
    assert array.shape == (2500, 16) and array.chunks == (1000, 16)
    assert array.dtype == np.float32 and array.metadata.zarr_format == 3
    X = array[:]
    assert np.isfinite(X).all()
    assert all(X[a : a + 1000].std() > 0 for a in range(0, 2500, 1000))  # every chunk written
    assert array.attrs["n_components"] == 4 and array.attrs["seed"] == 3
    with np.load(tmp_path / "patches" / gen_patches.TRUE_PARAMS_NAME) as p:
        weights, cov, spectra = p["weights"], p["covariances"], p["spectra"]
    assert weights.shape == (4,) and cov.shape == (4, 16, 16) and spectra.shape == (4, 16)
    np.testing.assert_allclose(weights.sum(), 1.0)
    np.testing.assert_allclose(cov, np.transpose(cov, (0, 2, 1)))
    eig = np.linalg.eigvalsh(cov)[:, ::-1]
    np.testing.assert_allclose(eig, spectra, rtol=1e-8, atol=1e-15)
    assert (np.diff(spectra, axis=1) < 0).all()
    assert _leftovers(tmp_path) == []


def test_patches_follow_the_mixture(gen_patches):
    mix = gen_patches.draw_mixture(3, 6, 0)
    x, z = gen_patches.sample_patches(
        np.random.default_rng(1), mix["weights"], mix["cholesky"], 30_000
    )
    assert x.dtype == np.float32 and x.shape == (30_000, 6)
    np.testing.assert_allclose(np.bincount(z, minlength=3) / 30_000, mix["weights"], atol=0.015)
    for k in range(3):
        emp = np.cov(x[z == k].T.astype(np.float64), bias=True)
        err = np.linalg.norm(emp - mix["covariances"][k]) / np.linalg.norm(mix["covariances"][k])
        assert err < 0.1


def test_patches_failure_leaves_no_output(tmp_path, gen_patches, monkeypatch):
    real = gen_patches._write_chunk

    def failing(path, chunk_index, start, stop, params):
        if chunk_index == 2:
            raise RuntimeError("worker lost (simulated)")
        return real(path, chunk_index, start, stop, params)

    monkeypatch.setattr(gen_patches, "_write_chunk", failing)
    with pytest.raises(RuntimeError, match="simulated"):
        gen_patches.make_patches(tmp_path / "p", client="sync", **SMALL_PATCHES)
    assert not (tmp_path / "p").exists()
    assert _leftovers(tmp_path) == []
    with pytest.raises(ValueError, match="chunk_rows must be a positive integer"):
        gen_patches.make_patches(tmp_path / "p", client="sync", chunk_rows=0)


def test_patches_cli(tmp_path, gen_patches, capsys):
    argv = ["--out", str(tmp_path / "p"), "--n-patches", "500", "--dim", "4", "--n-components"]
    assert gen_patches.main([*argv, "2", "--chunk-rows", "200", "--sync"]) == 0
    assert json.loads(capsys.readouterr().out)["path"].endswith("train.zarr")


# --------------------------------------------------------------------------- determinism


def test_same_seed_same_files_sync_and_cluster(tmp_path, gen_corpus, gen_patches, dask_client):
    kw = {**SMALL_CORPUS, "n_docs": 700, "docs_per_file": 200}
    a = gen_corpus.make_corpus(tmp_path / "sync", client="sync", **kw)
    b = gen_corpus.make_corpus(tmp_path / "dask", client=dask_client, **kw)
    names = sorted(p.name for p in (tmp_path / "sync" / "parts").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "dask" / "parts").iterdir())
    assert len(names) == 4
    for name in names:
        assert (tmp_path / "sync" / "parts" / name).read_bytes() == (
            tmp_path / "dask" / "parts" / name
        ).read_bytes()
    assert a.manifest["batches"] == b.manifest["batches"]
    assert (tmp_path / "sync" / "true_topics.npy").read_bytes() == (
        tmp_path / "dask" / "true_topics.npy"
    ).read_bytes()

    kw = {**SMALL_PATCHES, "n_patches": 2100}
    p1 = gen_patches.make_patches(tmp_path / "psync", client="sync", **kw)
    p2 = gen_patches.make_patches(tmp_path / "pdask", client=dask_client, **kw)
    np.testing.assert_array_equal(zarr.open_array(p1)[:], zarr.open_array(p2)[:])


# --------------------------------------------------------------------------- nightly retraining


def test_nightly_retraining_reports_new_and_removed_batches(tmp_path, nightly):
    kw = dict(
        n_docs=800, new_docs_per_night=300, n_heldout=100, vocab_size=200, n_topics=4,
        mean_doc_length=40, docs_per_row_group=100, docs_per_file=200, sparsity=2,
        first_laps=2, laps_per_night=1, client="sync",
    )  # fmt: skip
    first, second = nightly.run_nightly(tmp_path, nights=2, **kw)
    assert (first.night, first.n_batches, first.with_memo, first.new, first.removed) == (
        0, 8, 0, 8, 0,
    )  # fmt: skip
    assert first.laps == 2 and first.added_file is None
    # night 1: a file of 300 new documents (3 batches) in, the oldest file (2 batches) out
    assert second.removed_file == "parts/part-00000.parquet"
    assert second.added_file == "parts/part-00004.parquet"
    assert (second.n_docs, second.n_batches, second.with_memo, second.new, second.removed) == (
        900, 9, 6, 3, 2,
    )  # fmt: skip
    assert second.laps == 3
    for r in (first, second):
        assert np.isfinite(r.elbo) and np.isfinite(r.heldout_score) and r.heldout_score < 0
        assert 0 <= r.topic_l1 <= 2 and Path(r.checkpoint).parent == tmp_path / "checkpoints"
    assert Path(second.checkpoint).is_dir()  # the latest; night 0's was superseded
    doc_ids = read_all(tmp_path / nightly.CORPUS_DIR, return_doc_ids=True)[1]
    assert len(np.unique(doc_ids)) == len(doc_ids) == 900
    table = nightly.format_reports([first, second])
    assert table.count("\n") == 3 and "| 1 | 900 | 9 | 6 | 3 | 2 | 3 |" in table
    with pytest.raises(FileExistsError, match="earlier run"):
        nightly.run_nightly(tmp_path, nights=1, **kw)
