"""Untrusted tables: every bad row, column or file is a DataError that says where.

Each bad file below has 10 rows per row group and its bad row at row 13 of the
file: row 3 of row group 1. The error must name the file, the row group and
the row, what was expected and what was found; never a bare pyarrow error.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lsdask
from lsdask.errors import DataError
from lsdask.io.guarded import UnsafePath
from lsdask.io.ingest.words import Tokenizer
from lsdask.io.tables import ParquetTable
from lsdask.io.tables.vocabulary import read_vocabulary_file

V = 20
WORDS = [f"zq{chr(97 + i)}" for i in range(V)]
ROW = r"file bad\.parquet, row group 1, row 3 \(row 13 of the file\)"


def _ids(bad=None) -> list:
    rows: list = [[i % V, (3 * i) % V, (3 * i) % V] for i in range(25)]
    if bad is not None:
        rows[13] = bad
    return rows


def _write(root: Path, columns: dict, name: str = "bad.parquet") -> Path:
    root.mkdir(exist_ok=True)
    pq.write_table(pa.table(columns), root / name, row_group_size=10)
    return root


def _load_all(table: ParquetTable) -> None:
    source, _ = table.source()
    for b in source.batches:
        b.load()


@pytest.mark.parametrize(
    ("bad", "found"),
    [
        ([1, V, 2], rf"token id {V} \(entry 1 of 'ids'\) is outside \[0, {V}\)"),
        ([-1], rf"token id -1 \(entry 0 of 'ids'\) is outside \[0, {V}\)"),
        (None, r"the 'ids' list is null; expected a list"),
        ([1, None], r"entry 1 of the 'ids' list is null"),
    ],
)
def test_bad_token_ids_name_file_row_group_and_row(tmp_path, bad, found) -> None:
    rows = _ids()
    rows[13] = bad
    root = _write(tmp_path / "t", {"ids": pa.array(rows, pa.list_(pa.int64()))})
    table = ParquetTable(root, tokens="ids", vocabulary=WORDS)
    source, _ = table.source()
    source.batches[0].load()  # the good row group loads
    with pytest.raises(DataError, match=rf"{ROW}: {found}"):
        source.batches[1].load()


@pytest.mark.parametrize(
    ("bad", "found"),
    [
        ([1.0, -2.0, 1.0], r"count -2\.0 \(entry 1 of 'n'\) is not a word count; expected a whole"),
        ([1.0, 2.5, 1.0], r"count 2\.5 \(entry 1 of 'n'\) is not a word count"),
        ([float("nan"), 1.0, 1.0], r"count nan \(entry 0 of 'n'\) is not a word count"),
        ([1.0, 1.0], r"3 token ids in 'ids' but 2 counts in 'n'"),
        (None, r"the 'n' list is null"),
    ],
)
def test_bad_counts_name_file_row_group_and_row(tmp_path, bad, found) -> None:
    counts: list = [[1.0, 1.0, 2.0] for _ in range(25)]
    counts[13] = bad
    root = _write(
        tmp_path / "t",
        {
            "ids": pa.array(_ids(), pa.list_(pa.int32())),
            "n": pa.array(counts, pa.list_(pa.float64())),
        },
    )
    with pytest.raises(DataError, match=rf"{ROW}: {found}"):
        _load_all(ParquetTable(root, tokens="ids", counts="n", vocabulary=WORDS))


def test_a_negative_integer_count_is_refused_too(tmp_path) -> None:
    counts = [[1, 1, 1] for _ in range(25)]
    counts[13] = [1, 1, -3]
    root = _write(
        tmp_path / "t",
        {"ids": pa.array(_ids(), pa.list_(pa.int32())), "n": pa.array(counts, pa.list_(pa.int8()))},
    )
    with pytest.raises(DataError, match=rf"{ROW}: count -3 \(entry 2 of 'n'\)"):
        _load_all(ParquetTable(root, tokens="ids", counts="n", vocabulary=WORDS))


@pytest.mark.parametrize(
    ("column", "options", "found"),
    [
        (pa.array(["a b"] * 25), {"tokens": "ids", "vocabulary": WORDS},
         r"column 'ids' has type string; expected a list of integer token ids.*pass text="),
        (pa.array([[0.5]] * 25, pa.list_(pa.float32())), {"tokens": "ids", "vocabulary": WORDS},
         r"column 'ids' has type list<float>; expected a list of integer token ids"),
        (pa.array(list(range(25))), {"text": "ids", "vocabulary": WORDS},
         r"column 'ids' has type int64; expected text \(string\)"),
        (pa.array([[1]] * 25, pa.list_(pa.int32())), {"text": "ids", "vocabulary": WORDS},
         r"column 'ids' has type list<int32>; expected text \(string\); for a list of token"
         r" ids pass tokens="),
        (pa.array([[1]] * 25, pa.list_(pa.int32())), {"tokens": "nope", "vocabulary": WORDS},
         r"no column 'nope'; the columns are \['ids'\]"),
        (pa.array([[1]] * 25, pa.list_(pa.int32())),
         {"tokens": "ids", "counts": "n", "vocabulary": WORDS}, r"no column 'n'"),
    ],
)  # fmt: skip
def test_a_wrong_or_missing_column_is_refused_before_any_task(tmp_path, column, options, found):
    root = _write(tmp_path / "t", {"ids": column})
    with pytest.raises(DataError, match=rf"table .*: file bad\.parquet: {found}"):
        ParquetTable(root, **options).source()


def test_a_fit_over_a_bad_row_says_where_it_is(tmp_path) -> None:
    root = _write(tmp_path / "t", {"ids": pa.array(_ids([0, 99]), pa.list_(pa.int32()))})
    source, vocab = ParquetTable(root, tokens="ids", vocabulary=WORDS).source()
    with pytest.raises(DataError, match=rf"{ROW}: token id 99"):
        lsdask.LDA(2, n_laps=1, client="sync", random_state=0).fit(source, vocabulary=vocab)


def test_files_that_are_not_parquet(tmp_path) -> None:
    root = _write(tmp_path / "t", {"ids": pa.array(_ids(), pa.list_(pa.int32()))})
    (root / "notes.txt").write_text("not a table\n" * 3)
    table = ParquetTable(root, tokens="ids", vocabulary=WORDS)
    with pytest.raises(DataError, match=r"file notes\.txt: is not a Parquet file .*'_' or '\.'"):
        table.source()
    (root / "notes.txt").rename(root / "_notes.txt")  # skipped, as Spark skips it
    assert table.source()[0].n_rows == 25
    data = (root / "bad.parquet").read_bytes()
    (root / "cut.parquet").write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match=r"file cut\.parquet: is not a Parquet file"):
        table.source()
    (root / "cut.parquet").write_bytes(data[:100] + data[-8:])  # a footer claiming too much
    with pytest.raises(DataError, match=r"file cut\.parquet: its footer claims"):
        table.source()
    (root / "cut.parquet").write_bytes(
        b"PAR1" + b"\x00" * 200 + (50).to_bytes(4, "little") + b"PAR1"
    )
    with pytest.raises(DataError, match=r"file cut\.parquet: could not read the Parquet footer"):
        table.source()


def test_a_file_damaged_changed_or_removed_after_listing(tmp_path) -> None:
    root = _write(tmp_path / "t", {"ids": pa.array(_ids(), pa.list_(pa.int32()))})
    source, _ = ParquetTable(root, tokens="ids", vocabulary=WORDS).source()
    batch = source.batches[1]
    path = root / "bad.parquet"
    data = path.read_bytes()
    start = pq.read_metadata(path).row_group(1).column(0).data_page_offset
    path.write_bytes(data + b"more")
    with pytest.raises(DataError, match=r"row group 1: it holds .* bytes where it held"):
        batch.load()
    damaged = bytearray(data)
    damaged[start + 20 : start + 40] = b"\xff" * 20
    path.write_bytes(bytes(damaged))
    with pytest.raises(DataError, match=r"row group 1: could not read the row group"):
        batch.load()
    path.unlink()
    with pytest.raises(DataError, match=r"row group 1: .*bad\.parquet does not exist on host"):
        batch.load()


def test_links_and_special_files_inside_a_table_are_refused(tmp_path) -> None:
    root = _write(tmp_path / "t", {"ids": pa.array(_ids(), pa.list_(pa.int32()))})
    outside = _write(tmp_path / "elsewhere", {"ids": pa.array(_ids(), pa.list_(pa.int32()))})
    table = ParquetTable(root, tokens="ids", vocabulary=WORDS)
    (root / "year=2024").mkdir()
    os.symlink(outside / "bad.parquet", root / "year=2024" / "linked.parquet")
    with pytest.raises(UnsafePath, match=r"year=2024/linked\.parquet.*symbolic link"):
        table.source()
    os.remove(root / "year=2024" / "linked.parquet")
    os.symlink(outside, root / "year=2025")
    with pytest.raises(UnsafePath, match=r"year=2025.*symbolic link"):
        table.source()
    os.remove(root / "year=2025")
    os.mkfifo(root / "year=2024" / "pipe.parquet")
    with pytest.raises(UnsafePath, match=r"pipe\.parquet.*FIFO"):
        table.source()  # refused, never opened (which would block)
    os.remove(root / "year=2024" / "pipe.parquet")
    assert table.source()[0].n_rows == 25
    # a file swapped for a link after listing: the task refuses it too
    source, _ = table.source()
    os.remove(root / "bad.parquet")
    os.symlink(outside / "bad.parquet", root / "bad.parquet")
    with pytest.raises(UnsafePath, match="symbolic link"):
        source.batches[0].load()


def test_a_delta_folder_or_an_empty_table_is_refused(tmp_path) -> None:
    empty = pa.table({"ids": pa.array([], pa.list_(pa.int32()))})
    root = tmp_path / "t"
    root.mkdir()
    pq.write_table(empty, root / "empty.parquet")
    table = ParquetTable(root, tokens="ids", vocabulary=WORDS)
    with pytest.raises(DataError, match=r"its 1 data files hold no rows"):
        table.source()
    (root / "empty.parquet").rename(root / "_empty.parquet")
    with pytest.raises(DataError, match=r"holds no data files \(1 files, all with a name"):
        table.source()
    (root / "_delta_log").mkdir()
    (root / "_delta_log" / "00000000000000000000.json").write_text("{}\n")
    with pytest.raises(DataError, match=r"is a Delta table .*lsdask\.DeltaTable"):
        table.source()


def test_a_store_without_its_package_names_the_package() -> None:
    from fsspec.registry import known_implementations

    missing = [
        p for p in ("oci", "box", "dropbox", "wandb", "lakefs")
        if p in known_implementations
        and importlib.util.find_spec(known_implementations[p]["class"].split(".")[0]) is None
    ]  # fmt: skip
    if not missing:
        pytest.skip("every candidate store package is installed here")
    protocol = missing[0]
    package = known_implementations[protocol]["class"].split(".")[0]
    with pytest.raises(ImportError, match=rf"{protocol}://.*{package}"):
        ParquetTable(f"{protocol}://bucket/t", tokens="ids", vocabulary=WORDS).source()


def test_options_that_cannot_go_together() -> None:
    with pytest.raises(ValueError, match=r"exactly one of tokens= .* and text="):
        ParquetTable("t", tokens="a", text="b", vocabulary=WORDS)
    with pytest.raises(ValueError, match="exactly one of tokens="):
        ParquetTable("t")
    with pytest.raises(ValueError, match="counts= is the count of each token id: it needs tokens="):
        ParquetTable("t", text="b", counts="c")
    with pytest.raises(ValueError, match="holds ids into a vocabulary: give it as vocabulary="):
        ParquetTable("t", tokens="a")
    with pytest.raises(ValueError, match="min_df prune a vocabulary built from a text column"):
        ParquetTable("t", tokens="a", vocabulary=WORDS, min_df=2)
    with pytest.raises(ValueError, match="min_df must be an int count"):
        ParquetTable("t", text="a", min_df=-1)
    with pytest.raises(ValueError, match="tokenizer= cuts a text column"):
        ParquetTable("t", tokens="a", vocabulary=WORDS, tokenizer=Tokenizer())
    with pytest.raises(TypeError, match="storage_options must be a dict"):
        ParquetTable("t", tokens="a", vocabulary=WORDS, storage_options="key=1").source()


def test_vocabulary_files(tmp_path) -> None:
    path = tmp_path / "vocab.txt"
    path.write_bytes("\ufeffcat\r\ndog\r\nélan\r\n".encode())
    assert read_vocabulary_file(path) == ["cat", "dog", "élan"]
    path.write_text("cat\ndog\n\nbird\n")
    with pytest.raises(DataError, match=r"vocab\.txt, line 3: the line is empty"):
        read_vocabulary_file(path)
    path.write_text("cat\ndog\ncat\n")
    with pytest.raises(DataError, match=r"words 0 and 2 are both 'cat'"):
        read_vocabulary_file(path)
    path.write_bytes(b"cat\ndog\n\xff\xfe\n")
    with pytest.raises(DataError, match=r"vocab\.txt, line 3: not UTF-8"):
        read_vocabulary_file(path)
    path.write_text("")
    with pytest.raises(DataError, match="the vocabulary is empty"):
        read_vocabulary_file(path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_vocabulary_file(tmp_path / "nope.txt")
    os.mkfifo(tmp_path / "fifo.txt")
    with pytest.raises(UnsafePath, match="FIFO"):
        read_vocabulary_file(tmp_path / "fifo.txt")
    # a vocabulary too short for the ids: the row with the first id beyond it
    root = _write(tmp_path / "t", {"ids": pa.array(_ids(), pa.list_(pa.int32()))})
    path.write_text("\n".join(WORDS[:5]) + "\n")
    with pytest.raises(DataError, match=r"row group 0, row 2 .*token id 6 .* outside \[0, 5\)"):
        _load_all(ParquetTable(root, tokens="ids", vocabulary=str(path)))
    assert np.isfinite(V)
