"""Shared ingestion machinery: vocabulary arguments, the passes, summaries.

Used by the ingestion functions of :mod:`lsdask.io.ingest` (defined in
:mod:`lsdask.io.ingest.text_files`, :mod:`lsdask.io.ingest.table` and
:mod:`lsdask.io.ingest.bow`): the types of the common arguments, the imposed
vocabulary (a list of words, a Corpus or a corpus path), the out-of-vocabulary
bookkeeping of the writing pass, the :class:`IngestSummary` and
``manifest["ingest"]``, and the two drivers, which take the functions' shared
options as one :class:`~lsdask.io.ingest.options.IngestOptions`:
:func:`_ingest_texts` (two passes over raw text: document frequencies, then
encode and write; with ``phrases``, a pass before them counts pairs of words)
and :func:`_ingest_bags` (bags of words, with an extra pass only when the
file's vocabulary is pruned). The cleaning of raw text (mail, phrases) is
recorded in ``manifest["ingest"]["cleaning"]`` and reused by an append, as
the tokenizer is; the files a reader skipped as not text are counted. Opening
the input files, and the errors that name them, are
:mod:`lsdask.io.ingest.inputs`'.
"""

from __future__ import annotations

import logging
import math
import os
import sys
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from functools import partial
from typing import Any

import numpy as np

from lsdask.config import (
    DEFAULT_MAX_DF,
    DEFAULT_MIN_DF,
    DEFAULT_PHRASE_MIN_COUNT,
    DEFAULT_PHRASE_THRESHOLD,
)
from lsdask.errors import DataError
from lsdask.io.corpus.on_store import StoreCorpus
from lsdask.io.corpus.store import Corpus, check_out_dir
from lsdask.io.ingest.mail import clean_mail
from lsdask.io.ingest.options import IngestOptions, PathLike, TextIngestOptions, VocabArg
from lsdask.io.ingest.phrases import PHRASE_DELIMITER, PhraseCounter, join_phrases
from lsdask.io.ingest.words import Tokenizer, VocabularyBuilder, encode, select_vocabulary
from lsdask.io.stores import is_store_url

logger = logging.getLogger(__name__)


#: Document names are kept in the manifest only for corpora of fewer documents than this.
MAX_NAMES_IN_MANIFEST = 100_000

#: ``(name, text)``; the name is the document's own integer id where the
#: source has one (``_TextSource.ids``)
_Doc = tuple[str | int | None, str]
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


def _opened(vocab: VocabArg) -> Sequence[str] | Corpus | None:
    """``vocab=`` with a corpus path opened once (its words and its tokenizer are
    both read from it)."""
    return Corpus.open(vocab) if isinstance(vocab, str | os.PathLike) else vocab


def _manifest_of(corpus: Corpus) -> str:
    """The manifest file of ``corpus``, as the errors about its fields name it."""
    return os.path.join(corpus.path, "manifest.json")


def recorded_tokenizer(corpus: Corpus) -> Tokenizer | None:
    """The tokenizer ``corpus`` was ingested with (its manifest records it), or
    None for a corpus written without one (bag-of-words imports, other tools).

    Raises
    ------
    DataError
        The recorded settings are not ones :meth:`Tokenizer.settings` writes.
    """
    settings = corpus.ingest_info.get("tokenizer")
    if settings is None:
        return None
    return Tokenizer.from_settings(settings, where=f"{_manifest_of(corpus)}: ingest.tokenizer")


def _tokenizer_for(tokenizer: Tokenizer | None, vocab: Sequence[str] | Corpus | None) -> Tokenizer:
    """The tokenizer of an ingest: the one given; else, with a corpus's vocabulary
    imposed, the tokenizer that corpus was ingested with, so that new text at
    retraining time is cut into words as the training text was; else the
    default. A given tokenizer other than the corpus's is kept, with a warning."""
    corpus = vocab if isinstance(vocab, Corpus) else None
    theirs = recorded_tokenizer(corpus) if corpus is not None else None
    if corpus is None or theirs is None:
        return tokenizer if tokenizer is not None else Tokenizer()
    if tokenizer is None:
        logger.info("tokenizing as corpus %s was: %r", corpus.path, theirs)
        return theirs
    if tokenizer != theirs:
        logger.warning(
            "the tokenizer %r is not the one corpus %s was ingested with, %r: the same text "
            "gives other words here than there. Pass no tokenizer to use the corpus's",
            tokenizer, corpus.path, theirs,
        )  # fmt: skip
    return tokenizer


