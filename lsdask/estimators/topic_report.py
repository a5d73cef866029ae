"""The topic report of a fitted LDA or HDP: its data, and the HTML page of it.

:func:`report_data` computes everything the page shows, bounded whatever the
corpus's size: per topic its share of the training tokens, its map position
(:mod:`lsdask.estimators.topic_map`), its candidate terms for the relevance
slider (the few hundred at most that are among its top ``n_terms`` at some
lambda), UMass and NPMI coherence of its top 10 words and its ``n_docs`` top
documents; the fit's ELBO, heldout and K traces. One pass over the corpus gives
the coherence counts and each word's corpus frequency; a second ranks the
documents (:meth:`lsdask.LDA.rank_documents`). Without a corpus the word
frequencies are the model's training token counts (``components_ - eta_``
summed over topics) and the page has no documents or coherence.

:func:`write_model_report` renders the data with
:func:`lsdask.estimators.report_page.render_page` and writes one HTML file.
This lives with the estimators (not in :mod:`lsdask.jobs`) so that
:meth:`lsdask.LDA.report` can write it; ``lsdask report`` adds a saved model's
heldout trace (:mod:`lsdask.jobs.report`).
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.engine import make_executor
from lsdask.estimators.report_page import render_page
from lsdask.estimators.topic_map import classical_mds, js_distances, relevance_candidates
from lsdask.evaluate import CoDocumentCounts, top_word_ids
from lsdask.io.corpus.source import corpus_source
from lsdask.io.corpus.store import Corpus
from lsdask.io.corpus.vocabulary import vocabulary_difference
from lsdask.models.lda import as_csr_batch
from lsdask.persist.files import write_text_atomic
from lsdask.validation import check_int

logger = logging.getLogger(__name__)

__all__ = ["COHERENCE_WORDS", "NPMI_SCALE", "UMASS_SCALE", "report_data", "write_model_report"]

#: top words per topic that coherence is computed over
COHERENCE_WORDS = 10
UMASS_SCALE = (
    "UMass (Mimno et al. 2011): the sum over the 45 pairs of a topic's top 10 words of "
    "log((D(wi, wj) + 1) / D(wj)), wj the more probable word, D counting the corpus's "
    "documents that hold the words. At most about 0 (words always together); more "
    "negative is less coherent. Comparable between topics of one corpus only."
)
NPMI_SCALE = (
    "NPMI (Bouma 2009): for each pair of top words, log(P(wi, wj) / (P(wi) P(wj))) / "
    "-log P(wi, wj), P the fraction of documents holding the words; the mean over the 45 "
    "pairs. From -1 (never in one document) through 0 (independent) to 1 (always together)."
)


def _shares(model: Any) -> tuple[np.ndarray, np.ndarray]:
    """Each topic's training tokens (``components_ - eta_``) and share of them."""
    tokens = np.maximum(model.components_ - model.eta_, 0.0).sum(axis=1)
    total = tokens.sum()
    return tokens, tokens / total if total > 0 else np.full(tokens.size, 1.0 / tokens.size)


def _open(corpus: Any, model: Any) -> Corpus:
    """The Parquet corpus, checked to be over the model's vocabulary."""
    if not isinstance(corpus, Corpus):
        if not isinstance(corpus, str | os.PathLike):
            raise ValueError(
                f"corpus must be a Parquet corpus (a path or Corpus); got {type(corpus).__name__}"
            )
        corpus = Corpus.open(corpus, rescan=True)
    vocab = model.vocabulary_
    if vocab is not None and (diff := vocabulary_difference(vocab, corpus.vocab)) is not None:
        raise ValueError(
            f"corpus {corpus.path} is over another vocabulary than the model: {diff}; "
            "report on the model's training corpus"
        )
    if corpus.vocab_size != model.components_.shape[1]:
        raise ValueError(
            f"corpus {corpus.path} has {corpus.vocab_size} words; the model "
            f"{model.components_.shape[1]}"
        )
    return corpus


def corpus_counts(corpus: Corpus, top: np.ndarray) -> tuple[np.ndarray, CoDocumentCounts]:
    """One pass over ``corpus``: each word's count, and the co-document counts of
    the topics' ``top`` words (UMass and NPMI)."""
    source, _ = corpus_source(corpus)
    words = np.zeros(corpus.vocab_size)
    counts = CoDocumentCounts(top)
    for batch in source.batches:
        X = as_csr_batch(batch.load())
        words[: X.shape[1]] += np.asarray(X.sum(axis=0)).ravel()
        counts.add(X)
    return words, counts


