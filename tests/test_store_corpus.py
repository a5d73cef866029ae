"""A corpus in an object store: written, read back batch by batch (also by Dask
workers that open the store themselves), appended to by two processes at once."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from lsdask.errors import DataError
from lsdask.io.corpus.on_store import StoreCorpus
from tests.s3_server import s3_options

V = 40


def _matrix(n_docs: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.3, size=(n_docs, V)).astype(np.float32)
    dense[np.arange(n_docs), rng.integers(0, V, n_docs)] += 1  # no empty document
    return sp.csr_matrix(dense)


def _vocab() -> list[str]:
    return [f"w{i}" for i in range(V)]


def _read_back(corpus: StoreCorpus) -> tuple[np.ndarray, sp.csr_matrix]:
    """Every batch loaded as a task would: (doc ids, counts) in batch order."""
    loaded = [b.load() for b in corpus.batches]
    ids = np.concatenate([b.doc_ids for b in loaded])
    return ids, sp.vstack([b.to_csr(corpus.vocab_size) for b in loaded], format="csr")


def test_written_corpus_reads_back_exactly(store: tuple[str, dict[str, Any]]) -> None:
    url, options = store
    X = _matrix(230, 0)
    StoreCorpus.write(url, X, _vocab(), storage_options=options, docs_per_row_group=50)
    corpus = StoreCorpus.open(url, options)
    assert (corpus.n_docs, corpus.vocab, corpus.version) == (230, _vocab(), 1)
    assert [b.n_docs for b in corpus.batches] == [50, 50, 50, 50, 30]
    ids, Y = _read_back(corpus)
    np.testing.assert_array_equal(ids, np.arange(230))
    assert (Y != X).nnz == 0
    assert corpus.n_tokens == pytest.approx(float(X.sum()))


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_second_write_needs_overwrite(store: tuple[str, dict[str, Any]]) -> None:
    url, options = store
    StoreCorpus.write(url, _matrix(10, 0), _vocab(), storage_options=options)
    with pytest.raises(FileExistsError, match="holds a corpus already"):
        StoreCorpus.write(url, _matrix(10, 1), _vocab(), storage_options=options)
    replaced = StoreCorpus.write(
        url, _matrix(7, 1), _vocab(), storage_options=options, overwrite=True
    )
    assert (replaced.version, StoreCorpus.open(url, options).n_docs) == (2, 7)


def test_appends_number_documents_after_the_corpus(store: tuple[str, dict[str, Any]]) -> None:
    url, options = store
    corpus = StoreCorpus.write(
        url, _matrix(30, 0), _vocab(), storage_options=options, docs_per_row_group=20
    )
    new = corpus.append(_matrix(25, 1))
    assert [b.n_docs for b in new] == [20, 5]
    given = corpus.append([(1000, [1, 3], [2.0, 1.0])])
    assert [b.n_docs for b in given] == [1]
    reopened = StoreCorpus.open(url, options)
    ids, Y = _read_back(reopened)
    np.testing.assert_array_equal(ids, [*range(55), 1000])
    assert (Y[:30] != _matrix(30, 0)).nnz == 0 and (Y[30:55] != _matrix(25, 1)).nnz == 0
    assert reopened.manifest["next_doc_id"] == 1001 and reopened.version == 3
    assert StoreCorpus.open(url, options, version=1).n_docs == 30  # old versions stay


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_no_corpus_at_a_url_is_said(store: tuple[str, dict[str, Any]]) -> None:
    url, options = store
    with pytest.raises(DataError, match="no corpus there"):
        StoreCorpus.open(url, options)


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_missing_part_object_is_named(store: tuple[str, dict[str, Any]]) -> None:
    url, options = store
    corpus = StoreCorpus.write(url, _matrix(20, 0), _vocab(), storage_options=options)
    batch = corpus.batches[0]
    location = corpus._log.location
    location.fs.rm_file(location.path(*batch.file.split("/")))
    missing = rf"object {batch.file}, row group 0: the object is missing"
    with pytest.raises(DataError, match=missing):
        batch.load()


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_changed_part_object_is_refused(store: tuple[str, dict[str, Any]]) -> None:
    url, options = store
    corpus = StoreCorpus.write(url, _matrix(20, 0), _vocab(), storage_options=options)
    other = StoreCorpus.write(f"{url}-other", _matrix(20, 5), _vocab(), storage_options=options)
    location = corpus._log.location
    target = location.path(*corpus.batches[0].file.split("/"))
    source = other._log.location.path(*other.batches[0].file.split("/"))
    data = location.fs.cat_file(source)
    location.fs.rm_file(target)
    location.fs.pipe_file(target, data)  # same documents count, other words
    with pytest.raises(DataError, match="tokens; the manifest says"):
        corpus.batches[0].load()


@pytest.mark.parametrize("store", ["memory"], indirect=True)  # S3 adds nothing here
def test_a_vocabulary_that_does_not_match_is_refused(store: tuple[str, dict[str, Any]]) -> None:
    url, options = store
    corpus = StoreCorpus.write(url, _matrix(5, 0), _vocab(), storage_options=options)
    location = corpus._log.location
    path = location.path(*corpus.manifest["vocab"].split("/"))
    location.fs.rm_file(path)
    location.fs.pipe_file(path, "\n".join(reversed(_vocab())).encode())
    with pytest.raises(DataError, match="does not match the manifest"):
        StoreCorpus.open(url, options)


_APPENDER = """
import json, sys
import numpy as np, scipy.sparse as sp
from lsdask.io.corpus.on_store import StoreCorpus
url, options, seed = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
corpus = StoreCorpus.open(url, options)
for i in range(4):
    rng = np.random.default_rng(seed * 100 + i)
    X = sp.csr_matrix(rng.poisson(0.3, size=(15, 40)).astype(np.float32) + np.eye(15, 40))
    X[:, 39] = seed * 100 + i   # marks the append: column 39 holds its tag
    corpus.append(sp.csr_matrix(X))
"""


@pytest.mark.slow
def test_two_processes_append_at_once(s3_bucket: str, s3_endpoint: str) -> None:
    url, options = f"{s3_bucket}/corpus", s3_options(s3_endpoint)
    StoreCorpus.write(url, _matrix(10, 0), _vocab(), storage_options=options)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, url, json.dumps(options), str(seed)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (1, 2)
    ]
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
    corpus = StoreCorpus.open(url, options)
    ids, Y = _read_back(corpus)
    assert corpus.n_docs == 10 + 2 * 4 * 15 and corpus.version == 9
    np.testing.assert_array_equal(np.sort(ids), np.arange(corpus.n_docs))  # each once
    tags = Y[10:, 39].toarray().ravel()
    for tag in (100, 101, 102, 103, 200, 201, 202, 203):
        assert (tags == tag).sum() == 15, tag  # every append's documents, once


@pytest.mark.slow
def test_dask_workers_open_their_own_batches(s3_bucket: str, s3_endpoint: str) -> None:
    """Tasks on a LocalCluster of processes read their row groups from the S3
    server themselves: what the driver holds is only the batch descriptions."""
    from distributed import Client, LocalCluster

    url, options = f"{s3_bucket}/corpus", s3_options(s3_endpoint)
    X = _matrix(120, 3)
    corpus = StoreCorpus.write(url, X, _vocab(), storage_options=options, docs_per_row_group=40)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True) as cluster,
        Client(cluster) as client,
    ):
        futures = client.map(lambda b: b.load().to_csr(V), corpus.batches)
        parts = client.gather(futures)
    assert (sp.vstack(parts, format="csr") != X).nnz == 0
