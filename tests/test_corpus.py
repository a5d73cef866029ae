"""Tests for lsdask.io.corpus: the Parquet corpus store."""

from __future__ import annotations

import json
import logging
import os
import pickle
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from lsdask.errors import DataError
from lsdask.io.corpus import COLUMNS, SCHEMA, Corpus, CorpusBatch, DocBatch, read_all

VOCAB = [f"w{i}" for i in range(5)]


def _random_counts(rng: np.random.Generator, n_docs: int, n_words: int, density=0.2):
    X = sp.random(n_docs, n_words, density=density, format="csr", random_state=rng)
    X.data = rng.integers(1, 9, size=X.nnz).astype(np.float64)
    return X


def _same(A, B) -> bool:
    return A.shape == B.shape and abs(sp.csr_matrix(A) - sp.csr_matrix(B)).max() == 0


def _tree(path) -> list[str]:
    return sorted(os.listdir(path))


# --------------------------------------------------------------------------- round trips


def test_write_from_csr_round_trips_with_fixed_row_groups(tmp_path, rng):
    X = _random_counts(rng, 2500, 40)
    vocab = [f"word{i}" for i in range(40)]
    corpus = Corpus.write(tmp_path / "c", X, vocab, docs_per_row_group=1000, docs_per_file=2000)

    assert corpus.n_docs == 2500 and corpus.vocab_size == 40
    assert corpus.n_tokens == X.sum()
    layout = [(b.file, b.row_group, b.n_docs) for b in corpus.batches]
    assert layout == [
        ("parts/part-00000.parquet", 0, 1000),
        ("parts/part-00000.parquet", 1, 1000),
        ("parts/part-00001.parquet", 0, 500),
    ]
    meta = pq.read_metadata(tmp_path / "c" / "parts" / "part-00000.parquet")
    assert meta.num_row_groups == 2 and meta.row_group(1).num_rows == 1000
    assert pq.read_schema(tmp_path / "c" / "parts" / "part-00001.parquet").equals(SCHEMA)

    X2, doc_ids = read_all(tmp_path / "c", return_doc_ids=True)
    assert _same(X, X2)
    np.testing.assert_array_equal(doc_ids, np.arange(2500))
    assert (tmp_path / "c" / "vocab.txt").read_text(encoding="utf-8").split("\n")[:-1] == vocab


def test_manifest_records_sizes_batches_and_ingest_info(tmp_path, rng):
    X = _random_counts(rng, 30, 5)
    Corpus.write(tmp_path / "c", X, VOCAB, docs_per_row_group=10, ingest_info={"source": "x"})
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert manifest["format"] == "lsdask-corpus" and manifest["version"] == 1
    assert (manifest["vocab_size"], manifest["n_docs"]) == (5, 30)
    assert manifest["n_tokens"] == int(X.sum())
    assert manifest["ingest"] == {"source": "x"}
    assert [b["n_docs"] for b in manifest["batches"]] == [10, 10, 10]
    assert sum(b["n_tokens"] for b in manifest["batches"]) == manifest["n_tokens"]
    reopened = Corpus.open(tmp_path / "c")
    assert reopened.ingest_info == {"source": "x"} and reopened.vocab == VOCAB


def test_write_from_iterable_sorts_ids_and_drops_zero_counts(tmp_path):
    docs = [
        (10, [3, 0, 2], [1.0, 2.0, 0.0]),
        (11, np.array([], dtype=np.int64), np.array([])),
        (12, (4,), (7,)),
    ]
    corpus = Corpus.write(tmp_path / "c", iter(docs), VOCAB, docs_per_row_group=2)
    assert [b.n_docs for b in corpus.batches] == [2, 1]
    first = corpus.batches[0].load()
    np.testing.assert_array_equal(first.doc_ids, [10, 11])
    np.testing.assert_array_equal(first.indptr, [0, 2, 2])
    np.testing.assert_array_equal(first.word_ids, [0, 3])
    np.testing.assert_array_equal(first.counts, [2.0, 1.0])
    assert first.word_ids.dtype == np.int32 and first.counts.dtype == np.float32
    np.testing.assert_array_equal(first.doc_lengths(), [3.0, 0.0])
    X = read_all(corpus)
    expected = np.zeros((3, 5))
    expected[0, [0, 3]] = [2, 1]
    expected[2, 4] = 7
    np.testing.assert_array_equal(X.toarray(), expected)


def test_csr_input_sums_duplicate_entries(tmp_path):
    X = sp.csr_matrix((np.array([1.0, 2.0, 5.0]), np.array([1, 1, 0]), np.array([0, 2, 3])), (2, 5))
    corpus = Corpus.write(tmp_path / "c", X, VOCAB)
    np.testing.assert_array_equal(read_all(corpus).toarray()[0], [0, 3, 0, 0, 0])