def _trace(name: str, x_label: str, y_label: str, x: Any, y: Any) -> dict[str, Any] | None:
    """A trace for the page: finite points only; None without two of them."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n = min(x.size, y.size)
    ok = np.isfinite(x[:n]) & np.isfinite(y[:n])
    if ok.sum() < 1:
        return None
    return {"name": name, "x_label": x_label, "y_label": y_label,
            "x": x[:n][ok].tolist(), "y": y[:n][ok].tolist()}  # fmt: skip


def fit_traces(model: Any, heldout: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The fit's ELBO per token (per update), heldout score and an HDP's K (per lap).
    ``heldout``: a saved model's ``heldout_trace.json`` (``laps``, ``scores``);
    else early stopping's validation trace, where the model kept one."""
    elbo = np.asarray(getattr(model, "elbo_trace_", []), dtype=np.float64)
    laps = np.asarray(getattr(model, "lap_trace_", np.arange(1, elbo.size + 1)), dtype=float)
    sizes = np.asarray(getattr(model, "size_trace_", []), dtype=np.float64)
    per_token = sizes.size == elbo.size and bool(np.all(np.isfinite(sizes) & (sizes > 0)))
    traces = [
        _trace("ELBO", "lap", "ELBO (nats per token)" if per_token else "ELBO (nats)",
               laps, elbo / sizes if per_token else elbo),
    ]  # fmt: skip
    if heldout is not None:
        traces.append(_trace("heldout", "lap", "heldout log-likelihood (nats per token)",
                             heldout.get("laps", []), heldout.get("scores", [])))  # fmt: skip
    elif getattr(model, "validation_trace_", None) is not None:
        score = np.asarray(model.validation_trace_, dtype=np.float64)
        traces.append(_trace("validation", "lap", "validation log-likelihood (nats per token)",
                             np.arange(score.size), score))  # fmt: skip
    k_trace = getattr(model, "n_components_trace_", None)
    if k_trace is not None:
        k_trace = np.asarray(k_trace, dtype=np.float64)
        traces.append(_trace("K", "lap", "topics K", np.arange(1, k_trace.size + 1), k_trace))
    return [t for t in traces if t is not None]


def _terms(model: Any, word_counts: np.ndarray, n_terms: int) -> dict[str, Any]:
    """Each topic's relevance candidates, and the table of the terms they use."""
    phi = np.asarray(model.topic_word_, dtype=np.float64)
    with np.errstate(divide="ignore"):
        log_p = np.log(word_counts / word_counts.sum()) if word_counts.sum() > 0 else None
    if log_p is None:
        log_p = np.full(phi.shape[1], -np.inf)
    log_phi = np.log(phi)
    candidates = relevance_candidates(log_phi, log_p, n_terms)
    used = np.unique(np.concatenate([c for c in candidates] + [np.zeros(0, np.int64)]))
    index = {int(w): i for i, w in enumerate(used)}
    vocab = model.vocabulary_
    return {
        "terms": {
            "word": [vocab[w] if vocab is not None else str(w) for w in used.tolist()],
            "count": word_counts[used].tolist(),
            "logp": log_p[used].tolist(),
        },
        "cand": [[index[w] for w in c.tolist()] for c in candidates],
        "logphi": [log_phi[k, c].tolist() for k, c in enumerate(candidates)],
    }


def _documents(
    model: Any, corpus: Corpus, n_docs: int, text_words: int, executor: Any, texts: Any
) -> list:
    """Each topic's top documents: ``[doc_id, name, share, tokens, text]`` lists, the
    text read from ``texts`` (None: no text)."""
    K = int(model.model_.n_components)
    topics = tuple(range(K))
    found = model.rank_documents(corpus, topics, n_docs, text_words, executor, texts)
    return [
        [[h.doc_id, h.name, _round([h.share])[0], h.tokens, h.text] for h in found[k]]
        for k in range(K)
    ]


def _round(values: Any, digits: int = 6) -> list[float]:
    """Floats to ``digits`` significant digits, for positions and shares (not for
    the relevance inputs, which the page must rank exactly as numpy)."""
    return [float(f"{v:.{digits}g}") for v in np.asarray(values, dtype=np.float64).tolist()]


def _corpus_info(docs: Corpus) -> dict[str, Any]:
    """The corpus as the page names it."""
    return {"path": str(docs.path), "n_docs": docs.n_docs, "n_tokens": float(docs.n_tokens)}


