"""The Parquet corpus store: documents as bags of words, one row group per batch.

A corpus is a directory::

    corpus/
        manifest.json     # format, version, sizes, the batch list, ingest info
        vocab.txt         # UTF-8, one word per line; line i is word id i
        parts/
            part-00000.parquet
            part-00001.parquet
            ...

Every Parquet file holds one row per document with the schema
``doc_id int64, word_ids list<int32>, counts list<float32>`` (the two lists
of a document have the same length and its word ids are distinct), written in
row groups of a fixed number of documents. One row group is one *memoized
batch* (lsparse paper, Sec. 3.4): a :class:`CorpusBatch` names it by file and
row-group index, is small and picklable, and its :meth:`CorpusBatch.load`
runs inside the batch's task and reads just that row group into a
:class:`DocBatch` of CSR arrays that are views of the Arrow buffers (no copy).

The manifest looks like::

    {"format": "lsdask-corpus", "version": 1, "vocab_size": V, "n_docs": D,
     "n_tokens": N, "docs_per_row_group": 1000,
     "batches": [{"file": "parts/part-00000.parquet", "row_group": 0,
                  "n_docs": 1000, "n_tokens": 183731}, ...],
     "ingest": {...}}

Writes are atomic: :meth:`Corpus.write` builds the whole directory under a
temporary sibling name and renames it into place at the end;
:meth:`Corpus.append` writes a new Parquet file under a temporary name,
renames it, then replaces the manifest (itself written to a temporary file
and renamed). New Parquet files dropped into ``parts/`` by another job become
new batches with ``Corpus.open(path, rescan=True)``.
"""

from __future__ import annotations

import datetime
import json
import logging
import operator
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

from lsdask.io.sources import DataError

logger = logging.getLogger(__name__)

__all__ = [
    "COLUMNS",
    "FORMAT",
    "SCHEMA",
    "VERSION",
    "Corpus",
    "CorpusBatch",
    "DocBatch",
    "check_out_dir",
    "read_all",
]

#: Value of ``manifest["format"]``.
FORMAT = "lsdask-corpus"
#: Value of ``manifest["version"]`` written by this module.
VERSION = 1
MANIFEST_NAME = "manifest.json"
VOCAB_NAME = "vocab.txt"
PARTS_DIR = "parts"
DEFAULT_DOCS_PER_ROW_GROUP = 1000
DEFAULT_DOCS_PER_FILE = 100_000

#: The columns of every Parquet file, in order.
COLUMNS: tuple[str, str, str] = ("doc_id", "word_ids", "counts")
#: The Arrow schema of the Parquet files.
SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.int64()),
        pa.field("word_ids", pa.list_(pa.int32())),
        pa.field("counts", pa.list_(pa.float32())),
    ]
)

_PART_NAME = re.compile(r"^part-(\d+)\.parquet$")


# --------------------------------------------------------------------------- batches


