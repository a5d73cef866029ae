"""The corpus LDA job: fit LDA on a Parquet corpus, save it, read topics, transform.

``lsdask fit``, ``lsdask topics`` and ``lsdask transform`` and
``pipelines/corpus_lda.py`` are thin layers over these functions:

- :func:`fit_corpus_lda` fits :class:`lsdask.LDA` on a corpus directory
  (:mod:`lsdask.io.corpus`), scores a heldout corpus, saves the model
  (:func:`lsdask.persist.save_lda`) and its ELBO trace (``elbo.png``);
- :func:`topic_report` reads a saved model's top words, with UMass coherence
  over a corpus's documents;
- :func:`transform_corpus` writes every document's top-L topic weights to a
  Parquet file, one corpus row group at a time;
- :func:`split_corpus` splits a corpus's documents into train and heldout
  corpora, streaming;
- ``format_*`` turn the results into text for the command line.

They log with :mod:`logging` and never print.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import scipy.sparse as sp

from lsdask import config
from lsdask.engine import make_executor
from lsdask.io.atomic import temp_sibling
from lsdask.io.corpus.vocabulary import vocabulary_difference
from lsdask.jobs.cluster import dask_client
from lsdask.jobs.wording import plural
from lsdask.learn.base import waves

logger = logging.getLogger(__name__)

__all__ = [
    "WEIGHTS_SCHEMA",
    "fit_corpus_lda",
    "format_fit_report",
    "format_topics",
    "format_transform_summary",
    "split_corpus",
    "topic_report",
    "transform_corpus",
]


#: Schema of the Parquet file written by :func:`transform_corpus`.
WEIGHTS_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.int64()),
        pa.field("topics", pa.list_(pa.int32())),
        pa.field("weights", pa.list_(pa.float32())),
    ]
)


def _laps_in_checkpoint(checkpoint_dir: Any) -> int:
    """Laps made so far by the run a resume continues (0 without a checkpoint)."""
    from lsdask.persist.checkpoint import CheckpointDir

    if checkpoint_dir is None or not Path(checkpoint_dir).is_dir():
        return 0
    state = CheckpointDir(checkpoint_dir).read_state()
    return 0 if state is None else int(state.lap)


def _elbo_per_token(model: Any, n_tokens: float) -> np.ndarray:
    """The ELBO trace per token of the data each value was over (a resumed run
    that took in or dropped documents changed it); ``n_tokens`` where the trace
    of sizes does not reach back (models saved before it was kept)."""
    from lsdask.learn.base import padded_trace

    sizes = padded_trace(getattr(model, "size_trace_", None), len(model.elbo_trace_))
    sizes = np.where(np.isfinite(sizes) & (sizes > 0), sizes, max(n_tokens, 1.0))
    return np.asarray(model.elbo_trace_) / sizes


def _open_corpus(corpus: Any, what: str) -> Any:
    """A :class:`~lsdask.io.corpus.Corpus` from a Corpus or a path, naming ``what``
    on errors; a path is rescanned, as LDA.fit and score do: part files added or
    removed since it was written are taken in (every command sees the same
    documents)."""
    from lsdask.io.corpus.store import Corpus

    if isinstance(corpus, Corpus):
        return corpus
    try:
        return Corpus.open(corpus, rescan=True)
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{what}: {exc}") from exc


def _check_same_vocab(words: list[str] | None, corpus: Any, what: str, against: str) -> None:
    """Raise if ``corpus`` is not over the vocabulary ``words`` (None: only sizes)."""
    if words is None:
        return
    difference = vocabulary_difference(words, corpus.vocab)
    if difference is not None:
        raise ValueError(
            f"{what} {corpus.path} has a different vocabulary than {against}: {difference}; "
            "ingest it with the same vocabulary (`lsdask ingest ... --vocab TRAINING_CORPUS`)"
        )


def _loaded(model: Any) -> Any:
    """An LDA from a fitted estimator or a model directory."""
    if isinstance(model, str | os.PathLike):
        from lsdask.persist.lda import load_lda

        return load_lda(model)
    return model


# --------------------------------------------------------------------------- fit


def _initial_topics(init: Any, train: Any, n_components: int) -> Any:
    """``init`` for :class:`lsdask.LDA`: a method name or an array as they are;
    a ``.npy`` file its array of topic-word counts; a saved model's directory its
    topic-word counts ``components_ - eta`` (its vocabulary must be the corpus's,
    its K ``n_components``)."""
    from lsdask.estimators.lda import LDA_INIT_METHODS, lda_init_names
    from lsdask.persist.lda import load_lda

    if not isinstance(init, str | os.PathLike) or str(init) in LDA_INIT_METHODS:
        return init

    if not Path(init).exists():
        raise ValueError(
            f"init must be {lda_init_names()}, an array, a .npy file or a saved model's directory; "
            f"{str(init)!r} is none of these (no such file or directory)"
        )
    if Path(init).is_file():
        try:
            return np.load(init, allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise ValueError(
                f"init file {str(init)!r} cannot be read as a .npy array of topic-word counts "
                f"({type(exc).__name__}: {exc}); write it with numpy.save"
            ) from None
    source = load_lda(init)
    # (without a vocabulary, the estimator checks the number of words)
    _check_same_vocab(source.vocabulary_, train, "corpus", f"the --init model {init}")
    if source.n_components != n_components:
        raise ValueError(
            f"--init model {init} has {source.n_components} topics; --topics is "
            f"{n_components} (use the same K to start from its topics)"
        )
    return np.maximum(source.components_ - source.eta, 0.0)


def fit_corpus_lda(
    corpus: Any,
    out_dir: str | os.PathLike[str] | None,
    *,
    n_components: int,
    sparsity: int | None = 8,
    algorithm: str = "memo",
    n_laps: int = 10,
    alpha: float = 0.5,
    eta: float = 0.1,
    restarts: bool = True,
    heldout: Any = None,
    random_state: int = 0,
    client: Any = None,
    n_workers: int | None = None,
    overwrite: bool = False,
    n_top_words: int = 8,
    n_show_topics: int = 10,
    verbose: bool = False,
    progress: bool | None = False,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    resume: bool = False,
    init: Any = "auto",
    gibbs_sweeps: int = config.GIBBS_SWEEPS,
    gibbs_tokens: int = config.GIBBS_SAMPLE_TOKENS,
    batches_per_update: int | None = None,
) -> dict[str, Any]:
    """Fit LDA on a Parquet corpus, score heldout documents, save the model.

    Parameters
    ----------
    corpus : str, os.PathLike or lsdask.io.corpus.Corpus
        Training documents; each row group is one batch.
    out_dir : str, os.PathLike or None
        The model directory (:func:`lsdask.persist.save_lda`), which also
        gets ``elbo.png``; None saves nothing. Checked before the fit.
    n_components : int
        K.
    sparsity : int or None, default 8
        L; None runs the dense local step.
    algorithm : {"memo", "svi", "vb"}, default "memo"
    n_laps : int, default 10
        Maximum laps.
    alpha, eta : float, default 0.5, 0.1
        Total document-topic concentration and topic-word pseudo-count.
    restarts : bool, default True
        Restart proposals in the local step.
    heldout : str, os.PathLike, Corpus or None, default None
        A corpus over the same vocabulary scored by heldout document
        completion (:meth:`lsdask.LDA.score`, nats per token).
    random_state : int, default 0
    client : None, "sync", str or distributed.Client, default None
        Where batch tasks run (:func:`lsdask.jobs.cluster.dask_client`);
        None starts a LocalCluster of ``n_workers`` processes.
    n_workers : int or None, default None
    batches_per_update : int or None, default None
        Batches visited against the same globals before each global step;
        default the number of parallel workers (1 with ``client="sync"``).
        The fit depends on it: the same seed gives the same model under any
        client only with the same value.
    overwrite : bool, default False
        Replace an existing model directory at ``out_dir``.
    n_top_words, n_show_topics : int, default 8, 10
        Top words reported for the first topics.
    verbose : bool, default False
        Log one line per lap.
    progress : bool or None, default False
        Progress bar per lap (None: only on a terminal).
    checkpoint_dir : path or None
        Checkpoint every lap (and on SIGINT/SIGTERM) in this folder
        (memoized VI; see :class:`lsdask.LDA`).
    resume : bool
        Continue the latest checkpoint in ``checkpoint_dir``: an unfinished
        run to ``n_laps`` laps, a finished one for ``n_laps`` more laps over
        the corpus as it is now (new Parquet files in, removed ones out).
    init : "auto", "kmeans++", "random", "gibbs", array (K, V), a .npy file or a model directory
        How the topics start (:class:`lsdask.LDA`); a ``.npy`` file holds
        topic-word counts (K, V); a saved model's directory starts from its
        topics (``components_ - eta``; same vocabulary and K).
    gibbs_sweeps : int, default 1,000 (``lsdask.config.GIBBS_SWEEPS``)
        Collapsed Gibbs sweeps of ``init="gibbs"``.
    gibbs_tokens : int, default 4,000,000 (``lsdask.config.GIBBS_SAMPLE_TOKENS``)
        Tokens the Gibbs start samples at most (:class:`lsdask.LDA`).

    Returns
    -------
    dict
        ``corpus``, ``n_docs``, ``n_tokens``, ``vocab_size``, ``K``, ``L``,
        ``algorithm``, ``laps``, ``converged``, ``seconds`` (wall time of
        ``fit``), ``elbo_final``, ``heldout`` (path or None),
        ``n_heldout_docs``, ``heldout_score`` (None without heldout data),
        ``top_words`` (of the first ``n_show_topics`` topics),
        ``model_dir``, ``elbo_plot`` (paths or None) and ``model``.

    Raises
    ------
    FileNotFoundError
        If a corpus does not exist.
    FileExistsError
        If ``out_dir`` exists (see :func:`lsdask.persist.check_save_target`).
    ValueError
        For invalid parameters or data, or a heldout corpus over another
        vocabulary.
    """
    from lsdask.estimators.lda import LDA
    from lsdask.persist.lda import check_save_target, save_lda
    from lsdask.plotting import plot_elbo_trace

    train = _open_corpus(corpus, "corpus")
    held = None if heldout is None else _open_corpus(heldout, "heldout")
    if held is not None:
        _check_same_vocab(train.vocab, held, "heldout corpus", f"the training corpus {train.path}")
    if out_dir is not None:
        check_save_target(out_dir, overwrite)
    model = LDA(
        n_components,
        sparsity=sparsity,
        alpha=alpha,
        eta=eta,
        algorithm=algorithm,
        n_laps=n_laps,
        restarts=restarts,
        random_state=random_state,
        n_workers=n_workers,
        verbose=1 if verbose else 0,
        progress=progress,
        checkpoint_dir=None if checkpoint_dir is None else str(checkpoint_dir),
        resume=resume,
        init=_initial_topics(init, train, n_components),
        gibbs_sweeps=gibbs_sweeps,
        gibbs_tokens=gibbs_tokens,
        batches_per_update=batches_per_update,
    )
    model._check_params()  # fail before starting a cluster ...
    model._init_counts(train.vocab_size)  # ... also for init counts of the wrong shape
    laps_before = _laps_in_checkpoint(checkpoint_dir) if resume else 0
    logger.info(
        "fitting LDA K=%d, L=%s (%s) on %s: %d documents, %d batches",
        n_components, sparsity, algorithm, train.path, train.n_docs, len(train.batches),
    )  # fmt: skip
    trace = HeldoutTrace(held, alpha) if held is not None and held.n_docs else None
    with dask_client(client, n_workers) as shared:
        link = getattr(shared, "dashboard_link", None)
        model.set_params(client=shared)
        start = time.perf_counter()
        try:
            model.fit(train, callback=trace)
        finally:
            model.set_params(client=client)
        seconds = time.perf_counter() - start
    score = None
    if held is not None and held.n_docs:
        score = model.score(held)
    result: dict[str, Any] = {
        "corpus": train.path,
        "n_docs": train.n_docs,
        "n_tokens": train.n_tokens,
        "vocab_size": train.vocab_size,
        "K": n_components,
        "L": sparsity,
        "algorithm": algorithm,
        "laps": int(model.n_laps_),
        "laps_this_run": int(model.n_laps_) - laps_before,
        "converged": bool(model.converged_),
        "seconds": seconds,
        "elbo_final": float(model.elbo_trace_[-1]),
        "heldout": None if held is None else held.path,
        "n_heldout_docs": 0 if held is None else held.n_docs,
        "heldout_score": score,
        "top_words": model.top_words(n_top_words)[:n_show_topics],
        "model_dir": None,
        "elbo_plot": None,
        "time_plots": [],
        "model": model,
        "dashboard": None if client == "sync" else link,
    }
    logger.info(
        "LDA: %d laps in all, %d in %.1f s this run; final ELBO %.6g, heldout %s",
        result["laps"], result["laps_this_run"], seconds, result["elbo_final"], score,
    )  # fmt: skip
    if out_dir is not None:
        result["model_dir"] = str(save_lda(model, out_dir, overwrite=overwrite))
        label = "dense" if sparsity is None else f"L={sparsity}"
        per_token = _elbo_per_token(model, train.n_tokens)
        result["elbo_plot"] = str(
            plot_elbo_trace(
                {label: (model.lap_trace_, per_token)},
                Path(out_dir) / "elbo.png",
                title=f"LDA K={n_components}, {algorithm}, {train.n_docs:,} documents",
                ylabel="ELBO per training token",
            )
        )
        title = f"LDA K={n_components}, {label}, {algorithm}"
        result["time_plots"].append(
            str(
                plot_elbo_trace(
                    {label: (model.time_trace_, per_token)},
                    Path(out_dir) / "elbo_time.png",
                    title=title,
                    ylabel="ELBO per training token",
                    xlabel="seconds",
                )
            )
        )
        if trace is not None and trace.seconds:
            result["time_plots"].append(
                str(
                    plot_elbo_trace(
                        {label: (np.asarray(trace.seconds), np.asarray(trace.scores))},
                        Path(out_dir) / "heldout_time.png",
                        title=title,
                        ylabel="heldout log-likelihood per token",
                        xlabel="seconds",
                    )
                )
            )
    return result


class HeldoutTrace:
    """A per-lap callback: heldout document completion against the current topics.

    The 80/20 split of the heldout documents is drawn once, so every lap is
    scored on the same words; ``seconds`` are the fit's own clock (scoring
    time excluded).
    """

    def __init__(self, heldout: Any, alpha: float, random_state: int = 0) -> None:
        from lsdask.evaluate import split_documents
        from lsdask.io.corpus.store import read_all

        self.alpha = alpha
        self.A, self.B = split_documents(read_all(heldout), 0.8, random_state)
        self.seconds: list[float] = []
        self.scores: list[float] = []

    def __call__(self, result: Any) -> None:
        from lsdask.evaluate import document_completion

        score = document_completion(self.A, self.B, result.globals.topics, self.alpha)
        self.seconds.append(float(result.time_trace[-1]))
        self.scores.append(score)
        logger.info("lap %d: heldout %.4f nats/token", result.n_laps, score)


def format_fit_report(result: dict[str, Any], *, title: str | None = None) -> str:
    """Readable multi-line summary of a :func:`fit_corpus_lda` result."""
    lines = [title] if title else []
    L = "dense" if result["L"] is None else result["L"]
    n_tokens = max(result["n_tokens"], 1.0)
    lines.append(
        f"data: {result['n_docs']:,} documents, {result['n_tokens']:,.0f} tokens, "
        f"V={result['vocab_size']:,} ({result['corpus']})"
    )
    lines.append(f"model: LDA, K={result['K']}, L={L}, algorithm={result['algorithm']}")
    this_run = result.get("laps_this_run", result["laps"])
    resumed = f", {this_run} this run" if this_run != result["laps"] else ""
    lines.append(
        f"laps: {result['laps']}{resumed} "
        f"({'converged' if result['converged'] else 'not converged'})"
    )
    lines.append(f"seconds: {result['seconds']:.1f}")
    lines.append(
        f"final ELBO: {result['elbo_final']:.1f} ({result['elbo_final'] / n_tokens:.4f} per token)"
    )
    if result["heldout_score"] is not None:
        lines.append(
            f"heldout document completion: {result['heldout_score']:.4f} nats/token "
            f"({result['n_heldout_docs']:,} documents of {result['heldout']})"
        )
    shown = result["top_words"]
    if shown:
        lines.append("")
        lines.append(f"top {len(shown[0])} words of the first {len(shown)} topics:")
        lines.extend(f"  {k:>3}  {' '.join(words)}" for k, words in enumerate(shown))
    if result.get("model_dir"):
        lines.append("")
        lines.append(f"model: {result['model_dir']}")
    if result.get("elbo_plot"):
        lines.append(f"picture: {result['elbo_plot']}")
    for path in result.get("time_plots") or []:
        lines.append(f"picture: {path}")
    if result.get("dashboard"):
        lines.append(f"Dask dashboard (while it ran): {result['dashboard']}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- topics


def topic_report(model: Any, *, n_top: int = 10, corpus: Any = None) -> dict[str, Any]:
    """Each topic's top words, and their UMass coherence over a corpus.

    Parameters
    ----------
    model : str, os.PathLike or lsdask.LDA
        A model directory (:func:`lsdask.persist.load_lda`) or fitted model.
    n_top : int, default 10
        Words per topic.
    corpus : str, os.PathLike, Corpus or None, default None
        Reference documents for UMass coherence (Mimno et al. 2011), read
        batch by batch; None skips it.

    Returns
    -------
    dict
        ``K``, ``n_top``, ``share`` (each topic's share of the training
        tokens, array of K), ``top_words`` (K lists of words), ``coherence``
        (array of K, or None), ``mean_coherence`` (or None) and ``corpus``
        (path or None).

    Raises
    ------
    FileNotFoundError, ValueError
        For a missing or corrupt model, a missing corpus or one over
        another vocabulary.
    """
    if isinstance(n_top, bool) or not isinstance(n_top, int) or n_top < 1:
        raise ValueError(f"n_top must be a positive integer; got {n_top!r}")
    lda = _loaded(model)
    mass = np.maximum(lda.components_ - lda.eta, 0.0).sum(axis=1)  # tokens per topic
    result: dict[str, Any] = {
        "K": int(lda.n_components),
        "n_top": n_top,
        "share": mass / mass.sum() if mass.sum() > 0 else mass,
        "top_words": lda.top_words(n_top),
        "coherence": None,
        "mean_coherence": None,
        "corpus": None,
    }
    if corpus is not None:
        docs = _open_corpus(corpus, "corpus")
        if lda.vocabulary_ is not None:
            _check_same_vocab(lda.vocabulary_, docs, "corpus", "the model")
        coherence = lda.coherence(docs, n_top)
        result.update(
            coherence=coherence, mean_coherence=float(np.mean(coherence)), corpus=docs.path
        )
    return result


def format_topics(result: dict[str, Any]) -> str:
    """One line per topic of a :func:`topic_report` result (coherence first, if any)."""
    coherence = result["coherence"]
    umass = "" if coherence is None else f"  {'UMass':>8}"
    lines = [f"{'topic':>5}  {'share':>6}{umass}  top {result['n_top']} words"]
    for k, words in enumerate(result["top_words"]):
        umass = "" if coherence is None else f"  {coherence[k]:>8.2f}"
        lines.append(f"{k:>5}  {result['share'][k]:>6.1%}{umass}  {' '.join(words)}")
    if coherence is not None:
        lines.append(
            f"mean UMass coherence of {result['K']} topics (top {result['n_top']} words, "
            f"documents of {result['corpus']}): {result['mean_coherence']:.3f}"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------- transform


def _weights_table(doc_ids: np.ndarray, weights: sp.csr_matrix) -> pa.Table:
    """Arrow table of one batch: each row's topics ordered by decreasing weight."""
    W = sp.csr_matrix(weights)
    rows = np.repeat(np.arange(W.shape[0]), np.diff(W.indptr))
    order = np.lexsort((W.indices, -W.data, rows))  # by row, then weight desc, then topic
    offsets = pa.array(W.indptr.astype(np.int32), type=pa.int32())
    topics = pa.ListArray.from_arrays(
        offsets, pa.array(W.indices[order].astype(np.int32), type=pa.int32())
    )
    values = pa.ListArray.from_arrays(
        offsets, pa.array(W.data[order].astype(np.float32), type=pa.float32())
    )
    return pa.Table.from_arrays(
        [pa.array(np.asarray(doc_ids, dtype=np.int64), type=pa.int64()), topics, values],
        schema=WEIGHTS_SCHEMA,
    )


