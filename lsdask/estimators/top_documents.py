"""From a topic back to the documents most about it.

A document d is about topic k as much as its posterior mean share
``E[pi_dk] = (N_dk + alpha_k) / (N_d + sum_j alpha_j)`` says (for the HDP
``alpha_k = alpha E[beta_k]``, and the sum takes in the mass beyond its K),
with ``N_dk`` the tokens the L-sparse local step gives the topic under the
fitted topics (as :meth:`lsdask.LDA.transform`, before its renormalization
over a document's top L). The prior's share in it makes a long document's
share more certain than a short one's: a three-word document wholly on topic
k ranks below a long one mostly on it. Only documents that give the topic
tokens are ranked.

One pass over the corpus: each row group is a task (:class:`TopDocumentsTask`,
on a Dask cluster where the executor is one) that returns, for every topic
asked for, its ``n`` best documents of that batch; the driver keeps each
topic's ``n`` best of all (:func:`merge_top`), so memory is bounded by topics
x ``n`` whatever the corpus's size. Ties go to the smaller ``doc_id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from lsdask.io.corpus.names import DocumentNames
from lsdask.io.source_text import first_words
from lsdask.learn.base import in_waves

__all__ = [
    "DocumentHit",
    "TopDocumentsTask",
    "check_topics",
    "merge_top",
    "rank_documents",
]


@dataclass(frozen=True)
class DocumentHit:
    """One of a topic's top documents: its ``doc_id``, ``name`` (None where the
    corpus records none), ``share`` ``E[pi_dk]``, ``tokens`` (its length in the
    corpus) and the first words of its ``text`` (None unless the folder of
    the texts is named and holds the document's file)."""

    doc_id: int
    name: str | None
    share: float
    tokens: float
    text: str | None = None


@dataclass(frozen=True)
class TopDocumentsTask:
    """The ``n`` documents of one batch most about each of ``topics``: a pure
    function of (batch, posterior), run as a Dask task like the transform's.

    Returns ``(doc_ids, shares, tokens)``, each ``(len(topics), n)``; a slot no
    document fills has share ``-inf``.
    """

    model: Any
    L: int | None
    topics: tuple[int, ...]
    n: int

    def __call__(self, batch: Any, posterior: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows = batch.load()
        X = rows.to_csr(self.model.vocab_size)
        return self.best(np.asarray(rows.doc_ids, dtype=np.int64), X, posterior)

    def best(
        self, doc_ids: np.ndarray, X: sp.csr_matrix, posterior: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The task on the rows ``X`` of documents ``doc_ids``."""
        model, topics = self.model, np.asarray(self.topics, dtype=np.int64)
        T = len(topics)
        if X.shape[0] == 0:
            return (np.zeros((T, self.n), dtype=np.int64), np.full((T, self.n), -np.inf),
                    np.zeros((T, self.n)))  # fmt: skip
        _, doc_topic, _ = model.doc_topic_step(X, posterior, self.L)
        prior = np.broadcast_to(model.doc_prior(posterior), doc_topic.shape)
        rest = model.leftover_prior(posterior)  # the HDP's prior mass beyond K
        total = prior.sum(axis=1) + (0.0 if rest is None else float(rest))
        length = np.asarray(X.sum(axis=1), dtype=np.float64).ravel()
        share = (doc_topic + prior) / (length + total)[:, None]
        share = np.where(doc_topic > model.options.eps, share, -np.inf)[:, topics]
        shape = (T, len(doc_ids))
        return merge_top(
            np.broadcast_to(doc_ids, shape), share.T, np.broadcast_to(length, shape), self.n
        )


def merge_top(
    ids: np.ndarray, shares: np.ndarray, tokens: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row's ``n`` best columns, by share (largest first), then ``doc_id``
    (smallest first); rows shorter than ``n`` are padded with share ``-inf``."""
    T, m = shares.shape
    keep = np.lexsort((ids, -shares), axis=-1)[:, :n] if m else np.zeros((T, 0), dtype=np.int64)
    out_ids = np.zeros((T, n), dtype=np.int64)
    out_shares = np.full((T, n), -np.inf)
    out_tokens = np.zeros((T, n))
    k = keep.shape[1]
    out_ids[:, :k] = np.take_along_axis(ids, keep, axis=1)
    out_shares[:, :k] = np.take_along_axis(shares, keep, axis=1)
    out_tokens[:, :k] = np.take_along_axis(tokens, keep, axis=1)
    return out_ids, out_shares, out_tokens


def check_topics(topics: Any, K: int) -> tuple[int, ...]:
    """``topics`` (an id, ids, or None for all) as distinct topic ids in ``0 .. K-1``."""
    if topics is None:
        return tuple(range(K))
    items = [topics] if isinstance(topics, int | np.integer) else list(topics)
    if not items:
        raise ValueError("topics is empty; name at least one topic, or pass None for all")
    out = []
    for t in items:
        if isinstance(t, bool) or not isinstance(t, int | np.integer) or not 0 <= t < K:
            raise ValueError(f"topic {t!r} is not a topic of this model: choose from 0 to {K - 1}")
        out.append(int(t))
    return tuple(dict.fromkeys(out))


def rank_documents(
    task: TopDocumentsTask,
    corpus: Any,
    posterior: Any,
    executor: Any,
    text_words: int = 0,
    texts: Any = None,
) -> dict[int, list[DocumentHit]]:
    """``task`` over every row group of ``corpus`` (a :class:`Corpus`) on
    ``executor``: each of its topics' documents, best first, named where the
    corpus records names, with their first ``text_words`` words read from
    ``texts``, the folder or archive they were ingested from, where the user
    names it (:func:`lsdask.io.source_text.first_words`)."""
    T, n = len(task.topics), task.n
    ids = np.zeros((T, 0), dtype=np.int64)
    shares, tokens = np.zeros((T, 0)), np.zeros((T, 0))
    for b_ids, b_shares, b_tokens in in_waves(executor, task, corpus.batches, posterior):
        ids, shares, tokens = merge_top(
            np.hstack([ids, b_ids]), np.hstack([shares, b_shares]),
            np.hstack([tokens, b_tokens]), n,
        )  # fmt: skip
    names = DocumentNames.of(corpus)
    hits = {}
    for row, k in enumerate(task.topics):
        filled = np.isfinite(shares[row])
        hits[k] = [
            DocumentHit(int(d), names(int(d)), float(s), float(t))
            for d, s, t in zip(
                ids[row][filled], shares[row][filled], tokens[row][filled], strict=True
            )
        ]
    if text_words and texts is not None:
        named = {h.name for found in hits.values() for h in found if h.name is not None}
        text = first_words(texts, corpus.ingest_info, named, text_words)
        for k, found in hits.items():
            hits[k] = [
                DocumentHit(h.doc_id, h.name, h.share, h.tokens, text.get(h.name or ""))
                for h in found
            ]
    return hits