@dataclass(frozen=True, eq=False)
class DocBatch:
    """Documents of one batch as CSR arrays.

    Document ``i`` has words ``word_ids[indptr[i]:indptr[i+1]]`` (sorted or at
    least distinct) occurring ``counts[indptr[i]:indptr[i+1]]`` times. Arrays
    read from a corpus are read-only views of Arrow buffers: copy before
    writing into them.

    Attributes
    ----------
    doc_ids : numpy.ndarray of int64, shape (n_docs,)
    indptr : numpy.ndarray of int64, shape (n_docs + 1,)
    word_ids : numpy.ndarray of int32, shape (nnz,)
    counts : numpy.ndarray of float32 (or float64), shape (nnz,)
    """

    doc_ids: np.ndarray
    indptr: np.ndarray
    word_ids: np.ndarray
    counts: np.ndarray

    @property
    def n_docs(self) -> int:
        """Number of documents."""
        return len(self.doc_ids)

    @property
    def nnz(self) -> int:
        """Number of (document, word) pairs stored."""
        return len(self.word_ids)

    @property
    def n_tokens(self) -> float:
        """Sum of all counts (float64 accumulation)."""
        return float(self.counts.sum(dtype=np.float64))

    def doc_lengths(self) -> np.ndarray:
        """Tokens per document (sum of its counts), float64 of shape (n_docs,)."""
        cum = np.concatenate([[0.0], np.cumsum(self.counts, dtype=np.float64)])
        return cum[self.indptr[1:]] - cum[self.indptr[:-1]]

    def doc(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Word ids and counts of the ``i``-th document of the batch (views)."""
        start, stop = self.indptr[i], self.indptr[i + 1]
        return self.word_ids[start:stop], self.counts[start:stop]

    def to_csr(self, vocab_size: int) -> sp.csr_matrix:
        """The batch as a ``(n_docs, vocab_size)`` scipy CSR matrix of counts."""
        return sp.csr_matrix(
            (self.counts, self.word_ids, self.indptr), shape=(self.n_docs, int(vocab_size))
        )

    @classmethod
    def from_arrow(
        cls, table: pa.Table | pa.RecordBatch, where: str, vocab_size: int | None = None
    ) -> DocBatch:
        """Wrap the columns of an Arrow table (one row group) without copying; validate.

        Parameters
        ----------
        table : pyarrow.Table or pyarrow.RecordBatch
            With columns ``doc_id``, ``word_ids`` and ``counts`` of the corpus schema.
        where : str
            Where the table came from, for error messages.
        vocab_size : int or None
            Word ids must lie in ``[0, vocab_size)``; ``None`` checks only ``>= 0``.

        Raises
        ------
        DataError
            For missing columns, nulls, lists of different lengths, word ids out
            of range or repeated within a document, negative or non-finite counts.
        """
        missing = [c for c in COLUMNS if c not in table.column_names]
        if missing:
            raise DataError(
                f"{where}: missing column(s) {missing}; found {table.column_names}. "
                f"A corpus file needs columns {list(COLUMNS)} (schema {SCHEMA})."
            )
        doc_ids = _doc_id_array(table.column("doc_id"), where)
        ids_off, word_ids = _list_arrays(table.column("word_ids"), pa.int32(), doc_ids, where)
        cnt_off, counts = _list_arrays(table.column("counts"), None, doc_ids, where)
        _check_same_lengths(ids_off, cnt_off, doc_ids, where)
        batch = cls(doc_ids, (ids_off - ids_off[0]).astype(np.int64), word_ids, counts)
        batch.validate(where, vocab_size)
        return batch

    def validate(self, where: str, vocab_size: int | None = None) -> None:
        """Check word ids (in range, distinct per document) and counts (finite, >= 0).

        Raises
        ------
        DataError
            Naming ``where``, the document's ``doc_id`` and its position in the batch.
        """
        ids, counts = self.word_ids, self.counts
        if ids.size:
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or (vocab_size is not None and high >= vocab_size):
                limit = vocab_size if vocab_size is not None else "inf"
                bad = ids < 0 if vocab_size is None else (ids < 0) | (ids >= vocab_size)
                pos = int(np.flatnonzero(bad)[0])
                raise DataError(
                    f"{where}: {self._name(pos)}: word id {int(ids[pos])} is outside "
                    f"[0, {limit}), the range of the corpus vocabulary. The file does not "
                    "belong to this vocabulary; re-ingest it with the corpus's vocabulary "
                    "(vocab=Corpus.open(...)) or fix vocab.txt."
                )
        if counts.size:
            low_c, high_c = counts.min(), counts.max()
            if not (low_c >= 0 and high_c < np.inf):
                pos = int(np.flatnonzero(~((counts >= 0) & (counts < np.inf)))[0])
                raise DataError(
                    f"{where}: {self._name(pos)}: count {float(counts[pos])} of word id "
                    f"{int(ids[pos])}; counts must be finite and >= 0. Fix or drop the document."
                )
        self._check_distinct(where)

    def _check_distinct(self, where: str) -> None:
        """Word ids must not repeat within a document; fast when they are sorted."""
        ids, indptr = self.word_ids, self.indptr
        if ids.size < 2:
            return
        not_rising = np.flatnonzero(np.diff(ids) <= 0) + 1
        # a drop at the first entry of a document is fine
        suspects = not_rising[~np.isin(not_rising, indptr)]
        if suspects.size == 0:
            return
        for d in np.unique(np.searchsorted(indptr, suspects, side="right") - 1):
            words = ids[indptr[d] : indptr[d + 1]]
            values, counts = np.unique(words, return_counts=True)
            if (counts > 1).any():
                pos = int(indptr[d] + np.flatnonzero(words == values[counts > 1][0])[1])
                raise DataError(
                    f"{where}: {self._name(pos)}: word id {int(ids[pos])} appears more than "
                    "once; word ids must be distinct within a document. Sum the counts of "
                    "repeated ids when writing the corpus."
                )

    def _name(self, pos: int) -> str:
        """Name the document holding entry ``pos`` of ``word_ids``."""
        d = int(np.searchsorted(self.indptr, pos, side="right") - 1)
        return f"{_doc_name(self.doc_ids, d)}, entry {pos - int(self.indptr[d])}"


def _doc_name(doc_ids: np.ndarray, d: int) -> str:
    """Name the ``d``-th document of a row group by its doc_id and position."""
    return f"document doc_id {int(doc_ids[d])} (position {d} in the row group)"


def _single_array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One Arrow array for a column: the chunk itself when there is one (no copy)."""
    if isinstance(column, pa.Array):
        return column
    if column.num_chunks == 1:
        return column.chunk(0)
    if column.num_chunks == 0:
        return pa.array([], type=column.type)
    return pa.concat_arrays(column.chunks)


def _first_null(array: pa.Array) -> int:
    return int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])


