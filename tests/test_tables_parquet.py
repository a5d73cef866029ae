"""Parquet datasets that other tools write, read in place (lsdask.io.tables).

The datasets here are written by pyarrow (``pq.write_to_dataset``, hive
partitions), never by lsdask; the documents are known, so what the batches
load is compared with counts made the slow, obvious way.
"""

from __future__ import annotations

import os
import pickle
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.engine import SerialExecutor
from lsdask.io.ingest.words import Tokenizer, VocabularyBuilder
from lsdask.io.sources import ArrayBatch, BatchSource
from lsdask.io.tables import ParquetTable
from lsdask.io.tables.token_ids import counts_matrix
from lsdask.persist.checkpoint import CheckpointDir

V = 40
#: words of letters that are no stopwords (the tokenizer keeps them as they are)
WORDS = [f"zq{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(V)]


def _token_lists(rng: np.random.Generator, n_docs: int, K: int = 3) -> list[list[int]]:
    """Documents drawn from K topics over V words; some empty."""
    topics = rng.dirichlet(np.full(V, 0.1), size=K)
    docs = []
    for d in range(n_docs):
        n = 0 if d % 50 == 7 else int(rng.integers(5, 30))
        k = rng.integers(K)
        docs.append(rng.choice(V, size=n, p=topics[k]).tolist())
    return docs


def _table(docs: list[list[int]], first_id: int = 0) -> pa.Table:
    return pa.table(
        {
            "doc_id": np.arange(first_id, first_id + len(docs)),
            "token_ids": pa.array(docs, pa.list_(pa.int32())),
            "body": [" ".join(WORDS[i].upper() if j % 3 == 0 else WORDS[i] for j, i in
                              enumerate(d)) + " the and of" for d in docs],
            "year": [2020 + (i % 3) for i in range(len(docs))],
        }
    )  # fmt: skip


def _write_hive(root: Path, docs: list[list[int]], **kw) -> None:
    pq.write_to_dataset(_table(docs), str(root), partition_cols=["year"], row_group_size=30, **kw)


def _slow_counts(docs: list[list[int]], counts: list[list[float]] | None = None) -> np.ndarray:
    """The obvious way: a Counter per document."""
    out = np.zeros((len(docs), V))
    for d, ids in enumerate(docs):
        weights = counts[d] if counts is not None else [1.0] * len(ids)
        tally: Counter[int] = Counter()
        for i, c in zip(ids, weights, strict=True):
            tally[i] += c
        for i, c in tally.items():
            out[d, i] = c
    return out


def _rows_by_batch(source: BatchSource, root: Path, docs: list[list[int]]) -> list[np.ndarray]:
    """The doc_ids of each batch's rows, read back with pyarrow (the reference order)."""
    out = []
    for b in source.batches:
        f = pq.ParquetFile(str(root / b.file))
        out.append(f.read_row_group(b.row_group, columns=["doc_id"]).column(0).to_numpy())
    return out


@pytest.fixture
def hive(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, list[list[int]]]:
    docs = _token_lists(rng, 300)
    root = tmp_path / "table"
    _write_hive(root, docs)
    # what Spark and editors leave beside the data: skipped
    (root / "_SUCCESS").write_bytes(b"")
    (root / "year=2020" / ".part-0.parquet.crc").write_bytes(b"\x00crc")
    return root, docs


def test_a_hive_dataset_loads_the_counts_of_its_token_lists(hive) -> None:
    root, docs = hive
    source, vocab = ParquetTable(root, tokens="token_ids", vocabulary=WORDS).source()
    assert vocab == WORDS and source.n_features == V
    assert source.n_rows == 300 and source.n_batches == 12  # 3 partitions x 4 row groups
    assert {b.file.split("/")[0] for b in source.batches} == {"year=2020", "year=2021", "year=2022"}
    keys = [b.key for b in source.batches]
    assert len(set(keys)) == len(keys) and all("@" in k and "#" in k for k in keys)
    expected = _slow_counts(docs)
    for b, ids in zip(source.batches, _rows_by_batch(source, root, docs), strict=True):
        np.testing.assert_array_equal(b.load().toarray(), expected[ids])
    # a loader is small: where the row group is, not its rows
    assert len(pickle.dumps(source.batches[0])) < 1000


def test_lda_fits_a_table_as_it_fits_the_same_rows_in_memory(hive) -> None:
    """The table's batches feed the fit exactly as in-memory batches of the same
    rows would: the same topics, the same ELBO trace."""
    root, docs = hive
    source, vocab = ParquetTable(root, tokens="token_ids", vocabulary=WORDS).source()
    expected = _slow_counts(docs)
    in_memory = BatchSource(
        [ArrayBatch(sp.csr_matrix(expected[ids]), b.where, b.key)
         for b, ids in zip(source.batches, _rows_by_batch(source, root, docs), strict=True)],
        source.batch_rows, V, "the same rows in memory",
    )  # fmt: skip
    kw = dict(n_laps=3, sparsity=2, client="sync", random_state=0)
    table_fit = lsdask.LDA(3, **kw).fit(source, vocabulary=vocab)
    memory_fit = lsdask.LDA(3, **kw).fit(in_memory, vocabulary=vocab)
    np.testing.assert_allclose(table_fit.elbo_trace_, memory_fit.elbo_trace_, rtol=1e-12)
    np.testing.assert_allclose(table_fit.components_, memory_fit.components_, rtol=1e-10)
    assert table_fit.vocabulary_ == WORDS
    assert table_fit.stats_["n_docs"][0] == pytest.approx(300)


def test_a_text_column_is_tokenized_and_its_vocabulary_built_in_one_pass(hive) -> None:
    root, docs = hive
    table = ParquetTable(root, text="body", min_df=3, max_df=0.6)
    source, vocab = table.source()
    # the reference: lsdask ingest's own vocabulary builder over the same texts
    texts = pq.read_table(str(root), columns=["body"]).column("body").to_pylist()
    tokenizer, builder = Tokenizer(), VocabularyBuilder(min_df=3, max_df=0.6)
    for t in texts:
        builder.add(tokenizer.tokens(t))
    assert vocab == builder.build()
    # the same pass through an executor (its tasks, a wave at a time)
    assert table.source(SerialExecutor())[1] == vocab
    assert "the" not in vocab and all(w == w.lower() for w in vocab)  # stopwords, lower case
    index = {w: i for i, w in enumerate(vocab)}
    for b in source.batches:
        f = pq.ParquetFile(str(root / b.file))
        rows = f.read_row_group(b.row_group, columns=["body"]).column(0).to_pylist()
        slow = np.zeros((len(rows), len(vocab)))
        for d, text in enumerate(rows):
            for w in tokenizer.tokens(text):
                if w in index:
                    slow[d, index[w]] += 1
        np.testing.assert_array_equal(b.load().toarray(), slow)
    model = lsdask.LDA(3, n_laps=2, client="sync", random_state=0).fit(source, vocabulary=vocab)
    assert model.vocabulary_ == vocab and np.isfinite(model.elbo_trace_).all()
    # a vocabulary given: taken as it is, words outside it dropped
    given, words = ParquetTable(root, text="body", vocabulary=WORDS[:5]).source()
    assert words == WORDS[:5]
    total = sum(b.load().sum() for b in given.batches)
    assert total == sum(1 for d in docs for i in d if i < 5)


def test_the_same_table_through_memory_urls(hive) -> None:
    """memory:// (fsspec's in-process store): the same batches, keys and fit."""
    import fsspec

    root, _ = hive
    fs = fsspec.filesystem("memory")
    url = f"memory://tables-{os.getpid()}-{id(root)}"
    try:
        for path in root.rglob("*"):
            if path.is_file():
                fs.pipe(f"{url}/{path.relative_to(root).as_posix()}", path.read_bytes())
        local, _ = ParquetTable(root, tokens="token_ids", vocabulary=WORDS).source()
        remote, _ = ParquetTable(url, tokens="token_ids", vocabulary=WORDS).source()
        assert [b.key for b in remote.batches] == [b.key for b in local.batches]
        assert remote.description.startswith(f"Parquet table {url}")
        for a, b in zip(local.batches, remote.batches, strict=True):
            assert (a.load() != b.load()).nnz == 0
        kw = dict(n_laps=2, client="sync", random_state=0)
        by_url = lsdask.LDA(3, **kw).fit(remote, vocabulary=WORDS)
        by_path = lsdask.LDA(3, **kw).fit(local, vocabulary=WORDS)
        np.testing.assert_allclose(by_url.components_, by_path.components_, rtol=1e-12)
        text, vocab = ParquetTable(url, text="body", min_df=2).source()
        assert vocab == ParquetTable(root, text="body", min_df=2).source()[1]
        assert text.n_rows == 300
    finally:
        fs.rm(url, recursive=True)


def test_counts_column_and_repeated_ids_match_the_slow_reference(tmp_path, rng) -> None:
    """Ids repeat within a row (their counts add up), counts may be 0, rows may
    be empty; several row groups per file."""
    docs, counts = [], []
    for _ in range(120):
        n = int(rng.integers(0, 25))
        docs.append(rng.integers(0, V, size=n).tolist())
        counts.append(rng.integers(0, 4, size=n).astype(float).tolist())
    table = pa.table({"ids": pa.array(docs, pa.list_(pa.int64())),
                      "n": pa.array(counts, pa.list_(pa.float64()))})  # fmt: skip
    (tmp_path / "t").mkdir()
    pq.write_table(table, tmp_path / "t" / "part.parquet", row_group_size=25)
    source, _ = ParquetTable(tmp_path / "t", tokens="ids", counts="n", vocabulary=WORDS).source()
    assert source.batch_rows == [25, 25, 25, 25, 20]
    loaded = sp.vstack([b.load() for b in source.batches]).tocsr()
    np.testing.assert_array_equal(loaded.toarray(), _slow_counts(docs, counts))
    assert loaded.has_canonical_format and (loaded.data > 0).all()
    # the kernel itself, on random lists with many repeats
    for seed in range(5):
        r = np.random.default_rng(seed)
        lists = [r.integers(0, 6, size=r.integers(0, 40)).tolist() for _ in range(30)]
        indptr = np.concatenate([[0], np.cumsum([len(x) for x in lists])])
        ids = np.concatenate([np.asarray(x, dtype=np.int64) for x in lists])
        got = counts_matrix(indptr, ids, None, V).toarray()
        np.testing.assert_array_equal(got, _slow_counts(lists))


def test_retraining_takes_in_added_files_and_drops_removed_ones(tmp_path, rng) -> None:
    """A grown dataset: one file added, one removed, one rewritten in place. The
    resumed fit keeps the memo of the unchanged row groups (the same keys), and
    after one lap its memo is exactly the new file set's."""
    root = tmp_path / "t"
    root.mkdir()
    parts = [_token_lists(rng, 60) for _ in range(3)]
    for i, docs in enumerate(parts):
        pq.write_table(_table(docs), root / f"part-{i}.parquet", row_group_size=30)
    ckpt = tmp_path / "ck"
    kw = dict(sparsity=2, random_state=0, client="sync", checkpoint_dir=str(ckpt), resume=True)
    table = ParquetTable(root, tokens="token_ids", vocabulary=WORDS)
    first_source, _ = table.source()
    lsdask.LDA(3, n_laps=2, **kw).fit(first_source, vocabulary=WORDS)
    before = set(CheckpointDir(ckpt).read()["memo"])
    assert before == {b.key for b in first_source.batches}

    os.remove(root / "part-0.parquet")
    pq.write_table(_table(_token_lists(rng, 60)), root / "part-1.parquet", row_group_size=30)
    pq.write_table(_table(_token_lists(rng, 45)), root / "part-3.parquet", row_group_size=30)
    source, _ = table.source()
    keys = {b.key for b in source.batches}
    kept = keys & before
    assert kept == {b.key for b in first_source.batches if b.file == "part-2.parquet"}
    assert len(keys - before) == 4  # part-1 rewritten (2 row groups) and part-3 (2)

    model = lsdask.LDA(3, n_laps=1, **kw).fit(source, vocabulary=WORDS)
    assert model.n_laps_ == 3
    saved = CheckpointDir(ckpt).read()
    assert set(saved["memo"]) == keys
    assert model.stats_["n_docs"][0] == pytest.approx(60 + 60 + 45)


@pytest.mark.cluster
def test_a_table_on_a_local_cluster_equals_the_in_process_fit(hive, dask_client) -> None:
    """Worker processes read their own row groups (the vocabulary's pass too)."""
    from lsdask.engine import make_executor

    root, _ = hive
    table = ParquetTable(root, text="body", min_df=2)
    executor = make_executor(dask_client)
    try:
        source, vocab = table.source(executor)
    finally:
        executor.close()
    assert vocab == table.source()[1]
    kw = dict(n_laps=2, random_state=0, batches_per_update=2)
    on_cluster = lsdask.LDA(3, client=dask_client, **kw).fit(source, vocabulary=vocab)
    here = lsdask.LDA(3, client="sync", **kw).fit(source, vocabulary=vocab)
    np.testing.assert_allclose(on_cluster.components_, here.components_, rtol=1e-9)


def test_a_removed_table_folder_and_a_copy_elsewhere(tmp_path, hive) -> None:
    """Keys name files relative to the root: a copy of the table elsewhere has
    the same keys (a checkpoint follows the table when it moves)."""
    root, _ = hive
    copy = tmp_path / "copy"
    shutil.copytree(root, copy)
    a, _ = ParquetTable(root, tokens="token_ids", vocabulary=WORDS).source()
    b, _ = ParquetTable(copy, tokens="token_ids", vocabulary=WORDS).source()
    assert [x.key for x in a.batches] == [x.key for x in b.batches]
    shutil.rmtree(copy)
    with pytest.raises(FileNotFoundError, match="no such folder"):
        ParquetTable(copy, tokens="token_ids", vocabulary=WORDS).source()