def _shown(value: Any, limit: int = 80) -> str:
    """``repr(value)`` cut to ``limit`` characters, for an error message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _bad_cleaning(corpus: Corpus, name: str, expected: str, found: Any) -> DataError:
    """The error for the field ``ingest.cleaning.<name>`` of ``corpus``'s manifest."""
    key = "ingest.cleaning" + (f".{name}" if name else "")
    return DataError(
        f"{_manifest_of(corpus)}: {key} must be {expected}; found "
        f"{_shown(found)}. The manifest was edited or damaged: re-ingest the corpus (an "
        "append cleans new text as the corpus's text was cleaned, so it needs this record)"
    )


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 1


def _is_score(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def recorded_cleaning(corpus: Corpus) -> dict[str, Any] | None:
    """How the text of ``corpus`` was cleaned besides its tokenizer, as its
    manifest records it under ``ingest.cleaning``, checked.

    Returns
    -------
    dict or None
        ``{"strip_mail": bool, "phrases": None or {"joined": [[a, b], ...],
        "min_count": int, "threshold": float}}`` (``min_count`` and ``threshold``
        where recorded); None where the manifest records no cleaning (bag-of-words
        imports, corpora written by other tools), whose text was not cleaned.

    Raises
    ------
    DataError
        A field is not what :meth:`_Cleaning.record` writes; the message names
        the manifest, the field, what was expected and what was found.
    """
    cleaning = corpus.ingest_info.get("cleaning")
    if cleaning is None:
        return None
    if not isinstance(cleaning, dict):
        raise _bad_cleaning(corpus, "", "an object {strip_mail, phrases}", cleaning)
    strip = cleaning.get("strip_mail", False)
    if not isinstance(strip, bool):
        raise _bad_cleaning(corpus, "strip_mail", "true or false", strip)
    phrases = cleaning.get("phrases")
    if phrases is None:
        return {"strip_mail": strip, "phrases": None}
    if not isinstance(phrases, dict):
        raise _bad_cleaning(corpus, "phrases", "null or an object {joined, ...}", phrases)
    joined = phrases.get("joined")
    if not isinstance(joined, list):
        raise _bad_cleaning(corpus, "phrases.joined", "a list of pairs of words", joined)
    for i, pair in enumerate(joined):
        if not (
            isinstance(pair, list) and len(pair) == 2 and all(isinstance(w, str) for w in pair)
        ):
            raise _bad_cleaning(corpus, f"phrases.joined[{i}]", 'a pair of words ["a", "b"]', pair)
    checked: dict[str, Any] = {"joined": joined}
    for key, ok, expected in (("min_count", _is_count, "an int >= 1"),
                              ("threshold", _is_score, "a finite number >= 0")):  # fmt: skip
        if key in phrases:
            if not ok(phrases[key]):
                raise _bad_cleaning(corpus, f"phrases.{key}", expected, phrases[key])
            checked[key] = phrases[key]
    return {"strip_mail": strip, "phrases": checked}


@dataclass(frozen=True)
class _Cleaning:
    """What an ingest of raw text does besides tokenizing: mail cleaning, and
    phrases to detect (pass 1) or to join as a corpus joined them."""

    strip_mail: bool = False
    detect: PhraseCounter | None = None
    joined: frozenset[tuple[str, str]] | None = None
    phrase_settings: dict[str, Any] = field(default_factory=dict)

    def record(self, joined: frozenset[tuple[str, str]] | None) -> dict[str, Any]:
        """``manifest["ingest"]["cleaning"]``, the pairs joined listed."""
        phrases = None
        if joined is not None:
            phrases = {**self.phrase_settings, "joined": sorted([a, b] for a, b in joined)}
        return {"strip_mail": self.strip_mail, "phrases": phrases}


def _cleaning_for(options: TextIngestOptions, vocab: Sequence[str] | Corpus | None) -> _Cleaning:
    """The cleaning of an ingest: as the options say; with a corpus's vocabulary
    imposed, what the options leave unsaid as that corpus was cleaned (a value
    given that differs is kept, with a warning)."""
    corpus = vocab if isinstance(vocab, Corpus) else None
    theirs = recorded_cleaning(corpus) if corpus is not None else None
    text_corpus = corpus is not None and "tokenizer" in corpus.ingest_info
    where = corpus.path if corpus is not None else "?"
    their_strip = theirs is not None and theirs["strip_mail"]
    strip = options.strip_mail
    if strip is None:
        strip = their_strip if text_corpus else False
    elif text_corpus and strip != their_strip:
        logger.warning(
            "strip_mail=%s, but corpus %s was ingested with strip_mail=%s: the same posts "
            "give other words here than there. Leave it out to clean as the corpus was",
            strip, where, their_strip,
        )  # fmt: skip
    if vocab is None:
        if not options.phrases:
            return _Cleaning(strip_mail=strip)
        min_count = options.phrase_min_count or DEFAULT_PHRASE_MIN_COUNT
        threshold = options.phrase_threshold
        counter = PhraseCounter(
            min_count, DEFAULT_PHRASE_THRESHOLD if threshold is None else float(threshold)
        )
        settings = {"min_count": counter.min_count, "threshold": counter.threshold}
        return _Cleaning(strip_mail=strip, detect=counter, phrase_settings=settings)
    recorded = None if theirs is None else theirs["phrases"]
    if recorded is None:
        return _Cleaning(strip_mail=strip)
    if options.phrases is False:
        logger.warning(
            "phrases=False, but corpus %s joined %d phrases: they stay apart here, and their "
            "words count as out of its vocabulary. Leave it out to join them as the corpus did",
            where, len(recorded["joined"]),
        )  # fmt: skip
        return _Cleaning(strip_mail=strip)
    joined = frozenset((a, b) for a, b in recorded["joined"])
    settings = {k: v for k, v in recorded.items() if k != "joined"}
    return _Cleaning(strip_mail=strip, joined=joined, phrase_settings=settings)


def _warn_unreachable_words(
    words: Sequence[str], tokenizer: Tokenizer, where: str, phrases: Collection[str] = ()
) -> None:
    """Warn of imposed words the tokenizer never yields (a word is a token only if
    tokenizing it gives back the word itself, or it is one of the joined
    ``phrases``): their ids will hold no tokens, whatever the text. Each reason
    is named: capitals while it lowercases, stopwords, or no match of its token
    pattern."""
    upper: list[str] = []
    stop: list[str] = []
    other: list[str] = []
    for w in words:
        if w in phrases or tokenizer.tokens(w) == [w]:
            continue
        if tokenizer.lowercase and w != w.lower():
            upper.append(w)
        elif w.lower() in tokenizer.stopwords:
            stop.append(w)
        else:
            other.append(w)
    for found, why in ((upper, "hold capitals, but tokens are lowercased"),
                       (stop, "are stopwords, which the tokenizer drops"),
                       (other, "are not whole tokens of its pattern")):  # fmt: skip
        if found:
            logger.warning(
                "the imposed vocabulary (%s): %d of its %d words %s, so they never "
                "receive a token (e.g. %s); lowercase the vocabulary or change the tokenizer",
                where, len(found), len(words), why, ", ".join(repr(w) for w in found[:5]),
            )  # fmt: skip


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


@dataclass(frozen=True, eq=False)
class IngestSummary(Mapping[str, Any]):
    """What an ingestion function wrote.

    Read as attributes (``summary.n_docs``) or as a read-only mapping
    (``summary["n_docs"]``, ``dict(summary)`` for JSON), which compares equal
    to a dict of the same items.

    Attributes
    ----------
    path : str
        The corpus directory.
    n_docs, n_tokens, vocab_size, n_batches : int
        The documents, tokens (a float where counts are fractional), words
        and row groups of the corpus.
    n_empty_docs : int
        Documents left without words; they are written all the same.
    oov_tokens, oov_types : int
        The tokens dropped because their word is outside the vocabulary
        (imposed, or pruned by ``min_df``, ``max_df`` and ``max_vocab``), and
        how many distinct words they are.
    vocab_imposed : bool
        Whether the vocabulary was imposed (``vocab=``).
    n_skipped_files : int
        Files of a folder or archive skipped because their bytes are not text
        (images, archives, executables); never ingested, whatever the encoding.
    """

    path: str
    n_docs: int
    n_tokens: int | float
    vocab_size: int
    n_batches: int
    n_empty_docs: int
    oov_tokens: int | float
    oov_types: int
    vocab_imposed: bool
    n_skipped_files: int = field(default=0, kw_only=True)

    def __getitem__(self, key: str) -> Any:
        if key not in self._names():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def _names(self) -> list[str]:
        return [f.name for f in fields(self)]


def _check_out(out_dir: PathLike, overwrite: bool) -> None:
    """Refuse an output that exists (unless ``overwrite``) before the work starts."""
    if is_store_url(out_dir):
        StoreCorpus.check_target(str(out_dir), overwrite)
    else:
        check_out_dir(out_dir, overwrite)


def _write_corpus(
    out_dir: PathLike,
    documents: Iterator[tuple[int, np.ndarray, np.ndarray]],
    words: list[str],
    ingest_info: Callable[[], dict[str, Any]],
    options: IngestOptions,
) -> Corpus:
    """:meth:`Corpus.write` with the output options of an ingest (a store URL:
    :meth:`~lsdask.io.corpus.on_store.StoreCorpus.write`)."""
    write: Callable[..., Any] = StoreCorpus.write if is_store_url(out_dir) else Corpus.write
    return write(  # type: ignore[no-any-return]
        out_dir,
        documents,
        words,
        docs_per_row_group=options.docs_per_row_group,
        docs_per_file=options.docs_per_file,
        ingest_info=ingest_info,
        overwrite=options.overwrite,
    )


def _report(
    corpus: Corpus, counts: _Counts, vocab_from: str, skipped: Sequence[tuple[str, str]] = ()
) -> IngestSummary:
    """The summary of a written corpus; what was dropped or skipped is logged."""
    if skipped:
        logger.warning(
            "skipped %d files that are not text, whatever the encoding: %s%s. "
            "--exclude GLOB (exclude=) leaves such files out without this warning",
            len(skipped),
            ", ".join(f"{name} ({kind})" for name, kind in skipped[:5]),
            ", ..." if len(skipped) > 5 else "",
        )
    summary = IngestSummary(
        path=corpus.path,
        n_docs=corpus.n_docs,
        n_tokens=_number(corpus.n_tokens),
        vocab_size=corpus.vocab_size,
        n_batches=len(corpus.batches),
        n_empty_docs=counts.n_empty,
        oov_tokens=_number(counts.oov_tokens),
        oov_types=counts.oov_types,
        vocab_imposed=vocab_from.startswith("imposed"),
        n_skipped_files=len(skipped),
    )
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
    source: dict[str, Any],
    vocabulary: dict[str, Any],
    counts: _Counts,
    extra: dict[str, Any],
    skipped: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    info = dict(source)
    info.update(extra)
    if skipped:
        info["skipped_files"] = {
            "n_files": len(skipped),
            "first": [{"name": name, "kind": kind} for name, kind in skipped[:20]],
        }
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
    ids: bool = False  # the names are the documents' own integer ids: doc_id
    #: the files of the latest pass skipped as not text: (name, what they are)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def document_id(value: Any, where: str, name: str) -> int:
    """A document's own id as the corpus's int64 ``doc_id``, or a DataError
    naming ``where`` (file and line) and the id field ``name``."""
    if value is None or (isinstance(value, float) and np.isnan(value)) or value == "":
        raise DataError(
            f"{where}: the id {name!r} is missing; every document needs one, or leave the id "
            "option out to number the documents 0, 1, 2, ..."
        )
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise DataError(
            f"{where}: id {name!r} is {value!r}; document ids must be integers (the "
            "corpus's doc_id column is int64). Leave the id option out to number the "
            "documents 0, 1, 2, ..."
        )
    if not -(2**63) <= int(value) < 2**63:
        raise DataError(f"{where}: id {name!r} is {value}, outside the int64 range")
    return int(value)


def _check_distinct(ids: array, where: str) -> None:
    all_ids = np.frombuffer(ids, dtype=np.int64)
    values, counts = np.unique(all_ids, return_counts=True)
    if values.size < len(ids):
        first = int(values[np.argmax(counts > 1)])
        at = np.flatnonzero(all_ids == first)
        raise DataError(
            f"{where}: document id {first} appears {at.size} times (documents {at[0]} and "
            f"{at[1]}, counting from 0 in input order); the ids must be distinct"
        )


def _text_words(
    tokenizer: Tokenizer, cleaning: _Cleaning
) -> Callable[[str, frozenset[tuple[str, str]] | None], list[list[str]]]:
    """The function from a document's text to its runs of words (mail cleaned
    first if asked, the ``joined`` phrases joined)."""

    def runs(text: str, joined: frozenset[tuple[str, str]] | None) -> list[list[str]]:
        if cleaning.strip_mail:
            text = clean_mail(text)
        if joined:
            return [join_phrases(run, joined) for run in tokenizer.runs(text)]
        if cleaning.detect is not None:
            return tokenizer.runs(text)
        return [tokenizer.tokens(text)]

    return runs


def _detect_phrases(
    source: _TextSource,
    words_of: Callable[[str, frozenset[tuple[str, str]] | None], list[list[str]]],
    counter: PhraseCounter,
    progress: bool | None,
) -> frozenset[tuple[str, str]]:
    """Pass 1 of 3 (``phrases=True``): count the words and pairs of words; the
    pairs that score above the threshold."""
    for _, text in _progress(source.docs(), progress, "pass 1/3: counting pairs of words"):
        counter.add(words_of(text, None))
    joined = frozenset(counter.phrases())
    logger.info(
        "phrases: %d pairs of words score above %g (of %d counted, %d dropped to bound the "
        "memory); they are joined",
        len(joined), counter.threshold, len(counter.pairs), counter.n_pruned,
    )  # fmt: skip
    return joined


def _flat(runs: list[list[str]]) -> list[str]:
    return runs[0] if len(runs) == 1 else [w for run in runs for w in run]


def _ingest_texts(
    source: _TextSource, out_dir: PathLike, options: TextIngestOptions
) -> IngestSummary:
    """Two passes over raw text: document frequencies, then encode and write;
    with ``phrases``, a first pass counts the pairs of words to join."""
    _check_out(out_dir, options.overwrite)
    vocab = _opened(options.vocab)
    tokenizer = _tokenizer_for(options.tokenizer, vocab)
    cleaning = _cleaning_for(options, vocab)
    words_of = _text_words(tokenizer, cleaning)
    joined = cleaning.joined
    progress = options.progress
    total: int | None = None
    own_ids = array("q")  # the documents' own ids (source.ids), checked distinct
    passes = 2
    if cleaning.detect is not None:  # phrases first, then the vocabulary over them
        joined = _detect_phrases(source, words_of, cleaning.detect, progress)
        passes = 3
    if vocab is None:
        builder = VocabularyBuilder(
            DEFAULT_MIN_DF if options.min_df is None else options.min_df,
            DEFAULT_MAX_DF if options.max_df is None else options.max_df,
            options.max_vocab,
        )
        desc = f"pass {passes - 1}/{passes}: counting words"
        for name, text in _progress(source.docs(), progress, desc):
            builder.add(_flat(words_of(text, joined)))
            if source.ids:
                own_ids.append(name)
        if builder.n_docs == 0:
            raise DataError(f"{source.where}: no documents found{source.hint()}")
        if source.ids:  # before pass 2 writes anything
            _check_distinct(own_ids, source.where)
        logger.info(
            "pass %d/%d over %s: %d documents, %d word types",
            passes - 1,
            passes,
            source.where,
            builder.n_docs,
            builder.n_types,
        )
        words = builder.build()
        vocabulary = {"imposed": False, **builder.summary()}
        total, vocab_from = builder.n_docs, "vocabulary built from the data"
    else:
        words, vocab_from = _imposed_vocab(vocab)
        phrase_words = {PHRASE_DELIMITER.join(p) for p in joined or ()}
        _warn_unreachable_words(words, tokenizer, vocab_from, phrase_words)
        vocabulary = {"imposed": True, "from": vocab_from, "vocab_size": len(words)}
        vocab_from = f"imposed vocabulary ({vocab_from})"
    word_to_id = {w: i for i, w in enumerate(words)}
    counts = _Counts()
    check_ids = source.ids and vocab is not None  # one pass: checked at its end

    def documents() -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        desc = f"pass {passes}/{passes}: writing" if vocab is None else "writing"
        for i, (name, text) in enumerate(_progress(source.docs(), progress, desc, total)):
            tokens = _flat(words_of(text, joined))
            ids, cnt, n_oov = encode(tokens, word_to_id, oov_types=counts.oov_words)
            if check_ids:
                own_ids.append(name)
            counts.add(cnt, n_oov, None if source.ids else name)
            yield (name if source.ids else i), ids, cnt
        if counts.n_docs == 0:
            raise DataError(f"{source.where}: no documents found{source.hint()}")
        if check_ids:
            _check_distinct(own_ids, source.where)

    def extra() -> dict[str, Any]:
        return {"tokenizer": tokenizer.settings(), "cleaning": cleaning.record(joined)}

    def info() -> dict[str, Any]:
        return _ingest_info(source.info, vocabulary, counts, extra(), source.skipped)

    corpus = _write_corpus(out_dir, documents(), words, info, options)
    return _report(corpus, counts, vocab_from, source.skipped)


# --------------------------------------------------------------------------- bags of words


@dataclass
class _BagSource:
    """A re-iterable stream of bags ``(file word ids int64, counts float64)``."""

    docs: Callable[[], Iterator[_Bag]]
    words: list[str]
    info: dict[str, Any]
    where: str


def _bag_vocabulary(
    source: _BagSource, options: IngestOptions
) -> tuple[list[str], np.ndarray | None, dict[str, Any], str]:
    """The corpus words and the map from file word ids to them (None: identity)."""
    n_file = len(source.words)
    min_df, max_df, max_vocab = options.min_df, options.max_df, options.max_vocab
    if options.vocab is not None:
        words, vocab_from = _imposed_vocab(options.vocab)
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
    for ids, _ in _progress(source.docs(), options.progress, "pass 1/2: counting words"):
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


def _ingest_bags(source: _BagSource, out_dir: PathLike, options: IngestOptions) -> IngestSummary:
    """Bags of words over the file's vocabulary, imposed or pruned, written."""
    _check_out(out_dir, options.overwrite)
    words, id_map, vocabulary, vocab_from = _bag_vocabulary(source, options)
    counts = _Counts(oov_mask=np.zeros(len(source.words), dtype=bool), names=None)

    def documents() -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        for i, (ids, cnt) in enumerate(_progress(source.docs(), options.progress, "writing")):
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

    info = partial(_ingest_info, source.info, vocabulary, counts, {})
    corpus = _write_corpus(out_dir, documents(), words, info, options)
    return _report(corpus, counts, vocab_from)