def _doc_id_array(column: pa.ChunkedArray, where: str) -> np.ndarray:
    array = _single_array(column)
    if not pa.types.is_integer(array.type):
        raise DataError(f"{where}: column doc_id has type {array.type}; expected int64")
    if array.null_count:
        raise DataError(
            f"{where}: the document at position {_first_null(array)} in the row group has a "
            "null doc_id; every document needs an integer doc_id"
        )
    if array.type != pa.int64():
        array = array.cast(pa.int64())
    return array.to_numpy(zero_copy_only=True)


def _list_arrays(
    column: pa.ChunkedArray, value_type: pa.DataType | None, doc_ids: np.ndarray, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and values of a list column as numpy views of the Arrow buffers.

    ``value_type`` None keeps float32 and float64 values as they are and casts
    other numeric types to float32.
    """
    name = "word_ids" if value_type is not None else "counts"
    array = _single_array(column)
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        raise DataError(
            f"{where}: column {name} has type {array.type}; expected a list column "
            f"({SCHEMA.field(name).type})"
        )
    if array.null_count:
        raise DataError(
            f"{where}: {_doc_name(doc_ids, _first_null(array))} has a null {name} list; "
            "write an empty list for a document without words"
        )
    offsets = array.offsets.to_numpy(zero_copy_only=True)
    values = array.values
    target = value_type
    if target is None:
        if not (pa.types.is_floating(values.type) or pa.types.is_integer(values.type)):
            raise DataError(f"{where}: column {name} holds {values.type}; expected numbers")
        target = values.type if values.type in (pa.float32(), pa.float64()) else pa.float32()
    if values.type != target:
        try:
            values = values.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise DataError(
                f"{where}: column {name} holds {values.type}, which does not convert to "
                f"{target}: {exc}"
            ) from exc
    if values.null_count:
        pos = _first_null(values)
        d = int(np.searchsorted(offsets, pos, side="right") - 1)
        raise DataError(
            f"{where}: {_doc_name(doc_ids, d)} has a null inside its {name} list "
            f"(entry {pos - int(offsets[d])})"
        )
    data = values.to_numpy(zero_copy_only=True)
    return offsets, data[offsets[0] : offsets[-1]]


def _check_same_lengths(
    ids_off: np.ndarray, cnt_off: np.ndarray, doc_ids: np.ndarray, where: str
) -> None:
    ids_len, cnt_len = np.diff(ids_off), np.diff(cnt_off)
    if not np.array_equal(ids_len, cnt_len):
        d = int(np.flatnonzero(ids_len != cnt_len)[0])
        raise DataError(
            f"{where}: {_doc_name(doc_ids, d)} has {int(ids_len[d])} word ids but "
            f"{int(cnt_len[d])} counts; the two lists must have the same length"
        )


@dataclass(frozen=True)
class CorpusBatch:
    """One row group of a corpus file: a memoized batch, loaded inside its task.

    Small and picklable: it holds only where the row group is, so a Dask
    worker reads its own batch from the (shared) file system.

    Attributes
    ----------
    path : str
        The corpus directory.
    file : str
        The Parquet file, relative to ``path`` (``parts/part-00000.parquet``).
    row_group : int
        Index of the row group in the file.
    n_docs : int
        Documents in the row group (from the manifest).
    n_tokens : float
        Sum of the counts in the row group (from the manifest).
    vocab_size : int or None
        Size ``V`` of the corpus vocabulary; word ids are checked against
        ``[0, V)`` when the batch is loaded (only ``>= 0`` when None).
    """

    path: str
    file: str
    row_group: int
    n_docs: int
    n_tokens: float
    vocab_size: int | None = None

    @property
    def where(self) -> str:
        """Human-readable location, used in error messages."""
        return f"corpus {self.path}, file {self.file}, row group {self.row_group}"

    @property
    def file_path(self) -> str:
        """Full path of the Parquet file."""
        return os.path.join(self.path, self.file)

    def load(self) -> DocBatch:
        """Read this row group (and nothing else) and return it as checked CSR arrays.

        Raises
        ------
        DataError
            If the file is missing, unreadable or truncated, no longer matches
            the manifest, or holds invalid documents (see :meth:`DocBatch.from_arrow`).
        """
        table = _read_row_group(self.file_path, self.row_group, self.where)
        if table.num_rows != self.n_docs:
            raise DataError(
                f"{self.where}: holds {table.num_rows} documents but the manifest says "
                f"{self.n_docs}; the file changed after the manifest was written. Reopen "
                "the corpus with Corpus.open(path, rescan=True)."
            )
        return DocBatch.from_arrow(table, self.where, self.vocab_size)


def _read_row_group(file_path: str, row_group: int, where: str) -> pa.Table:
    if not os.path.exists(file_path):
        raise DataError(
            f"{where}: the file does not exist. The manifest lists a file that is gone; "
            "reopen the corpus with Corpus.open(path, rescan=True) to rebuild the batch list."
        )
    try:
        with pq.ParquetFile(file_path) as f:
            problem = _row_group_mismatch(f, row_group)
            table = None if problem else f.read_row_group(row_group, columns=list(COLUMNS))
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{where}: could not read the Parquet file ({type(exc).__name__}: {exc}). It is "
            "probably truncated or corrupt: re-run the ingestion, or delete the file and "
            "reopen the corpus with Corpus.open(path, rescan=True)."
        ) from exc
    if table is None:
        raise DataError(
            f"{where}: {problem}; the file does not match the manifest. Reopen the corpus "
            "with Corpus.open(path, rescan=True)."
        )
    return table


def _row_group_mismatch(f: pq.ParquetFile, row_group: int) -> str | None:
    """Why row group ``row_group`` of ``f`` cannot be a corpus batch, or None."""
    names = f.schema_arrow.names
    if row_group >= f.num_row_groups:
        return f"it has {f.num_row_groups} row groups"
    if any(c not in names for c in COLUMNS):
        return f"it has columns {names}, expected {list(COLUMNS)}"
    return None


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


def _write_groups(
    groups: Iterable[DocBatch],
    parts_dir: Path,
    file_name: Callable[[int], str],
    groups_per_file: int | None,
) -> list[dict[str, Any]]:
    """Write row groups to Parquet files, ``groups_per_file`` per file (None: one file).

    Returns the manifest batch entries; ``file_name(i)`` names the i-th file.
    """
    entries: list[dict[str, Any]] = []
    writer: pq.ParquetWriter | None = None
    name, in_file, file_index = "", 0, -1
    try:
        for group in groups:
            if writer is None or in_file == groups_per_file:
                if writer is not None:
                    writer.close()
                file_index += 1
                name, in_file = file_name(file_index), 0
                writer = pq.ParquetWriter(str(parts_dir / name), SCHEMA)
            writer.write_table(_group_table(group), row_group_size=max(group.n_docs, 1))
            entries.append(
                {
                    "file": f"{PARTS_DIR}/{name}",
                    "row_group": in_file,
                    "n_docs": group.n_docs,
                    "n_tokens": _as_number(group.n_tokens),
                }
            )
            in_file += 1
    finally:
        if writer is not None:
            writer.close()
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
    """Write JSON to a temporary file in the same folder, flush to disk, rename."""
    text = json.dumps(obj, indent=1, default=_json_default, ensure_ascii=False)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


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


def _remove_tree(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            logger.warning("could not remove temporary directory %s", path)


def _is_corpus_dir(path: Path) -> bool:
    try:
        with open(path / MANIFEST_NAME, encoding="utf-8") as f:
            return json.load(f).get("format") == FORMAT
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
            f"out_dir {str(out_dir)!r} already exists; pass overwrite=True to replace it "
            "(only after the new corpus is complete), or choose another path"
        )
    if any(out_dir.iterdir()) and not _is_corpus_dir(out_dir):
        raise FileExistsError(
            f"out_dir {str(out_dir)!r} is a non-empty folder that is not an lsdask corpus "
            f"(no {MANIFEST_NAME} with format {FORMAT!r}); refusing to replace it. "
            "Choose another path or empty it."
        )


def _replace_dir(new_dir: Path, out_dir: Path) -> None:
    """Rename ``new_dir`` to ``out_dir``; an existing ``out_dir`` is moved aside first."""
    if not out_dir.exists():
        new_dir.rename(out_dir)
        return
    old_dir = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    out_dir.rename(old_dir)
    try:
        new_dir.rename(out_dir)
    except BaseException:
        old_dir.rename(out_dir)
        raise
    _remove_tree(old_dir)


def _check_positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


# --------------------------------------------------------------------------- reading


def _read_vocab(path: Path, corpus: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise DataError(
            f"corpus {corpus}: {VOCAB_NAME} is missing; a corpus needs its vocabulary "
            "(one word per line). Re-run the ingestion."
        ) from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"corpus {corpus}: {VOCAB_NAME} is not valid UTF-8 ({exc})") from exc
    words = text.split("\n")
    if words and words[-1] == "":
        words.pop()
    return [w[:-1] if w.endswith("\r") else w for w in words]


def _read_manifest(root: Path) -> dict[str, Any]:
    path = root / MANIFEST_NAME
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError as exc:
        raise DataError(
            f"{root}: not an lsdask corpus (no {MANIFEST_NAME}). Make a corpus with "
            "lsdask.io.ingest or Corpus.write."
        ) from exc
    except ValueError as exc:
        raise DataError(f"{path}: not valid JSON ({exc}); the manifest is corrupt") from exc
    _check_manifest(manifest, path)
    return manifest


def _check_manifest(manifest: Any, path: Path) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise DataError(f"{path}: expected format {FORMAT!r}; found {found!r}")
    if manifest.get("version") != VERSION:
        raise DataError(
            f"{path}: manifest version {manifest.get('version')!r}; this lsdask reads "
            f"version {VERSION}. Upgrade lsdask or re-ingest the data."
        )
    for key, kind in (("vocab_size", int), ("batches", list)):
        if not isinstance(manifest.get(key), kind):
            raise DataError(f"{path}: key {key!r} is missing or not a {kind.__name__}")
    for i, b in enumerate(manifest["batches"]):
        ok = (
            isinstance(b, dict)
            and isinstance(b.get("file"), str)
            and isinstance(b.get("row_group"), int)
            and isinstance(b.get("n_docs"), int)
            and isinstance(b.get("n_tokens"), int | float)
        )
        if not ok:
            raise DataError(
                f"{path}: batches[{i}] is {b!r}; expected "
                "{'file': str, 'row_group': int, 'n_docs': int, 'n_tokens': number}"
            )
        parts = Path(b["file"]).parts
        if len(parts) != 2 or parts[0] != PARTS_DIR or b["file"].startswith("/"):
            raise DataError(
                f"{path}: batches[{i}] names file {b['file']!r}; files must be "
                f"'{PARTS_DIR}/<name>.parquet' inside the corpus"
            )


def _parquet_files(root: Path) -> list[str]:
    parts = root / PARTS_DIR
    if not parts.is_dir():
        return []
    return sorted(
        f"{PARTS_DIR}/{p.name}"
        for p in parts.iterdir()
        if p.suffix == ".parquet" and not p.name.startswith(".") and p.is_file()
    )


def _file_row_groups(root: Path, file: str) -> list[dict[str, Any]]:
    """Batch entries of one Parquet file from its footer (and its counts column)."""
    where = f"corpus {root}, file {file}"
    try:
        with pq.ParquetFile(str(root / file)) as f:
            names = f.schema_arrow.names
            if any(c not in names for c in COLUMNS):
                raise DataError(
                    f"{where}: has columns {names}; a corpus file needs {list(COLUMNS)}"
                )
            entries = []
            for g in range(f.num_row_groups):
                n = f.metadata.row_group(g).num_rows
                if n == 0:
                    continue
                counts = _single_array(f.read_row_group(g, columns=["counts"]).column(0))
                tokens = pc.sum(counts.flatten()).as_py() or 0
                entries.append({"file": file, "row_group": g, "n_docs": n, "n_tokens": tokens})
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{where}: could not read the Parquet file ({type(exc).__name__}: {exc}); it is "
            "probably truncated or corrupt. Delete or replace it and rescan."
        ) from exc
    for e in entries:
        e["n_tokens"] = _as_number(e["n_tokens"])
    return entries


def _footer_sizes(root: Path, file: str) -> list[tuple[int, int]]:
    where = f"corpus {root}, file {file}"
    try:
        meta = pq.read_metadata(str(root / file))
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{where}: could not read the Parquet footer ({type(exc).__name__}: {exc}); the "
            "file is probably truncated or corrupt. Delete or replace it and rescan."
        ) from exc
    sizes = [(g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]
    return [(g, n) for g, n in sizes if n > 0]


def _rescan(root: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Rebuild the batch list from the Parquet files present in ``parts/``."""
    listed: dict[str, list[dict[str, Any]]] = {}
    for b in manifest["batches"]:
        listed.setdefault(b["file"], []).append(b)
    on_disk = _parquet_files(root)
    present = set(on_disk)
    order = [f for f in listed if f in present] + [f for f in on_disk if f not in listed]
    batches: list[dict[str, Any]] = []
    n_changed = 0
    for file in order:
        old = listed.get(file, [])
        if [(b["row_group"], b["n_docs"]) for b in old] == _footer_sizes(root, file):
            batches.extend(old)
        else:
            batches.extend(_file_row_groups(root, file))
            n_changed += file in listed
    gone = sorted(set(listed) - present)
    logger.info(
        "rescanned corpus %s: %d files (%d new, %d changed, %d gone), %d batches (was %d)",
        root,
        len(order),
        len(order) - len(listed) + len(gone),
        n_changed,
        len(gone),
        len(batches),
        len(manifest["batches"]),
    )
    new = dict(manifest)
    new.update(
        batches=batches,
        n_docs=int(sum(b["n_docs"] for b in batches)),
        n_tokens=_as_number(sum(float(b["n_tokens"]) for b in batches)),
        updated=_now(),
    )
    return new


class Corpus:
    """A Parquet corpus on disk: vocabulary, manifest and batches.

    Use :meth:`open` to read one and :meth:`write` to make one; the
    ingestion functions of :mod:`lsdask.io.ingest` build them from raw text
    and bag-of-words files.

    Attributes
    ----------
    path : str
        Absolute path of the corpus directory.
    vocab : list of str
        Word ``i`` of the vocabulary is ``vocab[i]``.
    batches : list of CorpusBatch
        One per row group, in manifest order.
    """

    def __init__(self, path: str | os.PathLike[str], vocab: list[str], manifest: dict[str, Any]):
        self._path = os.path.abspath(os.fspath(path))
        self._vocab = vocab
        self._set_manifest(manifest)

    def _set_manifest(self, manifest: dict[str, Any]) -> None:
        self._manifest = manifest
        self._batches = [
            CorpusBatch(
                self._path,
                b["file"],
                int(b["row_group"]),
                int(b["n_docs"]),
                float(b["n_tokens"]),
                len(self._vocab),
            )
            for b in manifest["batches"]
        ]

    # ---- properties

    @property
    def path(self) -> str:
        return self._path

    @property
    def vocab(self) -> list[str]:
        return self._vocab

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    @property
    def n_docs(self) -> int:
        return int(sum(b.n_docs for b in self._batches))

    @property
    def n_tokens(self) -> float:
        return float(sum(b.n_tokens for b in self._batches))

    @property
    def batches(self) -> list[CorpusBatch]:
        return list(self._batches)

    @property
    def docs_per_row_group(self) -> int:
        return int(self._manifest.get("docs_per_row_group", DEFAULT_DOCS_PER_ROW_GROUP))

    @property
    def ingest_info(self) -> dict[str, Any]:
        """The free-form ``manifest["ingest"]`` (source, tokenizer, OOV counts, ...)."""
        return dict(self._manifest.get("ingest") or {})

    @property
    def manifest(self) -> dict[str, Any]:
        """A copy of the manifest as read (or last written)."""
        return json.loads(json.dumps(self._manifest))

    def __repr__(self) -> str:
        return (
            f"Corpus({self._path!r}, n_docs={self.n_docs}, vocab_size={self.vocab_size}, "
            f"n_tokens={self.n_tokens:g}, n_batches={len(self._batches)})"
        )

    # ---- open

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, rescan: bool = False) -> Corpus:
        """Open a corpus directory.

        Parameters
        ----------
        path : str or os.PathLike
            The corpus directory (holding ``manifest.json``, ``vocab.txt``, ``parts/``).
        rescan : bool, default False
            Rebuild the batch list from the Parquet footers in ``parts/``: files
            not in the manifest become new batches (after the listed ones, by
            name), files that are gone are dropped, files whose row groups
            changed are re-read. The rebuilt manifest is saved (atomically)
            when the directory is writable.

        Raises
        ------
        FileNotFoundError
            If ``path`` does not exist.
        DataError
            If it is not a corpus, its manifest or vocabulary is invalid, or
            (without ``rescan``) the manifest lists files that are gone.
        """
        root = Path(path)
        if not root.exists():
            raise FileNotFoundError(
                f"no corpus at {str(root)!r}: the path does not exist. Make one with "
                "lsdask.io.ingest (e.g. ingest_text_folder, import_ldac) or Corpus.write."
            )
        if not root.is_dir():
            raise DataError(
                f"{root}: not an lsdask corpus (a corpus is a directory holding "
                f"{MANIFEST_NAME}, {VOCAB_NAME} and {PARTS_DIR}/)"
            )
        manifest = _read_manifest(root)
        vocab = _read_vocab(root / VOCAB_NAME, root)
        if len(vocab) != manifest["vocab_size"]:
            raise DataError(
                f"corpus {root}: {VOCAB_NAME} has {len(vocab)} words but the manifest says "
                f"vocab_size {manifest['vocab_size']}; the two do not belong together"
            )
        if rescan:
            rescanned = _rescan(root, manifest)
            if rescanned["batches"] != manifest["batches"]:
                _save_rescanned(root, rescanned)
            manifest = rescanned
        else:
            _check_files(root, manifest)
        return cls(root, vocab, manifest)

    # ---- write

    @classmethod
    def write(
        cls,
        out_dir: str | os.PathLike[str],
        docs: Any,
        vocab: Sequence[str],
        *,
        docs_per_row_group: int = DEFAULT_DOCS_PER_ROW_GROUP,
        docs_per_file: int = DEFAULT_DOCS_PER_FILE,
        ingest_info: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
        overwrite: bool = False,
    ) -> Corpus:
        """Write a corpus, streaming, atomically.

        Parameters
        ----------
        out_dir : str or os.PathLike
            The corpus directory to create.
        docs : iterable of (doc_id, word_ids, counts), or scipy sparse matrix
            Documents in order. In an iterable, ``word_ids`` and ``counts`` are
            1-D arrays of the same length with distinct ids in ``[0, V)``;
            only one row group of documents is buffered at a time, so a
            generator can stream any number of them. Row ``i`` of a sparse
            matrix (``V`` columns) is document ``doc_id = i``; repeated
            entries are summed. Ids are sorted, zero counts dropped and counts
            stored as float32.
        vocab : sequence of str
            The ``V`` distinct words (no line breaks).
        docs_per_row_group : int, default 1000
            Documents per row group, i.e. per batch (the last may be smaller).
        docs_per_file : int, default 100000
            At most this many documents per Parquet file (whole row groups).
        ingest_info : dict, or callable returning a dict, optional
            Stored as ``manifest["ingest"]``; a callable is called after the
            last document was written (so it can report counts gathered
            while streaming).
        overwrite : bool, default False
            Replace an existing corpus at ``out_dir`` (only once the new one is
            complete). A non-empty folder that is not a corpus is never replaced.

        Returns
        -------
        Corpus

        Raises
        ------
        FileExistsError
            If ``out_dir`` exists and ``overwrite`` is false, or it is a
            file or a folder that is not a corpus.
        DataError
            For an invalid document (naming its position and doc_id).
        ValueError
            For invalid parameters or vocabulary.

        Notes
        -----
        Everything is written to a temporary sibling directory
        (``.<name>.tmp-<pid>-<hex>``) that is renamed to ``out_dir`` at the end.
        On any error it is removed and ``out_dir`` is left as it was.
        """
        rows = _check_positive("docs_per_row_group", docs_per_row_group)
        per_file = _check_positive("docs_per_file", docs_per_file)
        if per_file < rows:
            raise ValueError(
                f"docs_per_file ({per_file}) must be at least docs_per_row_group ({rows}); "
                "a file holds whole row groups"
            )
        words = _check_vocab(vocab)
        out = Path(os.path.abspath(os.fspath(out_dir)))
        _check_target(out, overwrite)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        try:
            (tmp / PARTS_DIR).mkdir(parents=True)
            _write_vocab(tmp / VOCAB_NAME, words)
            entries = _write_groups(
                _doc_groups(docs, len(words), rows, 0),
                tmp / PARTS_DIR,
                lambda i: f"part-{i:05d}.parquet",
                per_file // rows,
            )
            info = ingest_info() if callable(ingest_info) else ingest_info
            manifest = _make_manifest(len(words), entries, rows, info)
            _write_json_atomic(tmp / MANIFEST_NAME, manifest)
            _check_target(out, overwrite)
            _replace_dir(tmp, out)
        except BaseException:
            _remove_tree(tmp)
            raise
        corpus = cls(out, words, manifest)
        logger.info(
            "wrote corpus %s: %d documents, %g tokens, %d words, %d batches",
            corpus.path,
            corpus.n_docs,
            corpus.n_tokens,
            corpus.vocab_size,
            len(entries),
        )
        return corpus

    # ---- append

    def append(self, docs: Any, file_name: str | None = None) -> list[CorpusBatch]:
        """Add documents as one new Parquet file (new batches), atomically.

        Parameters
        ----------
        docs : iterable of (doc_id, word_ids, counts), or scipy sparse matrix
            As in :meth:`write`, over this corpus's vocabulary; rows of a
            sparse matrix get ``doc_id = m + 1 + i`` where m is the largest doc_id
            in the corpus (so ids stay unique after files were removed).
        file_name : str, optional
            Name of the new file in ``parts/`` (must end in ``.parquet``);
            default the next free ``part-NNNNN.parquet``.

        Returns
        -------
        list of CorpusBatch
            The new batches (also appended to :attr:`batches`); empty if
            ``docs`` was empty, in which case nothing is written.

        Notes
        -----
        The file is written under a hidden temporary name and renamed; the
        manifest is then re-read from disk, extended and replaced atomically.
        Two processes appending to the same corpus at the same moment are not
        supported.
        """
        root = Path(self._path)
        manifest = _read_manifest(root)
        name = file_name if file_name is not None else _next_part_name(root, manifest)
        final = _check_new_part(root, manifest, name)
        tmp_name = f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp = root / PARTS_DIR / tmp_name
        rows = int(manifest.get("docs_per_row_group", DEFAULT_DOCS_PER_ROW_GROUP))
        try:
            groups = _doc_groups(docs, self.vocab_size, rows, _next_doc_id(root, manifest))
            entries = _write_groups(groups, root / PARTS_DIR, lambda i: tmp_name, None)
            if not entries:
                logger.info("append to corpus %s: no documents, nothing written", root)
                return []
            os.replace(tmp, final)
        finally:
            tmp.unlink(missing_ok=True)
        for e in entries:
            e["file"] = f"{PARTS_DIR}/{name}"
        batches = manifest["batches"] + entries
        new = dict(manifest)
        new.update(
            batches=batches,
            n_docs=int(sum(b["n_docs"] for b in batches)),
            n_tokens=_as_number(sum(float(b["n_tokens"]) for b in batches)),
            updated=_now(),
        )
        try:
            _write_json_atomic(root / MANIFEST_NAME, new)
        except BaseException:
            final.unlink(missing_ok=True)
            raise
        self._set_manifest(new)
        logger.info(
            "appended %s to corpus %s: %d documents in %d batches",
            name,
            root,
            sum(e["n_docs"] for e in entries),
            len(entries),
        )
        return self._batches[-len(entries) :]


