"""A table's vocabulary: from a side file or a list, or built in one pass.

A table of token ids needs the words its ids index: a side file (UTF-8, one
word per line, the word of id ``i`` on line ``i + 1``; a fitted model's
``vocab.txt`` is one) or a list of words. A table of text may take one too, or
have its vocabulary built from its documents in ONE pass over its batches:
each batch's task counts the documents holding each word
(:class:`~lsdask.io.tables.text.DocFrequencies`), the driver adds the counts
up and keeps the words that ``min_df``, ``max_df`` and ``max_vocab`` allow, as
``lsdask ingest`` does (:func:`~lsdask.io.ingest.words.select_vocabulary`: by
descending document frequency, ties alphabetically).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from lsdask.errors import DataError
from lsdask.io import guarded
from lsdask.io.ingest.words import Tokenizer, select_vocabulary
from lsdask.io.tables.location import TableLocation
from lsdask.io.tables.text import BatchFrequencies, DocFrequencies

logger = logging.getLogger(__name__)

__all__ = ["build_vocabulary", "check_words", "read_vocabulary_file"]

#: Batches whose counts are held at once on the driver while they are added up.
_WAVE = 16


def check_words(words: Any, where: str) -> list[str]:
    """A vocabulary given as a sequence: distinct, non-empty words without line
    breaks (a model keeps its vocabulary one word per line)."""
    if isinstance(words, str) or not isinstance(words, Sequence):
        raise TypeError(
            f"{where}: expected a list of words or the path of a file of them (one per "
            f"line); got {type(words).__name__}"
        )
    words = list(words)
    if not words:
        raise DataError(f"{where}: the vocabulary is empty; it needs at least one word")
    seen: dict[str, int] = {}
    for i, w in enumerate(words):
        if not isinstance(w, str):
            raise TypeError(f"{where}: word {i} is {w!r}, not a str")
        if not w or "\n" in w or "\r" in w:
            raise DataError(
                f"{where}: word {i} is {w!r}; a word must be non-empty and hold no line break"
            )
        if w in seen:
            raise DataError(
                f"{where}: words {seen[w]} and {i} are both {w!r}; the words must be distinct "
                "(word i is the word of token id i)"
            )
        seen[w] = i
    return words


def read_vocabulary_file(path: Any, storage_options: dict[str, Any] | None = None) -> list[str]:
    """The words of a vocabulary file: UTF-8, one word per line (``\\r\\n`` line ends
    and a byte order mark are taken), the word of id ``i`` on line ``i + 1``.

    A local file is opened without following a link and read only if it is a
    regular file of at most ``guarded.LIMITS["vocab"]`` bytes; a URL is read
    through fsspec with ``storage_options``.
    """
    location = TableLocation.of(path, storage_options)
    where = f"vocabulary file {location.shown}"
    resolved = location.resolve()
    fs, file = resolved.fs, resolved.root
    limit = guarded.LIMITS["vocab"]
    try:
        if resolved.is_local:
            raw = guarded.read_bytes(os.path.dirname(file), os.path.basename(file), "vocab")
        else:
            size = int(fs.size(file))
            if size > limit:
                raise DataError(f"{where}: holds {size:,} bytes, more than the {limit:,} allowed")
            with fs.open(file, "rb") as f:
                raw = f.read(limit + 1)
    except FileNotFoundError:
        raise FileNotFoundError(f"{where}: no such file") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise DataError(
            f"{where}, line {line}: not UTF-8 ({exc.reason} at byte {exc.start}); write the "
            "vocabulary as UTF-8 text, one word per line"
        ) from None
    lines = text.removeprefix("\ufeff").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    words = [w.removesuffix("\r") for w in lines]
    empty = next((i for i, w in enumerate(words) if not w), None)
    if empty is not None:
        raise DataError(
            f"{where}, line {empty + 1}: the line is empty; every line holds one word (the "
            "word of token id line - 1). Remove the empty line"
        )
    return check_words(words, where)


def build_vocabulary(
    executor: Any,
    batches: Sequence[Any],
    tokenizer: Tokenizer,
    *,
    min_df: int | float,
    max_df: int | float,
    max_vocab: int | None,
    where: str,
) -> list[str]:
    """The vocabulary of the documents of ``batches``, in one pass: each task
    counts its row group's document frequencies (on ``executor``'s workers, or
    in this process for None), the driver adds them up a few batches at a time.

    Raises
    ------
    DataError
        No word is left (the bounds are too tight, or the texts hold no words).
    """
    task = DocFrequencies(tokenizer)
    total: Counter[str] = Counter()
    n_docs = 0
    for part in _frequencies(executor, task, batches):
        total.update(dict(zip(part.words, part.df.tolist(), strict=True)))
        n_docs += part.n_docs
    words = list(total)
    try:
        keep, report = select_vocabulary(
            words,
            [total[w] for w in words],
            n_docs,
            min_df=min_df,
            max_df=max_df,
            max_vocab=max_vocab,
        )
    except ValueError as exc:
        raise DataError(f"{where}: {exc}") from exc
    logger.info(
        "%s: vocabulary of %d of %d word types over %d documents "
        "(dropped %d below min_df, %d above max_df, %d beyond max_vocab)",
        where, report["vocab_size"], report["n_types"], n_docs, report["dropped_min_df"],
        report["dropped_max_df"], report["dropped_max_vocab"],
    )  # fmt: skip
    return [words[i] for i in keep]


def _frequencies(
    executor: Any, task: DocFrequencies, batches: Sequence[Any]
) -> Iterator[BatchFrequencies]:
    """Each batch's document frequencies, in order: computed here one by one, or
    on the executor a wave at a time (the next wave runs while the driver adds
    up this one), so the driver holds the counts of two waves at most."""
    if executor is None:
        for batch in batches:
            yield task(batch)
        return
    handles = executor.register(list(batches))
    step = max(_WAVE, 2 * int(getattr(executor, "n_slots", 1)))
    waves = [handles[i : i + step] for i in range(0, len(handles), step)]
    pending = executor.submit(task, waves[0], None) if waves else None
    for i in range(len(waves)):
        done = executor.collect(pending)
        pending = executor.submit(task, waves[i + 1], None) if i + 1 < len(waves) else None
        yield from done
