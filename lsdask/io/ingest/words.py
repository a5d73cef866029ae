"""Tokenization, vocabulary building and bag-of-words encoding.

A document becomes a bag of words in three steps:

1. :class:`Tokenizer` cuts its text into lower-case words and drops stopwords;
2. :class:`VocabularyBuilder` counts, over a stream of documents, in how many
   documents each word occurs (its *document frequency*) and keeps the words
   that are neither too rare (``min_df``) nor too common (``max_df``);
3. :func:`encode` turns the document's tokens into sorted word ids and counts
   over that vocabulary, counting the tokens that fall outside it.

The ingestion functions of :mod:`lsdask.io.ingest` run steps 1-2 over the
whole source (pass 1) and steps 1 and 3 while writing the corpus (pass 2).
"""

from __future__ import annotations

import logging
import numbers
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from lsdask.config import DEFAULT_MAX_DF, DEFAULT_MIN_DF
from lsdask.errors import DataError
from lsdask.io.ingest.stopwords import ENGLISH_STOPWORDS, LEGACY_ENGLISH_STOPWORDS

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_TOKEN_PATTERN",
    "NAMED_STOPWORDS",
    "Tokenizer",
    "VocabularyBuilder",
    "check_df",
    "check_max_vocab",
    "encode",
    "select_vocabulary",
]

#: Unicode-aware words of two or more letters (no digits, no underscores).
DEFAULT_TOKEN_PATTERN = r"(?u)\b[^\W\d_][^\W\d_']+\b"

#: The built-in stopword lists by the name a manifest records them under
#: (``"english"`` is a shorter list that corpora ingested with it keep using).
NAMED_STOPWORDS: dict[str, frozenset[str]] = {
    "english-2": ENGLISH_STOPWORDS,
    "english": LEGACY_ENGLISH_STOPWORDS,
}