def _topics(model: Any) -> dict[str, Any]:
    """Per topic: map position (MDS of Jensen-Shannon distances), share of the
    training tokens, tokens, an HDP's weight; coherence is added with a corpus."""
    K = int(model.model_.n_components)
    tokens, share = _shares(model)
    start = time.perf_counter()
    points = classical_mds(js_distances(model.topic_word_)) if K > 1 else np.zeros((K, 2))
    logger.info("map of %d topics in %.1f s", K, time.perf_counter() - start)
    weights = getattr(model, "topic_weights_", None)
    return {
        "x": _round(points[:, 0]),
        "y": _round(points[:, 1]),
        "share": _round(share),
        "tokens": _round(tokens),
        "weight": None if weights is None else _round(weights),
        "umass": None,
        "npmi": None,
    }


def report_data(
    model: Any,
    corpus: Any = None,
    *,
    n_terms: int = 30,
    n_docs: int = 10,
    text_words: int = 30,
    executor: Any = None,
    heldout: dict[str, Any] | None = None,
    title: str | None = None,
    texts: Any = None,
) -> dict[str, Any]:
    """Everything the page shows, as plain lists (see the module's docstring).

    ``executor`` ranks the documents (default: in this process); ``heldout`` a
    saved model's heldout trace (:func:`fit_traces`); ``texts`` the folder or tar
    archive the corpus was ingested from, where the documents' first
    ``text_words`` words are read (None: no text; never a folder the corpus names).
    """
    n_terms = check_int("n_terms", n_terms, 1)
    n_docs = check_int("n_docs", n_docs, 1)
    start = time.perf_counter()
    docs = None if corpus is None else _open(corpus, model)
    data = {
        "title": title or f"{type(model).__name__} topics",
        "model": type(model).__name__,
        "K": int(model.model_.n_components),
        "V": int(model.components_.shape[1]),
        "n_terms": n_terms,
        "corpus": None if docs is None else _corpus_info(docs),
        "freq_source": "corpus" if docs is not None else "model",
        "scales": {"umass": UMASS_SCALE, "npmi": NPMI_SCALE},
        "topics": _topics(model),
        "docs": None,
        "traces": fit_traces(model, heldout),
    }
    if docs is not None:
        top = top_word_ids(model.topic_word_, min(COHERENCE_WORDS, data["V"]))
        word_counts, counts = corpus_counts(docs, top)
        data["topics"].update(umass=counts.umass().tolist(), npmi=counts.npmi().tolist())
        logger.info("word and coherence counts in %.1f s", time.perf_counter() - start)
        where = executor if executor is not None else make_executor("sync")
        data["docs"] = _documents(model, docs, n_docs, text_words, where, texts)
        logger.info("top documents in %.1f s", time.perf_counter() - start)
    else:  # the training token counts: components_ - eta_, summed over topics
        word_counts = np.maximum(model.components_ - model.eta_, 0.0).sum(axis=0)
    data.update(_terms(model, word_counts, n_terms))
    logger.info("relevance candidates in %.1f s", time.perf_counter() - start)
    K = data["K"]
    logger.info("report data of %d topics in %.1f s", K, time.perf_counter() - start)
    return data


def write_model_report(
    model: Any,
    path: str | os.PathLike[str],
    *,
    corpus: Any = None,
    n_terms: int = 30,
    n_docs: int = 10,
    overwrite: bool = False,
    **options: Any,
) -> str:
    """Write :func:`report_data`'s page of ``model`` to the HTML file ``path``
    (atomically; an existing file only with ``overwrite``); returns the path.
    ``options`` go to :func:`report_data` (``executor``, ``heldout``, ``title``,
    ``texts``, ``text_words``)."""
    out = Path(os.path.abspath(path))
    if not out.parent.is_dir():
        raise FileNotFoundError(
            f"report path {path}: the folder {out.parent} does not exist; create it first"
        )
    if out.is_dir():
        raise ValueError(f"report path {path} is a folder; name an .html file")
    if out.exists() and not overwrite:
        raise FileExistsError(f"report path {path} exists; pass overwrite=True (--overwrite)")
    data = report_data(model, corpus, n_terms=n_terms, n_docs=n_docs, **options)
    page = render_page(data)
    write_text_atomic(out.parent, out, page)
    logger.info("wrote %s (%.1f MB)", out, len(page.encode("utf-8")) / 1e6)
    return str(out)