def test_load_gives_views_of_the_arrow_buffers(tmp_path, rng):
    corpus = Corpus.write(tmp_path / "c", _random_counts(rng, 50, 5), VOCAB)
    batch = corpus.batches[0].load()
    for array in (batch.doc_ids, batch.word_ids, batch.counts):
        assert not array.flags.owndata and not array.flags.writeable
        base = array
        while isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        assert type(base).__module__.startswith("pyarrow"), type(base)

    table = pq.ParquetFile(corpus.batches[0].file_path).read_row_group(0, columns=list(COLUMNS))
    wrapped = DocBatch.from_arrow(table, "test", vocab_size=5)
    ids_buffer = table.column("word_ids").chunk(0).values.buffers()[1]
    counts_buffer = table.column("counts").chunk(0).values.buffers()[1]
    assert np.shares_memory(wrapped.word_ids, np.frombuffer(ids_buffer, dtype=np.int32))
    assert np.shares_memory(wrapped.counts, np.frombuffer(counts_buffer, dtype=np.float32))
    from_record_batch = DocBatch.from_arrow(table.to_batches()[0], "test", vocab_size=5)
    np.testing.assert_array_equal(from_record_batch.word_ids, wrapped.word_ids)


def test_corpus_batch_is_small_picklable_and_names_its_location(tmp_path, rng):
    corpus = Corpus.write(tmp_path / "c", _random_counts(rng, 20, 5), VOCAB, docs_per_row_group=8)
    batch = corpus.batches[2]
    blob = pickle.dumps(batch)
    assert len(blob) < 400
    restored = pickle.loads(blob)
    assert restored == batch and restored.n_docs == 4
    assert restored.where == f"corpus {corpus.path}, file parts/part-00000.parquet, row group 2"
    X = restored.load().to_csr(5)
    assert X.shape == (4, 5)


def test_doc_batch_helpers():
    batch = DocBatch(
        np.array([7, 8], dtype=np.int64),
        np.array([0, 2, 3], dtype=np.int64),
        np.array([0, 4, 1], dtype=np.int32),
        np.array([1.0, 2.0, 5.0], dtype=np.float32),
    )
    assert (batch.n_docs, batch.nnz, batch.n_tokens) == (2, 3, 8.0)
    ids, counts = batch.doc(1)
    np.testing.assert_array_equal(ids, [1])
    np.testing.assert_array_equal(counts, [5.0])
    np.testing.assert_array_equal(batch.to_csr(5).toarray(), [[1, 0, 0, 0, 2], [0, 5, 0, 0, 0]])


def test_empty_iterable_writes_an_empty_corpus(tmp_path):
    corpus = Corpus.write(tmp_path / "c", [], VOCAB)
    assert corpus.n_docs == 0 and corpus.batches == []
    assert read_all(tmp_path / "c").shape == (0, 5)