def transform_corpus(
    model: Any,
    corpus: Any,
    out_path: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    client: Any = None,
    n_workers: int | None = None,
) -> dict[str, Any]:
    """Write every document's top-L topic weights to a Parquet file, batch by batch.

    One row per document, with the schema :data:`WEIGHTS_SCHEMA`:
    ``doc_id int64``, ``topics list<int32>`` and ``weights list<float32>``
    (:meth:`lsdask.LDA.transform`: ``E[pi_d]`` over the topics the document
    uses, at most its L largest, renormalized, largest first; an empty
    document gets empty lists). Each row group of the corpus is read and
    transformed by a batch task (on a Dask cluster as ``client`` says: a wave
    of as many tasks as the cluster runs at once is computed while the one
    before is written) and written as one row group, in corpus order, so
    memory holds two waves of batches at a time; the file is written under a
    temporary name in the same folder and renamed at the end.

    Parameters
    ----------
    model : str, os.PathLike or lsdask.LDA
        A model directory or fitted model.
    corpus : str, os.PathLike or Corpus
        Documents over the model's vocabulary.
    out_path : str or os.PathLike
        The Parquet file to write.
    overwrite : bool, default False
        Replace an existing file at ``out_path``.
    client : None, "sync", str or distributed.Client
        Where the batch tasks run (:func:`lsdask.jobs.cluster.dask_client`); the
        default starts a LocalCluster of ``n_workers`` processes when the corpus
        has more than one row group, else runs in this process.
    n_workers : int, optional
        Workers of that LocalCluster (default 2).

    Returns
    -------
    dict
        ``path``, ``n_docs``, ``n_batches``, ``K``, ``L`` and ``seconds``.

    Raises
    ------
    FileNotFoundError, FileExistsError, ValueError
        For a missing model or corpus, an existing output (without
        ``overwrite``), or a corpus over another vocabulary.
    """
    import pyarrow.parquet as pq

    lda = _loaded(model)
    docs = _open_corpus(corpus, "corpus")
    if lda.vocabulary_ is not None:
        _check_same_vocab(lda.vocabulary_, docs, "corpus", "the model")
    elif docs.vocab_size != lda.n_features_in_:
        raise ValueError(
            f"corpus {docs.path} has {docs.vocab_size} words in its vocabulary, but the "
            f"model was fitted with {lda.n_features_in_}"
        )
    out = Path(out_path)
    if out.is_dir():
        raise FileExistsError(f"--out {str(out)!r} is a folder; name a .parquet file")
    if out.exists() and not overwrite:
        raise FileExistsError(
            f"{str(out)!r} exists; remove it or pass overwrite=True (lsdask: --overwrite)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(out)
    start = time.perf_counter()
    n_docs = 0
    task = lda.transform_task()
    if client is None and len(docs.batches) <= 1:
        client = "sync"  # a cluster's start would cost more than one task
    try:
        with dask_client(client, n_workers) as where, pq.ParquetWriter(tmp, WEIGHTS_SCHEMA) as w:
            for doc_ids, weights in _in_waves(make_executor(where), task, docs.batches, lda):
                w.write_table(_weights_table(doc_ids, weights))
                n_docs += len(doc_ids)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    K = int(lda.n_components)
    result = {
        "path": str(out),
        "n_docs": n_docs,
        "n_batches": len(docs.batches),
        "K": K,
        "L": lda.topics_per_document,
        "seconds": time.perf_counter() - start,
    }
    logger.info("wrote top-%d topic weights of %d documents to %s", result["L"], n_docs, out)
    return result


def _in_waves(executor: Any, task: Any, batches: list, lda: Any) -> Iterator[Any]:
    """``task``'s results for every batch, in order; one wave of as many tasks as the
    executor runs at once is computed while the one before is handed out."""
    handles = executor.register(batches)
    shared = executor.broadcast(lda.posterior_)
    groups = [[handles[i] for i in wave] for wave in waves(range(len(handles)), executor.n_slots)]
    pending = executor.submit(task, groups[0], shared) if groups else None
    for i in range(len(groups)):
        done = executor.collect(pending)
        if i + 1 < len(groups):
            pending = executor.submit(task, groups[i + 1], shared)
        yield from done


def format_transform_summary(result: dict[str, Any]) -> str:
    """One line describing a :func:`transform_corpus` result."""
    return (
        f"wrote top-{result['L']} topic weights (K={result['K']}) of {result['n_docs']:,} "
        f"documents in {plural(result['n_batches'], 'row group')} to {result['path']} "
        f"({result['seconds']:.1f} s)"
    )


# --------------------------------------------------------------------------- split


def _heldout_mask(n_docs: int, batch_index: int, fraction: float, random_state: int) -> np.ndarray:
    """Which documents of a batch are held out: the same for the same seed and batch."""
    rng = np.random.default_rng([int(random_state), int(batch_index)])
    return rng.random(n_docs) < fraction


def split_corpus(
    corpus: Any,
    train_dir: str | os.PathLike[str],
    heldout_dir: str | os.PathLike[str],
    *,
    heldout_fraction: float = 0.1,
    random_state: int = 0,
    overwrite: bool = False,
) -> tuple[Any, Any]:
    """Split a corpus's documents at random into a train and a heldout corpus.

    Each document is held out with probability ``heldout_fraction``
    (independently, seeded by ``random_state`` and its batch), keeping its
    ``doc_id``, vocabulary and row-group size. The corpus is read twice,
    one row group at a time, so this works on corpora larger than memory.

    Parameters
    ----------
    corpus : str, os.PathLike or Corpus
    train_dir, heldout_dir : str or os.PathLike
        The two corpora to write (:meth:`lsdask.io.corpus.Corpus.write`).
    heldout_fraction : float, default 0.1
        In (0, 1).
    random_state : int, default 0
    overwrite : bool, default False
        Replace existing corpora.

    Returns
    -------
    (Corpus, Corpus)
        The train and heldout corpora.
    """
    from lsdask.io.corpus.store import Corpus

    fraction = float(heldout_fraction)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in (0, 1); got {heldout_fraction!r}")
    source = _open_corpus(corpus, "corpus")

    def documents(keep_heldout: bool) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        for index, batch in enumerate(source.batches):
            loaded = batch.load()
            mask = _heldout_mask(loaded.n_docs, index, fraction, random_state)
            for i in np.flatnonzero(mask == keep_heldout):
                ids, counts = loaded.doc(int(i))
                yield int(loaded.doc_ids[i]), ids, counts

    info = {
        "format": "split",
        "source": source.path,
        "heldout_fraction": fraction,
        "random_state": int(random_state),
    }
    parts = []
    for keep_heldout, out in ((False, train_dir), (True, heldout_dir)):
        parts.append(
            Corpus.write(
                out,
                documents(keep_heldout),
                source.vocab,
                docs_per_row_group=source.docs_per_row_group,
                ingest_info={**info, "part": "heldout" if keep_heldout else "train"},
                overwrite=overwrite,
            )
        )
    logger.info(
        "split %s: %d train, %d heldout documents", source.path, parts[0].n_docs, parts[1].n_docs
    )
    return parts[0], parts[1]
