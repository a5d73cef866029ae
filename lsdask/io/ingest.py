"""Ingestion: raw text and bag-of-words files become Parquet corpora.

Raw text (a folder of files or a tar archive, JSON lines, a CSV or Parquet
text column) is read twice, streaming, in bounded memory:

* pass 1 tokenizes every document and counts document frequencies to choose
  the vocabulary (:class:`~lsdask.io.text.VocabularyBuilder`);
* pass 2 tokenizes again, encodes each document over the vocabulary and
  writes it with :meth:`Corpus.write <lsdask.io.corpus.Corpus.write>`, which
  buffers one row group at a time and renames the finished corpus into place.

Bag-of-words files (LDA-C, UCI docword) already have a vocabulary and are
converted in one pass; a second pass is added only when ``min_df``,
``max_df`` or ``max_vocab`` prune the vocabulary.

Every function accepts ``vocab=`` an existing vocabulary (a list of words, a
:class:`~lsdask.io.corpus.Corpus`, or a corpus path) to *impose*, as when new
documents arrive for retraining: words outside it are dropped and counted,
pass 1 is skipped, and the counts are reported in the returned summary, in
``manifest["ingest"]`` and in an INFO log line. A document left without words
is still written (empty lists) and counted in ``n_empty_docs``.

Every function returns a summary dict with ``path``, ``n_docs``,
``n_tokens``, ``vocab_size``, ``n_batches``, ``n_empty_docs``,
``oov_tokens`` and ``oov_types``.
"""

from __future__ import annotations

import csv
import fnmatch
import gzip
import json
import logging
import os
import sys
import tarfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lsdask.io.corpus import (
    DEFAULT_DOCS_PER_FILE,
    DEFAULT_DOCS_PER_ROW_GROUP,
    Corpus,
    check_out_dir,
)
from lsdask.io.sources import DataError
from lsdask.io.text import Tokenizer, VocabularyBuilder, encode, select_vocabulary

logger = logging.getLogger(__name__)

__all__ = [
    "import_ldac",
    "import_uci",
    "ingest_jsonl",
    "ingest_table",
    "ingest_text_folder",
]

#: Document names are kept in the manifest only for corpora of fewer documents than this.
MAX_NAMES_IN_MANIFEST = 100_000

PathLike = str | os.PathLike[str]
VocabArg = Sequence[str] | Corpus | PathLike | None
_Doc = tuple[str | None, str]
_Bag = tuple[np.ndarray, np.ndarray]


# --------------------------------------------------------------------------- shared


def _progress(
    iterable: Iterable[Any], progress: bool | None, desc: str, total: int | None = None
) -> Iterable[Any]:
    """Wrap ``iterable`` in a tqdm bar on a terminal (or when ``progress`` is true)."""
    show = sys.stderr.isatty() if progress is None else bool(progress)
    if not show:
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, total=total, desc=desc, unit="doc")


def _existing_file(path: PathLike, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what}: {str(p)!r} does not exist")
    return p