@settings(max_examples=25, deadline=None)
@given(
    n_docs=st.integers(0, 40),
    n_words=st.integers(1, 12),
    density=st.floats(0.0, 1.0),
    rows=st.integers(1, 9),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_csr_matrices_round_trip_exactly(n_docs, n_words, density, rows, seed):
    rng = np.random.default_rng(seed)
    X = sp.random(n_docs, n_words, density=density, format="csr", random_state=rng)
    X.data = rng.integers(0, 1000, size=X.nnz).astype(np.float64)  # zeros included
    vocab = [f"v{i}" for i in range(n_words)]
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Corpus.write(os.path.join(tmp, "c"), X, vocab, docs_per_row_group=rows)
        assert [b.n_docs for b in corpus.batches] == [
            min(rows, n_docs - s) for s in range(0, n_docs, rows)
        ]
        Y = read_all(Corpus.open(os.path.join(tmp, "c")))
        assert Y.shape == X.shape
        assert (Y != X).nnz == 0
        assert corpus.n_tokens == X.sum()


# --------------------------------------------------------------------------- atomic writes


def test_existing_out_dir_needs_overwrite_and_is_replaced_only_on_success(tmp_path, rng):
    out = tmp_path / "c"
    Corpus.write(out, _random_counts(rng, 10, 5), VOCAB)
    with pytest.raises(FileExistsError, match="already exists; pass overwrite=True"):
        Corpus.write(out, _random_counts(rng, 10, 5), VOCAB)

    def failing():
        yield 0, [1], [1.0]
        raise RuntimeError("source broke")

    with pytest.raises(RuntimeError, match="source broke"):
        Corpus.write(out, failing(), VOCAB, overwrite=True)
    assert _tree(tmp_path) == ["c"]
    assert Corpus.open(out).n_docs == 10

    Corpus.write(out, _random_counts(rng, 3, 5), VOCAB, overwrite=True)
    assert _tree(tmp_path) == ["c"] and Corpus.open(out).n_docs == 3


def test_failed_write_leaves_nothing(tmp_path):
    docs = [(0, [1], [1.0]), (1, [9], [1.0])]
    with pytest.raises(DataError, match=r"docs item 1 \(doc_id 1\): word id 9 is outside \[0, 5\)"):
        Corpus.write(tmp_path / "c", docs, VOCAB)
    assert _tree(tmp_path) == []


def test_overwrite_refuses_a_folder_that_is_not_a_corpus(tmp_path, rng):
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "precious.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match=r"not an lsdask corpus.*refusing"):
        Corpus.write(tmp_path / "c", _random_counts(rng, 3, 5), VOCAB, overwrite=True)
    assert (tmp_path / "c" / "precious.txt").exists()


@pytest.mark.parametrize(
    ("docs", "match"),
    [
        ([(0, [0, 1], [1.0])], r"docs item 0 \(doc_id 0\): word_ids .* same length"),
        ([(0, [0], [1.0]), (1, [2, 2], [1.0, 1.0])], r"doc_id 1\): word id 2 appears more"),
        ([(0, [0], [-1.0])], r"count -1.0; counts must be finite"),
        ([(0, [0], [np.nan])], r"count nan; counts must be finite"),
        ([(0, [0], [1e39])], r"fit in float32"),
        ([(0, [-1], [1.0])], r"word id -1 is outside \[0, 5\)"),
        ([(0, [0.5], [1.0])], r"word_ids must be integers"),
        ([("a", [0], [1.0])], r"docs item 0: expected a \(doc_id: int, word_ids, counts\)"),
        ([(0, [0])], r"docs item 0: expected a \(doc_id"),
    ],
)
def test_bad_documents_are_named(tmp_path, docs, match):
    with pytest.raises(DataError, match=match):
        Corpus.write(tmp_path / "c", docs, VOCAB)


def test_bad_csr_input_is_named(tmp_path):
    X = sp.csr_matrix(np.array([[1.0, 0, 0, 0, 0], [0, 0, -2.0, 0, 0]]))
    with pytest.raises(DataError, match=r"row 1, column 2 has count -2.0"):
        Corpus.write(tmp_path / "c", X, VOCAB)
    with pytest.raises(DataError, match="3 columns but the vocabulary has 5 words"):
        Corpus.write(tmp_path / "c", sp.csr_matrix((2, 3)), VOCAB)
    with pytest.raises(TypeError, match=r"scipy\.sparse\.csr_matrix"):
        Corpus.write(tmp_path / "c", np.ones((2, 5)), VOCAB)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"docs_per_row_group": 0}, "docs_per_row_group must be a positive integer"),
        ({"docs_per_file": 10, "docs_per_row_group": 20}, "docs_per_file .* at least"),
    ],
)
def test_bad_write_parameters(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        Corpus.write(tmp_path / "c", [], VOCAB, **kwargs)


def test_docs_per_file_rounded_to_whole_row_groups_is_said(tmp_path, rng, caplog):
    with caplog.at_level(logging.WARNING, logger="lsdask.io"):
        c = Corpus.write(tmp_path / "c", _random_counts(rng, 25, 5), VOCAB,
                         docs_per_row_group=4, docs_per_file=10)  # fmt: skip
    assert "docs_per_file (10) is not a multiple of docs_per_row_group (4)" in caplog.text
    assert "so 8 documents (2 row groups) each" in caplog.text
    assert len({b.file for b in c.batches}) == 4  # 8 + 8 + 8 + 1 documents


@pytest.mark.parametrize(
    ("vocab", "match"),
    [(["a", "b", "a"], r"vocab\[2\] is 'a', which is also vocab\[0\]"), (["a", "b\nc"], "line")],
)
def test_bad_vocabularies(tmp_path, vocab, match):
    with pytest.raises(ValueError, match=match):
        Corpus.write(tmp_path / "c", [], vocab)


# --------------------------------------------------------------------------- bad files


def _replace_part(corpus: Corpus, columns: dict) -> None:
    """Overwrite the corpus's first Parquet file with the given columns."""
    table = pa.table(columns)
    pq.write_table(table, os.path.join(corpus.path, "parts", "part-00000.parquet"))


@pytest.fixture
def small_corpus(tmp_path) -> Corpus:
    docs = [(i, [i % 5], [1.0]) for i in range(3)]
    return Corpus.write(tmp_path / "c", docs, VOCAB)


def _ids(lists):
    return pa.array(lists, type=pa.list_(pa.int32()))


def _counts(lists):
    return pa.array(lists, type=pa.list_(pa.float32()))


WHERE = r"file parts/part-00000\.parquet, row group 0"


@pytest.mark.parametrize(
    ("word_ids", "counts", "match"),
    [
        (
            [[0], [1], [0, 5]],
            [[1.0], [1.0], [1.0, 1.0]],
            r"document doc_id 12 \(position 2 in the row group\), entry 1: word id 5 is "
            r"outside \[0, 5\)",
        ),
        ([[0], [1, 2], [3]], [[1.0], [1.0, -1.0], [1.0]], r"doc_id 11 .*count -1\.0"),
        ([[0], [1], [3]], [[1.0], [1.0], [float("nan")]], r"doc_id 12 .*count nan"),
        ([[0], [1], [3]], [[1.0], [1.0], [float("inf")]], r"doc_id 12 .*count inf"),
        ([[0], [1, 2], [3]], [[1.0], [1.0], [1.0]], r"doc_id 11 .* 2 word ids but 1 counts"),
        ([[0], None, [3]], [[1.0], [], [1.0]], r"position 1 .* null word_ids list"),
        ([[0], [1], [3]], [[1.0], [1.0], None], r"position 2 .* null counts list"),
        ([[0], [1], [3, 0, 3]], [[1.0], [1.0], [1, 1, 1]], r"doc_id 12 .*3 appears more than"),
        ([[0], [1], [3, None]], [[1.0], [1.0], [1, 1]], r"position 2 .* null inside"),
    ],
)
def test_load_names_the_bad_document(small_corpus, word_ids, counts, match):
    _replace_part(
        small_corpus,
        {
            "doc_id": pa.array([10, 11, 12], pa.int64()),
            "word_ids": _ids(word_ids),
            "counts": _counts(counts),
        },
    )
    with pytest.raises(DataError, match=f"corpus {small_corpus.path}, {WHERE}: .*{match}"):
        small_corpus.batches[0].load()


def test_load_accepts_unsorted_distinct_ids_and_other_numeric_types(small_corpus):
    _replace_part(
        small_corpus,
        {
            "doc_id": pa.array([10, 11, 12], pa.int32()),
            "word_ids": pa.array([[4, 0], [], [2, 1, 3]], pa.list_(pa.int64())),
            "counts": pa.array([[1, 2], [], [3, 4, 5]], pa.list_(pa.int16())),
        },
    )
    import dataclasses

    batch = dataclasses.replace(small_corpus.batches[0], n_tokens=15.0).load()
    np.testing.assert_array_equal(batch.word_ids, [4, 0, 2, 1, 3])
    assert batch.word_ids.dtype == np.int32 and batch.counts.dtype == np.float32
    np.testing.assert_array_equal(batch.doc_ids, [10, 11, 12])


def test_load_reports_missing_columns_and_changed_files(small_corpus):
    _replace_part(small_corpus, {"doc_id": pa.array([1, 2, 3]), "words": _ids([[0], [1], [2]])})
    with pytest.raises(DataError, match=rf"{WHERE}: it has columns \['doc_id', 'words'\]"):
        small_corpus.batches[0].load()
    _replace_part(
        small_corpus,
        {"doc_id": pa.array([1, 2]), "word_ids": _ids([[0], [1]]), "counts": _counts([[1], [1]])},
    )
    with pytest.raises(DataError, match=r"holds 2 documents but the manifest says 3.*rescan=True"):
        small_corpus.batches[0].load()
    # as many documents, other counts (a worker seeing a stale copy): the fit ran on
    # without a word, to an ELBO per token of -15.5 against -8.1
    _replace_part(
        small_corpus,
        {"doc_id": pa.array([0, 1, 2]), "word_ids": _ids([[0], [1], [2]]),
         "counts": _counts([[1], [1], [10]])},
    )  # fmt: skip
    with pytest.raises(DataError, match=r"holds 12 tokens but the manifest says 3: the file "
                       r"changed .* \(or this process, on host .* sees another copy"):  # fmt: skip
        small_corpus.batches[0].load()


def test_truncated_parquet_file_is_named(tmp_path, rng):
    corpus = Corpus.write(tmp_path / "c", _random_counts(rng, 50, 5), VOCAB)
    part = tmp_path / "c" / "parts" / "part-00000.parquet"
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    with pytest.raises(DataError, match=rf"{WHERE}: could not read the Parquet file.*truncated"):
        corpus.batches[0].load()
    with pytest.raises(DataError, match=r"file parts/part-00000\.parquet: could not read"):
        Corpus.open(tmp_path / "c", rescan=True)


def test_missing_file_is_reported_and_rescan_drops_it(tmp_path, rng, caplog):
    corpus = Corpus.write(
        tmp_path / "c", _random_counts(rng, 30, 5), VOCAB, docs_per_row_group=10, docs_per_file=10
    )
    os.remove(tmp_path / "c" / "parts" / "part-00001.parquet")
    # the task names the host it ran on: a Dask worker may not see a file the driver sees
    with pytest.raises(DataError, match=r"row group 0: .*part-00001\.parquet does not exist on "
                       r"host .* they need the data at the same path.*rescan=True"):  # fmt: skip
        corpus.batches[1].load()
    with pytest.raises(DataError, match=r"lists 1 file\(s\) that are gone \(parts/part-00001"):
        Corpus.open(tmp_path / "c")
    n_tokens = corpus.batches[1].n_tokens
    with caplog.at_level(logging.WARNING, logger="lsdask.io"):
        rescanned = Corpus.open(tmp_path / "c", rescan=True)
    assert [b.file for b in rescanned.batches] == [
        "parts/part-00000.parquet",
        "parts/part-00002.parquet",
    ]
    assert rescanned.n_docs == 20
    assert Corpus.open(tmp_path / "c").n_docs == 20  # the rescanned manifest was saved
    # not silent: a warning names the file and the documents that leave ...
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(
        "1 part file(s) listed in its manifest are gone (parts/part-00001.parquet: 10 "
        "documents): 10 of 30 documents are left out" in m
        for m in warned
    ), warned
    # ... and the manifest keeps the record of what was removed, across rescans
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert [(r["file"], r["n_docs"], r["n_tokens"]) for r in manifest["removed_parts"]] == [
        ("parts/part-00001.parquet", 10, n_tokens)
    ]
    os.remove(tmp_path / "c" / "parts" / "part-00002.parquet")
    Corpus.open(tmp_path / "c", rescan=True)
    manifest = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert [r["file"] for r in manifest["removed_parts"]] == [
        "parts/part-00001.parquet",
        "parts/part-00002.parquet",
    ]


@pytest.mark.parametrize("bad", [{"n_tokens": -100}, {"n_tokens": float("inf")}, {"n_docs": -1}])
def test_manifest_with_negative_or_infinite_sizes_is_refused(tmp_path, rng, bad):
    Corpus.write(tmp_path / "c", _random_counts(rng, 10, 5), VOCAB)
    path = tmp_path / "c" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["batches"][0].update(bad)
    path.write_text(json.dumps(manifest))
    with pytest.raises(DataError, match=r"batches\[0\] is .*'n_tokens': number >= 0"):
        Corpus.open(tmp_path / "c")


# --------------------------------------------------------------------------- open


def test_open_errors_name_the_path(tmp_path, rng):
    with pytest.raises(FileNotFoundError, match=r"no corpus at .*nowhere.*does not exist"):
        Corpus.open(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"empty: not an lsdask corpus \(no manifest.json\)"):
        Corpus.open(tmp_path / "empty")
    (tmp_path / "file").write_text("x")
    with pytest.raises(DataError, match="not an lsdask corpus"):
        Corpus.open(tmp_path / "file")

    out = tmp_path / "c"
    Corpus.write(out, _random_counts(rng, 5, 5), VOCAB)
    manifest = (out / "manifest.json").read_text()
    (out / "manifest.json").write_text(manifest[:20])
    with pytest.raises(DataError, match=r"manifest.json: not valid JSON"):
        Corpus.open(out)
    (out / "manifest.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(DataError, match=r"expected format 'lsdask-corpus'; found 'other'"):
        Corpus.open(out)
    (out / "manifest.json").write_text(manifest.replace('"version": 1', '"version": 7'))
    with pytest.raises(DataError, match=r"manifest version 7; this lsdask reads version 1"):
        Corpus.open(out)
    (out / "manifest.json").write_text(manifest)
    (out / "vocab.txt").write_text("a\nb\n")
    with pytest.raises(DataError, match=r"vocab.txt has 2 words but the manifest says .* 5"):
        Corpus.open(out)
    os.remove(out / "vocab.txt")
    with pytest.raises(DataError, match=r"vocab.txt is missing"):
        Corpus.open(out)


# --------------------------------------------------------------------------- append, rescan


def test_append_adds_a_file_and_batches_atomically(tmp_path, rng):
    X = _random_counts(rng, 25, 5)
    corpus = Corpus.write(tmp_path / "c", X, VOCAB, docs_per_row_group=10)
    new = corpus.append(_random_counts(rng, 12, 5))
    assert [(b.file, b.row_group, b.n_docs) for b in new] == [
        ("parts/part-00001.parquet", 0, 10),
        ("parts/part-00001.parquet", 1, 2),
    ]
    assert corpus.n_docs == 37 and corpus.batches[-2:] == new
    reopened = Corpus.open(tmp_path / "c")
    assert reopened.n_docs == 37 and len(reopened.batches) == 5
    _, doc_ids = read_all(reopened, return_doc_ids=True)
    np.testing.assert_array_equal(doc_ids, np.arange(37))

    corpus.append([(100, [1, 2], [1.0, 1.0])], file_name="nightly-2024-01-02.parquet")
    assert Corpus.open(tmp_path / "c").batches[-1].file == "parts/nightly-2024-01-02.parquet"
    assert corpus.append([]) == []
    assert sorted(os.listdir(tmp_path / "c" / "parts")) == [
        "nightly-2024-01-02.parquet",
        "part-00000.parquet",
        "part-00001.parquet",
    ]
    with pytest.raises(FileExistsError, match="already exists"):
        corpus.append([(0, [1], [1.0])], file_name="part-00000.parquet")
    with pytest.raises(ValueError, match="file_name must be a plain file name"):
        corpus.append([(0, [1], [1.0])], file_name="sub/x.parquet")


def test_failed_append_leaves_corpus_unchanged(tmp_path, rng):
    corpus = Corpus.write(tmp_path / "c", _random_counts(rng, 5, 5), VOCAB)
    before = (tmp_path / "c" / "manifest.json").read_text()
    with pytest.raises(DataError, match="word id 7 is outside"):
        corpus.append([(5, [1], [1.0]), (6, [7], [1.0])])
    assert os.listdir(tmp_path / "c" / "parts") == ["part-00000.parquet"]
    assert (tmp_path / "c" / "manifest.json").read_text() == before
    assert corpus.n_docs == 5


def test_rescan_adds_new_parquet_files_as_batches(tmp_path, rng, caplog):
    corpus = Corpus.write(tmp_path / "c", _random_counts(rng, 15, 5), VOCAB, docs_per_row_group=10)
    # a partition dropped in by another job, with two row groups
    table = pa.table(
        {
            "doc_id": pa.array(np.arange(100, 104), pa.int64()),
            "word_ids": _ids([[0, 1], [2], [], [4]]),
            "counts": _counts([[1, 2], [3], [], [4]]),
        },
        schema=SCHEMA,
    )
    pq.write_table(table, tmp_path / "c" / "parts" / "new-partition.parquet", row_group_size=3)

    with caplog.at_level(logging.WARNING, logger="lsdask.io.corpus"):
        stale = Corpus.open(tmp_path / "c")
    assert stale.n_docs == 15
    assert "not in the manifest" in caplog.text and "rescan=True" in caplog.text

    fresh = Corpus.open(tmp_path / "c", rescan=True)
    assert [(b.file, b.row_group, b.n_docs, b.n_tokens) for b in fresh.batches[2:]] == [
        ("parts/new-partition.parquet", 0, 3, 6.0),
        ("parts/new-partition.parquet", 1, 1, 4.0),
    ]
    assert fresh.batches[:2] == corpus.batches
    assert fresh.n_docs == 19 and fresh.n_tokens == corpus.n_tokens + 10
    assert read_all(fresh).shape == (19, 5)
    assert Corpus.open(tmp_path / "c").n_docs == 19


def test_rescan_rejects_a_foreign_parquet_file(tmp_path):
    Corpus.write(tmp_path / "c", [(0, [1], [1.0])], VOCAB)
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "c" / "parts" / "junk.parquet")
    with pytest.raises(DataError, match=r"file parts/junk.parquet: has columns \['x'\]"):
        Corpus.open(tmp_path / "c", rescan=True)


@pytest.mark.parametrize(
    ("column", "values", "message"),
    [
        ("counts", pa.array([[1.0], [-5.0]], pa.list_(pa.float64())), r"count -5\.0 of word id 1"),
        ("counts", pa.array([[1.0], [np.nan]], pa.list_(pa.float64())), r"count nan"),
        ("counts", pa.array([[1.0], [1e300]], pa.list_(pa.float64())), r"count 1e\+300 .* at most"),
        ("counts", pa.array([1.0, 2.0], pa.float32()), r"column counts has type float"),
        ("doc_id", pa.array(["a", "b"]), r"column doc_id has type string"),
        (
            "doc_id",
            pa.array([0, 2**64 - 1], pa.uint64()),
            r"column doc_id \(uint64\) holds a value",
        ),
    ],
)
def test_rescan_refuses_a_bad_part_and_leaves_the_manifest_as_it_was(
    tmp_path, column, values, message
):
    """A new part with bad documents is refused when the rescan meets it, naming
    the file and row group, and the manifest is not rewritten: before, its token
    count (negative, nan, 1e300) was saved, and every later open failed on the
    manifest even after the file was removed."""
    Corpus.write(tmp_path / "c", [(0, [1], [1.0])], VOCAB)
    columns = {
        "doc_id": pa.array([10, 11], pa.int64()),
        "word_ids": _ids([[0], [1]]),
        "counts": _counts([[1.0], [2.0]]),
    }
    columns[column] = values
    pq.write_table(pa.table(columns), tmp_path / "c" / "parts" / "bad.parquet")
    manifest = (tmp_path / "c" / "manifest.json").read_bytes()
    with pytest.raises(DataError, match=r"file parts/bad.parquet, row group 0: .*" + message):
        Corpus.open(tmp_path / "c", rescan=True)
    assert (tmp_path / "c" / "manifest.json").read_bytes() == manifest
    os.remove(tmp_path / "c" / "parts" / "bad.parquet")
    assert Corpus.open(tmp_path / "c", rescan=True).n_tokens == 1.0


def test_rescan_refuses_a_part_written_over_another_vocabulary(tmp_path, rng):
    """Part files carry the SHA-256 of the words their ids index: one written over
    another vocabulary (ingested without --vocab, then copied in) is refused,
    where before its ids were read as the corpus's words."""
    import shutil

    X = _random_counts(rng, 12, 5)
    Corpus.write(tmp_path / "c", X, VOCAB, docs_per_row_group=6, docs_per_file=6)
    Corpus.write(tmp_path / "o", X, VOCAB[::-1], docs_per_row_group=6)
    Corpus.write(tmp_path / "s", X[:6], VOCAB, docs_per_row_group=6)
    shutil.copy(tmp_path / "s/parts/part-00000.parquet", tmp_path / "c/parts/new.parquet")
    assert Corpus.open(tmp_path / "c", rescan=True).n_docs == 18  # the same words: taken in
    shutil.copy(tmp_path / "o/parts/part-00000.parquet", tmp_path / "c/parts/bad.parquet")
    manifest = (tmp_path / "c" / "manifest.json").read_bytes()
    with pytest.raises(DataError, match=r"file parts/bad.parquet: was written over another "
                       r"vocabulary .* Remove it and add its documents with lsdask ingest \.\.\. "
                       r"--append-to .*c \(in Python"):  # fmt: skip
        Corpus.open(tmp_path / "c", rescan=True)
    assert (tmp_path / "c" / "manifest.json").read_bytes() == manifest
    os.remove(tmp_path / "c/parts/bad.parquet")
    # vocab.txt edited in place after the parts were written (same size, one word
    # changed): every part's stamp is checked, not only those of new parts
    vocab_txt = tmp_path / "c" / "vocab.txt"
    vocab_txt.write_text(vocab_txt.read_text().replace("w3", "x3"))
    edited = r"part-00000.parquet: was written over another .* vocab.txt was edited, restore"
    with pytest.raises(DataError, match=edited):
        Corpus.open(tmp_path / "c", rescan=True)
    meta = pq.read_schema(tmp_path / "c/parts/part-00000.parquet").metadata
    from lsdask.io.corpus.vocabulary import vocabulary_digest

    assert meta[b"lsdask.vocabulary_sha256"] == vocabulary_digest(VOCAB).encode()


def test_rescan_warns_of_a_new_part_whose_doc_ids_meet_anothers(tmp_path, rng, caplog):
    import shutil

    X = _random_counts(rng, 12, 5)
    Corpus.write(tmp_path / "c", X, VOCAB, docs_per_row_group=6, docs_per_file=6)
    Corpus.write(tmp_path / "o", [(100 + i, [1], [2.0]) for i in range(3)], VOCAB)
    shutil.copy(tmp_path / "o/parts/part-00000.parquet", tmp_path / "c/parts/own-ids.parquet")
    with caplog.at_level(logging.WARNING, logger="lsdask.io"):
        assert Corpus.open(tmp_path / "c", rescan=True).n_docs == 15
    assert "doc_ids" not in caplog.text  # 100..102: new ids
    shutil.copy(tmp_path / "c/parts/part-00001.parquet", tmp_path / "c/parts/again.parquet")
    with caplog.at_level(logging.WARNING, logger="lsdask.io"):
        assert Corpus.open(tmp_path / "c", rescan=True).n_docs == 21
    assert (
        "new part parts/again.parquet holds doc_ids 6..11, and parts/part-00001.parquet holds "
        "6..11: if these are the same documents they are now counted twice" in caplog.text
    )


def test_append_corpus_numbers_after_the_largest_id_or_keeps_own_ids(tmp_path, rng):
    X = _random_counts(rng, 9, 5)
    c = Corpus.write(tmp_path / "c", X[:5], VOCAB, docs_per_row_group=2)
    Corpus.write(tmp_path / "n", X[5:], VOCAB, docs_per_row_group=3)
    added = c.append_corpus(Corpus.open(tmp_path / "n"))
    assert [b.n_docs for b in added] == [2, 2]  # the corpus's own row-group size, not 3
    Y, ids = read_all(Corpus.open(tmp_path / "c"), return_doc_ids=True)
    np.testing.assert_array_equal(ids, np.arange(9))
    np.testing.assert_allclose(Y.toarray(), X.toarray())
    Corpus.write(tmp_path / "k", [(50, [0], [1.0]), (70, [2], [2.0])], VOCAB)
    c.append_corpus(Corpus.open(tmp_path / "k"), keep_ids=True)
    assert list(read_all(c, return_doc_ids=True)[1][-2:]) == [50, 70]
    # own ids already in the corpus are refused; ids between them are not
    Corpus.write(tmp_path / "dup", [(60, [0], [1.0]), (70, [1], [1.0])], VOCAB)
    with pytest.raises(
        ValueError, match=r"1 of the documents to append have doc_ids that .*e\.g\. 70"
    ):
        c.append_corpus(Corpus.open(tmp_path / "dup"), keep_ids=True)
    Corpus.write(tmp_path / "between", [(55, [0], [1.0]), (65, [1], [1.0])], VOCAB)
    c.append_corpus(Corpus.open(tmp_path / "between"), keep_ids=True)
    Corpus.write(tmp_path / "o", X[:2], VOCAB[::-1])
    with pytest.raises(ValueError, match=r"over another vocabulary than corpus .*--append-to"):
        c.append_corpus(Corpus.open(tmp_path / "o"))
    assert c.n_docs == 13


def test_rescan_rereads_a_part_replaced_in_place(tmp_path, rng, caplog):
    """Same row groups of the same sizes, other documents: the manifest's sizes
    used to stay as they were (only row-group document counts were compared)."""
    import shutil

    c = Corpus.write(tmp_path / "c", _random_counts(rng, 6, 5), VOCAB, docs_per_row_group=3)
    heavier = sp.csr_matrix(_random_counts(rng, 6, 5).toarray() * 7 + 1)
    Corpus.write(tmp_path / "h", heavier, VOCAB, docs_per_row_group=3)
    shutil.copy(tmp_path / "h/parts/part-00000.parquet", tmp_path / "c/parts/part-00000.parquet")
    with caplog.at_level(logging.INFO, logger="lsdask.io"):
        fresh = Corpus.open(tmp_path / "c", rescan=True)
    assert "(0 new, 1 changed, 0 gone)" in caplog.text
    assert fresh.n_tokens == heavier.sum() != c.n_tokens
    assert [b.n_tokens for b in fresh.batches] == [heavier[:3].sum(), heavier[3:].sum()]
    # an unchanged corpus rescans to the same batches
    assert Corpus.open(tmp_path / "c", rescan=True).batches == fresh.batches


def test_batch_without_vocab_size_checks_only_negative_ids(small_corpus):
    b = small_corpus.batches[0]
    loose = CorpusBatch(b.path, b.file, b.row_group, b.n_docs, b.n_tokens)
    assert loose.load().n_docs == 3


def test_append_after_removing_a_file_keeps_doc_ids_unique(tmp_path):
    import os

    import scipy.sparse as sp

    from lsdask.io.corpus import Corpus, read_all

    X = sp.csr_matrix(np.arange(1, 25, dtype=float).reshape(6, 4))
    Corpus.write(tmp_path / "c", X, list("abcd"), docs_per_row_group=2, docs_per_file=2)
    first = sorted((tmp_path / "c" / "parts").glob("*.parquet"))[0]
    os.remove(first)
    corpus = Corpus.open(tmp_path / "c", rescan=True)
    corpus.append(X[:2])
    _, ids = read_all(Corpus.open(tmp_path / "c"), return_doc_ids=True)
    assert sorted(ids.tolist()) == [2, 3, 4, 5, 6, 7]


def test_a_writer_removes_the_temporaries_of_a_stopped_writer_of_the_same_output(tmp_path, caplog):
    """A writer killed outright (SIGKILL, a lost machine) leaves its temporary
    folder; the next write of the same output removes those of this host whose
    process is gone, and leaves those of running processes and other hosts."""
    from lsdask.io.atomic import _host

    dead = subprocess_pid_that_exited()
    stale = tmp_path / f".c.tmp-{_host()}-{dead}-0123abcd"
    live = tmp_path / f".c.tmp-{_host()}-{os.getpid()}-0123abcd"
    other_host = tmp_path / f".c.tmp-elsewhere-{dead}-0123abcd"
    for folder in (stale, live, other_host):
        (folder / "parts").mkdir(parents=True)
    with caplog.at_level(logging.WARNING, logger="lsdask.io.atomic"):
        Corpus.write(tmp_path / "c", [(0, [1], [1.0])], VOCAB)
    assert f"removing {stale}, left behind by a writer of {tmp_path / 'c'}" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["c", live.name, other_host.name])


def subprocess_pid_that_exited() -> int:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(proc.stdout)
