"""The documents job: from topics back to the documents of a corpus most about them.

``lsdask docs`` prints :func:`format_top_documents` of :func:`top_documents`;
the ranking (by ``E[pi_dk]``, one pass over the corpus, bounded memory) is
:mod:`lsdask.estimators.top_documents`'s.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from lsdask.engine import make_executor
from lsdask.estimators.top_documents import DocumentHit, check_topics
from lsdask.io.source_text import recorded_source
from lsdask.jobs.cluster import dask_client
from lsdask.jobs.inputs import loaded_topic_model, open_corpus
from lsdask.validation import check_int

logger = logging.getLogger(__name__)

__all__ = ["TopDocuments", "format_top_documents", "top_documents"]


@dataclass
class TopDocuments:
    """What :func:`top_documents` found: ``by_topic[k]``, topic k's documents,
    best first (fewer than ``n`` where fewer documents use it), over the
    ``n_docs`` documents of ``corpus``, in ``seconds``; ``source`` is the
    folder the corpus says it was ingested from (a hint for ``texts``), or None."""

    corpus: str
    K: int
    n: int
    n_docs: int
    seconds: float
    by_topic: dict[int, list[DocumentHit]] = field(default_factory=dict)
    source: str | None = None


def top_documents(
    model: Any,
    corpus: Any,
    *,
    topics: Any = None,
    n: int = 10,
    text_words: int = 30,
    texts: Any = None,
    client: Any = None,
    n_workers: int | None = None,
) -> TopDocuments:
    """Each topic's ``n`` documents of ``corpus`` most about it
    (:meth:`lsdask.LDA.top_documents` for several topics, from a saved model).

    Parameters
    ----------
    model : str, os.PathLike, lsdask.LDA or lsdask.HDP
        A model directory or fitted model.
    corpus : str, os.PathLike or Corpus
        Documents over the model's vocabulary (usually its training corpus).
    topics : int, sequence of int or None, default None
        The topics to rank documents for (ids as in ``components_``); None: all.
    n : int, default 10
        Documents per topic.
    text_words : int, default 30
        Words of each document's text shown (0: none).
    texts : str, os.PathLike or None, default None
        The folder (or tar archive) of text files the corpus was ingested from,
        where the documents' text is read (:func:`lsdask.io.source_text.first_words`);
        None shows none. Never taken from the corpus's manifest: the user names it.
    client : None, "sync", str or distributed.Client
        Where the batch tasks run (:func:`lsdask.jobs.cluster.dask_client`); the
        default starts a LocalCluster of ``n_workers`` processes when the corpus
        has more than one row group, else runs in this process.
    n_workers : int, optional
        Workers of that LocalCluster (default 2).

    Returns
    -------
    TopDocuments

    Raises
    ------
    FileNotFoundError, ValueError
        For a missing model or corpus, a corpus over another vocabulary, or a
        topic outside ``0 .. K-1``.
    """
    lda = loaded_topic_model(model)
    docs = open_corpus(corpus, "corpus")
    K = int(lda.model_.n_components)
    wanted = check_topics(topics, K)
    n = check_int("n", n, 1)
    text_words = check_int("text_words", text_words, 0)
    start = time.perf_counter()
    if client is None and len(docs.batches) <= 1:
        client = "sync"  # a cluster's start would cost more than one task
    with dask_client(client, n_workers) as where:
        by_topic = lda.rank_documents(docs, wanted, n, text_words, make_executor(where), texts)
    found = TopDocuments(
        docs.path, K, n, docs.n_docs, time.perf_counter() - start, by_topic,
        None if texts is not None else recorded_source(docs.ingest_info),
    )  # fmt: skip
    logger.info(
        "top %d documents of %d topics over %d documents of %s in %.1f s",
        n, len(wanted), docs.n_docs, docs.path, found.seconds,
    )  # fmt: skip
    return found


def format_top_documents(found: TopDocuments) -> str:
    """Each topic's documents, one line each: rank, share, tokens, doc_id, name,
    and the first words of the text where there are some."""
    lines = []
    for k, hits in found.by_topic.items():
        lines.append(f"topic {k}: top {len(hits)} of {found.n_docs:,} documents by E[pi_dk]")
        if not hits:
            lines.append("  (no document gives this topic a token)")
        for rank, h in enumerate(hits, 1):
            name = h.name if h.name is not None else "-"
            lines.append(
                f"  {rank:>3}  {h.share:6.1%}  {h.tokens:>7g} tokens  doc_id {h.doc_id}  {name}"
            )
            if h.text:
                lines.append(f"       {h.text}")
    if found.source is not None:
        lines.append(
            f"(the corpus was ingested from {found.source}: name it with --texts to show "
            "each document's first words)"
        )
    return "\n".join(lines)