class Tokenizer:
    """Cut text into words.

    Parameters
    ----------
    lowercase : bool, default True
        Lower-case the text before matching.
    pattern : str, default :data:`DEFAULT_TOKEN_PATTERN`
        Regular expression whose matches are the tokens. The default keeps
        runs of two or more Unicode letters, so ``"Don't panic, 42 times!"``
        gives ``["don", "panic", "times"]`` before stopword removal.
    stopwords : collection of str or None, default :data:`ENGLISH_STOPWORDS`
        Words to drop. They are compared with the lower-cased token, so they
        apply whether or not ``lowercase`` is set. ``None`` keeps every token.
        See :mod:`lsdask.io.ingest.stopwords` for the built-in lists.

    Examples
    --------
    >>> Tokenizer().tokens("The cat sat on the mat; the cat purred.")
    ['cat', 'sat', 'mat', 'cat', 'purred']
    """

    def __init__(
        self,
        lowercase: bool = True,
        pattern: str = DEFAULT_TOKEN_PATTERN,
        stopwords: Collection[str] | None = ENGLISH_STOPWORDS,
    ) -> None:
        try:
            self._regex = re.compile(pattern)
        except (re.error, TypeError) as exc:
            raise ValueError(
                f"pattern must be a valid regular expression; got {pattern!r} ({exc}). "
                f"The default is {DEFAULT_TOKEN_PATTERN!r}."
            ) from exc
        if isinstance(stopwords, str):
            raise TypeError(
                "stopwords must be a collection of words or None; got the string "
                f"{stopwords!r}. Pass e.g. stopwords={{{stopwords!r}}} or ENGLISH_STOPWORDS."
            )
        self.lowercase = bool(lowercase)
        self.pattern = pattern
        self.stopwords: frozenset[str] = frozenset(w.lower() for w in (stopwords or ()))

    def tokens(self, text: str) -> list[str]:
        """Return the tokens of ``text``, in order, stopwords removed.

        Parameters
        ----------
        text : str

        Returns
        -------
        list of str
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}")
        found = self._regex.findall(text.lower() if self.lowercase else text)
        if not self.stopwords:
            return found
        stop = self.stopwords
        if self.lowercase:
            return [t for t in found if t not in stop]
        return [t for t in found if t.lower() not in stop]

    def runs(self, text: str) -> list[list[str]]:
        """The tokens of ``text`` as runs of adjacent words: a stopword ends a
        run, so that ``"bank of america"`` gives ``[["bank"], ["america"]]``.

        The tokens in order are those of :meth:`tokens`; phrase detection
        (:mod:`lsdask.io.ingest.phrases`) pairs words within a run only.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str; got {type(text).__name__}")
        found = self._regex.findall(text.lower() if self.lowercase else text)
        stop = self.stopwords
        runs: list[list[str]] = []
        run: list[str] = []
        for token in found:
            if (token if self.lowercase else token.lower()) in stop:
                if run:
                    runs.append(run)
                    run = []
            else:
                run.append(token)
        if run:
            runs.append(run)
        return runs

    def settings(self) -> dict[str, Any]:
        """The settings as a JSON-ready dict (recorded in a corpus manifest).

        ``stopwords`` is the name of a built-in list (``"english-2"`` for
        :data:`ENGLISH_STOPWORDS`, ``"english"`` for
        :data:`LEGACY_ENGLISH_STOPWORDS`, see :data:`NAMED_STOPWORDS`), ``None``
        for none, or the sorted list of custom stopwords.
        """
        named = [name for name, words in NAMED_STOPWORDS.items() if self.stopwords == words]
        if named:
            stop: Any = named[0]
        elif not self.stopwords:
            stop = None
        else:
            stop = sorted(self.stopwords)
        return {"lowercase": self.lowercase, "pattern": self.pattern, "stopwords": stop}

    @classmethod
    def from_settings(
        cls, settings: Mapping[str, Any], *, where: str = "tokenizer settings"
    ) -> Tokenizer:
        """The tokenizer whose :meth:`settings` these are (as a corpus manifest
        records them under ``ingest.tokenizer``).

        Parameters
        ----------
        settings : mapping
            ``{"lowercase": bool, "pattern": str, "stopwords": name, list of
            str or None}``; a key left out takes its default.
        where : str
            Where the settings were read, for the errors (the manifest and its
            field).

        Raises
        ------
        DataError
            A setting is not one :meth:`settings` writes; the message names
            ``where``, the setting, what was expected and what was found.
        """

        def bad(name: str, expected: str, found: Any) -> DataError:
            shown = repr(found)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            return DataError(
                f"{where}{'.' + name if name else ''} must be {expected}; found {shown}. "
                "The record was edited or damaged (or a newer lsdask wrote it): re-ingest the "
                "corpus"
            )

        if not isinstance(settings, Mapping):
            raise bad("", "an object {lowercase, pattern, stopwords}", settings)
        lowercase = settings.get("lowercase", True)
        if not isinstance(lowercase, bool):
            raise bad("lowercase", "true or false", lowercase)
        pattern = settings.get("pattern", DEFAULT_TOKEN_PATTERN)
        if not isinstance(pattern, str):
            raise bad("pattern", "a regular expression (a string)", pattern)
        stop = settings.get("stopwords", "english")
        if isinstance(stop, str):
            if stop not in NAMED_STOPWORDS:
                raise bad(
                    "stopwords", f"null, a list of words or one of {sorted(NAMED_STOPWORDS)}", stop
                )
            stop = NAMED_STOPWORDS[stop]
        elif stop is not None and not (
            isinstance(stop, list) and all(isinstance(w, str) for w in stop)
        ):
            raise bad("stopwords", "null, a list of words or the name of a built-in list", stop)
        try:
            return cls(lowercase=lowercase, pattern=pattern, stopwords=stop)
        except ValueError as exc:  # the pattern is not a regular expression
            raise bad("pattern", "a valid regular expression", pattern) from exc

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and self.settings() == other.settings()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        s = self.settings()
        stop = s["stopwords"] if not isinstance(s["stopwords"], list) else len(s["stopwords"])
        return f"Tokenizer(lowercase={self.lowercase}, pattern={self.pattern!r}, stopwords={stop})"


def check_df(name: str, value: Any, *, minimum: int) -> int | float:
    """A document-frequency bound ``min_df`` or ``max_df`` (``name``): an int
    count of documents >= ``minimum``, or a float fraction of them in [0, 1].

    The one check of these bounds: every entry point that takes them
    (:class:`VocabularyBuilder`, :func:`select_vocabulary`,
    :class:`~lsdask.io.ingest.options.IngestOptions`) calls it once.
    """
    if isinstance(value, bool):
        pass
    elif isinstance(value, numbers.Integral):
        if int(value) >= minimum:
            return int(value)
    elif isinstance(value, numbers.Real) and 0.0 <= float(value) <= 1.0:
        return float(value)
    raise ValueError(
        f"{name} must be an int count of documents (>= {minimum}) or a float fraction of "
        f"the documents in [0, 1]; got {value!r}. Use e.g. {name}=5 or {name}=0.5."
    )


