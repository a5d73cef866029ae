"""Documents as lists of token ids: the word reader of a token-id column.

A table made by a tokenizing pipeline (Spark ML's ``CountVectorizer`` input, a
Hugging Face tokenizer, a SQL ``array_agg``) holds each document as a list of
integer ids into a vocabulary, one id per token, repeats allowed. A parallel
list column of counts may say how often each id occurs (then the same id may
still repeat: its counts are added). :class:`TokenIdColumns` checks such
columns and turns one row group into the CSR matrix of word counts (documents x
V) that the topic models read.

Nothing in the table is trusted: a null list, an id outside ``[0, V)``, a count
that is negative, not a whole number or not finite, or a column of another type
is a :class:`~lsdask.errors.DataError` that names the file, the row group and
the row, says what was expected and what was found.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from lsdask.errors import DataError
from lsdask.io.tables.arrow import first_null, is_list, list_parts, one_array, type_name
from lsdask.io.tables.place import Place
from lsdask.validation import MAX_WORD_COUNT

__all__ = ["TokenIdColumns", "counts_matrix"]


def counts_matrix(
    indptr: np.ndarray, ids: np.ndarray, counts: np.ndarray | None, vocab_size: int
) -> sp.csr_matrix:
    """The CSR matrix of word counts of documents given as token ids.

    Row ``d`` of the result counts, for every word id ``v``, the entries of
    ``ids[indptr[d]:indptr[d+1]]`` equal to ``v`` (with ``counts``: the sum of
    their counts). Ids are sorted within each row and zero counts dropped.

    Parameters
    ----------
    indptr : numpy.ndarray of int, shape (n_docs + 1,), starting at 0
    ids : numpy.ndarray of int, shape (indptr[-1],), each in ``[0, vocab_size)``
    counts : numpy.ndarray of float or None, same shape as ``ids``; None: 1 each
    vocab_size : int
    """
    n_docs = len(indptr) - 1
    data = np.ones(len(ids)) if counts is None else np.array(counts, dtype=np.float64)
    # copies: scipy sorts and sums in place, and Arrow's buffers are read-only
    matrix = sp.csr_matrix(
        (data, np.array(ids, dtype=np.int32), np.array(indptr, dtype=np.int64)),
        shape=(n_docs, int(vocab_size)),
    )
    matrix.sum_duplicates()
    matrix.eliminate_zeros()
    return matrix


@dataclass(frozen=True)
class TokenIdColumns:
    """The words of a table as token-id lists, and optionally their counts.

    Attributes
    ----------
    tokens : str
        The column of token ids: a list of integers per row, each in ``[0, V)``.
    counts : str or None
        A list column parallel to ``tokens``: the count of each id (whole
        numbers >= 0). None: every id counts once.
    vocab_size : int
        ``V``, the size of the vocabulary the ids index.
    """

    tokens: str
    counts: str | None
    vocab_size: int

    @property
    def columns(self) -> list[str]:
        """The columns a batch reads."""
        return [self.tokens] if self.counts is None else [self.tokens, self.counts]

    def check_schema(self, schema: pa.Schema, place: Place) -> None:
        """Refuse a file whose columns cannot hold token ids (read from its footer,
        before any batch is read)."""
        _column_type(schema, self.tokens, place, "tokens")
        kind = schema.field(self.tokens).type
        if not (is_list(kind) and pa.types.is_integer(kind.value_type)):
            raise DataError(
                f"{place}: column {self.tokens!r} has type {type_name(kind)}; expected a list of "
                "integer token ids (list<int32> or list<int64>), one id per token. For a column "
                "of text pass text= (lsdask fit: --text-column) in place of tokens="
            )
        if self.counts is not None:
            _column_type(schema, self.counts, place, "counts")
            kind = schema.field(self.counts).type
            if not (is_list(kind) and _is_number(kind.value_type)):
                raise DataError(
                    f"{place}: column {self.counts!r} has type {type_name(kind)}; expected a "
                    f"list of counts (list<int64> or list<double>) parallel to {self.tokens!r}"
                )

    def to_csr(self, table: pa.Table, place: Place) -> sp.csr_matrix:
        """The row group ``table`` as a (rows x V) CSR matrix of word counts, checked."""
        self.check_schema(table.schema, place)
        ids_array = one_array(table.column(self.tokens))
        indptr, values = self._lists(ids_array, self.tokens, place)
        self._check_ids(values, indptr, place)
        counts = None
        if self.counts is not None:
            counts_array = one_array(table.column(self.counts))
            count_ptr, count_values = self._lists(counts_array, self.counts, place)
            lengths, count_lengths = np.diff(indptr), np.diff(count_ptr)
            if not np.array_equal(lengths, count_lengths):
                r = int(np.flatnonzero(lengths != count_lengths)[0])
                raise DataError(
                    f"{place.row(r)}: {int(lengths[r])} token ids in {self.tokens!r} but "
                    f"{int(count_lengths[r])} counts in {self.counts!r}; the two lists of a row "
                    "must have the same length (one count per id)"
                )
            counts = self._checked_counts(count_values, indptr, place)
        ids = values.to_numpy(zero_copy_only=False)
        matrix = counts_matrix(indptr, ids, counts, self.vocab_size)
        if matrix.nnz and matrix.data.max() > MAX_WORD_COUNT:  # repeated ids add up
            i = int(np.argmax(matrix.data))
            r = int(np.searchsorted(matrix.indptr, i, side="right") - 1)
            raise DataError(
                f"{place.row(r)}: word id {int(matrix.indices[i])} occurs {matrix.data[i]:.6g} "
                f"times, more than the {MAX_WORD_COUNT:,} a count may be; counts this large are "
                "not word counts: check how the column was written"
            )
        return matrix

    # -- checks ----------------------------------------------------------------
    def _lists(self, array: pa.Array, name: str, place: Place) -> tuple[np.ndarray, pa.Array]:
        if array.null_count:
            raise DataError(
                f"{place.row(first_null(array))}: the {name!r} list is null; expected a list "
                "(an empty list for a document without words). Write [] in place of null, "
                "or drop the row"
            )
        indptr, values = list_parts(array)
        if values.null_count:
            pos = first_null(values)
            r = int(np.searchsorted(indptr, pos, side="right") - 1)
            raise DataError(
                f"{place.row(r)}: entry {pos - int(indptr[r])} of the {name!r} list is null; "
                "expected a number. Drop the null entries"
            )
        return indptr, values

    def _check_ids(self, values: pa.Array, indptr: np.ndarray, place: Place) -> None:
        if len(values) == 0:
            return
        bounds = pc.min_max(values)
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        V = self.vocab_size
        if low >= 0 and high < V:
            return
        ids = values.to_numpy(zero_copy_only=False)
        pos = int(np.flatnonzero((ids < 0) | (ids >= V))[0])
        r = int(np.searchsorted(indptr, pos, side="right") - 1)
        raise DataError(
            f"{place.row(r)}: token id {int(ids[pos])} (entry {pos - int(indptr[r])} of "
            f"{self.tokens!r}) is outside [0, {V}), the ids of the vocabulary of {V} words. "
            "Give the vocabulary the ids were made with (vocabulary=, lsdask fit: "
            "--vocabulary FILE), or fix the row"
        )

    def _checked_counts(self, values: pa.Array, indptr: np.ndarray, place: Place) -> np.ndarray:
        counts = values.to_numpy(zero_copy_only=False)
        if counts.dtype.kind in "iu":
            ok = (counts >= 0) & (counts <= MAX_WORD_COUNT)
        else:
            counts = counts.astype(np.float64, copy=False)
            with np.errstate(invalid="ignore"):
                ok = (counts >= 0) & (counts <= MAX_WORD_COUNT) & (counts == np.floor(counts))
        if ok.all():
            return counts
        pos = int(np.flatnonzero(~ok)[0])
        r = int(np.searchsorted(indptr, pos, side="right") - 1)
        raise DataError(
            f"{place.row(r)}: count {counts[pos].item()!r} (entry {pos - int(indptr[r])} of "
            f"{self.counts!r}) is not a word count; expected a whole number in [0, "
            f"{MAX_WORD_COUNT:,}]. Fix the row, or drop counts= to count each token id once"
        )


def _column_type(schema: pa.Schema, name: str, place: Place, option: str) -> None:
    if schema.get_field_index(name) < 0:
        raise DataError(
            f"{place}: no column {name!r}; the columns are {schema.names}. Pass {option}= "
            "one of them (lsdask fit: --tokens-column, --counts-column)"
        )


def _is_number(kind: pa.DataType) -> bool:
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind))
