"""A corpus folder is not trusted, and nothing outside it is touched (issue 39).

One test per finding about the Parquet corpus store and its lock: a lock file
that is a link (1), ``pending`` entries naming paths elsewhere (2), a linked
``parts/`` (4), special or huge ``manifest.json`` and ``vocab.txt`` (5),
flipped bits in a part (7), an append killed while it cleans up after its
commit (11), and two writers of one output at once (and an output path that is
a link). Each hashes a tree beside the corpus before and after, and checks the
error message.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

from lsdask.errors import DataError
from lsdask.io.corpus import COLUMNS, Corpus, read_all
from lsdask.io.corpus.batch import DocBatch
from lsdask.io.locks import LOCK_NAME, FolderLock, holder
from tests.lsdask_processes import lsdask_env, paused_env, run_lsdask, start_lsdask, wait_reached

V = 40
VOCAB = [f"word{i:02d}" for i in range(V)]
ADDRESS_SPACE = 4 << 30  # room for pyarrow and numpy, none for reading /dev/zero whole


def _counts(n: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    X = sp.random(n, V, density=0.2, random_state=rng, format="csr")
    X.data = np.ceil(X.data * 4)
    return X


def _corpus(path: Path, n: int = 120, seed: int = 0) -> Path:
    Corpus.write(path, _counts(n, seed), VOCAB, docs_per_row_group=40)
    return path


WORDS = [a + b for a in ("apple", "river", "stone", "cloud", "field")
         for b in ("ward", "light", "berg", "ton", "wood", "mere")]  # fmt: skip


def _jsonl(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    with open(path, "w") as f:
        for i in range(n):
            words = rng.choice(WORDS, size=int(rng.integers(4, 12)))
            f.write(json.dumps({"text": " ".join(words), "n": 1000 * seed + i}) + "\n")
    return path


def _outside(tmp: Path) -> Path:
    """A tree beside the corpus that nothing may change: a file, a folder, a
    corpus of its own."""
    out = tmp / "outside"
    out.mkdir()
    (out / "important.txt").write_text("keep me\n" * 100)
    (out / "folder").mkdir()
    (out / "folder" / "notes.txt").write_text("notes\n")
    _corpus(out / "other", n=80, seed=9)
    return out


def _tree_hash(folder: Path) -> str:
    """Every entry below ``folder``: its name, kind, link target or content."""
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            p = Path(dirpath) / name
            h.update(str(p.relative_to(folder)).encode() + b"\0")
            if p.is_symlink():
                h.update(b"link:" + os.readlink(p).encode())
            elif p.is_file():
                h.update(p.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def _bounded_lsdask(*args: object, timeout: float = 120) -> subprocess.CompletedProcess:
    """``lsdask ARGS`` under an address-space limit and a time limit: a command
    that reads a device whole or blocks on a FIFO fails the test, never hangs it."""
    return subprocess.run(
        [sys.executable, "-m", "lsdask", *map(str, args)], capture_output=True, text=True,
        env=lsdask_env(), timeout=timeout, preexec_fn=_limited,
    )  # fmt: skip


# --------------------------------------------------------------------------- finding 1


def test_a_lock_file_that_is_a_link_is_refused_and_its_target_untouched(tmp_path):
    outside = _outside(tmp_path)
    corpus = _corpus(tmp_path / "c")
    more = _jsonl(tmp_path / "more.jsonl", 20, 1)
    (corpus / LOCK_NAME).symlink_to(outside / "important.txt")
    before = _tree_hash(outside)

    run = run_lsdask("ingest", "jsonl", more, "--append-to", corpus)
    assert run.returncode != 0
    assert f"{corpus}" in run.stderr and LOCK_NAME in run.stderr
    assert "symbolic link" in run.stderr and "Traceback" not in run.stderr
    assert _tree_hash(outside) == before
    assert json.loads((corpus / "manifest.json").read_text())["n_docs"] == 120  # none appended

    # a dangling link: its target is never created; a FIFO: no hang, no record read
    (corpus / LOCK_NAME).unlink()
    (corpus / LOCK_NAME).symlink_to(outside / "created.txt")
    with pytest.raises(DataError, match=r"lock file \.lsdask\.lock"):
        FolderLock(corpus, "corpus").acquire()
    assert not (outside / "created.txt").exists()
    (corpus / LOCK_NAME).unlink()
    os.mkfifo(corpus / LOCK_NAME)
    assert holder(corpus) is None
    with pytest.raises(DataError, match="a FIFO"):
        FolderLock(corpus, "corpus").acquire()
    assert _tree_hash(outside) == before


# --------------------------------------------------------------------------- finding 2


@pytest.mark.parametrize(
    "entry, field",
    [
        ({"file": "ABSOLUTE", "txn": "0123456789abcdef0123456789abcdef"}, "file"),
        ({"file": "parts/../../outside/important.txt", "txn": "0123456789abcdef"}, "file"),
        ({"file": "parts/part-00000.parquet", "txn": "../../outside/important"}, "txn"),
        ({"file": "parts/x.parquet", "txn": "ab\ncd"}, "txn"),
        ("not an object", "entry"),
    ],
    ids=["absolute-file", "dotdot-file", "dotdot-txn", "newline-txn", "not-an-object"],
)
def test_crafted_pending_entries_are_refused_and_nothing_outside_moves(tmp_path, entry, field):
    outside = _outside(tmp_path)
    corpus = _corpus(tmp_path / "c")
    crafted = entry
    if isinstance(entry, dict) and entry["file"] == "ABSOLUTE":
        crafted = {**entry, "file": str(outside / "important.txt")}
    manifest = json.loads((corpus / "manifest.json").read_text())
    manifest["pending"] = [crafted]
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    before, parts_before = _tree_hash(outside), _tree_hash(corpus / "parts")

    with pytest.raises(DataError) as refused:  # what fit, transform and topics do first
        Corpus.open(corpus, rescan=True)
    message = str(refused.value)
    assert "manifest.json" in message and f"pending[0] {field}" in message
    assert "\n" not in message
    if isinstance(entry, dict) and ("ABSOLUTE" in str(entry) or "../" in entry["txn"]):
        # the two attacks of the finding, also through a real command that recovers appends
        more = _jsonl(tmp_path / "m.jsonl", 10, 2)
        run = run_lsdask("ingest", "jsonl", more, "--append-to", corpus)
        assert run.returncode != 0 and f"pending[0] {field}" in run.stderr
    assert _tree_hash(outside) == before
    assert _tree_hash(corpus / "parts") == parts_before
    assert not (corpus / "quarantine").exists()


# --------------------------------------------------------------------------- finding 4


def test_a_corpus_whose_parts_folder_links_into_another_is_refused(tmp_path):
    outside = _outside(tmp_path)
    corpus = _corpus(tmp_path / "c")
    shutil.move(corpus / "parts", tmp_path / "parts.saved")
    (corpus / "parts").symlink_to(outside / "other" / "parts")
    before = _tree_hash(outside)

    run = run_lsdask("ingest", "jsonl", _jsonl(tmp_path / "m.jsonl", 20, 3), "--append-to", corpus)
    assert run.returncode != 0
    assert "'parts' is a symbolic link" in run.stderr and str(corpus) in run.stderr
    for rescan in (False, True):
        with pytest.raises(DataError, match="'parts' is a symbolic link"):
            Corpus.open(corpus, rescan=rescan)
    with pytest.raises(DataError, match="'parts' is a symbolic link"):
        Corpus(str(corpus), VOCAB, json.loads((corpus / "manifest.json").read_text())).append(
            _counts(5, 4)
        )
    assert _tree_hash(outside) == before
    assert Corpus.open(outside / "other").n_docs == 80

    # a quarantine/ linked elsewhere, and a link among the part files
    (corpus / "parts").unlink()
    shutil.move(tmp_path / "parts.saved", corpus / "parts")
    (corpus / "quarantine").symlink_to(outside / "folder")
    with pytest.raises(DataError, match="'quarantine' is a symbolic link"):
        Corpus.open(corpus, rescan=True)
    (corpus / "quarantine").unlink()
    (corpus / "parts" / "extra.parquet").symlink_to(
        outside / "other" / "parts" / "part-00000.parquet"
    )
    with pytest.raises(DataError, match=r"extra\.parquet' is a symbolic link"):
        Corpus.open(corpus, rescan=True)
    assert _tree_hash(outside) == before


# --------------------------------------------------------------------------- finding 5


@pytest.mark.parametrize(
    "name, make",
    [
        ("manifest.json", "zero"),
        ("manifest.json", "fifo"),
        ("vocab.txt", "urandom"),
        ("vocab.txt", "huge"),
    ],
)
def test_special_or_huge_manifest_and_vocab_are_refused_at_once(tmp_path, name, make):
    outside = _outside(tmp_path)
    corpus = _corpus(tmp_path / "c")
    target = corpus / name
    target.unlink()
    if make == "zero":
        target.symlink_to("/dev/zero")
    elif make == "urandom":
        target.symlink_to("/dev/urandom")
    elif make == "fifo":
        os.mkfifo(target)
    else:  # larger than a manifest or vocabulary may be (sparse: no disk used)
        with open(target, "wb") as f:
            f.truncate((1 << 30) + 1)
    before = _tree_hash(outside)

    run = _bounded_lsdask("ingest", "jsonl", _jsonl(tmp_path / "m.jsonl", 5, 5), "--append-to",
                          corpus)  # fmt: skip
    assert run.returncode != 0
    expected = {"zero": "symbolic link", "urandom": "symbolic link", "fifo": "a FIFO",
                "huge": "more than the"}[make]  # fmt: skip
    assert name in run.stderr and expected in run.stderr, run.stderr[-2000:]
    assert "Traceback" not in run.stderr and "MemoryError" not in run.stderr
    assert _tree_hash(outside) == before


# --------------------------------------------------------------------------- finding 7


def _flip_in_data_page(part: Path) -> None:
    """Flip the first bit of row group 0's word ids that, read without checksums,
    still loads as valid documents with other words: a flip that only a checksum
    can catch."""
    data = part.read_bytes()
    column = pq.read_metadata(part).row_group(0).column(1)
    original = pq.ParquetFile(io.BytesIO(data)).read_row_group(0, columns=list(COLUMNS))
    for at in range(column.data_page_offset, len(data)):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[at] ^= 1 << bit
            try:
                with pq.ParquetFile(io.BytesIO(bytes(flipped))) as f:
                    table = f.read_row_group(0, columns=list(COLUMNS))
                DocBatch.from_arrow(table, "flip", V)
            except (OSError, ValueError, pa.ArrowException):
                continue
            if not table.equals(original):
                part.write_bytes(bytes(flipped))
                return
    pytest.fail("no silent flip found")


def test_a_flipped_bit_in_a_part_is_refused_by_digest_and_page_checksum(tmp_path):
    outside = _outside(tmp_path)
    corpus = _corpus(tmp_path / "c")
    part = corpus / "parts" / "part-00000.parquet"
    recorded = json.loads((corpus / "manifest.json").read_text())["batches"][0].get("file_blake2b")
    _flip_in_data_page(part)
    found = hashlib.blake2b(part.read_bytes(), digest_size=32).hexdigest()
    before = _tree_hash(outside)

    with pytest.raises(DataError) as refused:  # as a fit reads it: open, then every batch
        for batch in Corpus.open(corpus, rescan=True).batches:
            batch.load()
    message = str(refused.value)
    assert "parts/part-00000.parquet" in message and f"{recorded}" in message and found in message
    assert "Restore it from a backup, or re-ingest" in message

    # without the digest (a corpus written before digests), the page checksum refuses it
    manifest = json.loads((corpus / "manifest.json").read_text())
    for b in manifest["batches"]:
        b.pop("file_blake2b", None)
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    opened = Corpus.open(corpus, rescan=True)
    with pytest.raises(DataError, match="could not read the Parquet file"):
        opened.batches[0].load()
    assert _tree_hash(outside) == before


def test_parts_written_before_checksums_and_digests_still_read(tmp_path):
    corpus = _corpus(tmp_path / "c")
    X = read_all(corpus)
    for part in (corpus / "parts").iterdir():  # as lsdask wrote them before: no page checksums
        table = pq.read_table(part)
        pq.write_table(table, part, row_group_size=40, write_page_checksum=False)
    manifest = json.loads((corpus / "manifest.json").read_text())
    for b in manifest["batches"]:
        b.pop("file_blake2b", None)
        b["file_bytes"] = (corpus / b["file"]).stat().st_size
    (corpus / "manifest.json").write_text(json.dumps(manifest))
    assert abs(read_all(Corpus.open(corpus, rescan=True)) - X).max() == 0


# --------------------------------------------------------------------------- finding 11


def test_an_append_killed_while_it_cleans_up_after_its_commit_is_not_appended_again(tmp_path):
    outside = _outside(tmp_path)
    first, more = _jsonl(tmp_path / "a.jsonl", 60, 1), _jsonl(tmp_path / "b.jsonl", 40, 2)

    def fresh(name: str) -> Path:
        run = run_lsdask("ingest", "jsonl", first, "--out", tmp_path / name, "--min-df", "1",
                         "--max-df", "1.0")  # fmt: skip
        assert run.returncode == 0, run.stderr
        return tmp_path / name

    # the steps of an undisturbed append: the commit, then the staging folder's removal
    log = tmp_path / "steps.log"
    run = run_lsdask("ingest", "jsonl", more, "--append-to", fresh("ref"),
                     env=lsdask_env(LSDASK_FS_LOG=str(log)))  # fmt: skip
    assert run.returncode == 0, run.stderr
    steps = [line.split(" ", 2) for line in log.read_text().splitlines()]
    commit = max(
        int(n) for n, op, path in steps if op == "replace" and path.endswith("manifest.json")
    )
    clean_up = [int(n) for n, op, path in steps if int(n) > commit and ".append-" in path]
    assert clean_up, steps

    corpus = fresh("c")
    before = _tree_hash(outside)
    for step in clean_up:
        killed = run_lsdask("ingest", "jsonl", more, "--append-to", corpus,
                            env=lsdask_env(LSDASK_CRASH_AT_FS=str(step)))  # fmt: skip
        assert killed.returncode == -9, killed.stderr[-2000:]
        again = run_lsdask("ingest", "jsonl", more, "--append-to", corpus)
        assert again.returncode == 0, again.stderr[-2000:]
        X, ids = read_all(Corpus.open(corpus, rescan=True), return_doc_ids=True)
        reference = read_all(Corpus.open(tmp_path / "ref", rescan=True))
        assert X.shape[0] == 100 and abs(X - reference).max() == 0  # each document once
        assert len(set(ids.tolist())) == 100
        assert "Nothing is appended again" in again.stderr
        assert "as parts/part-00001.parquet" in again.stdout
        assert sorted(p.name for p in tmp_path.glob(".c.*")) == []  # the staging folder went
    assert _tree_hash(outside) == before

    # the identical command run again after a complete append appends again, as asked
    assert run_lsdask("ingest", "jsonl", more, "--append-to", corpus).returncode == 0
    assert Corpus.open(corpus).n_docs == 140


# ---------------------------------------------------------------- one output, two writers


def test_two_writers_of_one_output_at_once_both_succeed_in_turn(tmp_path):
    outside = _outside(tmp_path)
    source = _jsonl(tmp_path / "docs.jsonl", 50, 6)
    out = tmp_path / "same"
    args = ["ingest", "jsonl", source, "--out", out, "--overwrite", "--min-df", "1"]
    assert run_lsdask(*args).returncode == 0
    before = _tree_hash(outside)
    pause = tmp_path / "go"
    first = start_lsdask(*args, env=paused_env(pause, "replace_dir.swapping"))
    wait_reached(pause, first)  # the first has moved the output aside, not yet put its own
    second = run_lsdask(*args)
    assert second.returncode == 0, second.stderr[-2000:]
    pause.touch()
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err[-2000:]
    assert "Directory not empty" not in err
    assert Corpus.open(out, rescan=True).n_docs == 50
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".same")] == []
    assert _tree_hash(outside) == before


def test_an_output_path_that_is_a_link_is_replaced_not_followed(tmp_path):
    outside = _outside(tmp_path)
    out = tmp_path / "out"
    out.symlink_to(outside / "other")
    before = _tree_hash(outside)
    Corpus.write(out, _counts(30, 7), VOCAB, overwrite=True)
    assert not out.is_symlink() and Corpus.open(out).n_docs == 30
    assert _tree_hash(outside) == before
    assert Corpus.open(outside / "other").n_docs == 80


def test_an_output_is_forced_to_disk_before_and_after_it_is_swapped_in(tmp_path, monkeypatch):
    """Model and corpus files were renamed into place without an fsync: a crash
    soon after could leave the new name holding empty files."""
    from lsdask.io.atomic import replace_dir, temp_sibling

    out = tmp_path / "model"
    new = temp_sibling(out)
    (new / "sub").mkdir(parents=True)
    (new / "arrays.npz").write_bytes(b"x" * 100)
    (new / "sub" / "params.json").write_text("{}")
    files = {p.stat().st_ino for p in new.rglob("*") if p.is_file()}
    synced: list[int] = []
    fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    replace_dir(new, out)
    assert files <= set(synced)  # every file of the new output
    assert tmp_path.stat().st_ino in synced  # and the folder the rename changed
    assert (out / "sub" / "params.json").read_text() == "{}"