def check_max_vocab(max_vocab: Any) -> int | None:
    """``max_vocab``: None (no cap) or a positive int (see :func:`check_df`)."""
    if max_vocab is None:
        return None
    if isinstance(max_vocab, numbers.Integral) and not isinstance(max_vocab, bool):
        if int(max_vocab) >= 1:
            return int(max_vocab)
    raise ValueError(
        f"max_vocab must be a positive int or None; got {max_vocab!r}. "
        "Use None to keep every word that passes min_df and max_df."
    )


def _df_bounds(min_df: int | float, max_df: int | float, n_docs: int) -> tuple[float, float]:
    """The document counts ``lo <= df <= hi`` that ``min_df`` and ``max_df`` allow."""
    lo = float(min_df) if isinstance(min_df, int) else min_df * n_docs
    hi = float(max_df) if isinstance(max_df, int) else max_df * n_docs
    if hi < lo:
        raise ValueError(
            f"max_df={max_df!r} allows words in at most {hi:g} of the {n_docs} documents, "
            f"but min_df={min_df!r} requires at least {lo:g}; no word can pass both. "
            "Lower min_df or raise max_df (for a few documents: min_df=1, max_df=1.0; "
            "lsdask ingest --min-df 1 --max-df 1.0)."
        )
    return lo, hi


