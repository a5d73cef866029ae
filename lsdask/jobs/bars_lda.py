"""The bars LDA job: learn the "bars" topics (Griffiths & Steyvers 2004) and look at them.

The corpus (:func:`lsdask.synthetic.make_bars_corpus`) is drawn in memory, so
the job needs no file: :func:`run_bars_demo` fits :class:`lsdask.LDA` with
the L-sparse local step on most documents, scores the others by heldout
document completion, matches the learned topics to the true bars and draws
both in ``topics.png``. ``lsdask demo`` runs it after the patch GMM, on the
same Dask client; :func:`format_bars_report` is its text.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.jobs.cluster import dask_client
from lsdask.jobs.wording import plural

logger = logging.getLogger(__name__)

__all__ = ["BARS_DOC_TOPIC_PRIOR", "format_bars_report", "run_bars_demo"]

#: Per-topic Dirichlet concentration of the demo's documents. With 50 tokens
#: per document, documents made of one or two bars (0.1) let 20 laps of
#: variational inference find every bar from any seed; with Griffiths &
#: Steyvers' 1.0, documents mix most bars and some runs end in local optima
#: that merge two bars.
BARS_DOC_TOPIC_PRIOR = 0.1


def run_bars_demo(
    out_dir: str | os.PathLike[str] | None,
    *,
    n_components: int = 10,
    sparsity: int | None = 4,
    n_laps: int = 20,
    client: Any = None,
    n_workers: int | None = None,
    n_docs: int = 2000,
    side: int = 5,
    doc_length: int = 50,
    doc_topic_prior: float = BARS_DOC_TOPIC_PRIOR,
    alpha: float | None = None,
    heldout_fraction: float = 0.1,
    batch_size: int | None = None,
    random_state: int = 0,
    verbose: bool = False,
    progress: bool | None = False,
) -> dict[str, Any]:
    """Fit LDA to the bars corpus, score heldout documents, draw ``topics.png``.

    Parameters
    ----------
    out_dir : str, os.PathLike or None
        Folder for ``topics.png`` (created); None draws nothing.
    n_components : int, default 10
        K; the corpus has ``2 * side`` true topics (10 for ``side=5``).
    sparsity : int or None, default 4
        L; None runs the dense local step.
    n_laps : int, default 20
        Maximum laps.
    client : None, "sync", str or distributed.Client, default None
        Where batch tasks run (see :func:`lsdask.jobs.cluster.dask_client`);
        None starts a LocalCluster of ``n_workers`` processes for this job.
    n_workers : int or None, default None
    n_docs, side, doc_length, doc_topic_prior
        The corpus (:func:`lsdask.synthetic.make_bars_corpus`), drawn with
        ``random_state``.
    alpha : float or None, default None
        The LDA's total document-topic concentration; default
        ``doc_topic_prior * n_components``, the generating model's.
    heldout_fraction : float, default 0.1
        The last ``round(heldout_fraction * n_docs)`` documents are held out
        (documents are exchangeable, so any split is a random one).
    batch_size : int or None, default None
        Documents per batch; default a quarter of the training documents (4
        batches, two per worker of a 2-worker cluster).
    random_state : int, default 0
        Seed of the corpus and of the fit.
    verbose : bool, default False
        Log one line per lap.
    progress : bool or None, default False
        Progress bar per lap (None: only on a terminal).

    Returns
    -------
    dict
        ``n_docs`` (training documents), ``n_heldout``, ``n_tokens``
        (training tokens), ``vocab_size``, ``K``, ``L`` (None for dense),
        ``alpha``, ``laps``, ``converged``, ``seconds`` (wall time of
        ``fit``), ``heldout_score`` (nats per token, None without heldout
        documents), ``mean_l1`` (mean L1 distance of the matched topics, in
        [0, 2]), ``l1`` (per true topic), ``match`` (learned topic per true
        topic), ``elbo_final``, ``topics_plot`` (path or None) and ``model``.

    Raises
    ------
    ValueError
        For invalid parameters.
    """
    from lsdask.estimators.lda import LDA
    from lsdask.plotting import plot_topic_images
    from lsdask.synthetic import make_bars_corpus, match_topics

    if not 0.0 <= float(heldout_fraction) < 1.0:
        raise ValueError(f"heldout_fraction must be in [0, 1); got {heldout_fraction!r}")
    X, true_topics = make_bars_corpus(n_docs, side, doc_length, doc_topic_prior, random_state)
    n_heldout = round(float(heldout_fraction) * X.shape[0])
    n_train = X.shape[0] - n_heldout
    if n_train < 1:
        raise ValueError(f"no training documents left: n_docs={n_docs}, {heldout_fraction=}")
    train, heldout = X[:n_train], X[n_train:]
    if alpha is None:
        alpha = float(doc_topic_prior) * n_components
    if batch_size is None:
        batch_size = max(1, -(-n_train // 4))

    model = LDA(
        n_components,
        sparsity=sparsity,
        alpha=alpha,
        n_laps=n_laps,
        batch_size=batch_size,
        random_state=random_state,
        n_workers=n_workers,
        verbose=1 if verbose else 0,
        progress=progress,
    )
    logger.info(
        "bars LDA: %d train, %d heldout documents; K=%d, L=%s, %d laps at most",
        n_train, n_heldout, n_components, sparsity, n_laps,
    )  # fmt: skip
    with dask_client(client, n_workers) as shared:
        model.set_params(client=shared)
        start = time.perf_counter()
        model.fit(train)
        seconds = time.perf_counter() - start
    model.set_params(client=client)
    score = model.score(heldout) if n_heldout else None
    match, l1 = match_topics(true_topics, model.topic_word_)
    result: dict[str, Any] = {
        "n_docs": n_train,
        "n_heldout": n_heldout,
        "n_tokens": float(train.sum()),
        "vocab_size": int(X.shape[1]),
        "K": n_components,
        "L": sparsity,
        "alpha": float(alpha),
        "laps": int(model.n_laps_),
        "converged": bool(model.converged_),
        "seconds": seconds,
        "heldout_score": score,
        "mean_l1": float(np.nanmean(l1)),
        "l1": l1,
        "match": match,
        "elbo_final": float(model.elbo_trace_[-1]),
        "topics_plot": None,
        "model": model,
    }
    logger.info(
        "bars LDA: %d laps in %.1f s, heldout %s nats/token, mean L1 %.3f",
        result["laps"], seconds, score, result["mean_l1"],
    )  # fmt: skip
    if out_dir is not None:
        title = (
            f"bars: true topics vs LDA K={n_components}, "
            f"L={'dense' if sparsity is None else sparsity} "
            f"(mean L1 {result['mean_l1']:.3f})"
        )
        result["topics_plot"] = str(
            plot_topic_images(
                true_topics, model.topic_word_, Path(out_dir) / "topics.png", side, title=title
            )
        )
    return result


def format_bars_report(result: dict[str, Any], *, title: str | None = None) -> str:
    """Readable multi-line summary of a :func:`run_bars_demo` result."""
    lines = [title] if title else []
    L = "dense" if result["L"] is None else result["L"]
    lines.append(
        f"data: {result['n_docs']:,} train documents ({result['n_tokens']:,.0f} tokens), "
        f"{result['n_heldout']:,} heldout documents, V={result['vocab_size']}"
    )
    lines.append(f"model: LDA, K={result['K']}, L={L}, alpha={result['alpha']:g}")
    lines.append(
        f"fit: {plural(result['laps'], 'lap')} "
        f"({'converged' if result['converged'] else 'not converged'})"
        f" in {result['seconds']:.1f} s, final ELBO {result['elbo_final']:.1f} "
        f"({result['elbo_final'] / max(result['n_tokens'], 1.0):.4f} per token)"
    )
    score = result["heldout_score"]
    lines.append(
        "heldout document completion: "
        + ("no heldout documents" if score is None else f"{score:.4f} nats/token")
    )
    lines.append(
        f"learned vs true bars: mean L1 distance {result['mean_l1']:.3f} "
        f"(max {float(np.nanmax(result['l1'])):.3f}; 0 = identical, 2 = disjoint)"
    )
    if result.get("topics_plot"):
        lines.append(f"picture: {result['topics_plot']}")
    return "\n".join(lines)
