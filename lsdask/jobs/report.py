"""The report job: a saved LDA or HDP model's topics as one self-contained HTML page.

``lsdask report`` runs :func:`write_report`: the page of
:mod:`lsdask.estimators.topic_report` (an intertopic distance map, terms by
relevance, top documents, coherence, traces), with the heldout trace a fit
saved in the model folder (:data:`lsdask.jobs.corpus_lda.HELDOUT_TRACE_FILE`)
and the documents ranked on a Dask cluster where the corpus has more than one
row group.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsdask.engine import make_executor
from lsdask.estimators.topic_report import write_model_report
from lsdask.io import guarded
from lsdask.jobs.cluster import dask_client
from lsdask.jobs.corpus_lda import HELDOUT_TRACE_FILE
from lsdask.jobs.inputs import loaded_topic_model, open_corpus
from lsdask.validation import check_int

logger = logging.getLogger(__name__)

__all__ = ["ReportSummary", "format_summary", "saved_heldout", "write_report"]


@dataclass
class ReportSummary:
    """What :func:`write_report` wrote: the page ``path``, its size in ``bytes``,
    the model's ``K`` and the ``seconds`` it took."""

    path: str
    bytes: int
    K: int
    seconds: float


def saved_heldout(model_dir: Any) -> dict[str, Any] | None:
    """The heldout trace ``lsdask fit --heldout`` saved in a model folder: None
    where there is none, and with a warning where it is unreadable, not a regular
    file (a link or FIFO in its place) or not lists of laps and scores."""
    if not isinstance(model_dir, str | os.PathLike):
        return None
    try:
        if not guarded.is_file(model_dir, HELDOUT_TRACE_FILE):
            return None
        record = guarded.read_json(model_dir, HELDOUT_TRACE_FILE)
    except (OSError, ValueError, RecursionError) as exc:  # UnsafePath is a ValueError
        logger.warning("%s in %s is unreadable (%s); the page leaves it out",
                       HELDOUT_TRACE_FILE, model_dir, exc)  # fmt: skip
        return None
    laps, scores = (record.get(n) if isinstance(record, dict) else None for n in ("laps", "scores"))
    if not (_numbers(laps) and _numbers(scores) and len(laps) == len(scores)):
        logger.warning("%s in %s is not a heldout trace; the page leaves it out",
                       HELDOUT_TRACE_FILE, model_dir)  # fmt: skip
        return None
    return {"laps": laps, "scores": scores}


def _numbers(values: Any) -> bool:
    """Whether ``values`` is a list of numbers (not booleans)."""
    return isinstance(values, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in values
    )


def write_report(
    model: Any,
    out: str | os.PathLike[str],
    *,
    corpus: Any = None,
    n_terms: int = 30,
    n_docs: int = 10,
    overwrite: bool = False,
    texts: Any = None,
    client: Any = None,
    n_workers: int | None = None,
) -> ReportSummary:
    """Write the topic report of ``model`` (a model folder or fitted LDA/HDP) to
    the HTML file ``out``.

    Parameters
    ----------
    model : str, os.PathLike, lsdask.LDA or lsdask.HDP
    out : path of the page; an existing file is replaced only with ``overwrite``
    corpus : str, os.PathLike, Corpus or None
        Documents over the model's vocabulary (usually its training corpus): the
        words' frequencies, coherence and each topic's ``n_docs`` top documents;
        None leaves documents and coherence out.
    n_terms : terms shown per topic
    texts : str, os.PathLike or None
        The folder or tar archive of text files the corpus was ingested from: each
        top document's first words are read there (None: none shown).
    client, n_workers : where the documents are ranked
        (:func:`lsdask.jobs.cluster.dask_client`; a one-row-group corpus in this process)

    Returns
    -------
    ReportSummary
    """
    n_terms = check_int("n_terms", n_terms, 1)
    n_docs = check_int("n_docs", n_docs, 1)
    start = time.perf_counter()
    lda = loaded_topic_model(model)
    docs = None if corpus is None else open_corpus(corpus, "corpus")
    if client is None and (docs is None or len(docs.batches) <= 1):
        client = "sync"  # a cluster's start would cost more than one task
    name = Path(model).name if isinstance(model, str | os.PathLike) else type(lda).__name__
    with dask_client(client, n_workers) as where:
        path = write_model_report(
            lda, out, corpus=docs, n_terms=n_terms, n_docs=n_docs, overwrite=overwrite,
            executor=make_executor(where), heldout=saved_heldout(model),
            title=f"{type(lda).__name__} topics of {name}", texts=texts,
        )  # fmt: skip
    summary = ReportSummary(path, os.path.getsize(path), int(lda.model_.n_components),
                            time.perf_counter() - start)  # fmt: skip
    logger.info("report of %d topics: %s, %d bytes", summary.K, path, summary.bytes)
    return summary


def format_summary(summary: ReportSummary) -> str:
    """One line: what was written."""
    return (
        f"wrote {summary.path}: {summary.K} topics, {summary.bytes / 1e6:.2f} MB, "
        f"in {summary.seconds:.1f} s"
    )
