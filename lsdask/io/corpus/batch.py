"""Corpus batches: one Parquet row group as CSR arrays, read and validated.

Part of the Parquet corpus store (:mod:`lsdask.io.corpus`, which re-exports the
public names): the Arrow schema of the corpus files, :class:`DocBatch` (the
documents of one batch as CSR arrays that are views of the Arrow buffers, with
the Arrow -> CSR conversion and its checks) and :class:`CorpusBatch` (a small,
picklable reference to one row group, read inside its task).
"""

from __future__ import annotations

import math
import os
import socket
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from lsdask.errors import DataError, one_line
from lsdask.io import guarded
from lsdask.io.arrow_columns import first_null, one_array
from lsdask.io.sources import missing_here

__all__ = ["COLUMNS", "SCHEMA", "CorpusBatch", "DocBatch"]


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


#: The largest count a corpus holds: counts are stored as float32 (a float64
#: column of another tool is read as it is, within the same bound).
MAX_COUNT = float(np.finfo(np.float32).max)


def first_bad_count(counts: np.ndarray) -> int | None:
    """Position of the first count that is not finite, >= 0 and <= MAX_COUNT."""
    if counts.size == 0 or (counts.min() >= 0 and counts.max() <= MAX_COUNT):
        return None
    return int(np.flatnonzero(~((counts >= 0) & (counts <= MAX_COUNT)))[0])


def bad_count_message(count: float, word_id: int | None = None) -> str:
    of_word = "" if word_id is None else f" of word id {int(word_id)}"
    return (
        f"count {float(count)}{of_word}; counts must be finite, >= 0 and at most "
        f"{MAX_COUNT:.4g} (the largest float32, the corpus's count type)"
    )


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
        pos = first_bad_count(counts)
        if pos is not None:
            raise DataError(
                f"{where}: {self._name(pos)}: {bad_count_message(counts[pos], ids[pos])}. Fix "
                "or drop the document."
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


def _doc_id_array(column: pa.ChunkedArray, where: str) -> np.ndarray:
    array = one_array(column)
    if not pa.types.is_integer(array.type):
        raise DataError(f"{where}: column doc_id has type {array.type}; expected int64")
    if array.null_count:
        raise DataError(
            f"{where}: the document at position {first_null(array)} in the row group has a "
            "null doc_id; every document needs an integer doc_id"
        )
    if array.type != pa.int64():
        try:
            array = array.cast(pa.int64())
        except pa.ArrowInvalid as exc:
            raise DataError(
                f"{where}: column doc_id ({array.type}) holds a value outside int64 ({exc}); "
                "doc_ids must fit in int64"
            ) from exc
    return array.to_numpy(zero_copy_only=True)


def _list_arrays(
    column: pa.ChunkedArray, value_type: pa.DataType | None, doc_ids: np.ndarray, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and values of a list column as numpy views of the Arrow buffers.

    ``value_type`` None keeps float32 and float64 values as they are and casts
    other numeric types to float32.
    """
    name = "word_ids" if value_type is not None else "counts"
    array = one_array(column)
    if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
        raise DataError(
            f"{where}: column {name} has type {array.type}; expected a list column "
            f"({SCHEMA.field(name).type})"
        )
    if array.null_count:
        raise DataError(
            f"{where}: {_doc_name(doc_ids, first_null(array))} has a null {name} list; "
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
        pos = first_null(values)
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
        table = _read_row_group(self.path, self.file, self.row_group, self.where)
        if table.num_rows != self.n_docs:
            raise DataError(
                f"{self.where}: holds {table.num_rows} documents but the manifest says "
                f"{self.n_docs}; the file changed after the manifest was written. Reopen "
                "the corpus with Corpus.open(path, rescan=True)."
            )
        batch = DocBatch.from_arrow(table, self.where, self.vocab_size)
        if not math.isclose(batch.n_tokens, self.n_tokens, rel_tol=1e-6, abs_tol=1e-6):
            raise DataError(
                f"{self.where}: holds {batch.n_tokens:g} tokens but the manifest says "
                f"{self.n_tokens:g}: the file changed after the manifest was written (or this "
                f"process, on host {socket.gethostname()}, sees another copy of it). Reopen "
                "the corpus with Corpus.open(path, rescan=True)."
            )
        return batch


def _read_row_group(root: str, file: str, row_group: int, where: str) -> pa.Table:
    """Row group ``row_group`` of the part ``file`` of the corpus ``root``, opened
    through :mod:`lsdask.io.guarded` (no links, no special files) and read with
    its Parquet page checksums verified (a damaged page is an error, not data)."""
    try:
        raw = guarded.open_read(root, file)
    except FileNotFoundError:
        raise DataError(
            f"{where}: {missing_here(os.path.join(root, file))}. If the file is gone, reopen "
            "the corpus with Corpus.open(path, rescan=True) to rebuild the batch list "
            "(lsdask fit rescans)."
        ) from None
    try:
        with raw, pq.ParquetFile(raw, page_checksum_verification=True) as f:
            problem = _row_group_mismatch(f, row_group)
            table = None if problem else f.read_row_group(row_group, columns=list(COLUMNS))
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{where}: could not read the Parquet file ({type(exc).__name__}: "
            f"{one_line(exc, 300)}). It is probably truncated or corrupt: re-run the ingestion, "
            "or delete the file and "
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
