"""Input folders of ingestion are not trusted either: links and special files in
them are skipped (text folders) or refused (Parquet datasets), never followed
out of the folder, and a FIFO never blocks the command."""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lsdask.errors import DataError
from lsdask.io.corpus import Corpus
from lsdask.io.ingest import ingest_table, ingest_text_folder

ALL = {"min_df": 1, "max_df": 1.0}


def _tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "outside"
    (folder / "sub").mkdir(parents=True)
    (folder / "secret.txt").write_text("secret words never ingested")
    (folder / "sub" / "more.txt").write_text("hidden folder words")
    return folder


def test_text_folder_skips_links_and_special_files(tmp_path, outside, caplog):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("apple river stone")
    (docs / "b.txt").write_text("river cloud field")
    (docs / "link.txt").symlink_to(outside / "secret.txt")
    (docs / "dir").symlink_to(outside / "sub", target_is_directory=True)
    (docs / "dangling.txt").symlink_to(tmp_path / "nowhere.txt")
    os.mkfifo(docs / "fifo.txt")
    (docs / "zero.txt").symlink_to("/dev/zero")
    before = _tree_digest(outside)
    with caplog.at_level(logging.WARNING, logger="lsdask.io.ingest.text_files"):
        summary = ingest_text_folder(docs, tmp_path / "corpus", **ALL)
    assert summary.n_docs == 2
    vocab = Corpus.open(tmp_path / "corpus").vocab
    assert "secret" not in vocab and "hidden" not in vocab
    skipped = " ".join(r.getMessage() for r in caplog.records)
    for name in ("link.txt", "dir", "dangling.txt", "fifo.txt", "zero.txt"):
        assert f"skipped {name}" in skipped
    assert _tree_digest(outside) == before
    assert not (tmp_path / "nowhere.txt").exists()


def test_parquet_dataset_with_a_link_is_refused(tmp_path, outside):
    data = tmp_path / "dataset"
    (data / "year=2024").mkdir(parents=True)
    pq.write_table(
        pa.table({"text": ["apple river", "stone cloud"]}), data / "year=2024" / "a.parquet"
    )
    pq.write_table(pa.table({"text": ["secret words"]}), outside / "b.parquet")
    (data / "year=2024" / "b.parquet").symlink_to(outside / "b.parquet")
    with pytest.raises(DataError, match=r"'year=2024/b.parquet' is a symbolic link"):
        ingest_table(data, tmp_path / "corpus", text_column="text", **ALL)
    assert not (tmp_path / "corpus").exists()