def _next_doc_id(root: Path, manifest: dict[str, Any]) -> int:
    """One more than the largest doc_id of the listed files (0 for an empty corpus),
    from the Parquet row-group statistics where present, else the column itself."""
    largest = -1
    for file in sorted({b["file"] for b in manifest["batches"]}):
        meta = pq.ParquetFile(root / file).metadata
        col = meta.schema.to_arrow_schema().get_field_index("doc_id")
        for rg in range(meta.num_row_groups):
            stats = meta.row_group(rg).column(col).statistics
            if stats is not None and stats.has_min_max:
                largest = max(largest, int(stats.max))
            else:
                ids = pq.read_table(root / file, columns=["doc_id"]).column(0).to_numpy()
                largest = max(largest, int(ids.max()) if ids.size else -1)
                break
    return largest + 1


def _write_vocab(path: Path, words: list[str]) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(w + "\n" for w in words))


def _check_files(root: Path, manifest: dict[str, Any]) -> None:
    """Without rescan: files that are gone are an error, unlisted files a warning."""
    listed = {b["file"] for b in manifest["batches"]}
    on_disk = set(_parquet_files(root))
    gone = sorted(listed - on_disk)
    if gone:
        raise DataError(
            f"corpus {root}: the manifest lists {len(gone)} file(s) that are gone "
            f"({', '.join(gone[:5])}{', ...' if len(gone) > 5 else ''}); reopen with "
            "Corpus.open(path, rescan=True) to rebuild the batch list from the files present"
        )
    new = sorted(on_disk - listed)
    if new:
        logger.warning(
            "corpus %s: %d Parquet file(s) in %s/ are not in the manifest (%s); they are "
            "ignored. Open with rescan=True to add them as new batches.",
            root,
            len(new),
            PARTS_DIR,
            ", ".join(new[:5]),
        )


