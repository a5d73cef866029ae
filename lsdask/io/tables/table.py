"""What every table of another tool's making shares: its words and its batches.

:class:`TableOptions` holds how a table's rows are read as documents (a
token-id column with its vocabulary, or a text column with a tokenizer and a
vocabulary given or built) and :meth:`TableOptions.source` turns the table's
data files into a :class:`~lsdask.io.sources.BatchSource`, one batch per
non-empty row group, and its vocabulary. The subclasses
(:class:`~lsdask.io.tables.parquet.ParquetTable`,
:class:`~lsdask.io.tables.delta.DeltaTable`) say only which files are the
table's and how to name the table (:meth:`TableOptions.data_files`).

The driver reads each file's footer (never its rows) to cut the batches and
check the columns; every batch task reads its own row group.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass
from typing import Any, NamedTuple

from lsdask.config import DEFAULT_MAX_DF, DEFAULT_MIN_DF
from lsdask.errors import DataError
from lsdask.io.corpus.vocabulary import vocabulary_digest
from lsdask.io.ingest.words import Tokenizer, check_df, check_max_vocab
from lsdask.io.sources import BatchSource
from lsdask.io.tables.batch import TableRowGroup
from lsdask.io.tables.footer import FileFooter, read_footer
from lsdask.io.tables.location import TableLocation
from lsdask.io.tables.place import Place
from lsdask.io.tables.text import TextColumn, TextEncoder
from lsdask.io.tables.token_ids import TokenIdColumns
from lsdask.io.tables.vocabulary import build_vocabulary, check_words, read_vocabulary_file

__all__ = ["DataFile", "TableOptions"]

#: Footers read at once (a store answers each read after a round trip).
_FOOTER_THREADS = 16


class DataFile(NamedTuple):
    """One data file of a table: its path relative to the root, its size, and
    whether its name alone identifies its contents (never rewritten: Delta)."""

    file: str
    size: int
    named_once: bool = False


@dataclass(frozen=True)
class TableOptions:
    """How the rows of a table are read as documents (the options every table takes).

    Exactly one of ``tokens`` and ``text`` names the column of words.

    Parameters
    ----------
    tokens : str or None
        A column of token-id lists (``list<int>``): one id per token, repeats
        allowed, each in ``[0, V)`` of ``vocabulary``.
    counts : str or None
        With ``tokens``: a list column parallel to it, the count of each id
        (whole numbers >= 0). None: each id counts once.
    text : str or None
        A column of text, cut into words by ``tokenizer`` in each task.
    vocabulary : path, URL, list of str or None
        The words the ids index (required with ``tokens``): a list, or a file
        of one word per line (UTF-8; a fitted model's ``vocab.txt``), local or
        a URL read with ``storage_options``. With ``text``: None builds the
        vocabulary from the table in one pass (``min_df``, ``max_df``,
        ``max_vocab``); to retrain a model on the grown table, give it the
        vocabulary it was fitted with (``model.vocabulary_``), so that its
        word ids keep their meaning.
    storage_options : dict or None
        Options of the fsspec file system of a URL (credentials, endpoint).
    tokenizer : Tokenizer or None
        With ``text``: how text is cut into words; default ``Tokenizer()``
        (as ``lsdask ingest``: lower case, words of letters, English stopwords
        removed).
    min_df, max_df, max_vocab
        With ``text`` and no ``vocabulary``: the bounds of
        :func:`~lsdask.io.ingest.words.select_vocabulary` (defaults 5
        documents and half of them, as ``lsdask ingest``).
    """

    _: KW_ONLY
    tokens: str | None = None
    counts: str | None = None
    text: str | None = None
    vocabulary: str | os.PathLike[str] | Sequence[str] | None = None
    storage_options: dict[str, Any] | None = None
    tokenizer: Tokenizer | None = None
    min_df: int | float | None = None
    max_df: int | float | None = None
    max_vocab: int | None = None

    def __post_init__(self) -> None:
        for name in ("tokens", "counts", "text"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"{name} must be a column name (a non-empty str); got {value!r}")
        if (self.tokens is None) == (self.text is None):
            raise ValueError(
                "give exactly one of tokens= (a column of token-id lists) and text= (a column "
                f"of text); got tokens={self.tokens!r}, text={self.text!r}"
            )
        if self.counts is not None and self.tokens is None:
            raise ValueError("counts= is the count of each token id: it needs tokens=")
        if self.tokens is not None and self.vocabulary is None:
            raise ValueError(
                f"tokens={self.tokens!r} holds ids into a vocabulary: give it as vocabulary= "
                "(a list of words, or a file of one word per line; lsdask fit: --vocabulary)"
            )
        given = [n for n in ("min_df", "max_df", "max_vocab") if getattr(self, n) is not None]
        if given and (self.tokens is not None or self.vocabulary is not None):
            raise ValueError(
                f"{', '.join(given)} prune a vocabulary built from a text column, but "
                f"{'tokens= ids index' if self.tokens else 'vocabulary= imposes'} a given "
                "vocabulary; drop them"
            )
        if self.tokenizer is not None and self.text is None:
            raise ValueError("tokenizer= cuts a text column into words: it needs text=")
        if self.tokenizer is not None and not isinstance(self.tokenizer, Tokenizer):
            raise TypeError(
                f"tokenizer must be an lsdask Tokenizer; got {type(self.tokenizer).__name__}"
            )
        if self.min_df is not None:
            check_df("min_df", self.min_df, minimum=0)
        if self.max_df is not None:
            check_df("max_df", self.max_df, minimum=1)
        check_max_vocab(self.max_vocab)

    @property
    def builds_vocabulary(self) -> bool:
        """Whether :meth:`source` builds the vocabulary from the table (a text
        column without ``vocabulary``): one pass of tasks over its batches."""
        return self.text is not None and self.vocabulary is None

    # -- what a subclass says ---------------------------------------------------------
    @property
    def root(self) -> str:
        """The table's root, a path or URL (the subclass's ``path``)."""
        raise NotImplementedError

    def data_files(self, location: TableLocation) -> tuple[list[DataFile], str]:
        """The table's data files (listed on the driver), and the table in words
        (the BatchSource's description)."""
        raise NotImplementedError

    # -- the batches --------------------------------------------------------------
    def location(self) -> TableLocation:
        return TableLocation.of(self.root, self.storage_options)

    def source(self, executor: Any = None) -> tuple[BatchSource, list[str]]:
        """The table's batches (one per non-empty row group of each data file)
        and its vocabulary.

        Parameters
        ----------
        executor : lsdask executor or None
            Where the vocabulary's pass runs (a text column without
            ``vocabulary`` only): an executor of :mod:`lsdask.engine`
            (``make_executor(client)``: its tasks on the Dask workers), or
            None for this process.

        Raises
        ------
        DataError
            A data file that is not Parquet, lacks the columns or has them of
            another type; a table without rows; a bad vocabulary.
        FileNotFoundError
            The table's root is missing.
        """
        location = self.location()
        files, description = self.data_files(location)
        given = None if self.vocabulary is None else self._given_vocabulary(location)
        words = self._words(given)
        footers = self._footers(location, files, words)
        batches = []
        for data_file, footer in zip(files, footers, strict=True):
            first = 0
            for g, (n_rows, nbytes) in enumerate(footer.row_groups):
                if n_rows:
                    identity = "" if data_file.named_once else footer.identity
                    batches.append(
                        TableRowGroup(
                            location=location,
                            file=data_file.file,
                            identity=identity,
                            size=footer.size,
                            row_group=g,
                            first_row=first,
                            n_docs=n_rows,
                            nbytes=nbytes,
                            words=words,
                        )
                    )
                first += n_rows
        if not batches:
            raise DataError(
                f"table {location.shown}: its {len(files)} data files hold no rows; nothing "
                "to learn from"
            )
        if self.builds_vocabulary:
            vocab = self._build(location, batches, executor)
            words = self._text_words(vocab)
            batches = [dataclasses.replace(b, words=words) for b in batches]
        else:
            assert given is not None
            vocab = given
        source = BatchSource(batches, [b.n_docs for b in batches], len(vocab), description)
        return source, vocab

    def _given_vocabulary(self, location: TableLocation) -> list[str]:
        given = self.vocabulary
        if isinstance(given, str | os.PathLike):
            return read_vocabulary_file(given, self.storage_options)
        return check_words(given, f"table {location.shown}: vocabulary=")

    def _text_words(self, vocab: list[str]) -> TextColumn:
        assert self.text is not None
        tokenizer = self.tokenizer if self.tokenizer is not None else Tokenizer()
        encoder = TextEncoder(tokenizer, "\n".join(vocab), vocabulary_digest(vocab))
        return TextColumn(self.text, encoder)

    def _words(self, given: list[str] | None) -> TokenIdColumns | TextColumn:
        """The reader of the words: of token ids over ``given``, or of text (without
        its vocabulary while ``given`` is None: it is built from the table)."""
        if self.tokens is not None:
            assert given is not None
            return TokenIdColumns(self.tokens, self.counts, len(given))
        assert self.text is not None
        return TextColumn(self.text) if given is None else self._text_words(given)

    def _footers(
        self,
        location: TableLocation,
        files: list[DataFile],
        words: TokenIdColumns | TextColumn,
    ) -> list[FileFooter]:
        def one(data_file: DataFile) -> FileFooter:
            footer = read_footer(location, data_file.file, words.columns)
            place = Place(location.shown, data_file.file)
            if footer.size != data_file.size:
                raise DataError(
                    f"{place}: holds {footer.size:,} bytes but the table lists it with "
                    f"{data_file.size:,}; it is being rewritten, or is not the table's file. "
                    "Fit again once the writer is done"
                )
            words.check_schema(footer.schema, place)
            return footer

        if len(files) <= 1:
            return [one(f) for f in files]
        with ThreadPoolExecutor(min(_FOOTER_THREADS, len(files))) as pool:
            return list(pool.map(one, files))

    def _build(self, location: TableLocation, batches: list[TableRowGroup], executor: Any) -> list:
        return build_vocabulary(
            executor, batches,
            self.tokenizer if self.tokenizer is not None else Tokenizer(),
            min_df=self.min_df if self.min_df is not None else DEFAULT_MIN_DF,
            max_df=self.max_df if self.max_df is not None else DEFAULT_MAX_DF,
            max_vocab=self.max_vocab, where=f"table {location.shown}",
        )  # fmt: skip