def select_vocabulary(
    words: Sequence[str],
    doc_freq: Sequence[int] | np.ndarray,
    n_docs: int,
    *,
    min_df: int | float = DEFAULT_MIN_DF,
    max_df: int | float = DEFAULT_MAX_DF,
    max_vocab: int | None = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Choose the words to keep from their document frequencies.

    Parameters
    ----------
    words : sequence of str
        The candidate words.
    doc_freq : sequence of int
        ``doc_freq[i]`` is the number of documents containing ``words[i]``.
    n_docs : int
        Number of documents counted.
    min_df, max_df, max_vocab
        As in :class:`VocabularyBuilder`.

    Returns
    -------
    keep : numpy.ndarray of int64
        Indices into ``words`` of the kept words, by descending document
        frequency, ties broken alphabetically.
    report : dict
        Thresholds and how many words each rule dropped.

    Raises
    ------
    ValueError
        For invalid bounds, or if no word is left.
    """
    return _select_vocabulary(
        words,
        doc_freq,
        n_docs,
        check_df("min_df", min_df, minimum=0),
        check_df("max_df", max_df, minimum=1),
        check_max_vocab(max_vocab),
    )


def _select_vocabulary(
    words: Sequence[str],
    doc_freq: Sequence[int] | np.ndarray,
    n_docs: int,
    min_df: int | float,
    max_df: int | float,
    max_vocab: int | None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """:func:`select_vocabulary` with bounds already checked."""
    df = np.asarray(doc_freq, dtype=np.int64)
    if df.shape != (len(words),):
        raise ValueError(f"doc_freq has shape {df.shape}; expected ({len(words)},), one per word")
    if len(words) == 0:
        raise ValueError(
            f"none of the {n_docs} documents has a word (after tokenizing: words of letters, "
            "stopwords removed), so there is no vocabulary to build; check that the input "
            "holds text, and its encoding"
        )
    lo, hi = _df_bounds(min_df, max_df, n_docs)
    too_rare = df < lo
    too_common = ~too_rare & (df > hi)
    candidates = np.flatnonzero(~too_rare & ~too_common)
    order = sorted(candidates.tolist(), key=lambda i: (-int(df[i]), words[i]))
    keep = np.asarray(order[:max_vocab] if max_vocab is not None else order, dtype=np.int64)
    report = {
        "n_docs": int(n_docs),
        "n_types": len(words),
        "min_df": min_df,
        "max_df": max_df,
        "max_vocab": max_vocab,
        "dropped_min_df": int(too_rare.sum()),
        "dropped_max_df": int(too_common.sum()),
        "dropped_max_vocab": len(order) - len(keep),
        "vocab_size": len(keep),
    }
    if len(keep) == 0:
        raise ValueError(
            f"no word is left in the vocabulary: {n_docs} documents with {len(words)} word "
            f"types; min_df={min_df!r} keeps words in at least {lo:g} documents and "
            f"max_df={max_df!r} words in at most {hi:g}. Lower min_df or raise max_df."
        )
    return keep, report


class VocabularyBuilder:
    """Count document frequencies over a stream of documents; choose a vocabulary.

    Memory grows with the number of distinct words seen, not with the number
    of documents.

    Parameters
    ----------
    min_df : int or float, default 5
        Drop words found in fewer documents than this: an int is a count of
        documents, a float in [0, 1] a fraction of them.
    max_df : int or float, default 0.5
        Drop words found in more documents than this (int count or float
        fraction); the default drops words in more than half the documents.
    max_vocab : int or None, default None
        Keep at most this many words, the most frequent by document frequency.

    Examples
    --------
    >>> b = VocabularyBuilder(min_df=1, max_df=1.0)
    >>> for doc in [["cat", "sat"], ["cat", "cat", "dog"]]:
    ...     b.add(doc)
    >>> b.build()
    ['cat', 'dog', 'sat']
    """

    def __init__(
        self,
        min_df: int | float = DEFAULT_MIN_DF,
        max_df: int | float = DEFAULT_MAX_DF,
        max_vocab: int | None = None,
    ) -> None:
        self.min_df = check_df("min_df", min_df, minimum=0)
        self.max_df = check_df("max_df", max_df, minimum=1)
        self.max_vocab = check_max_vocab(max_vocab)
        self.n_docs = 0
        self._df: Counter[str] = Counter()
        self._report: dict[str, Any] | None = None

    def add(self, tokens: Iterable[str]) -> None:
        """Count one document given as its tokens (repeats count once)."""
        self._df.update(set(tokens))
        self.n_docs += 1

    @property
    def n_types(self) -> int:
        """Number of distinct words seen so far."""
        return len(self._df)

    def document_frequency(self, word: str) -> int:
        """Number of documents added so far that contain ``word``."""
        return self._df.get(word, 0)

    def build(self) -> list[str]:
        """The vocabulary: kept words by descending document frequency, then alphabetically.

        Raises
        ------
        ValueError
            If no document was added, or no word passes ``min_df`` and ``max_df``.
        """
        if self.n_docs == 0:
            raise ValueError("no documents were added, so there is no vocabulary to build")
        words = list(self._df)
        keep, self._report = _select_vocabulary(  # the bounds were checked in __init__
            words,
            np.fromiter(self._df.values(), dtype=np.int64, count=len(words)),
            self.n_docs,
            self.min_df,
            self.max_df,
            self.max_vocab,
        )
        vocab = [words[i] for i in keep]
        logger.info(
            "vocabulary: kept %d of %d word types over %d documents "
            "(dropped %d below min_df, %d above max_df, %d beyond max_vocab)",
            len(vocab),
            len(words),
            self.n_docs,
            self._report["dropped_min_df"],
            self._report["dropped_max_df"],
            self._report["dropped_max_vocab"],
        )
        return vocab

    def summary(self) -> dict[str, Any]:
        """Settings and, after :meth:`build`, how many words each rule dropped."""
        if self._report is not None:
            return dict(self._report)
        return {
            "n_docs": self.n_docs,
            "n_types": self.n_types,
            "min_df": self.min_df,
            "max_df": self.max_df,
            "max_vocab": self.max_vocab,
        }


def encode(
    tokens: Iterable[str],
    word_to_id: Mapping[str, int],
    *,
    oov_types: set[str] | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Turn tokens into a bag of words over a vocabulary.

    Parameters
    ----------
    tokens : iterable of str
        The document's tokens (e.g. :meth:`Tokenizer.tokens`).
    word_to_id : mapping of str to int
        The vocabulary.
    oov_types : set of str, optional
        If given, the out-of-vocabulary words are added to it (to count
        distinct out-of-vocabulary words over a corpus).

    Returns
    -------
    word_ids : numpy.ndarray of int32
        Distinct word ids, sorted.
    counts : numpy.ndarray of float32
        How often each word occurs.
    n_oov : int
        Number of tokens not in the vocabulary (dropped).

    Examples
    --------
    >>> encode(["b", "a", "b", "zz"], {"a": 0, "b": 1})
    (array([0, 1], dtype=int32), array([1., 2.], dtype=float32), 1)
    """
    ids: list[int] = []
    counts: list[int] = []
    n_oov = 0
    for word, count in Counter(tokens).items():
        i = word_to_id.get(word)
        if i is None:
            n_oov += count
            if oov_types is not None:
                oov_types.add(word)
        else:
            ids.append(i)
            counts.append(count)
    word_ids = np.array(ids, dtype=np.int32)
    order = np.argsort(word_ids, kind="stable")
    return word_ids[order], np.array(counts, dtype=np.float32)[order], n_oov
