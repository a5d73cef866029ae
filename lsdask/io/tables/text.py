"""Documents as text: the word reader of a text column.

Each row's text is cut into words by lsdask's own
:class:`~lsdask.io.ingest.words.Tokenizer` (lower case, words of letters,
stopwords removed) in the batch's task, as ``lsdask ingest`` cuts a text
table, and encoded over the vocabulary: words outside it are dropped. A null
cell is an empty document, as in ``lsdask ingest``.

The vocabulary reaches the tasks inside the loader (:class:`TextEncoder`: the
words joined into one string); each worker process builds its word -> id
dictionary once per vocabulary and keeps it (:func:`_word_ids`).

:class:`DocFrequencies` is the task of the vocabulary's one pass: the number of
documents of one row group that hold each word, added up on the driver.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from lsdask.errors import DataError
from lsdask.io.ingest.words import Tokenizer
from lsdask.io.tables.arrow import one_array, type_name
from lsdask.io.tables.place import Place
from lsdask.io.tables.token_ids import counts_matrix

__all__ = ["DocFrequencies", "TextColumn", "TextEncoder", "text_values"]

#: word -> id dictionaries built in this process, by vocabulary digest (a few)
_WORD_IDS: dict[str, dict[str, int]] = {}
_WORD_IDS_KEPT = 4
_WORD_IDS_LOCK = threading.Lock()


def _word_ids(digest: str, words: str) -> dict[str, int]:
    """The id of each word of the newline-joined ``words``, built once per process."""
    with _WORD_IDS_LOCK:
        found = _WORD_IDS.get(digest)
        if found is None:
            found = {w: i for i, w in enumerate(words.split("\n"))}
            while len(_WORD_IDS) >= _WORD_IDS_KEPT:
                _WORD_IDS.pop(next(iter(_WORD_IDS)))
            _WORD_IDS[digest] = found
        return found


@dataclass(frozen=True, eq=False)
class TextEncoder:
    """Cuts texts into words and encodes them over a vocabulary.

    Attributes
    ----------
    tokenizer : Tokenizer
    words : str
        The vocabulary in id order, joined by newlines (no word holds one).
    digest : str
        :func:`~lsdask.io.corpus.vocabulary.vocabulary_digest` of the words:
        names the vocabulary in each worker's cache of dictionaries.
    """

    tokenizer: Tokenizer
    words: str
    digest: str

    @property
    def vocab_size(self) -> int:
        return self.words.count("\n") + 1

    def encode(self, texts: list[str]) -> sp.csr_matrix:
        """The (len(texts) x V) CSR matrix of the counts of the vocabulary's words."""
        index = _word_ids(self.digest, self.words)
        ids: list[int] = []
        indptr = np.zeros(len(texts) + 1, dtype=np.int64)
        for d, text in enumerate(texts):
            ids.extend(i for i in map(index.get, self.tokenizer.tokens(text)) if i is not None)
            indptr[d + 1] = len(ids)
        return counts_matrix(indptr, np.asarray(ids, dtype=np.int32), None, self.vocab_size)


@dataclass(frozen=True)
class TextColumn:
    """The words of a table as a text column.

    Attributes
    ----------
    text : str
        The column of text (a string per row; null: an empty document).
    encoder : TextEncoder or None
        The tokenizer and vocabulary; None while the vocabulary is being built
        (such a column is read by :class:`DocFrequencies` only).
    """

    text: str
    encoder: TextEncoder | None = None

    @property
    def columns(self) -> list[str]:
        """The columns a batch reads."""
        return [self.text]

    @property
    def vocab_size(self) -> int:
        if self.encoder is None:
            raise RuntimeError("the text column has no vocabulary yet")
        return self.encoder.vocab_size

    def check_schema(self, schema: pa.Schema, place: Place) -> None:
        """Refuse a file whose column ``text`` is missing or holds no strings."""
        if schema.get_field_index(self.text) < 0:
            raise DataError(
                f"{place}: no column {self.text!r}; the columns are {schema.names}. Pass text= "
                "one of them (lsdask fit: --text-column)"
            )
        kind = schema.field(self.text).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            hint = (
                "; for a list of token ids pass tokens= (lsdask fit: --tokens-column) in place "
                "of text="
                if pa.types.is_list(kind) or pa.types.is_large_list(kind)
                else ""
            )
            raise DataError(
                f"{place}: column {self.text!r} has type {type_name(kind)}; expected text "
                f"(string){hint}"
            )

    def texts(self, table: pa.Table, place: Place) -> list[str]:
        """The texts of the row group ``table`` (null as ""), its column checked."""
        self.check_schema(table.schema, place)
        return text_values(one_array(table.column(self.text)))

    def to_csr(self, table: pa.Table, place: Place) -> sp.csr_matrix:
        """The row group ``table`` as a (rows x V) CSR matrix of word counts."""
        if self.encoder is None:
            raise RuntimeError("the text column has no vocabulary yet")
        return self.encoder.encode(self.texts(table, place))


def text_values(array: pa.Array) -> list[str]:
    """The strings of a string (or dictionary of strings) array; null as ""."""
    if pa.types.is_dictionary(array.type):
        array = array.cast(array.type.value_type)
    return [t if t is not None else "" for t in array.to_pylist()]


@dataclass(frozen=True)
class BatchFrequencies:
    """How many documents of one batch hold each word: ``words`` (sorted) with
    their document frequencies ``df``, and the batch's ``n_docs``."""

    words: list[str]
    df: np.ndarray
    n_docs: int


@dataclass(frozen=True)
class DocFrequencies:
    """The task of the vocabulary's pass: one row group's document frequencies.

    Called as ``task(batch, shared)`` by an executor (``shared`` unused); the
    batch (:class:`~lsdask.io.tables.batch.TableRowGroup` over a
    :class:`TextColumn`) reads its own row group.
    """

    tokenizer: Tokenizer

    def __call__(self, batch: Any, shared: Any = None) -> BatchFrequencies:
        texts = batch.read_texts()
        counter: Counter[str] = Counter()
        for text in texts:
            counter.update(set(self.tokenizer.tokens(text)))
        words = sorted(counter)
        df = np.fromiter((counter[w] for w in words), dtype=np.int64, count=len(words))
        return BatchFrequencies(words, df, len(texts))
