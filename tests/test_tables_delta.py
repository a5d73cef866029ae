"""Delta Lake tables, written by deltalake's write_deltalake, read in place.

A fit with a checkpoint, then a new version appended and the fit resumed on
it: the memo of the first version's row groups is kept (their keys are the
same), the new version's file joins as new batches, and files that a version
removes leave the memo.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import lsdask
from lsdask.errors import DataError
from lsdask.io.tables import DeltaTable
from lsdask.io.tables.batch import TableRowGroup
from lsdask.io.tables.delta import _refuse_deletion_vectors
from lsdask.io.tables.location import TableLocation
from lsdask.models import sum_stats
from lsdask.persist.checkpoint import CheckpointDir
from lsdask.persist.memo_files import load_stats

deltalake = pytest.importorskip("deltalake")

V = 30
WORDS = [f"zq{chr(97 + i // 26)}{chr(97 + i % 26)}" for i in range(V)]


def _docs(rng: np.random.Generator, n: int, first: int) -> pa.Table:
    topics = rng.dirichlet(np.full(V, 0.1), size=3)
    ids = [rng.choice(V, size=int(rng.integers(5, 25)), p=topics[d % 3]).tolist() for d in range(n)]
    return pa.table(
        {
            "doc_id": np.arange(first, first + n),
            "token_ids": pa.array(ids, pa.list_(pa.int32())),
            "body": [" ".join(WORDS[i] for i in d) for d in ids],
            "year": [2020 + d % 2 for d in range(n)],
        }
    )


def _write(root: Path, table: pa.Table, mode: str = "error") -> None:
    deltalake.write_deltalake(
        str(root), table, partition_by=["year"], mode=mode,
        writer_properties=deltalake.WriterProperties(max_row_group_size=40),
    )  # fmt: skip


def _tokens(source) -> float:
    return float(sum(b.load().sum() for b in source.batches))


def test_a_new_version_is_trained_on_from_the_kept_memo_and_removed_files_leave(
    tmp_path: Path, rng: np.random.Generator, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "delta"
    _write(root, _docs(rng, 160, 0))
    table = DeltaTable(root, tokens="token_ids", vocabulary=WORDS)
    first, vocab = table.source()
    assert first.description.startswith(f"Delta table {root} version 0 (2 files)")
    assert first.n_rows == 160 and first.n_batches == 4  # 2 partitions x 2 row groups
    assert all(b.key == f"{b.file}#{b.row_group}" for b in first.batches)  # no size: Delta

    ckpt = tmp_path / "ck"
    kw = dict(sparsity=2, random_state=0, client="sync", checkpoint_dir=str(ckpt), resume=True)
    n_first = len(lsdask.LDA(3, n_laps=2, **kw).fit(first, vocabulary=vocab).elbo_trace_)
    old_keys = {b.key for b in first.batches}
    assert set(CheckpointDir(ckpt).read()["memo"]) == old_keys

    # version 1: new documents appended (one new file in each partition)
    _write(root, _docs(rng, 70, 1000), mode="append")
    grown, _ = table.source()
    new = [b for b in grown.batches if b.key not in old_keys]
    assert {b.key for b in grown.batches} >= old_keys and len(new) == 2  # 35 rows each
    assert grown.description.startswith(f"Delta table {root} version 1 (4 files)")
    older = DeltaTable(root, version=0, tokens="token_ids", vocabulary=WORDS).source()[0]
    assert {b.key for b in older.batches} == old_keys  # time travel: version 0's files

    loads: Counter[str] = Counter()
    original = TableRowGroup.load

    def counting(self: TableRowGroup):
        loads[self.key] += 1
        return original(self)

    monkeypatch.setattr(TableRowGroup, "load", counting)
    model = lsdask.LDA(3, n_laps=1, **kw).fit(grown, vocabulary=vocab)
    monkeypatch.undo()
    # resumed, not started over: no start-up sample, each row group read once in its lap
    assert loads == Counter({b.key: 1 for b in grown.batches})
    assert model.n_laps_ == 3
    sizes = model.size_trace_
    old_tokens = _tokens(first)
    np.testing.assert_allclose(sizes[:n_first], old_tokens, rtol=1e-12)
    # the first update after the resume starts from the kept memo of version 0: it
    # visited an old row group (no change in size) or added one new row group
    options = [old_tokens] + [old_tokens + float(b.load().sum()) for b in new]
    assert any(sizes[n_first] == pytest.approx(v, rel=1e-12) for v in options)
    assert sizes[-1] == pytest.approx(_tokens(grown), rel=1e-12)
    saved = CheckpointDir(ckpt).read()
    assert set(saved["memo"]) == {b.key for b in grown.batches}
    memo_sum = sum_stats([load_stats(ckpt / "memo" / f) for f in saved["memo"].values()])
    assert model.stats_.allclose(memo_sum, rtol=1e-12, atol=1e-9)

    # version 2: a partition deleted; its files leave the batches and the memo
    deltalake.DeltaTable(str(root)).delete("year = 2020")
    shrunk, _ = table.source()
    assert all(not b.file.startswith("year=2020/") for b in shrunk.batches)
    assert {b.key for b in shrunk.batches} < {b.key for b in grown.batches}
    model = lsdask.LDA(3, n_laps=1, **kw).fit(shrunk, vocabulary=vocab)
    assert set(CheckpointDir(ckpt).read()["memo"]) == {b.key for b in shrunk.batches}
    assert model.stats_["n_docs"][0] == pytest.approx(shrunk.n_rows) == 80 + 35


def test_a_text_column_retrains_over_the_vocabulary_it_was_fitted_with(tmp_path, rng) -> None:
    root = tmp_path / "delta"
    _write(root, _docs(rng, 120, 0))
    kw = dict(random_state=0, client="sync", checkpoint_dir=str(tmp_path / "ck"), resume=True)
    source, vocab = DeltaTable(root, text="body", min_df=2, max_df=1.0).source()
    model = lsdask.LDA(3, n_laps=1, **kw).fit(source, vocabulary=vocab)
    _write(root, _docs(rng, 40, 500), mode="append")
    # the vocabulary built anew from the grown table is another one: refused
    rebuilt, other = DeltaTable(root, text="body", min_df=2, max_df=0.3).source()
    assert other != vocab
    with pytest.raises(ValueError, match=r"another vocabulary|vocab_size"):
        lsdask.LDA(3, n_laps=1, **kw).fit(rebuilt, vocabulary=other)
    # the model's own vocabulary: resumed
    again, same = DeltaTable(root, text="body", vocabulary=model.vocabulary_).source()
    assert same == vocab
    resumed = lsdask.LDA(3, n_laps=1, **kw).fit(again, vocabulary=same)
    assert resumed.n_laps_ == 2 and resumed.stats_["n_docs"][0] == pytest.approx(160)


def test_tables_delta_refuses_what_it_would_misread(tmp_path, rng, monkeypatch) -> None:
    with pytest.raises(FileNotFoundError, match="no table there"):
        DeltaTable(tmp_path / "none", tokens="token_ids", vocabulary=WORDS).source()
    mapped = tmp_path / "mapped"
    deltalake.write_deltalake(
        str(mapped), _docs(rng, 20, 0), configuration={"delta.columnMapping.mode": "name"}
    )
    with pytest.raises(DataError, match=r"uses column mapping \(mode 'name'\)"):
        DeltaTable(mapped, tokens="token_ids", vocabulary=WORDS).source()
    # deletion vectors: enabled but none written (deltalake rewrites files) is fine
    vectors = tmp_path / "vectors"
    deltalake.write_deltalake(
        str(vectors), _docs(rng, 20, 0), configuration={"delta.enableDeletionVectors": "true"}
    )
    assert DeltaTable(vectors, tokens="token_ids", vocabulary=WORDS).source()[0].n_rows == 20

    class WithVectors:  # a log whose files have rows deleted by a deletion vector
        def protocol(self):
            return deltalake.DeltaTable(str(vectors)).protocol()

        def deletion_vectors(self):
            batch = pa.record_batch(
                {"filepath": ["file:///t/part-0.parquet"], "selection_vector": [[True, False]]}
            )
            return pa.RecordBatchReader.from_batches(batch.schema, [batch])

    with pytest.raises(DataError, match=r"1 data files have rows deleted by a deletion vector"):
        _refuse_deletion_vectors(WithVectors(), TableLocation.of(vectors))
    monkeypatch.setitem(sys.modules, "deltalake", None)
    with pytest.raises(ImportError, match=r"pip install 'lsdask\[delta\]'"):
        DeltaTable(vectors, tokens="token_ids", vocabulary=WORDS).source()
    with pytest.raises(ValueError, match="version must be a table version"):
        DeltaTable(vectors, version=-1, tokens="token_ids", vocabulary=WORDS)