def _open_text(path: Path, encoding: str, errors: str = "replace", newline: str | None = None):
    """Open a text file, transparently decompressing ``.gz``."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding=encoding, errors=errors, newline=newline)
    return open(path, encoding=encoding, errors=errors, newline=newline)


def _imposed_vocab(vocab: Sequence[str] | Corpus | PathLike) -> tuple[list[str], str]:
    """The words of an imposed vocabulary and a description of where they came from."""
    if isinstance(vocab, Corpus):
        return vocab.vocab, f"corpus {vocab.path}"
    if isinstance(vocab, str | os.PathLike):
        corpus = Corpus.open(vocab)
        return corpus.vocab, f"corpus {corpus.path}"
    words = list(vocab)
    if not words:
        raise ValueError("vocab is empty; pass None to build the vocabulary from the data")
    return words, f"list of {len(words)} words"


@dataclass
class _Counts:
    """What pass 2 saw: documents, empty documents, dropped (out-of-vocabulary) tokens."""

    n_docs: int = 0
    n_empty: int = 0
    oov_tokens: float = 0.0
    oov_words: set[str] = field(default_factory=set)
    oov_mask: np.ndarray | None = None
    names: list[str] | None = field(default_factory=list)

    def add(self, counts: np.ndarray, n_oov: float, name: str | None = None) -> None:
        self.n_docs += 1
        self.n_empty += counts.size == 0
        self.oov_tokens += float(n_oov)
        if self.names is not None and name is not None:
            if len(self.names) < MAX_NAMES_IN_MANIFEST - 1:
                self.names.append(name)
            else:
                self.names = None

    @property
    def oov_types(self) -> int:
        if self.oov_mask is not None:
            return int(self.oov_mask.sum())
        return len(self.oov_words)


def _number(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def _report(corpus: Corpus, counts: _Counts, vocab_from: str) -> dict[str, Any]:
    summary = {
        "path": corpus.path,
        "n_docs": corpus.n_docs,
        "n_tokens": _number(corpus.n_tokens),
        "vocab_size": corpus.vocab_size,
        "n_batches": len(corpus.batches),
        "n_empty_docs": counts.n_empty,
        "oov_tokens": _number(counts.oov_tokens),
        "oov_types": counts.oov_types,
    }
    total = counts.oov_tokens + corpus.n_tokens
    share = 100.0 * counts.oov_tokens / total if total else 0.0
    logger.info(
        "%s (%d words): dropped %g tokens (%.2f%%) of %d word types outside it; "
        "%d of %d documents are empty",
        vocab_from,
        corpus.vocab_size,
        counts.oov_tokens,
        share,
        counts.oov_types,
        counts.n_empty,
        counts.n_docs,
    )
    return summary


def _ingest_info(
    source: dict[str, Any], vocabulary: dict[str, Any], counts: _Counts, extra: dict[str, Any]
) -> dict[str, Any]:
    info = dict(source)
    info.update(extra)
    info["vocabulary"] = vocabulary
    info["n_empty_docs"] = counts.n_empty
    info["oov_tokens"] = _number(counts.oov_tokens)
    info["oov_types"] = counts.oov_types
    if counts.names:
        info["doc_names"] = counts.names
    return info


# --------------------------------------------------------------------------- raw text


@dataclass
class _TextSource:
    """A re-iterable stream of ``(name, text)`` documents and how to describe it."""

    docs: Callable[[], Iterator[_Doc]]
    info: dict[str, Any]
    where: str
    hint: Callable[[], str] = lambda: ""


def _ingest_texts(
    source: _TextSource,
    out_dir: PathLike,
    *,
    tokenizer: Tokenizer | None,
    vocab: VocabArg,
    min_df: int | float,
    max_df: int | float,
    max_vocab: int | None,
    docs_per_row_group: int,
    docs_per_file: int,
    overwrite: bool,
    progress: bool | None,
) -> dict[str, Any]:
    """Two passes over raw text: document frequencies, then encode and write."""
    check_out_dir(out_dir, overwrite)
    tokenizer = tokenizer if tokenizer is not None else Tokenizer()
    total: int | None = None
    if vocab is None:
        builder = VocabularyBuilder(min_df, max_df, max_vocab)
        for _, text in _progress(source.docs(), progress, "pass 1/2: counting words"):
            builder.add(tokenizer.tokens(text))
        if builder.n_docs == 0:
            raise DataError(f"{source.where}: no documents found{source.hint()}")
        logger.info(
            "pass 1/2 over %s: %d documents, %d word types",
            source.where,
            builder.n_docs,
            builder.n_types,
        )
        words = builder.build()
        vocabulary = {"imposed": False, **builder.summary()}
        total, vocab_from = builder.n_docs, "vocabulary built from the data"
    else:
        words, vocab_from = _imposed_vocab(vocab)
        vocabulary = {"imposed": True, "from": vocab_from, "vocab_size": len(words)}
        vocab_from = f"imposed vocabulary ({vocab_from})"
    word_to_id = {w: i for i, w in enumerate(words)}
    counts = _Counts()

    def documents() -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        desc = "pass 2/2: writing" if vocab is None else "writing"
        for i, (name, text) in enumerate(_progress(source.docs(), progress, desc, total)):
            ids, cnt, n_oov = encode(tokenizer.tokens(text), word_to_id, oov_types=counts.oov_words)
            counts.add(cnt, n_oov, name)
            yield i, ids, cnt
        if counts.n_docs == 0:
            raise DataError(f"{source.where}: no documents found{source.hint()}")

    extra = {"tokenizer": tokenizer.settings()}
    corpus = Corpus.write(
        out_dir,
        documents(),
        words,
        docs_per_row_group=docs_per_row_group,
        docs_per_file=docs_per_file,
        ingest_info=lambda: _ingest_info(source.info, vocabulary, counts, extra),
        overwrite=overwrite,
    )
    return _report(corpus, counts, vocab_from)


def _is_hidden(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/"))


def _selected(relative: str, subset: str | None) -> bool:
    """Does a member path pass the ``subset`` filter (a prefix, or a glob with * ? [)?"""
    if subset is None:
        return True
    if any(ch in subset for ch in "*?["):
        return fnmatch.fnmatchcase(relative, subset) or fnmatch.fnmatchcase(
            relative, subset.rstrip("/") + "/*"
        )
    return relative.startswith(subset)


def _folder_docs(root: Path, subset: str | None, encoding: str, seen: set[str]) -> Iterator[_Doc]:
    """Files under ``root`` (recursive, sorted, hidden ones skipped), one document each."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            relative = path.relative_to(root).as_posix()
            if len(seen) < 20:
                seen.add(relative.split("/")[0])
            if name.startswith(".") or not _selected(relative, subset) or not path.is_file():
                continue
            yield relative, path.read_bytes().decode(encoding, errors="replace")


def _tar_docs(path: Path, subset: str | None, encoding: str, seen: set[str]) -> Iterator[_Doc]:
    """Regular-file members of a tar archive, in archive order, one document each."""
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                relative = member.name.removeprefix("./")
                if len(seen) < 20:
                    seen.add(relative.split("/")[0])
                if not member.isfile() or _is_hidden(relative) or not _selected(relative, subset):
                    continue
                handle = tar.extractfile(member)
                data = handle.read() if handle is not None else b""
                yield relative, data.decode(encoding, errors="replace")
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise DataError(
            f"tar archive {path}: could not be read ({type(exc).__name__}: {exc}); it is "
            "probably truncated or not a tar file. Download or re-create it."
        ) from exc


def _without_headers(docs: Iterator[_Doc], strip: bool) -> Iterator[_Doc]:
    """Each document's text after its first blank line, when ``strip``."""
    for name, text in docs:
        if strip:
            _, blank, body = text.replace("\r\n", "\n").partition("\n\n")
            text = body if blank else text
        yield name, text


def ingest_text_folder(
    path_or_tar: PathLike,
    out_dir: PathLike,
    *,
    subset: str | None = None,
    encoding: str = "latin-1",
    strip_headers: bool = False,
    tokenizer: Tokenizer | None = None,
    vocab: VocabArg = None,
    min_df: int | float = 5,
    max_df: int | float = 0.5,
    max_vocab: int | None = None,
    docs_per_row_group: int = DEFAULT_DOCS_PER_ROW_GROUP,
    docs_per_file: int = DEFAULT_DOCS_PER_FILE,
    overwrite: bool = False,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Ingest a folder of text files, or a tar archive of them: one file, one document.

    Parameters
    ----------
    path_or_tar : str or os.PathLike
        A folder (read recursively, in sorted order, hidden files and folders
        skipped) or a ``.tar``, ``.tar.gz``/``.tgz`` or ``.tar.bz2`` archive
        (read member by member, in archive order).
    out_dir : str or os.PathLike
        The corpus directory to write.
    subset : str, optional
        Keep only files whose path relative to the folder (or member name)
        starts with this prefix, e.g. ``"20news-bydate-train/"``; a pattern
        with ``*``, ``?`` or ``[`` is matched as a glob instead.
    encoding : str, default "latin-1"
        Text encoding of the files (the 20 Newsgroups posts are latin-1; pass
        ``"utf-8"`` for UTF-8 text). Undecodable bytes are replaced.
    strip_headers : bool, default False
        Drop everything up to the first blank line of each file: the mail or
        news headers (``From:``, ``Subject:``, ``Lines:``, ...) of posts such as
        20 Newsgroups', which otherwise become the most frequent "words".
    tokenizer : Tokenizer, optional
        Default ``Tokenizer()`` (lower case, words of >= 2 letters, English
        stopwords removed).
    vocab : list of str, Corpus, corpus path, or None
        Vocabulary to impose; ``None`` builds one from the data with
        ``min_df``, ``max_df`` and ``max_vocab`` (see
        :class:`~lsdask.io.text.VocabularyBuilder`).
    min_df, max_df, max_vocab
        Vocabulary pruning when ``vocab`` is None.
    docs_per_row_group, docs_per_file, overwrite
        As in :meth:`Corpus.write <lsdask.io.corpus.Corpus.write>`.
    progress : bool or None
        Show tqdm progress bars; ``None`` shows them only when stderr is a terminal.

    Returns
    -------
    dict
        The summary (see the module docstring). Document ``doc_id`` is its
        running index; relative file names are kept in
        ``manifest["ingest"]["doc_names"]`` when there are fewer than 100,000.

    Raises
    ------
    FileNotFoundError
        If ``path_or_tar`` does not exist.
    DataError
        If no file matches, or the archive cannot be read.
    """
    path = _existing_file(path_or_tar, "path_or_tar")
    seen: set[str] = set()
    if path.is_dir():
        kind = "text folder"

        def docs() -> Iterator[_Doc]:
            return _without_headers(_folder_docs(path, subset, encoding, seen), strip_headers)
    elif tarfile.is_tarfile(path):
        kind = "tar archive"

        def docs() -> Iterator[_Doc]:
            return _without_headers(_tar_docs(path, subset, encoding, seen), strip_headers)
    else:
        raise DataError(
            f"path_or_tar {str(path)!r} is neither a folder nor a tar archive (.tar, .tar.gz, "
            ".tgz); for other formats use ingest_jsonl or ingest_table"
        )

    def hint() -> str:
        if subset is None:
            return ""
        return f" matching subset {subset!r}; top-level entries seen: {sorted(seen)}"

    info = {
        "format": kind,
        "source": str(path),
        "subset": subset,
        "encoding": encoding,
        "strip_headers": strip_headers,
    }
    return _ingest_texts(
        _TextSource(docs, info, f"{kind} {path}", hint),
        out_dir,
        tokenizer=tokenizer,
        vocab=vocab,
        min_df=min_df,
        max_df=max_df,
        max_vocab=max_vocab,
        docs_per_row_group=docs_per_row_group,
        docs_per_file=docs_per_file,
        overwrite=overwrite,
        progress=progress,
    )


def _record_text(record: Any, fields: Sequence[str], where: str) -> str | None:
    """Join the present text fields of one JSON record; None if it has none of them."""
    if not isinstance(record, dict):
        raise DataError(
            f"{where}: expected a JSON object with text fields {list(fields)}; found a "
            f"{type(record).__name__}"
        )
    parts: list[str] = []
    found = False
    for key in fields:
        value = record.get(key)
        if value is None:
            continue
        found = True
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            parts.extend(value)
        else:
            raise DataError(
                f"{where}: field {key!r} holds a {type(value).__name__}; expected a string "
                "(or a list of strings)"
            )
    return " ".join(parts) if found else None


def _jsonl_docs(path: Path, fields: Sequence[str]) -> Iterator[_Doc]:
    n_records = n_without = 0
    first_keys: list[str] = []
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            where = f"{path}, line {lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"{where}: not valid UTF-8 ({exc}); JSON lines are UTF-8") from exc
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(
                    f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); every line must "
                    "be one JSON object. Fix or delete the line."
                ) from None
            text = _record_text(record, fields, where)
            n_records += 1
            if text is None:
                n_without += 1
                first_keys = first_keys or list(record)[:20]
            yield None, text or ""
    if n_records and n_without == n_records:
        raise DataError(
            f"{path}: none of the {n_records} records has any of the text fields "
            f"{list(fields)}; the first has keys {first_keys}. Pass text_fields= naming the "
            "fields that hold the text."
        )
    if n_without:
        logger.warning("%s: %d of %d records have none of %s", path, n_without, n_records, fields)


def ingest_jsonl(
    path: PathLike,
    out_dir: PathLike,
    text_fields: Sequence[str] = ("title", "abstract", "text"),
    *,
    tokenizer: Tokenizer | None = None,
    vocab: VocabArg = None,
    min_df: int | float = 5,
    max_df: int | float = 0.5,
    max_vocab: int | None = None,
    docs_per_row_group: int = DEFAULT_DOCS_PER_ROW_GROUP,
    docs_per_file: int = DEFAULT_DOCS_PER_FILE,
    overwrite: bool = False,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Ingest JSON lines (UTF-8, optionally ``.gz``): one object per line, one document.

    The text of a document is its ``text_fields`` that are present (strings,
    or lists of strings), joined with a space; blank lines are skipped. The
    other parameters are as in :func:`ingest_text_folder`.

    Raises
    ------
    DataError
        For a line that is not a JSON object (naming the file and line
        number), a text field that is not a string, or when no record has any
        of ``text_fields``.
    """
    p = _existing_file(path, "path")
    fields = [text_fields] if isinstance(text_fields, str) else list(text_fields)
    if not fields:
        raise ValueError("text_fields is empty; name at least one field holding text")
    info = {"format": "jsonl", "source": str(p), "text_fields": fields}
    return _ingest_texts(
        _TextSource(lambda: _jsonl_docs(p, fields), info, f"JSON lines {p}"),
        out_dir,
        tokenizer=tokenizer,
        vocab=vocab,
        min_df=min_df,
        max_df=max_df,
        max_vocab=max_vocab,
        docs_per_row_group=docs_per_row_group,
        docs_per_file=docs_per_file,
        overwrite=overwrite,
        progress=progress,
    )


def _csv_docs(path: Path, column: str, delimiter: str, encoding: str) -> Iterator[_Doc]:
    old_limit = csv.field_size_limit()
    csv.field_size_limit(max(old_limit, 2**31 - 1))  # long texts exceed the 128 KiB default
    try:
        with _open_text(path, encoding, newline="") as f:
            reader = csv.reader(f, delimiter=delimiter)
            try:
                header = next(reader, None)
                if header is None:
                    raise DataError(f"{path}: the file is empty; expected a header row")
                if column not in header:
                    raise DataError(
                        f"{path}: no column {column!r}; the columns are {header}. Pass "
                        "text_column= one of them."
                    )
                j = header.index(column)
                for row in reader:
                    if not row:
                        continue
                    if len(row) <= j:
                        raise DataError(
                            f"{path}, line {reader.line_num}: the row has {len(row)} fields; "
                            f"column {column!r} is field {j + 1} of the header's {len(header)}"
                        )
                    yield None, row[j]
            except csv.Error as exc:
                raise DataError(f"{path}, line {reader.line_num}: malformed CSV ({exc})") from exc
    finally:
        csv.field_size_limit(old_limit)


def _parquet_docs(path: Path, column: str, batch_rows: int) -> Iterator[_Doc]:
    try:
        with pq.ParquetFile(path) as f:
            names = f.schema_arrow.names
            if column not in names:
                raise DataError(
                    f"{path}: no column {column!r}; the columns are {names}. Pass "
                    "text_column= one of them."
                )
            kind = f.schema_arrow.field(column).type
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                raise DataError(f"{path}: column {column!r} has type {kind}; expected strings")
            for batch in f.iter_batches(batch_size=batch_rows, columns=[column]):
                for text in batch.column(0).to_pylist():
                    yield None, text or ""
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{path}: could not read the Parquet file ({type(exc).__name__}: {exc})"
        ) from exc


_TABLE_FORMATS = {".csv": ("csv", ","), ".tsv": ("csv", "\t"), ".tab": ("csv", "\t")}
_TABLE_FORMATS.update({".parquet": ("parquet", ""), ".pq": ("parquet", "")})


def _table_format(path: Path, fmt: str | None, delimiter: str | None) -> tuple[str, str]:
    suffix = Path(path.name.removesuffix(".gz")).suffix.lower()
    guess = _TABLE_FORMATS.get(suffix)
    if fmt is None:
        if guess is None:
            raise ValueError(
                f"cannot tell the format of {str(path)!r} from its suffix {suffix!r}; pass "
                "format='csv' or format='parquet'"
            )
        fmt = guess[0]
    if fmt not in ("csv", "parquet"):
        raise ValueError(f"format must be 'csv', 'parquet' or None; got {fmt!r}")
    default_delimiter = guess[1] if guess is not None and guess[0] == "csv" else ","
    return fmt, delimiter or default_delimiter


def ingest_table(
    path: PathLike,
    out_dir: PathLike,
    text_column: str,
    *,
    format: str | None = None,
    delimiter: str | None = None,
    encoding: str = "utf-8",
    batch_rows: int = 10_000,
    tokenizer: Tokenizer | None = None,
    vocab: VocabArg = None,
    min_df: int | float = 5,
    max_df: int | float = 0.5,
    max_vocab: int | None = None,
    docs_per_row_group: int = DEFAULT_DOCS_PER_ROW_GROUP,
    docs_per_file: int = DEFAULT_DOCS_PER_FILE,
    overwrite: bool = False,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Ingest one text column of a CSV or Parquet table: one row, one document.

    Parameters
    ----------
    path : str or os.PathLike
        A CSV file (``.csv``, ``.tsv``, optionally ``.gz``; read with the
        :mod:`csv` module, streaming, with a header row) or a Parquet file
        (``.parquet``; read ``batch_rows`` rows at a time).
    out_dir : str or os.PathLike
    text_column : str
        The column holding the text; empty or null cells give empty documents.
    format : {"csv", "parquet"} or None
        Default: from the suffix.
    delimiter : str, optional
        CSV field delimiter; default ``","`` (tab for ``.tsv``).
    encoding : str, default "utf-8"
        CSV text encoding (undecodable bytes are replaced).
    batch_rows : int, default 10000
        Rows per Parquet read.
    **other
        As in :func:`ingest_text_folder`.

    Raises
    ------
    DataError
        If the column is missing (naming the file and the available columns),
        is not a string column, or a CSV row is malformed (naming the line).
    """
    p = _existing_file(path, "path")
    fmt, sep = _table_format(p, format, delimiter)
    if fmt == "csv":

        def docs() -> Iterator[_Doc]:
            return _csv_docs(p, text_column, sep, encoding)
    else:

        def docs() -> Iterator[_Doc]:
            return _parquet_docs(p, text_column, batch_rows)

    info = {"format": fmt, "source": str(p), "text_column": text_column}
    return _ingest_texts(
        _TextSource(docs, info, f"{fmt} table {p}"),
        out_dir,
        tokenizer=tokenizer,
        vocab=vocab,
        min_df=min_df,
        max_df=max_df,
        max_vocab=max_vocab,
        docs_per_row_group=docs_per_row_group,
        docs_per_file=docs_per_file,
        overwrite=overwrite,
        progress=progress,
    )


# --------------------------------------------------------------------------- bags of words


def _read_word_list(path: Path) -> list[str]:
    """A vocabulary file: one word per line (surrounding spaces stripped)."""
    with _open_text(path, "utf-8", errors="strict") as f:
        try:
            lines = f.read().split("\n")
        except UnicodeDecodeError as exc:
            raise DataError(f"vocabulary file {path}: not valid UTF-8 ({exc})") from exc
    if lines and not lines[-1].strip():
        lines.pop()
    first: dict[str, int] = {}
    for i, line in enumerate(lines):
        word = line.strip()
        if not word:
            raise DataError(f"vocabulary file {path}, line {i + 1}: empty line; one word per line")
        if word in first:
            raise DataError(
                f"vocabulary file {path}, line {i + 1}: {word!r} repeats line {first[word] + 1}; "
                "words must be distinct"
            )
        first[word] = i
        lines[i] = word
    return lines


@dataclass
class _BagSource:
    """A re-iterable stream of bags ``(file word ids int64, counts float64)``."""

    docs: Callable[[], Iterator[_Bag]]
    words: list[str]
    info: dict[str, Any]
    where: str


def _bag_vocabulary(
    source: _BagSource,
    vocab: VocabArg,
    min_df: int | float | None,
    max_df: int | float | None,
    max_vocab: int | None,
    progress: bool | None,
) -> tuple[list[str], np.ndarray | None, dict[str, Any], str]:
    """The corpus words and the map from file word ids to them (None: identity)."""
    n_file = len(source.words)
    if vocab is not None:
        words, vocab_from = _imposed_vocab(vocab)
        to_id = {w: i for i, w in enumerate(words)}
        id_map = np.array([to_id.get(w, -1) for w in source.words], dtype=np.int64)
        vocabulary = {"imposed": True, "from": vocab_from, "vocab_size": len(words)}
        return words, id_map, vocabulary, f"imposed vocabulary ({vocab_from})"
    if min_df is None and max_df is None and max_vocab is None:
        vocab_file = str(source.info.get("vocab_file"))
        vocabulary = {"imposed": False, "from": vocab_file, "vocab_size": n_file}
        return list(source.words), None, vocabulary, f"vocabulary of {vocab_file}"
    doc_freq = np.zeros(n_file, dtype=np.int64)
    n_docs = 0
    for ids, _ in _progress(source.docs(), progress, "pass 1/2: counting words"):
        doc_freq[ids] += 1
        n_docs += 1
    keep, report = select_vocabulary(
        source.words,
        doc_freq,
        n_docs,
        min_df=0 if min_df is None else min_df,
        max_df=1.0 if max_df is None else max_df,
        max_vocab=max_vocab,
    )
    keep = np.sort(keep)  # keep the file's word order
    id_map = np.full(n_file, -1, dtype=np.int64)
    id_map[keep] = np.arange(len(keep))
    described = f"vocabulary of {source.info.get('vocab_file')}, pruned"
    return [source.words[i] for i in keep], id_map, {"imposed": False, **report}, described


def _ingest_bags(
    source: _BagSource,
    out_dir: PathLike,
    *,
    vocab: VocabArg,
    min_df: int | float | None,
    max_df: int | float | None,
    max_vocab: int | None,
    docs_per_row_group: int,
    docs_per_file: int,
    overwrite: bool,
    progress: bool | None,
) -> dict[str, Any]:
    check_out_dir(out_dir, overwrite)
    words, id_map, vocabulary, vocab_from = _bag_vocabulary(
        source, vocab, min_df, max_df, max_vocab, progress
    )
    counts = _Counts(oov_mask=np.zeros(len(source.words), dtype=bool), names=None)

    def documents() -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        for i, (ids, cnt) in enumerate(_progress(source.docs(), progress, "writing")):
            if id_map is not None:
                new = id_map[ids]
                inside = new >= 0
                counts.oov_mask[ids[~inside]] = True
                n_oov = cnt[~inside].sum()
                order = np.argsort(new[inside], kind="stable")
                ids, cnt = new[inside][order], cnt[inside][order]
            else:
                n_oov = 0.0
            counts.add(cnt, n_oov)
            yield i, ids, cnt
        if counts.n_docs == 0:
            raise DataError(f"{source.where}: no documents found (the file has no document lines)")

    corpus = Corpus.write(
        out_dir,
        documents(),
        words,
        docs_per_row_group=docs_per_row_group,
        docs_per_file=docs_per_file,
        ingest_info=lambda: _ingest_info(source.info, vocabulary, counts, {}),
        overwrite=overwrite,
    )
    return _report(corpus, counts, vocab_from)


def _parse_ldac_line(line: str, where: str, n_words: int) -> _Bag:
    """Parse ``N id:count id:count ...`` (0-based ids) into sorted ids and counts."""
    parts = line.split()
    try:
        n = int(parts[0])
    except ValueError:
        raise DataError(
            f"{where}: expected 'N id:count id:count ...' starting with the number of pairs "
            f"N; found {parts[0]!r}"
        ) from None
    pairs = parts[1:]
    if n != len(pairs):
        raise DataError(
            f"{where}: says N={n} pairs but has {len(pairs)}; the line is truncated or its "
            "count is wrong"
        )
    flat = ":".join(pairs).split(":")
    try:
        if len(flat) != 2 * n and n:
            raise ValueError
        ids = np.array(flat[0::2], dtype=np.int64) if n else np.empty(0, np.int64)
        cnt = np.array(flat[1::2], dtype=np.float64) if n else np.empty(0, np.float64)
    except ValueError:
        bad = next(p for p in pairs if not _is_pair(p))
        raise DataError(f"{where}: malformed pair {bad!r}; expected 'id:count'") from None
    return _check_bag(ids, cnt, where, n_words, base=0)


def _is_pair(text: str) -> bool:
    word, sep, count = text.partition(":")
    try:
        int(word)
        float(count)
    except ValueError:
        return False
    return bool(sep)


def _check_bag(ids: np.ndarray, cnt: np.ndarray, where: str, n_words: int, base: int) -> _Bag:
    """Check ids (``base``-based, in range, distinct) and counts; return sorted 0-based ids."""
    ids = ids - base
    if ids.size and (ids.min() < 0 or ids.max() >= n_words):
        bad = int(ids[(ids < 0) | (ids >= n_words)][0]) + base
        raise DataError(
            f"{where}: word id {bad} is outside [{base}, {n_words + base}), the range of the "
            f"{n_words}-word vocabulary file"
        )
    if cnt.size and not (cnt.min() >= 0 and cnt.max() < np.inf):
        bad_count = cnt[~((cnt >= 0) & (cnt < np.inf))][0]
        raise DataError(f"{where}: count {float(bad_count)}; counts must be finite and >= 0")
    order = np.argsort(ids, kind="stable")
    ids, cnt = ids[order], cnt[order]
    repeated = np.flatnonzero(np.diff(ids) == 0)
    if repeated.size:
        raise DataError(
            f"{where}: word id {int(ids[repeated[0]]) + base} is listed twice; each word "
            "appears once per document"
        )
    return ids, cnt


def _ldac_docs(path: Path, n_words: int) -> Iterator[_Bag]:
    with _open_text(path, "ascii", errors="strict") as f:
        try:
            for lineno, line in enumerate(f, start=1):
                if line.strip():
                    yield _parse_ldac_line(line, f"{path}, line {lineno}", n_words)
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not an ASCII LDA-C file ({exc})") from exc


def import_ldac(
    dat_path: PathLike,
    vocab_path: PathLike,
    out_dir: PathLike,
    *,
    vocab: VocabArg = None,
    min_df: int | float | None = None,
    max_df: int | float | None = None,
    max_vocab: int | None = None,
    docs_per_row_group: int = DEFAULT_DOCS_PER_ROW_GROUP,
    docs_per_file: int = DEFAULT_DOCS_PER_FILE,
    overwrite: bool = False,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Import an LDA-C corpus (Blei's lda-c format).

    Parameters
    ----------
    dat_path : str or os.PathLike
        One document per non-blank line, ``N id:count id:count ...``, where
        ``N`` is the number of pairs and ids are 0-based into ``vocab_path``
        (optionally ``.gz``).
    vocab_path : str or os.PathLike
        One word per line.
    out_dir : str or os.PathLike
    vocab : list of str, Corpus, corpus path, or None
        Vocabulary to impose; words of ``vocab_path`` outside it are dropped
        and counted. ``None`` keeps the file's vocabulary and ids.
    min_df, max_df, max_vocab : optional
        When any is given (and ``vocab`` is None), prune the file's vocabulary
        by document frequency in an extra pass (see
        :class:`~lsdask.io.text.VocabularyBuilder`; the kept words keep the
        file's order). By default nothing is pruned.
    docs_per_row_group, docs_per_file, overwrite, progress
        As in :func:`ingest_text_folder`.

    Raises
    ------
    DataError
        Naming the file and line, when ``N`` differs from the number of pairs,
        a pair is malformed, an id is out of range or repeated, or a count is
        negative or not finite.
    """
    dat = _existing_file(dat_path, "dat_path")
    vocab_file = _existing_file(vocab_path, "vocab_path")
    file_words = _read_word_list(vocab_file)
    info = {"format": "ldac", "source": str(dat), "vocab_file": str(vocab_file)}
    return _ingest_bags(
        _BagSource(lambda: _ldac_docs(dat, len(file_words)), file_words, info, f"LDA-C {dat}"),
        out_dir,
        vocab=vocab,
        min_df=min_df,
        max_df=max_df,
        max_vocab=max_vocab,
        docs_per_row_group=docs_per_row_group,
        docs_per_file=docs_per_file,
        overwrite=overwrite,
        progress=progress,
    )


def _uci_header(f: IO[str], path: Path) -> tuple[int, int, int, int]:
    """Read D, W, NNZ (one per line); return them and the number of lines read."""
    values: list[int] = []
    lineno = 0
    while len(values) < 3:
        line = f.readline()
        lineno += 1
        if not line:
            raise DataError(f"{path}: ends inside the header; expected D, W and NNZ lines")
        if not line.strip():
            continue
        try:
            values.append(int(line))
        except ValueError:
            raise DataError(
                f"{path}, line {lineno}: expected the header (D, W, NNZ, one integer per line); "
                f"found {line.strip()[:60]!r}"
            ) from None
    return values[0], values[1], values[2], lineno


def _uci_docs(path: Path, n_words: int) -> Iterator[_Bag]:
    """Documents of a UCI docword file, empty ones included, in docID order."""
    with _open_text(path, "ascii", errors="strict") as f:
        n_docs, width, nnz, header_lines = _uci_header(f, path)
        if width != n_words:
            raise DataError(
                f"{path}: the header says W={width} words but the vocabulary file has {n_words}"
            )
        empty: _Bag = (np.empty(0, np.int64), np.empty(0, np.float64))
        current, first_line, next_doc, seen = 0, 0, 1, 0
        ids: list[int] = []
        cnt: list[float] = []
        lineno = header_lines
        for lineno, line in enumerate(f, start=header_lines + 1):
            parts = line.split()
            if not parts:
                continue
            doc, word, count = _uci_triple(parts, f"{path}, line {lineno}", n_docs)
            if doc != current:
                if doc < current:
                    raise DataError(
                        f"{path}, line {lineno}: docID {doc} after docID {current}; lines must "
                        "be grouped by document in increasing docID order (sort the file)"
                    )
                if current:
                    yield _uci_bag(ids, cnt, path, current, first_line, lineno - 1, n_words)
                for _ in range(next_doc, doc):
                    yield empty
                current, first_line, next_doc, ids, cnt = doc, lineno, doc + 1, [], []
            ids.append(word)
            cnt.append(count)
            seen += 1
        if current:
            yield _uci_bag(ids, cnt, path, current, first_line, lineno, n_words)
        for _ in range(next_doc, n_docs + 1):
            yield empty
    if seen != nnz:
        raise DataError(
            f"{path}: the header says NNZ={nnz} entries but the file has {seen}; it is "
            "truncated or the header is wrong"
        )


def _uci_triple(parts: list[str], where: str, n_docs: int) -> tuple[int, int, float]:
    try:
        if len(parts) != 3:
            raise ValueError
        doc, word, count = int(parts[0]), int(parts[1]), float(parts[2])
    except ValueError:
        raise DataError(
            f"{where}: expected 'docID wordID count'; found {' '.join(parts)[:60]!r}"
        ) from None
    if not 1 <= doc <= n_docs:
        raise DataError(f"{where}: docID {doc} is outside [1, {n_docs}] (D from the header)")
    return doc, word, count


def _uci_bag(
    ids: list[int], cnt: list[float], path: Path, doc: int, first: int, last: int, n_words: int
) -> _Bag:
    where = f"{path}, lines {first}-{last} (docID {doc})"
    return _check_bag(
        np.array(ids, dtype=np.int64), np.array(cnt, dtype=np.float64), where, n_words, base=1
    )


def import_uci(
    docword_path: PathLike,
    vocab_path: PathLike,
    out_dir: PathLike,
    *,
    vocab: VocabArg = None,
    min_df: int | float | None = None,
    max_df: int | float | None = None,
    max_vocab: int | None = None,
    docs_per_row_group: int = DEFAULT_DOCS_PER_ROW_GROUP,
    docs_per_file: int = DEFAULT_DOCS_PER_FILE,
    overwrite: bool = False,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Import a UCI bag-of-words corpus (``docword.*.txt`` and ``vocab.*.txt``).

    Parameters
    ----------
    docword_path : str or os.PathLike
        Header lines ``D``, ``W``, ``NNZ``, then ``docID wordID count`` lines
        with 1-based ids, grouped by increasing docID (optionally ``.gz``).
        Documents without lines are written as empty documents, so the corpus
        has ``D`` documents and ``doc_id = docID - 1``.
    vocab_path : str or os.PathLike
        ``W`` words, one per line.
    out_dir, vocab, min_df, max_df, max_vocab
        As in :func:`import_ldac`.
    docs_per_row_group, docs_per_file, overwrite, progress
        As in :func:`import_ldac`.

    Raises
    ------
    DataError
        Naming the file and line, for a bad header, a malformed line, ids out
        of range, a document whose lines are not together, a repeated word, or
        a number of entries different from ``NNZ``.
    """
    docword = _existing_file(docword_path, "docword_path")
    vocab_file = _existing_file(vocab_path, "vocab_path")
    file_words = _read_word_list(vocab_file)
    info = {"format": "uci", "source": str(docword), "vocab_file": str(vocab_file)}
    return _ingest_bags(
        _BagSource(lambda: _uci_docs(docword, len(file_words)), file_words, info, f"UCI {docword}"),
        out_dir,
        vocab=vocab,
        min_df=min_df,
        max_df=max_df,
        max_vocab=max_vocab,
        docs_per_row_group=docs_per_row_group,
        docs_per_file=docs_per_file,
        overwrite=overwrite,
        progress=progress,
    )
