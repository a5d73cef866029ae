"""The options every ingestion function takes, written and checked once, and
the types of their arguments.

:class:`IngestOptions` holds what the five functions of
:mod:`lsdask.io.ingest` share: the vocabulary (imposed, or chosen by document
frequency) and how the corpus is written. :class:`TextIngestOptions` adds the
tokenizer, the cleaning of mail and news posts and phrase detection, which
only raw text needs: bag-of-words files are words already.

A function takes them one by one as keyword arguments (``min_df=2``, typed
by :class:`IngestKeywords` or :class:`TextIngestKeywords`), as one object
(``options=IngestOptions(min_df=2)``, to reuse across calls), or both, the
keywords replacing the object's fields. Either way :meth:`IngestOptions.merge`
makes one options object, and the vocabulary options are checked before any
input is read (the output options are :meth:`Corpus.write
<lsdask.io.corpus.Corpus.write>`'s, checked there). The arguments that differ
between the functions (``subset``, ``text_column``, ``encoding``, ...) stay in
their own signatures.
"""

from __future__ import annotations

import difflib
import inspect
import math
import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Self, TypedDict, TypeVar

from lsdask.io.corpus.store import DEFAULT_DOCS_PER_FILE, DEFAULT_DOCS_PER_ROW_GROUP, Corpus
from lsdask.io.ingest.words import Tokenizer, check_df, check_max_vocab

__all__ = [
    "IngestKeywords",
    "IngestOptions",
    "PathLike",
    "TextIngestKeywords",
    "TextIngestOptions",
    "VocabArg",
    "option_keywords",
]

#: An input file or folder, or the corpus to write.
PathLike = str | os.PathLike[str]
#: ``vocab=``: the words to impose, a corpus whose vocabulary to impose (or its
#: path), or None to build or keep one.
VocabArg = Sequence[str] | Corpus | PathLike | None

_Function = TypeVar("_Function", bound=Callable[..., Any])


@dataclass(frozen=True, kw_only=True)
class IngestOptions:
    """The options of every ingestion function: the vocabulary and the output.

    Parameters
    ----------
    vocab : list of str, Corpus, corpus path, or None, default None
        A vocabulary to impose, as when new documents arrive for retraining:
        words outside it are dropped and counted in the summary. ``None``
        builds the vocabulary of raw text from the data (with ``min_df``,
        ``max_df`` and ``max_vocab``, see
        :class:`~lsdask.io.ingest.words.VocabularyBuilder`) and keeps the
        vocabulary file of a bag-of-words corpus, with its word ids.
    min_df : int, float or None, default None
        Drop words found in fewer documents than this: an int counts
        documents, a float in [0, 1] is a share of them. ``None`` means
        :data:`~lsdask.config.DEFAULT_MIN_DF` (5 documents) for raw text and
        no bound for a bag-of-words file.
    max_df : int, float or None, default None
        Drop words found in more documents than this (a count or a share, as
        ``min_df``). ``None`` means :data:`~lsdask.config.DEFAULT_MAX_DF`
        (half of them) for raw text and no bound for a bag-of-words file.
    max_vocab : int or None, default None
        Keep at most this many words, those in the most documents; ``None``
        keeps every word that passes ``min_df`` and ``max_df``.

        A bag-of-words file is pruned only when one of ``min_df``, ``max_df``
        and ``max_vocab`` is given, in an extra pass that counts the
        documents of each word; the kept words keep the file's order. With
        ``vocab`` all three must be None: an imposed vocabulary is taken as
        it is.
    docs_per_row_group, docs_per_file, overwrite
        As in :meth:`Corpus.write <lsdask.io.corpus.Corpus.write>`.
    progress : bool or None, default None
        Show tqdm progress bars; ``None`` shows them only when stderr is a
        terminal.

    Raises
    ------
    ValueError
        If ``min_df``, ``max_df`` or ``max_vocab`` is given with ``vocab``, or
        is out of its range.
    """

    vocab: VocabArg = None
    min_df: int | float | None = None
    max_df: int | float | None = None
    max_vocab: int | None = None
    docs_per_row_group: int = DEFAULT_DOCS_PER_ROW_GROUP
    docs_per_file: int = DEFAULT_DOCS_PER_FILE
    overwrite: bool = False
    progress: bool | None = None

    def __post_init__(self) -> None:
        pruning = {"min_df": self.min_df, "max_df": self.max_df, "max_vocab": self.max_vocab}
        given = [name for name, value in pruning.items() if value is not None]
        if self.vocab is not None and given:
            raise ValueError(
                f"{', '.join(given)} prune a vocabulary built from the data, but vocab= imposes "
                "one as it is (--vocab or --append-to on the command line), so they would do "
                "nothing. Drop "
                f"{'it' if len(given) == 1 else 'them'}, or drop vocab to build a new vocabulary"
            )
        if self.min_df is not None:
            check_df("min_df", self.min_df, minimum=0)
        if self.max_df is not None:
            check_df("max_df", self.max_df, minimum=1)
        check_max_vocab(self.max_vocab)

    @classmethod
    def merge(
        cls, options: Self | None, keywords: Mapping[str, Any], caller: Callable[..., Any]
    ) -> Self:
        """The options of one call of ``caller``: ``options`` (or the defaults)
        with the fields named in ``keywords`` replaced.

        Raises
        ------
        TypeError
            For a keyword that is no field, as Python does for an unknown
            keyword argument, naming the arguments ``caller`` takes; or for
            ``options`` of another class.
        """
        names = {f.name for f in fields(cls)}
        for key in keywords:
            if key not in names:
                raise _unexpected_keyword(caller, key)
        if options is None:
            return cls(**keywords)
        if type(options) is not cls:
            raise TypeError(
                f"{caller.__name__}() takes options={cls.__name__}(...); got a "
                f"{type(options).__name__}"
            )
        return replace(options, **keywords) if keywords else options


