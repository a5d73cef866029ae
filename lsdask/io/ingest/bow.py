"""Importing bag-of-words files: LDA-C and UCI docword corpora.

The public functions :func:`import_ldac` and :func:`import_uci` (re-exported
by :mod:`lsdask.io.ingest`), the parsers of the two formats and of their
vocabulary files; the documents go through
:func:`lsdask.io.ingest.common._ingest_bags`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Unpack

import numpy as np

from lsdask.errors import DataError
from lsdask.io.corpus.batch import bad_count_message, first_bad_count
from lsdask.io.ingest.common import IngestSummary, _Bag, _BagSource, _ingest_bags
from lsdask.io.ingest.inputs import (
    READ_ERRORS,
    existing_file,
    numbered_lines,
    open_input,
    read_error,
)
from lsdask.io.ingest.options import (
    IngestKeywords,
    IngestOptions,
    PathLike,
    option_keywords,
)

# --------------------------------------------------------------------------- bags of words

#: a UCI header may say more documents D than hold entries (the rest are empty
#: documents), but not more empty ones than this and than entries: a D far beyond
#: NNZ is a wrong header, which would otherwise write empty documents for hours
MAX_EMPTY_UCI_DOCS = 100_000


def read_word_list(path: Path) -> list[str]:
    """A vocabulary file: one word per line (surrounding spaces stripped)."""
    with open_input(path, "utf-8-sig") as f:  # -sig: a byte order mark is dropped
        try:
            lines = f.read().split("\n")
        except UnicodeDecodeError as exc:
            raise DataError(f"vocabulary file {path}: not valid UTF-8 ({exc})") from exc
        except READ_ERRORS as exc:
            raise read_error(path, None, exc) from exc
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
    except OverflowError:
        bad = next(p for p in pairs if not -(2**63) <= int(p.partition(":")[0]) < 2**63)
        raise DataError(
            f"{where}: word id {bad.partition(':')[0]} is outside [0, {n_words}), the range "
            f"of the {n_words}-word vocabulary file"
        ) from None
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
    pos = first_bad_count(cnt)
    if pos is not None:
        raise DataError(f"{where}: {bad_count_message(cnt[pos])}")
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
    with open_input(path) as f:  # bytes, decoded line by line: an error names its line
        for lineno, raw in numbered_lines(f, path):
            try:
                line = raw.decode("ascii")
            except UnicodeDecodeError as exc:
                raise DataError(
                    f"{path}, line {lineno}: not ASCII (byte {exc.start} of the line: "
                    f"{raw[exc.start : exc.start + 4]!r}); an LDA-C file holds only numbers, "
                    "colons and white space"
                ) from None
            # blank lines are not documents: Blei's lda-c reads the counts with
            # fscanf, which skips all white space (an empty document is "0")
            if not line.strip():
                continue
            yield _parse_ldac_line(line, f"{path}, line {lineno}", n_words)


@option_keywords(IngestOptions)
def import_ldac(
    dat_path: PathLike,
    vocab_path: PathLike,
    out_dir: PathLike,
    *,
    options: IngestOptions | None = None,
    **keywords: Unpack[IngestKeywords],
) -> IngestSummary:
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
    options : IngestOptions, optional
    **keywords
        The vocabulary options (by default the file's vocabulary is kept as
        it is) and the output options of
        :class:`~lsdask.io.ingest.options.IngestOptions`, as one object or
        one by one.

    Raises
    ------
    DataError
        Naming the file and line, when ``N`` differs from the number of pairs,
        a pair is malformed, an id is out of range or repeated, or a count is
        negative or not finite.
    TypeError
        For a keyword argument it does not take (a ``tokenizer``, say: the
        file holds words already).
    """
    options = IngestOptions.merge(options, keywords, import_ldac)
    dat = existing_file(dat_path, "dat_path")
    vocab_file = existing_file(vocab_path, "vocab_path")
    file_words = read_word_list(vocab_file)
    info = {"format": "ldac", "source": str(dat), "vocab_file": str(vocab_file)}
    return _ingest_bags(
        _BagSource(lambda: _ldac_docs(dat, len(file_words)), file_words, info, f"LDA-C {dat}"),
        out_dir,
        options,
    )


def _uci_header(f: IO[str], path: Path) -> tuple[int, int, int, int]:
    """Read D, W, NNZ (one per line); return them and the number of lines read."""
    values: list[int] = []
    lineno = 0
    while len(values) < 3:
        lineno += 1
        try:
            line = f.readline()
        except READ_ERRORS as exc:
            raise read_error(path, lineno, exc) from exc
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
    with open_input(path, "ascii") as f:
        n_docs, width, nnz, header_lines = _uci_header(f, path)
        if width != n_words:
            raise DataError(
                f"{path}: the header says W={width} words but the vocabulary file has {n_words}"
            )
        if n_docs - nnz > max(nnz, MAX_EMPTY_UCI_DOCS):
            # every document with words holds at least one of the NNZ entries
            raise DataError(
                f"{path}: the header says D={n_docs} documents but NNZ={nnz} entries, so at "
                f"least {n_docs - nnz} documents would be empty; the header is probably wrong "
                "(its lines are D, W, NNZ). Fix D."
            )
        empty: _Bag = (np.empty(0, np.int64), np.empty(0, np.float64))
        current, first_line, next_doc, seen = 0, 0, 1, 0
        ids: list[int] = []
        cnt: list[float] = []
        lineno = header_lines
        for lineno, line in numbered_lines(f, path, start=header_lines + 1):
            parts = line.split()
            if not parts:
                continue
            doc, word, count = _uci_triple(parts, f"{path}, line {lineno}", n_docs, n_words)
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


def _uci_triple(parts: list[str], where: str, n_docs: int, n_words: int) -> tuple[int, int, float]:
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
    if not 1 <= word <= n_words:
        raise DataError(
            f"{where}: word id {word} is outside [1, {n_words + 1}), the range of the "
            f"{n_words}-word vocabulary file"
        )
    return doc, word, count


def _uci_bag(
    ids: list[int], cnt: list[float], path: Path, doc: int, first: int, last: int, n_words: int
) -> _Bag:
    where = f"{path}, lines {first}-{last} (docID {doc})"
    return _check_bag(
        np.array(ids, dtype=np.int64), np.array(cnt, dtype=np.float64), where, n_words, base=1
    )


@option_keywords(IngestOptions)
def import_uci(
    docword_path: PathLike,
    vocab_path: PathLike,
    out_dir: PathLike,
    *,
    options: IngestOptions | None = None,
    **keywords: Unpack[IngestKeywords],
) -> IngestSummary:
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
    out_dir, options, **keywords
        As in :func:`import_ldac`.

    Raises
    ------
    DataError
        Naming the file and line, for a bad header, a malformed line, ids out
        of range, a document whose lines are not together, a repeated word, or
        a number of entries different from ``NNZ``.
    """
    options = IngestOptions.merge(options, keywords, import_uci)
    docword = existing_file(docword_path, "docword_path")
    vocab_file = existing_file(vocab_path, "vocab_path")
    file_words = read_word_list(vocab_file)
    info = {"format": "uci", "source": str(docword), "vocab_file": str(vocab_file)}
    return _ingest_bags(
        _BagSource(lambda: _uci_docs(docword, len(file_words)), file_words, info, f"UCI {docword}"),
        out_dir,
        options,
    )