def _save_rescanned(root: Path, manifest: dict[str, Any]) -> None:
    try:
        _write_json_atomic(root / MANIFEST_NAME, manifest)
    except OSError as exc:
        logger.warning(
            "corpus %s: could not save the rescanned manifest (%s); using it in memory only",
            root,
            exc,
        )


def _next_part_name(root: Path, manifest: dict[str, Any]) -> str:
    names = [Path(b["file"]).name for b in manifest["batches"]]
    names += [Path(f).name for f in _parquet_files(root)]
    numbers = [int(m.group(1)) for n in names if (m := _PART_NAME.match(n))]
    return f"part-{max(numbers, default=-1) + 1:05d}.parquet"


def _check_new_part(root: Path, manifest: dict[str, Any], name: str) -> Path:
    if (
        not isinstance(name, str)
        or not name.endswith(".parquet")
        or name.startswith(".")
        or "/" in name
        or os.sep in name
    ):
        raise ValueError(
            f"file_name must be a plain file name ending in '.parquet' (no folders, not "
            f"hidden); got {name!r}"
        )
    final = root / PARTS_DIR / name
    if final.exists() or any(Path(b["file"]).name == name for b in manifest["batches"]):
        raise FileExistsError(
            f"corpus {root}: {PARTS_DIR}/{name} already exists; choose another file_name"
        )
    final.parent.mkdir(exist_ok=True)
    return final


def read_all(
    corpus: Corpus | str | os.PathLike[str], *, return_doc_ids: bool = False
) -> sp.csr_matrix | tuple[sp.csr_matrix, np.ndarray]:
    """Read a whole (small) corpus into one ``(n_docs, V)`` CSR matrix of float32 counts.

    Rows follow the batch order. With ``return_doc_ids`` also return the
    int64 ``doc_id`` of every row.
    """
    if not isinstance(corpus, Corpus):
        corpus = Corpus.open(corpus)
    loaded = [b.load() for b in corpus.batches]
    if loaded:
        X = sp.vstack([b.to_csr(corpus.vocab_size) for b in loaded], format="csr")
        doc_ids = np.concatenate([b.doc_ids for b in loaded])
    else:
        X = sp.csr_matrix((0, corpus.vocab_size), dtype=np.float32)
        doc_ids = np.empty(0, dtype=np.int64)
    return (X, doc_ids) if return_doc_ids else X
