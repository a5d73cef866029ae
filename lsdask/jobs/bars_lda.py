"""The bars job: learn the "bars" topics (Griffiths & Steyvers 2004) and look at them.

The corpus (:func:`lsdask.synthetic.make_bars_corpus`) is drawn in memory, so
the job needs no file: :func:`run_bars_demo` fits a configured
:class:`lsdask.LDA` (:func:`bars_lda`: the demo's) on most documents, scores
the others by heldout document completion, matches the learned topics to the
true bars and draws both in ``topics.png``, and returns a :class:`BarsReport`.
Given an :class:`lsdask.HDP` (:func:`bars_hdp`), started with more topics than
the 10 bars, it also reports how the number of topics fell, lap by lap.
``lsdask demo`` runs it after the patch GMM, on the same Dask client;
:func:`format_bars_report` is its text.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.estimators.hdp import HDP
from lsdask.estimators.lda import LDA
from lsdask.estimators.params import clone
from lsdask.jobs.cluster import on_shared_client
from lsdask.jobs.wording import plural
from lsdask.synthetic import make_bars_corpus, match_topics

logger = logging.getLogger(__name__)

__all__ = [
    "BARS_DOC_TOPIC_PRIOR", "BarsReport", "bars_hdp", "bars_lda", "format_bars_report",
    "run_bars_demo",
]  # fmt: skip

#: Per-topic Dirichlet concentration of the demo's documents, and of the
#: demo's LDA (:func:`bars_lda`). With 50 tokens
#: per document, documents made of one or two bars (0.1) let 20 laps of
#: variational inference find every bar from any seed; with Griffiths &
#: Steyvers' 1.0, documents mix most bars and some runs end in local optima
#: that merge two bars.
BARS_DOC_TOPIC_PRIOR = 0.1


def bars_lda(n_components: int = 10, *, n_laps: int = 20, random_state: Any = 0) -> LDA:
    """The demo's LDA: L=4 and the total concentration of the generating model,
    ``BARS_DOC_TOPIC_PRIOR`` per topic (``client`` and the rest set with
    ``set_params``)."""
    return LDA(
        n_components,
        sparsity=4,
        alpha=BARS_DOC_TOPIC_PRIOR * n_components,
        n_laps=n_laps,
        random_state=random_state,
    )


@dataclass
class BarsReport:
    """What :func:`run_bars_demo` did.

    Attributes
    ----------
    model : LDA
        The fitted estimator (a clone of the one given; an :class:`lsdask.HDP`
        is one); ``K`` (fitted), ``L`` (None: dense) and ``alpha`` its.
    n_docs, n_heldout : int
        Training and heldout documents; ``n_tokens`` the training tokens and
        ``vocab_size`` the words.
    laps, converged, seconds, elbo_final
        Of the fit (``seconds``: wall time of ``fit``).
    heldout_score : float or None
        Heldout document completion, nats per token (None without heldout
        documents).
    l1, match : arrays
        Per true topic: the L1 distance to its matched learned topic (in
        [0, 2]) and that topic; ``mean_l1`` their mean.
    topics_plot : str or None
    kind : str
        ``"LDA"`` or ``"HDP"``.
    start_K, k_trace, k_plot
        An HDP's: the topics it started with, K after every lap and the picture
        of K and the surrogate ELBO by lap (``hdp_k_elbo.png``); None for LDA.
    """

    model: LDA
    n_docs: int
    n_heldout: int
    n_tokens: float
    vocab_size: int
    K: int
    L: int | None
    alpha: float
    laps: int
    converged: bool
    seconds: float
    heldout_score: float | None
    mean_l1: float
    l1: np.ndarray
    match: np.ndarray
    elbo_final: float
    topics_plot: str | None = None
    kind: str = "LDA"
    start_K: int | None = None
    k_trace: np.ndarray | None = None
    k_plot: str | None = None


def run_bars_demo(
    estimator: LDA,
    out_dir: str | os.PathLike[str] | None = None,
    *,
    n_docs: int = 2000,
    side: int = 5,
    doc_length: int = 50,
    heldout_fraction: float = 0.1,
    random_state: int = 0,
) -> BarsReport:
    """Fit ``estimator`` to the bars corpus, score heldout documents, draw ``topics.png``.

    The estimator's parameters say everything about the fit, its ``client``
    and ``n_workers`` where it runs. A clone of it is fitted (the estimator
    given is left as it is); a ``batch_size`` of None becomes, in the clone, a
    quarter of the training documents (4 batches, two per worker of a
    2-worker cluster).

    Parameters
    ----------
    estimator : lsdask.LDA
        The configured estimator (:func:`bars_lda`). The corpus has
        ``2 * side`` true topics (10 for ``side=5``).
    out_dir : str, os.PathLike or None
        Folder for ``topics.png`` (created); None draws nothing.
    n_docs, side, doc_length
        The corpus (:func:`lsdask.synthetic.make_bars_corpus`), drawn with
        ``random_state``; its documents' per-topic concentration is
        :data:`BARS_DOC_TOPIC_PRIOR`, as :func:`bars_lda`'s.
    heldout_fraction : float, default 0.1
        The last ``round(heldout_fraction * n_docs)`` documents are held out
        (documents are exchangeable, so any split is a random one).
    random_state : int, default 0
        Seed of the corpus.

    Returns
    -------
    BarsReport

    Raises
    ------
    ValueError
        For invalid parameters.
    """
    if not 0.0 <= float(heldout_fraction) < 1.0:
        raise ValueError(f"heldout_fraction must be in [0, 1); got {heldout_fraction!r}")
    X, true_topics = make_bars_corpus(n_docs, side, doc_length, BARS_DOC_TOPIC_PRIOR, random_state)
    n_heldout = round(float(heldout_fraction) * X.shape[0])
    n_train = X.shape[0] - n_heldout
    if n_train < 1:
        raise ValueError(f"no training documents left: n_docs={n_docs}, {heldout_fraction=}")
    train, heldout = X[:n_train], X[n_train:]
    model = clone(estimator)
    if model.batch_size is None:
        model.set_params(batch_size=max(1, -(-n_train // 4)))
    L = model.sparsity
    logger.info(
        "bars %s: %d train, %d heldout documents; K=%d, L=%s, %d laps at most",
        type(model).__name__, n_train, n_heldout, model.n_components, L, model.n_laps,
    )  # fmt: skip
    with on_shared_client(model):
        start = time.perf_counter()
        model.fit(train)
        seconds = time.perf_counter() - start
    hdp = isinstance(model, HDP)
    K = int(model.n_components_ if hdp else model.n_components)
    match, l1 = match_topics(true_topics, model.topic_word_)
    report = BarsReport(
        model=model,
        n_docs=n_train,
        n_heldout=n_heldout,
        n_tokens=float(train.sum()),
        vocab_size=int(X.shape[1]),
        K=K,
        L=L,
        alpha=float(model.alpha),
        laps=int(model.n_laps_),
        converged=bool(model.converged_),
        seconds=seconds,
        heldout_score=model.score(heldout) if n_heldout else None,
        mean_l1=float(np.nanmean(l1)),
        l1=l1,
        match=match,
        elbo_final=float(model.elbo_trace_[-1]),
        kind="HDP" if hdp else "LDA",
        start_K=int(model.n_components) if hdp else None,
        k_trace=np.asarray(model.n_components_trace_) if hdp else None,
    )
    logger.info(
        "bars %s: %d laps in %.1f s, heldout %s nats/token, mean L1 %.3f",
        report.kind, report.laps, seconds, report.heldout_score, report.mean_l1,
    )  # fmt: skip
    if out_dir is not None:
        _draw(report, true_topics, Path(out_dir), side)
    return report


def _draw(report: BarsReport, true_topics: np.ndarray, out_dir: Path, side: int) -> None:
    """``topics.png`` (an HDP's: ``hdp_topics.png``) and an HDP's ``hdp_k_elbo.png``."""
    from lsdask.plotting import plot_k_elbo_trace, plot_topic_images

    model, L = report.model, report.L
    prefix = "hdp_" if report.kind == "HDP" else ""
    title = (
        f"bars: true topics vs {report.kind} K={report.K}, L={'dense' if L is None else L} "
        f"(mean L1 {report.mean_l1:.3f})"
    )
    report.topics_plot = str(
        plot_topic_images(
            true_topics, model.topic_word_, out_dir / f"{prefix}topics.png", side, title=title
        )
    )
    if report.k_trace is not None:
        report.k_plot = str(
            plot_k_elbo_trace(
                (np.arange(1, report.k_trace.size + 1), report.k_trace),
                (model.lap_trace_, model.elbo_trace_ / max(report.n_tokens, 1.0)),
                out_dir / "hdp_k_elbo.png",
                title=f"HDP on bars: K from {report.start_K}",
                ylabel="surrogate ELBO per token (nats/token)",
            )
        )


def format_bars_report(report: BarsReport, *, title: str | None = None) -> str:
    """Readable multi-line summary of a :func:`run_bars_demo` report."""
    lines = [title] if title else []
    L = "dense" if report.L is None else report.L
    lines.append(
        f"data: {report.n_docs:,} train documents ({report.n_tokens:,.0f} tokens), "
        f"{report.n_heldout:,} heldout documents, V={report.vocab_size}"
    )
    if report.k_trace is not None:
        trace = " -> ".join(str(int(k)) for k in _changes(report.k_trace))
        lines.append(
            f"model: HDP, L={L}, alpha={report.alpha:g}; topics by lap: {trace} (started at "
            f"{report.start_K}; the corpus has {report.l1.size} true topics)"
        )
    else:
        lines.append(f"model: LDA, K={report.K}, L={L}, alpha={report.alpha:g}")
    lines.append(
        f"fit: {plural(report.laps, 'lap')} "
        f"({'converged' if report.converged else 'not converged'})"
        f" in {report.seconds:.1f} s, final ELBO {report.elbo_final:.1f} "
        f"({report.elbo_final / max(report.n_tokens, 1.0):.4f} per token)"
    )
    score = report.heldout_score
    lines.append(
        "heldout document completion: "
        + ("no heldout documents" if score is None else f"{score:.4f} nats/token")
    )
    lines.append(
        f"learned vs true bars: mean L1 distance {report.mean_l1:.3f} "
        f"(max {float(np.nanmax(report.l1)):.3f}; 0 = identical, 2 = disjoint)"
    )
    pictures = [p for p in (report.topics_plot, report.k_plot) if p]
    if pictures:
        lines.append(f"picture{'s' if len(pictures) > 1 else ''}: {', '.join(pictures)}")
    return "\n".join(lines)


def _changes(trace: np.ndarray) -> list[float]:
    """The values of ``trace`` where it changes (its first and last kept)."""
    values = [float(trace[0])]
    for k in trace[1:]:
        if k != values[-1]:
            values.append(float(k))
    return values


def bars_hdp(max_components: int = 40, *, n_laps: int = 15, random_state: Any = 0) -> HDP:
    """The demo's HDP: started at ``max_components`` topics with delete and merge
    moves, L=4, the document concentration of the generating model
    (``BARS_DOC_TOPIC_PRIOR`` per true topic, 10 topics)."""
    return HDP(
        max_components,
        sparsity=4,
        alpha=BARS_DOC_TOPIC_PRIOR * 10,
        n_laps=n_laps,
        random_state=random_state,
    )