@dataclass(frozen=True, kw_only=True)
class TextIngestOptions(IngestOptions):
    """The options of the raw-text ingestion functions: :class:`IngestOptions`
    and the tokenizer.

    Parameters
    ----------
    tokenizer : Tokenizer, optional
        How text is cut into words. Default ``Tokenizer()`` (lower case,
        words of >= 2 letters, English stopwords removed); with ``vocab`` a
        corpus, the tokenizer that corpus was ingested with (recorded in its
        manifest), so that new documents are cut into words as its own were.
        A tokenizer given that differs from the corpus's is used, with a
        warning.
    strip_mail : bool or None, default None
        Clean mail and news posts before tokenizing
        (:func:`lsdask.io.ingest.mail.clean_mail`): drop the header block,
        quoted reply lines and their attribution lines, the signature,
        encoded data and e-mail addresses. None: False, or with ``vocab`` a
        corpus, as that corpus was ingested (a value given that differs is
        used, with a warning).
    phrases : bool or None, default None
        Join frequent collocations of two words into one token (``new_york``),
        as gensim's Phrases (:mod:`lsdask.io.ingest.phrases`): an extra first
        pass counts the pairs of words, and the two passes that follow join
        the pairs that score above ``phrase_threshold``, so that the
        vocabulary is chosen over the joined tokens (a phrase pruned from it
        is dropped as words outside it are). The joined pairs are recorded in
        the manifest. None: False, or with ``vocab`` a corpus, the phrases
        that corpus joined. ``True`` with an imposed vocabulary is refused:
        there is no pass to count the pairs in.
    phrase_min_count : int or None, default None
        With ``phrases``: pairs seen at most this many times are never joined
        (:data:`~lsdask.config.DEFAULT_PHRASE_MIN_COUNT`, 5, for None).
    phrase_threshold : float or None, default None
        With ``phrases``: the score a pair must exceed to be joined; higher
        joins fewer (:data:`~lsdask.config.DEFAULT_PHRASE_THRESHOLD`, 10, for
        None).
    **others
        As in :class:`IngestOptions`.

    Raises
    ------
    ValueError
        As :class:`IngestOptions`; for a phrase option out of its range, given
        without ``phrases=True``, or ``phrases=True`` with ``vocab``.
    """

    tokenizer: Tokenizer | None = None
    strip_mail: bool | None = None
    phrases: bool | None = None
    phrase_min_count: int | None = None
    phrase_threshold: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("strip_mail", "phrases"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise ValueError(f"{name} must be True, False or None; got {value!r}")
        given = [
            name
            for name in ("phrase_min_count", "phrase_threshold")
            if getattr(self, name) is not None
        ]
        if given and self.phrases is not True:
            raise ValueError(
                f"{' and '.join(given)} set how phrases are detected, but phrases is "
                f"{self.phrases!r}; pass phrases=True (lsdask: --phrases) or drop "
                f"{'it' if len(given) == 1 else 'them'}"
            )
        if self.phrases and self.vocab is not None:
            raise ValueError(
                "phrases=True detects phrases over the documents before choosing the "
                "vocabulary, but vocab= imposes one (--vocab or --append-to); drop it: with a "
                "corpus's vocabulary, the phrases that corpus joined are joined"
            )
        check_phrase_min_count(self.phrase_min_count)
        check_phrase_threshold(self.phrase_threshold)


def check_phrase_min_count(value: Any) -> None:
    """``phrase_min_count``: None or an int >= 1."""
    if value is None:
        return
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= 1:
        return
    raise ValueError(
        f"phrase_min_count must be an int >= 1 (a pair seen at most this often is never a "
        f"phrase); got {value!r}. The default is 5."
    )


def check_phrase_threshold(value: Any) -> None:
    """``phrase_threshold``: None or a finite number >= 0."""
    if value is None:
        return
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        if math.isfinite(value) and float(value) >= 0:
            return
    raise ValueError(
        f"phrase_threshold must be a finite number >= 0 (the score a pair must exceed to be "
        f"joined); got {value!r}. The default is 10.0; higher joins fewer pairs."
    )


class IngestKeywords(TypedDict, total=False):
    """The fields of :class:`IngestOptions` as keyword arguments
    (``**keywords: Unpack[IngestKeywords]``); tests/test_ingest.py checks that they agree."""

    vocab: VocabArg
    min_df: int | float | None
    max_df: int | float | None
    max_vocab: int | None
    docs_per_row_group: int
    docs_per_file: int
    overwrite: bool
    progress: bool | None


class TextIngestKeywords(IngestKeywords, total=False):
    """The fields of :class:`TextIngestOptions` as keyword arguments."""

    tokenizer: Tokenizer | None
    strip_mail: bool | None
    phrases: bool | None
    phrase_min_count: int | None
    phrase_threshold: float | None


def option_keywords(options_class: type[IngestOptions]) -> Callable[[_Function], _Function]:
    """Show the fields of ``options_class`` in the signature of a function that
    takes them as ``**keywords``.

    The decorated function is returned itself, with ``__signature__`` listing
    each field as a keyword-only argument with its default in place of
    ``**keywords``, so that ``help()``, ``inspect.signature`` and the error for
    an unknown keyword show the arguments it takes.
    """

    def decorate(function: _Function) -> _Function:
        signature = inspect.signature(function)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        shared = [
            inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default,
                              annotation=f.type)
            for f in fields(options_class)
        ]  # fmt: skip
        function.__signature__ = signature.replace(parameters=own + shared)  # type: ignore[attr-defined]
        return function

    return decorate


def _unexpected_keyword(caller: Callable[..., Any], key: str) -> TypeError:
    """Python's TypeError for an unknown keyword, with the likely one and the
    valid ones."""
    valid = [
        p.name
        for p in inspect.signature(caller).parameters.values()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return TypeError(
        f"{caller.__name__}() got an unexpected keyword argument {key!r}{hint}; it takes "
        f"{', '.join(valid)}"
    )
