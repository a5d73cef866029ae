"""The corpora and saved models the corpus jobs are given, opened and checked alike."""

from __future__ import annotations

import os
from typing import Any

from lsdask.io.corpus.on_store import StoreCorpus
from lsdask.io.corpus.store import Corpus
from lsdask.io.corpus.vocabulary import vocabulary_difference
from lsdask.io.stores import is_store_url
from lsdask.persist.lda import load_lda
from lsdask.persist.saved_model import load_model

__all__ = ["check_same_vocab", "loaded_lda", "loaded_topic_model", "open_corpus"]


def open_corpus(corpus: Any, what: str) -> Corpus:
    """A :class:`~lsdask.io.corpus.Corpus` from a Corpus or a path, naming ``what``
    on errors; a path is rescanned, as LDA.fit and score do: part files added or
    removed since it was written are taken in (every command sees the same
    documents). A store URL opens its newest version (a
    :class:`~lsdask.io.corpus.on_store.StoreCorpus`)."""
    if isinstance(corpus, Corpus | StoreCorpus):
        return corpus
    if is_store_url(corpus):
        return StoreCorpus.open(corpus)  # type: ignore[return-value]
    try:
        return Corpus.open(corpus, rescan=True)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{what}: {exc}") from exc


def check_same_vocab(words: list[str] | None, corpus: Corpus, what: str, against: str) -> None:
    """Raise if ``corpus`` is not over the vocabulary ``words`` (None: no check)."""
    if words is None:
        return
    difference = vocabulary_difference(words, corpus.vocab)
    if difference is not None:
        raise ValueError(
            f"{what} {corpus.path} has a different vocabulary than {against}: {difference}; "
            "ingest it with the same vocabulary (`lsdask ingest ... --vocab TRAINING_CORPUS`)"
        )


def loaded_lda(model: Any) -> Any:
    """An LDA from a fitted estimator or a model directory (or store URL)."""
    if is_store_url(model):
        return load_model(model)
    if isinstance(model, str | os.PathLike):
        return load_lda(model)
    return model


def loaded_topic_model(model: Any) -> Any:
    """An LDA or HDP from a fitted estimator or a model directory (read by
    :func:`lsdask.persist.load_model`); a folder that holds no topic model is
    reported as :func:`~lsdask.persist.load_lda` reports it."""
    if not isinstance(model, str | os.PathLike):
        return model
    if is_store_url(model):
        return load_model(model)
    from lsdask.estimators.lda import LDA

    try:
        loaded = load_model(model)
    except FileNotFoundError:
        loaded = None
    return loaded if isinstance(loaded, LDA) else load_lda(model)
