"""Writing corpora: documents to row groups, Parquet files, manifests, atomic renames.

Part of the Parquet corpus store (:mod:`lsdask.io.corpus`): the directory
layout and manifest constants, the normalization of documents (an iterable of
``(doc_id, word_ids, counts)`` or a sparse matrix) into checked row groups,
writing them to Parquet files, building manifests, and the helpers that make
writes atomic (JSON written to a temporary file and renamed, a new corpus
directory renamed into place).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import logging
import operator
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from lsdask import config
from lsdask.errors import DataError
from lsdask.io import fsops, guarded
from lsdask.io.atomic import sync_parent, temp_sibling
from lsdask.io.corpus.batch import SCHEMA, DocBatch

logger = logging.getLogger(__name__)


#: Value of ``manifest["format"]``.
FORMAT = "lsdask-corpus"
#: Value of ``manifest["version"]`` written by this module.
VERSION = 1
MANIFEST_NAME = "manifest.json"
VOCAB_NAME = "vocab.txt"
PARTS_DIR = "parts"
DEFAULT_DOCS_PER_ROW_GROUP = config.DEFAULT_DOCS_PER_ROW_GROUP
DEFAULT_DOCS_PER_FILE = config.DEFAULT_DOCS_PER_FILE


# --------------------------------------------------------------------------- writing


def _as_number(x: float) -> int | float:
    """An int when ``x`` is integral (keeps the manifest readable), else the float."""
    x = float(x)
    return int(x) if x.is_integer() else x


def _check_vocab(vocab: Sequence[str]) -> list[str]:
    if isinstance(vocab, str):
        raise TypeError("vocab must be a sequence of words, not a single string")
    words = list(vocab)
    first: dict[str, int] = {}
    for i, w in enumerate(words):
        if not isinstance(w, str) or not w or "\n" in w or "\r" in w:
            raise ValueError(
                f"vocab[{i}] is {w!r}; every word must be a non-empty string without "
                "line breaks (vocab.txt holds one word per line)"
            )
        if w in first:
            raise ValueError(
                f"vocab[{i}] is {w!r}, which is also vocab[{first[w]}]; words must be distinct"
            )
        if not w.isascii():
            try:
                w.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(
                    f"vocab[{i}] is {w!r}, which holds {w[exc.start]!r}, a lone UTF-16 "
                    "surrogate that no UTF-8 file can hold (in JSON, an escape such as "
                    "\\ud800 without its pair); fix the input, or use a token pattern that "
                    "does not match it"
                ) from None
        first[w] = i
    return words


def _normalize_doc(item: Any, position: int, vocab_size: int) -> tuple[int, np.ndarray, np.ndarray]:
    """Check one ``(doc_id, word_ids, counts)`` item; return it sorted, zeros dropped."""
    where = f"docs item {position}"
    try:
        doc_id, word_ids, counts = item
        doc_id = operator.index(doc_id)
    except (TypeError, ValueError) as exc:
        raise DataError(
            f"{where}: expected a (doc_id: int, word_ids, counts) tuple; got "
            f"{type(item).__name__} ({exc})"
        ) from exc
    where = f"docs item {position} (doc_id {doc_id})"
    ids = np.asarray(word_ids)
    cnt = np.asarray(counts)
    if ids.ndim != 1 or cnt.ndim != 1 or len(ids) != len(cnt):
        raise DataError(
            f"{where}: word_ids (shape {ids.shape}) and counts (shape {cnt.shape}) must be "
            "1-D of the same length"
        )
    if ids.size and (ids.dtype.kind not in "iu" or cnt.dtype.kind not in "biuf"):
        raise DataError(
            f"{where}: word_ids must be integers and counts numbers; got {ids.dtype} and "
            f"{cnt.dtype}"
        )
    if ids.size == 0:
        return doc_id, np.empty(0, np.int32), np.empty(0, np.float32)
    if ids.min() < 0 or ids.max() >= vocab_size:
        bad = ids[(ids < 0) | (ids >= vocab_size)][0]
        raise DataError(
            f"{where}: word id {int(bad)} is outside [0, {vocab_size}), the vocabulary range"
        )
    with np.errstate(over="ignore"):  # too large for float32: inf, caught below
        cnt32 = cnt.astype(np.float32)
    if not (cnt32.min() >= 0 and cnt32.max() < np.inf):
        bad = cnt[~((cnt32 >= 0) & (cnt32 < np.inf))][0]
        raise DataError(
            f"{where}: count {float(bad)}; counts must be finite, >= 0 and fit in float32"
        )
    ids32 = ids.astype(np.int32)
    if ids32.size > 1 and not (np.diff(ids32) > 0).all():
        order = np.argsort(ids32, kind="stable")
        ids32, cnt32 = ids32[order], cnt32[order]
        repeated = np.flatnonzero(np.diff(ids32) == 0)
        if repeated.size:
            raise DataError(
                f"{where}: word id {int(ids32[repeated[0]])} appears more than once; word ids "
                "must be distinct within a document (sum their counts first)"
            )
    keep = cnt32 != 0
    if not keep.all():
        ids32, cnt32 = ids32[keep], cnt32[keep]
    return doc_id, ids32, cnt32


def _concat_group(doc_ids: list[int], ids: list[np.ndarray], counts: list[np.ndarray]) -> DocBatch:
    lengths = np.fromiter((len(a) for a in ids), dtype=np.int64, count=len(ids))
    indptr = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    return DocBatch(
        np.asarray(doc_ids, dtype=np.int64),
        indptr,
        np.concatenate(ids) if ids else np.empty(0, np.int32),
        np.concatenate(counts) if counts else np.empty(0, np.float32),
    )


def _groups_from_docs(
    docs: Iterable[Any], vocab_size: int, docs_per_row_group: int
) -> Iterator[DocBatch]:
    """Buffer checked documents one row group at a time."""
    doc_ids: list[int] = []
    ids: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for position, item in enumerate(docs):
        doc_id, w, c = _normalize_doc(item, position, vocab_size)
        doc_ids.append(doc_id)
        ids.append(w)
        counts.append(c)
        if len(doc_ids) == docs_per_row_group:
            yield _concat_group(doc_ids, ids, counts)
            doc_ids, ids, counts = [], [], []
    if doc_ids:
        yield _concat_group(doc_ids, ids, counts)


def _groups_from_csr(
    X: Any, vocab_size: int, docs_per_row_group: int, first_doc_id: int
) -> Iterator[DocBatch]:
    """Cut a sparse matrix (row i = document ``first_doc_id + i``) into checked row groups."""
    X = sp.csr_matrix(X)
    if X.shape[1] != vocab_size:
        raise DataError(
            f"docs: the matrix has {X.shape[1]} columns but the vocabulary has {vocab_size} "
            "words; column j must be word j"
        )
    if X.dtype.kind not in "biuf":
        raise DataError(f"docs: the matrix has dtype {X.dtype}; expected numeric counts")
    for start in range(0, X.shape[0], docs_per_row_group):
        stop = min(start + docs_per_row_group, X.shape[0])
        with np.errstate(over="ignore"):  # too large for float32: inf, caught below
            sub = X[start:stop].astype(np.float32)  # a copy: canonicalized in place
        sub.sum_duplicates()
        if sub.nnz and not (sub.data.min() >= 0 and sub.data.max() < np.inf):
            pos = int(np.flatnonzero(~((sub.data >= 0) & (sub.data < np.inf)))[0])
            row = int(np.searchsorted(sub.indptr, pos, side="right") - 1)
            raise DataError(
                f"docs: row {start + row}, column {int(sub.indices[pos])} has count "
                f"{float(X[start + row, int(sub.indices[pos])])}; counts must be finite, >= 0 "
                "and fit in float32"
            )
        sub.eliminate_zeros()
        yield DocBatch(
            np.arange(first_doc_id + start, first_doc_id + stop, dtype=np.int64),
            sub.indptr.astype(np.int64),
            sub.indices.astype(np.int32),
            sub.data,
        )


def _doc_groups(
    docs: Any, vocab_size: int, docs_per_row_group: int, first_doc_id: int
) -> Iterator[DocBatch]:
    if sp.issparse(docs):
        return _groups_from_csr(docs, vocab_size, docs_per_row_group, first_doc_id)
    if isinstance(docs, np.ndarray | str | bytes):
        raise TypeError(
            "docs must be an iterable of (doc_id, word_ids, counts) or a scipy sparse "
            f"matrix; got {type(docs).__name__}. Wrap a dense array with scipy.sparse.csr_matrix."
        )
    return _groups_from_docs(docs, vocab_size, docs_per_row_group)


def _group_table(group: DocBatch) -> pa.Table:
    if group.nnz > np.iinfo(np.int32).max:
        raise ValueError(
            f"a row group of {group.n_docs} documents holds {group.nnz} (document, word) "
            "pairs, more than list<> offsets can address; use a smaller docs_per_row_group"
        )
    offsets = pa.array(group.indptr.astype(np.int32), type=pa.int32())
    return pa.Table.from_arrays(
        [
            pa.array(group.doc_ids, type=pa.int64()),
            pa.ListArray.from_arrays(offsets, pa.array(group.word_ids, type=pa.int32())),
            pa.ListArray.from_arrays(offsets, pa.array(group.counts, type=pa.float32())),
        ],
        schema=SCHEMA,
    )


#: Parquet key-value metadata of a part file: the SHA-256 of the vocabulary its
#: word ids index (``lsdask.io.corpus.vocabulary.vocabulary_digest``), so that a part
#: written over other words is refused when a rescan takes it in.
VOCAB_DIGEST_KEY = b"lsdask.vocabulary_sha256"
#: Parquet key-value metadata of a part file: the id of the write or append that
#: made it, which its manifest entries record once that append committed
#: (``"txn"``), so that a rescan tells the part of an append that never committed
#: (``manifest["pending"]``) from one dropped in by another job.
TXN_KEY = b"lsdask.transaction"


def new_txn() -> str:
    """A fresh transaction id (32 hex digits)."""
    return uuid.uuid4().hex


#: Parquet writer options of every part file: page checksums (CRC-32 of each
#: page), verified on every read, so a flipped bit in a data page is an error.
PARQUET_WRITE_OPTIONS: dict[str, Any] = {"write_page_checksum": True}
#: Manifest key of a batch entry: the part file's BLAKE2b-256 (hex), with
#: ``file_bytes`` its size, recorded when the part was written.
DIGEST_KEY = "file_blake2b"
_CHUNK = 1 << 20


def file_digest(root: str | os.PathLike[str], file: str) -> tuple[int, str]:
    """(size in bytes, BLAKE2b-256 hex) of the part ``file`` below ``root``,
    read in chunks (bounded memory whatever its size)."""
    h = hashlib.blake2b(digest_size=32)
    size = 0
    with guarded.open_read(root, file) as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _write_groups(
    groups: Iterable[DocBatch],
    root: Path,
    file_name: Callable[[int], str],
    groups_per_file: int | None,
    vocab_digest: str,
    txn: str | None = None,
) -> list[dict[str, Any]]:
    """Write row groups to new Parquet files ``parts/<file_name(i)>`` below the
    corpus folder ``root`` (through :mod:`lsdask.io.guarded`), ``groups_per_file``
    per file (None: one file), each stamped with ``vocab_digest`` and the
    transaction id ``txn``, with page checksums, and forced to disk.

    Returns the manifest batch entries (recording ``txn``, the file's size and
    digest).
    """
    stamps = {VOCAB_DIGEST_KEY: vocab_digest.encode()}
    if txn is not None:
        stamps[TXN_KEY] = txn.encode()
    schema = SCHEMA.with_metadata(stamps)
    entries: list[dict[str, Any]] = []
    writer: pq.ParquetWriter | None = None
    sink: Any = None
    name, in_file, file_index = "", 0, -1

    def finish() -> None:
        nonlocal writer, sink
        if writer is not None:
            writer.close()
            writer = None
        if sink is not None:
            try:
                fsops.fsync(sink)
            finally:
                sink.close()
                sink = None

    try:
        for group in groups:
            if writer is None or in_file == groups_per_file:
                finish()
                file_index += 1
                name, in_file = file_name(file_index), 0
                sink = guarded.open_write(root, f"{PARTS_DIR}/{name}")
                writer = pq.ParquetWriter(sink, schema, **PARQUET_WRITE_OPTIONS)
            writer.write_table(_group_table(group), row_group_size=max(group.n_docs, 1))
            entries.append(
                {
                    "file": f"{PARTS_DIR}/{name}",
                    "row_group": in_file,
                    "n_docs": group.n_docs,
                    "n_tokens": _as_number(group.n_tokens),
                    **({} if txn is None else {"txn": txn}),
                }
            )
            in_file += 1
    except BaseException:
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.close()
        if sink is not None:
            sink.close()
        raise
    finish()
    digests: dict[str, tuple[int, str]] = {}
    for e in entries:  # size and digest: a rescan tells a replaced or damaged file by them
        if e["file"] not in digests:
            digests[e["file"]] = file_digest(root, e["file"])
        e["file_bytes"], e[DIGEST_KEY] = digests[e["file"]]
    return entries


def _json_default(x: Any) -> Any:
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, set | frozenset):
        return sorted(x)
    if isinstance(x, os.PathLike):
        return os.fspath(x)
    raise TypeError(f"ingest_info holds a {type(x).__name__}, which JSON cannot store")


def _write_json_atomic(path: Path, obj: Mapping[str, Any]) -> None:
    """Write JSON to a new temporary file in the same folder, force it to disk,
    rename it over ``path`` (a link there is replaced, never written through),
    and force the folder to disk; all through :mod:`lsdask.io.guarded`, with the
    folder as root."""
    text = json.dumps(obj, indent=1, default=_json_default, ensure_ascii=False)
    path = Path(path)
    tmp = temp_sibling(path)
    try:
        with guarded.open_write(path.parent, tmp.name, "w", encoding="utf-8") as f:
            f.write(text + "\n")
            fsops.fsync(f)
        guarded.replace(path.parent, tmp.name, path.name)
    except BaseException:
        guarded.unlink(path.parent, tmp.name)
        raise
    sync_parent(path)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _make_manifest(
    vocab_size: int,
    batches: list[dict[str, Any]],
    docs_per_row_group: int,
    ingest: Mapping[str, Any] | None,
    created: str | None = None,
) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "vocab_size": int(vocab_size),
        "n_docs": int(sum(b["n_docs"] for b in batches)),
        "n_tokens": _as_number(sum(float(b["n_tokens"]) for b in batches)),
        "docs_per_row_group": int(docs_per_row_group),
        "created": created or _now(),
        "batches": batches,
        "ingest": dict(ingest or {}),
    }
    return manifest


def _is_corpus_dir(path: Path) -> bool:
    try:
        return guarded.read_json(path, MANIFEST_NAME, "manifest").get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def check_out_dir(out_dir: str | os.PathLike[str], overwrite: bool = False) -> None:
    """Fail early if :meth:`Corpus.write` could not write a corpus at ``out_dir``.

    Raises
    ------
    FileExistsError
        If ``out_dir`` is a file, exists while ``overwrite`` is false, or is a
        non-empty folder that is not a corpus.
    """
    _check_target(Path(out_dir), overwrite)


def _check_target(out_dir: Path, overwrite: bool) -> None:
    """Refuse to write over a file, an existing corpus (unless asked) or a foreign folder."""
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise FileExistsError(
            f"out_dir {str(out_dir)!r} exists and is a file; choose another path or remove it"
        )
    if not overwrite:
        raise FileExistsError(
            f"out_dir {str(out_dir)!r} already exists; pass overwrite=True (lsdask: "
            "--overwrite) to replace it (only after the new corpus is complete), or choose "
            "another path"
        )
    if any(out_dir.iterdir()) and not _is_corpus_dir(out_dir):
        raise FileExistsError(
            f"out_dir {str(out_dir)!r} is a non-empty folder that is not an lsdask corpus "
            f"(no {MANIFEST_NAME} with format {FORMAT!r}); refusing to replace it. "
            "Choose another path or empty it."
        )


def _check_positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def _write_vocab(root: Path, words: list[str]) -> None:
    """Write ``vocab.txt`` (a new file) in the corpus folder ``root``, forced to disk."""
    with guarded.open_write(root, VOCAB_NAME, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(w + "\n" for w in words))
        fsops.fsync(f)
