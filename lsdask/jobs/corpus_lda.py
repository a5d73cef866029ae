"""The corpus LDA job: fit a configured :class:`lsdask.LDA` (or :class:`lsdask.HDP`) on a
Parquet corpus and save it.

``lsdask fit`` and ``pipelines/corpus_lda.py`` are thin layers over
:func:`fit_corpus_lda`: it fits the estimator on a corpus directory
(:mod:`lsdask.io.corpus`), scores a heldout corpus after every lap and at
the end, saves the model (:func:`lsdask.persist.save_model`: an HDP in its
own format) with pictures of its traces, and returns a :class:`CorpusFitReport`, which
:func:`format_fit_report` turns into text for the command line. The other
corpus jobs: :mod:`lsdask.jobs.topics`, :mod:`lsdask.jobs.transform`,
:mod:`lsdask.jobs.split`.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.errors import one_line
from lsdask.estimators.hdp import HDP
from lsdask.estimators.lda import LDA
from lsdask.estimators.params import LDA_INIT_METHODS, clone, lda_init_names
from lsdask.evaluate import document_completion, split_documents
from lsdask.io import guarded
from lsdask.io.atomic import temp_sibling
from lsdask.io.corpus.store import Corpus, read_all
from lsdask.io.faults import fault_point
from lsdask.jobs import commit
from lsdask.jobs.cluster import on_shared_client
from lsdask.jobs.inputs import check_same_vocab, open_corpus
from lsdask.learn.base import padded_trace
from lsdask.persist import check_save_target, load_lda, load_model, save_model
from lsdask.persist import svi_gibbs as svi_gibbs_checkpoint
from lsdask.persist.checkpoint import CheckpointDir
from lsdask.persist.files import write_text_atomic
from lsdask.persist.model_dir import extra_files
from lsdask.persist.resume import _foreign, checkpoint_lock

logger = logging.getLogger(__name__)

__all__ = [
    "HELDOUT_TRACE_FILE",
    "CorpusFitReport",
    "HeldoutTrace",
    "fit_corpus_lda",
    "format_fit_report",
]


@dataclass
class CorpusFitReport:
    """What :func:`fit_corpus_lda` did.

    Attributes
    ----------
    model : LDA
        The fitted estimator: a clone of the one given (an :class:`lsdask.HDP`
        is one too).
    corpus : str
        The training corpus; ``n_docs``, ``n_tokens`` and ``vocab_size`` its size.
    K, L, algorithm
        The fit's topics (an HDP's final number), sparsity (None: dense) and
        algorithm.
    laps, laps_this_run : int
        Laps in all (a resumed run counts those before it) and in this call.
    converged : bool
    seconds : float
        Wall time of ``fit``.
    elbo_final : float
    heldout : str or None
        The heldout corpus; ``n_heldout_docs`` its documents and
        ``heldout_score`` their document completion, nats per token (None
        without heldout documents).
    top_words : list of list of str
        The top words of the first topics (an HDP's by decreasing weight).
    model_dir, elbo_plot : str or None
        The saved model and its ELBO trace by lap (None without ``out_dir``);
        ``time_plots`` the traces by time.
    dashboard : str or None
        The Dask dashboard's address while the fit ran.
    model_name : str
        ``"LDA"`` or ``"HDP"``.
    max_components : int or None
        An HDP's truncation (None for LDA).
    topic_weights : list of float or None
        An HDP's ``E[beta_k]`` of the topics of ``top_words``, decreasing
        (None for LDA).
    k_elbo_plot : str or None
        An HDP's K and surrogate ELBO by lap (``k_elbo.png``; None without
        ``out_dir`` or for LDA).
    done_before : bool
        The same command had already done this work (its checkpoint records it
        done, over the same data, and its model is in ``model_dir``):
        nothing was trained or written, ``model`` is the saved one.
    """

    model: LDA
    corpus: str
    n_docs: int
    n_tokens: float
    vocab_size: int
    K: int
    L: int | None
    algorithm: str
    laps: int
    laps_this_run: int
    converged: bool
    seconds: float
    elbo_final: float
    heldout: str | None
    n_heldout_docs: int
    heldout_score: float | None
    top_words: list[list[str]]
    dashboard: str | None = None
    model_dir: str | None = None
    elbo_plot: str | None = None
    time_plots: list[str] = field(default_factory=list)
    model_name: str = "LDA"
    max_components: int | None = None
    topic_weights: list[float] | None = None
    k_elbo_plot: str | None = None
    done_before: bool = False
    best_lap: int | None = None  # early stopping's kept lap (None without it)
    validation_score: float | None = None


def _early_stopping_report(model: Any) -> dict[str, Any]:
    """The report's fields of early stopping: the kept lap and its validation score."""
    best = getattr(model, "best_lap_", None)
    trace = getattr(model, "validation_trace_", None)
    if best is None or trace is None or len(trace) <= best:
        return {}
    return {"best_lap": int(best), "validation_score": float(trace[best])}


def _lap_name(lap: int) -> str:
    """How the report names early stopping's kept lap (lap 0 is the start)."""
    return "the start (lap 0)" if lap == 0 else f"lap {lap}"


def _laps_in_checkpoint(checkpoint_dir: Any) -> int:
    """Laps made so far by the run a resume continues (0 without a checkpoint)."""
    if checkpoint_dir is None or not Path(checkpoint_dir).is_dir():
        return 0
    epochs = svi_gibbs_checkpoint.epochs_in_checkpoint(checkpoint_dir)
    if epochs is not None:  # an svi-gibbs run's (its own checkpoint file)
        return epochs
    state = CheckpointDir(checkpoint_dir).read_state()
    return 0 if state is None else int(state.lap)


def _elbo_per_token(model: Any, n_tokens: float) -> np.ndarray:
    """The ELBO trace per token of the data each value was over (a resumed run
    that took in or dropped documents changed it); ``n_tokens`` where the trace
    of sizes does not reach back (a saved model without ``size_trace_``)."""
    sizes = padded_trace(getattr(model, "size_trace_", None), len(model.elbo_trace_))
    sizes = np.where(np.isfinite(sizes) & (sizes > 0), sizes, max(n_tokens, 1.0))
    return np.asarray(model.elbo_trace_) / sizes


def _initial_topics(init: Any, train: Corpus, n_components: int) -> Any:
    """``init`` for :class:`lsdask.LDA`: a method name or an array as they are;
    a ``.npy`` file its array of topic-word counts; a saved model's directory its
    topic-word counts ``components_ - eta`` (its vocabulary must be the corpus's,
    its K ``n_components``)."""
    if not isinstance(init, str | os.PathLike) or str(init) in LDA_INIT_METHODS:
        return init
    if not Path(init).exists():
        raise ValueError(
            f"init must be {lda_init_names()}, an array, a .npy file or a saved model's directory; "
            f"{str(init)!r} is none of these (no such file or directory)"
        )
    if not Path(init).is_dir():
        # the file named (a link the user gave is theirs to give), read as a regular file
        return _read_init_file(Path(os.path.realpath(init)), (n_components, train.vocab_size))
    source = load_lda(init)
    # (without a vocabulary, the estimator checks the number of words)
    check_same_vocab(source.vocabulary_, train, "corpus", f"the --init model {init}")
    if source.n_components != n_components:
        raise ValueError(
            f"--init model {init} has {source.n_components} topics; --topics is "
            f"{n_components} (use the same K to start from its topics)"
        )
    return np.maximum(source.components_ - source.eta_, 0.0)


def _read_init_file(path: Path, shape: tuple[int, int]) -> np.ndarray:
    """The (K, V) array of topic-word counts in the ``.npy`` file ``path``: a
    regular file (:mod:`lsdask.io.guarded`: no FIFO or device), whose header is
    checked against ``shape`` before its data is read."""
    try:
        with guarded.open_read(path.parent, path.name) as f:
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                found = tuple(np.lib.format.read_array_header_1_0(f)[0])
            else:
                found = tuple(np.lib.format.read_array_header_2_0(f)[0])
            if found == shape:
                f.seek(0)
                return np.load(f, allow_pickle=False)
    except guarded.UnsafePath:
        raise
    except (OSError, ValueError, EOFError, TypeError) as exc:
        raise ValueError(
            f"init file {str(path)!r} cannot be read as a .npy array of topic-word counts "
            f"({type(exc).__name__}: {exc}); write it with numpy.save"
        ) from None
    raise ValueError(
        f"init: expected topic-word counts of shape (n_components, V) = {shape}; got shape "
        f"{found} in {str(path)!r} (--topics by the corpus's vocabulary size)"
    )


def _data_stamp(corpus: Corpus) -> str:
    """A digest of what a fit on ``corpus`` trains on: every row group's part file,
    place, documents and tokens, and the part file's size and hash where its
    manifest records them. A rewritten or appended corpus gets another."""
    fields = ("file", "row_group", "n_docs", "n_tokens", "file_bytes", "file_blake2b")
    entries = [[b.get(f) for f in fields] for b in corpus.manifest.get("batches", [])]
    text = json.dumps([corpus.vocab_size, entries], sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: In a model folder written by ``lsdask fit`` with a checkpoint: the command that
#: wrote it, the data it trained on and its laps (what a rerun matches).
COMMAND_FILE = "command.json"


def _done_command(
    checkpoint_dir: Any, command_id: str, data: str, out_dir: Any
) -> tuple[int, bool] | None:
    """``(laps, marked)`` where the latest checkpoint in ``checkpoint_dir`` shows
    the command ``command_id`` ran to its end over the data ``data``
    (:func:`_data_stamp`): ``marked`` where it records the command done; not
    ``marked`` where the command made every lap it asked for and ``out_dir``
    holds the model it wrote (its :data:`COMMAND_FILE` names the command, the data
    and the laps) but was stopped before it could record that. None otherwise.
    The caller holds the folder's lock."""
    stream = svi_gibbs_checkpoint.load_stream_state(checkpoint_dir)
    if stream is not None:
        command, laps = stream[0].command, stream[0].epoch
    else:
        state = CheckpointDir(checkpoint_dir).read_state()
        if state is None:
            return None
        command, laps = state.command, int(state.lap)
    if not (
        isinstance(command, dict)
        and command.get("id") == command_id
        and command.get("data") == data
    ):
        return None
    if command.get("done") is True:
        return laps, True
    if command.get("target") != laps:
        return None
    try:
        written = guarded.read_json(out_dir, COMMAND_FILE)
    except (FileNotFoundError, ValueError, OSError):
        return None
    if written != {"id": command_id, "data": data, "laps": laps}:
        return None
    return laps, False


def _done_before(model: LDA, data: str, out_dir: Any, command_id: str | None) -> LDA | None:
    """The model this very command saved, where it ran to its end before over the
    same data (a rerun after a signal, or by a retry loop): its checkpoint records
    it done, over the corpus as it is now (:func:`_data_stamp`), and ``out_dir``
    holds a model of as many laps. A command stopped after it wrote its model and
    before it recorded itself done is recorded done now. None where there is work
    to do."""
    folder = model.checkpoint_dir
    if command_id is None or folder is None or out_dir is None or not Path(folder).is_dir():
        return None
    with checkpoint_lock(folder):
        found = _done_command(folder, command_id, data, out_dir)
        if found is None:
            return None
        laps, marked = found
        if not guarded.is_file(out_dir, "params.json"):
            logger.info(
                "the command's checkpoint is done but %s holds no model: writing it", out_dir
            )
            return None
        saved = load_model(out_dir, client=model.client)
        if type(saved) is not type(model) or int(saved.n_laps_) != laps:
            return None
        if not marked:
            logger.info("the command wrote %s before it was stopped: recording it done", out_dir)
            CheckpointDir(folder).mark_done(command_id)
            svi_gibbs_checkpoint.mark_command_done(folder, command_id)
    return saved


def fit_corpus_lda(
    estimator: LDA,
    corpus: Any,
    *,
    out_dir: str | os.PathLike[str] | None = None,
    heldout: Any = None,
    overwrite: bool = False,
    n_top_words: int = 8,
    n_show_topics: int = 10,
    command_id: str | None = None,
) -> CorpusFitReport:
    """Fit ``estimator`` on a Parquet corpus, score heldout documents, save the model.

    The estimator's parameters say everything about the fit, its ``client``
    and ``n_workers`` where it runs (one Dask client is opened for the fit,
    so that its dashboard's address can be reported), its ``checkpoint_dir``
    and ``resume`` how it is checkpointed and continued. Its ``init`` may
    also name a ``.npy`` file of topic-word counts (K, V) or a saved model's
    directory (its topics, ``components_ - eta``, over the same vocabulary
    and K), as ``lsdask fit --init`` does. A clone of the estimator is
    fitted, with those counts as its ``init``, and returned as the report's
    ``model``: the estimator given is left as it is.

    Parameters
    ----------
    estimator : lsdask.LDA or lsdask.HDP
        The configured estimator.
    corpus : str, os.PathLike or lsdask.io.corpus.Corpus
        Training documents; each row group is one batch.
    out_dir : str, os.PathLike or None
        The model directory (:func:`lsdask.persist.save_model`), which also
        gets ``elbo.png``, ``elbo_time.png``, (with heldout documents)
        ``heldout_time.png`` and (an HDP) ``k_elbo.png``; None saves nothing.
        Checked before the fit.
    heldout : str, os.PathLike, Corpus or None
        A corpus over the same vocabulary scored by heldout document
        completion (:meth:`lsdask.LDA.score`, nats per token) after every lap
        and at the end.
    overwrite : bool
        Replace an existing model directory at ``out_dir``.
    n_top_words, n_show_topics : int
        Top words reported for the first topics.
    command_id : str or None
        The command running the job (a hash of its arguments), recorded in the
        checkpoint with the laps in all it asks for: when the same command is
        rerun after being interrupted (before its output was written), it trains
        exactly to those laps (none if they were made) and writes its output,
        after which the checkpoint records it done, with a digest of the corpus.
        The same command run again over the same corpus then trains and writes
        nothing (the report's ``done_before``); over a corpus that changed, it
        is new work (``n_laps`` more laps).

    Returns
    -------
    CorpusFitReport

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
    train = open_corpus(corpus, "corpus")
    held = None if heldout is None else open_corpus(heldout, "heldout")
    if held is not None:
        check_same_vocab(train.vocab, held, "heldout corpus", f"the training corpus {train.path}")
    model = clone(estimator)
    data = _data_stamp(train)
    saved = _done_before(model, data, out_dir, command_id)
    if saved is not None:
        return _report_done(
            saved, model.checkpoint_dir, train, held, out_dir, n_top_words, n_show_topics
        )
    if out_dir is not None:
        check_save_target(out_dir, overwrite)
    model._command_id = command_id if model.checkpoint_dir is not None else None
    model._command_data = data
    init = _initial_topics(model.init, train, model.n_components)
    if init is not model.init:
        model.set_params(init=init)
    # fail before starting a cluster, also for init counts of the wrong shape
    model.check_params(n_features=train.vocab_size)
    laps_before = _laps_in_checkpoint(model.checkpoint_dir) if model.resume else 0
    K, L, algorithm = model.n_components, model.sparsity, model.algorithm
    name = "HDP" if isinstance(model, HDP) else "LDA"
    logger.info(
        "fitting %s K=%d, L=%s (%s) on %s: %d documents, %d batches",
        name, K, L, algorithm, train.path, train.n_docs, len(train.batches),
    )  # fmt: skip
    trace = _heldout_trace(model, held, laps_before)
    with on_shared_client(model) as shared:
        link = getattr(shared, "dashboard_link", None)
        start = time.perf_counter()
        model.fit(train, callback=trace)
        seconds = time.perf_counter() - start
    report = CorpusFitReport(
        model=model,
        corpus=train.path,
        n_docs=train.n_docs,
        n_tokens=train.n_tokens,
        vocab_size=train.vocab_size,
        K=K,
        L=L,
        algorithm=algorithm,
        laps=int(model.n_laps_),
        laps_this_run=int(model.n_laps_) - laps_before,
        converged=bool(model.converged_),
        seconds=seconds,
        **_early_stopping_report(model),
        elbo_final=float(model.elbo_trace_[-1]),
        heldout=None if held is None else held.path,
        n_heldout_docs=0 if held is None else held.n_docs,
        heldout_score=model.score(held) if held is not None and held.n_docs else None,
        top_words=model.top_words(n_top_words)[:n_show_topics],
        dashboard=None if model.client == "sync" else link,
        model_name=name,
    )
    if isinstance(model, HDP):
        report.K, report.max_components = int(model.n_components_), K
        report.topic_weights = [float(w) for w in model.topic_weights_[: len(report.top_words)]]
    logger.info(
        "%s: %d laps in all, %d in %.1f s this run; final ELBO %.6g, heldout %s",
        name, report.laps, report.laps_this_run, seconds, report.elbo_final, report.heldout_score,
    )  # fmt: skip
    what = "the model" if out_dir is None else f"the model in {out_dir}"
    with commit.output_step(what):  # a signal from here on: the output is written first
        fault_point("fit.output")
        if out_dir is not None:
            _save_with_pictures(report, trace, Path(out_dir), overwrite)
        if model._command_id is not None:  # its output is written: the command is done
            with checkpoint_lock(model.checkpoint_dir):
                CheckpointDir(model.checkpoint_dir).mark_done(model._command_id)
                svi_gibbs_checkpoint.mark_command_done(model.checkpoint_dir, model._command_id)
    return report


def _heldout_trace(model: LDA, held: Corpus | None, laps_before: int) -> HeldoutTrace | None:
    """The per-lap heldout callback of a fit (None without heldout documents): kept
    in the checkpoint folder, where there is one, continuing its earlier runs' trace."""
    if held is None or not held.n_docs:
        return None
    folder = model.checkpoint_dir
    trace = HeldoutTrace(held, model.alpha, folder=folder)
    if laps_before:
        trace.continue_from(earlier_heldout(folder, trace.stamp, laps_before))
    elif folder is not None and Path(folder).is_dir():
        _drop_stale_trace(folder)
    return trace


def _drop_stale_trace(folder: Any) -> None:
    """Remove the heldout trace of a checkpoint folder that holds no checkpoint (an
    older fit's, whose checkpoints were removed): a fresh fit's trace is its own,
    and a stop after the fit's first checkpoint and before its first trace would
    otherwise resume the older fit's points.

    Only in a folder the fit starts afresh in, as decided under the folder's lock:
    no checkpoint, and nothing that :func:`lsdask.persist.resume.open_resume`
    refuses a fresh fit among (its own test, ``_foreign``). A trace in a folder
    the fit refuses is left where it is. This runs before the fit rather than in
    its locked section: that lock is taken in the estimator's ``fit``, where the
    first code of this module to run, the lap callback, comes after the first
    checkpoint is written."""
    with checkpoint_lock(folder):
        names = guarded.listdir(folder)
        if CHECKPOINT_HELDOUT_FILE not in names or _foreign(Path(folder)):
            return
        if not any(name == "LATEST" or name.startswith("ckpt-") for name in names):
            guarded.unlink(folder, CHECKPOINT_HELDOUT_FILE)


def _report_done(
    model: LDA,
    checkpoint_dir: Any,
    train: Corpus,
    held: Corpus | None,
    out_dir: Any,
    n_top_words: int,
    n_show_topics: int,
) -> CorpusFitReport:
    """The report of a command whose work was done before (:func:`_done_before`):
    the saved model's, with no lap this run."""
    logger.warning(
        "this command ran to its end before (its checkpoint %s records it done, over the "
        "same %d row groups; its model is in %s): nothing to train or write",
        checkpoint_dir, len(train.batches), out_dir,
    )  # fmt: skip
    name = "HDP" if isinstance(model, HDP) else "LDA"
    report = CorpusFitReport(
        model=model,
        corpus=train.path,
        n_docs=train.n_docs,
        n_tokens=train.n_tokens,
        vocab_size=train.vocab_size,
        K=int(model.n_components),
        L=model.sparsity,
        algorithm=model.algorithm,
        laps=int(model.n_laps_),
        laps_this_run=0,
        converged=bool(model.converged_),
        seconds=0.0,
        **_early_stopping_report(model),
        elbo_final=float(model.elbo_trace_[-1]),
        heldout=None if held is None else held.path,
        n_heldout_docs=0 if held is None else held.n_docs,
        heldout_score=model.score(held) if held is not None and held.n_docs else None,
        top_words=model.top_words(n_top_words)[:n_show_topics],
        model_dir=str(out_dir),
        model_name=name,
        done_before=True,
    )
    if isinstance(model, HDP):
        report.K, report.max_components = int(model.n_components_), int(model.n_components)
        report.topic_weights = [float(w) for w in model.topic_weights_[: len(report.top_words)]]
    commit.committed(f"the model in {out_dir}, written before")
    return report


def _save_with_pictures(
    report: CorpusFitReport, trace: HeldoutTrace | None, out: Path, overwrite: bool
) -> None:
    """Save the model to ``out`` with its pictures inside the same atomic swap:
    they are drawn into a staging folder beside ``out`` first, so a picture that
    cannot be drawn leaves no model, and a saved model always has its pictures."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = temp_sibling(out, "pictures")  # a killed writer's is removed by the next one
    guarded.makedirs(out.parent, staging.name)
    try:
        _draw(report, trace, staging)
        model = report.model
        if model._command_id is not None:  # what a rerun of this command matches
            laps = int(model.n_laps_)
            record = {"id": model._command_id, "data": model._command_data, "laps": laps}
            with guarded.open_write(staging, COMMAND_FILE, "w") as f:
                json.dump(record, f)
        pictures = guarded.listdir(out.parent, staging.name)
        with extra_files({n: staging / n for n in pictures if guarded.is_file(staging, n)}):
            report.model_dir = str(save_model(report.model, out, overwrite=overwrite))
    finally:
        guarded.remove_tree(out.parent, staging.name)

    def moved(path: str | None) -> str | None:
        return None if path is None else str(out / Path(path).name)

    report.elbo_plot, report.k_elbo_plot = moved(report.elbo_plot), moved(report.k_elbo_plot)
    report.time_plots = [str(out / Path(p).name) for p in report.time_plots]


#: the axes' labels of the pictures of a fit (laps: :data:`lsdask.plotting.LAPS_LABEL`)
TIME_LABEL = "wall time of the fit (s)"
ELBO_LABEL = "ELBO per training token (nats/token)"
HELDOUT_LABEL = "heldout log-likelihood (nats/token)"


def _draw(report: CorpusFitReport, trace: HeldoutTrace | None, out_dir: Path) -> None:
    """The ELBO per token by lap and by time, the heldout score by time (and its
    data, :data:`HELDOUT_TRACE_FILE`), and an HDP's K and ELBO by lap. The traces
    span the whole fit: a resumed run's continue those of the runs before it."""
    from lsdask.plotting import LAPS_LABEL, plot_elbo_trace, plot_k_elbo_trace

    model = report.model
    label = "dense" if report.L is None else f"L={report.L}"
    per_token = _elbo_per_token(model, report.n_tokens)
    has_elbo = bool(np.isfinite(per_token).any())  # svi-gibbs computes none
    if has_elbo:
        report.elbo_plot = str(
            plot_elbo_trace(
                {label: (model.lap_trace_, per_token)},
                out_dir / "elbo.png",
                title=f"{report.model_name} K={report.K}, {report.algorithm}, "
                f"{report.n_docs:,} documents",
                ylabel=ELBO_LABEL,
                xlabel=LAPS_LABEL,
            )
        )
    title = f"{report.model_name} K={report.K}, {label}, {report.algorithm}"
    by_time = [("elbo_time.png", model.time_trace_, per_token, ELBO_LABEL)] if has_elbo else []
    if trace is not None and trace.seconds:
        by_time.append(
            ("heldout_time.png", np.asarray(trace.seconds), np.asarray(trace.scores),
             HELDOUT_LABEL)
        )  # fmt: skip
        with guarded.open_write(out_dir, HELDOUT_TRACE_FILE, "w") as f:
            f.write(trace.json())
    for name, seconds, values, what in by_time:
        path = plot_elbo_trace(
            {label: (seconds, values)}, out_dir / name, title=title, ylabel=what,
            xlabel=TIME_LABEL,
        )  # fmt: skip
        report.time_plots.append(str(path))
    if isinstance(model, HDP):
        k_trace = np.asarray(model.n_components_trace_, dtype=float)
        report.k_elbo_plot = str(
            plot_k_elbo_trace(
                (np.arange(1, k_trace.size + 1), k_trace),
                (model.lap_trace_, per_token),
                out_dir / "k_elbo.png",
                title=title,
                ylabel="surrogate ELBO per training token (nats/token)",
                xlabel=LAPS_LABEL,
            )
        )


#: In a model folder: the heldout trace ``heldout_time.png`` is drawn from (JSON:
#: ``laps``, ``seconds`` and ``scores`` in nats per token, over the whole fit).
HELDOUT_TRACE_FILE = "heldout_trace.json"
#: In a checkpoint folder: the heldout trace of the laps made so far, which a
#: resumed run's trace continues (hidden: a checkpoint folder holds its own entries
#: and hidden files only).
CHECKPOINT_HELDOUT_FILE = ".heldout_trace.json"


class HeldoutTrace:
    """A per-lap callback: heldout document completion against the current topics.

    The 80/20 split of the heldout documents is drawn once, so every lap is
    scored on the same words; ``seconds`` are the fit's own clock (scoring
    time excluded), which a resumed run continues from the end of the run before.
    ``laps``, ``seconds`` and ``scores`` start with those of the earlier runs a
    resumed fit continues (:meth:`continue_from`); with ``folder`` (the
    checkpoint folder) the trace is written there after every lap
    (:data:`CHECKPOINT_HELDOUT_FILE`), with ``stamp``, the digest of the heldout
    documents and their split.
    """

    def __init__(
        self,
        heldout: Any,
        alpha: float,
        random_state: int = 0,
        *,
        folder: Any = None,
    ) -> None:
        self.alpha = alpha
        self.A, self.B = split_documents(read_all(heldout), 0.8, random_state)
        self.stamp = _heldout_stamp(heldout, random_state)
        self.folder = folder
        self.laps: list[int] = []
        self.seconds: list[float] = []
        self.scores: list[float] = []

    def continue_from(self, earlier: dict[str, list[float]]) -> None:
        """Start from the earlier runs' trace (:func:`earlier_heldout`)."""
        self.laps = [int(lap) for lap in earlier.get("laps", [])]
        self.seconds = [float(s) for s in earlier.get("seconds", [])]
        self.scores = [float(s) for s in earlier.get("scores", [])]

    def __call__(self, result: Any) -> None:
        if result.n_laps == 0:  # the Gibbs start's progress: its own log says how far it got
            return
        alpha = getattr(result.globals, "alpha", self.alpha)  # a learned one: the lap's
        score = document_completion(self.A, self.B, result.globals.topics, alpha)
        self.laps.append(int(result.n_laps))
        self.seconds.append(float(result.time_trace[-1]))
        self.scores.append(score)
        logger.info("lap %d: heldout %.4f nats/token", result.n_laps, score)
        if self.folder is not None:
            write_text_atomic(self.folder, Path(self.folder) / CHECKPOINT_HELDOUT_FILE, self.json())

    def json(self) -> str:
        """The trace as JSON: ``heldout`` (the stamp), ``laps``, ``seconds``, ``scores``
        (a score that is not finite, of topics giving a heldout word no mass, as
        ``null``: strict JSON has no NaN or infinity)."""
        scores = [s if math.isfinite(s) else None for s in self.scores]
        record = {"heldout": self.stamp, "laps": self.laps, "seconds": self.seconds,
                  "scores": scores}  # fmt: skip
        return json.dumps(record, indent=1, allow_nan=False)


def _heldout_stamp(heldout: Corpus, random_state: int) -> str:
    """A digest of the heldout documents (:func:`_data_stamp`) and their split's seed:
    a resumed run continues an earlier heldout trace only over the same."""
    return hashlib.sha256(f"{_data_stamp(heldout)}:{random_state}".encode()).hexdigest()


def _finite(value: Any) -> float | None:
    """``value`` as a finite float, or None where it is not a finite number (a
    bool, NaN, an infinity, an integer too large for a float)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _read_trace(record: Any) -> dict[str, Any] | None:
    """The heldout trace ``record`` as :meth:`HeldoutTrace.json` writes it, its
    numbers as floats; None where it is not one: ``heldout`` a string, and lists
    of as many laps (increasing positive integers), seconds (finite, >= 0, never
    decreasing: the fit's clock) and scores (finite numbers, or null for a
    score that was not)."""
    if not isinstance(record, dict) or not isinstance(record.get("heldout"), str):
        return None
    laps, seconds, scores = (record.get(name) for name in ("laps", "seconds", "scores"))
    if not (isinstance(laps, list) and isinstance(seconds, list) and isinstance(scores, list)):
        return None
    if not len(laps) == len(seconds) == len(scores):
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in laps):
        return None
    if not all(b > a for a, b in itertools.pairwise(laps)):
        return None
    times: list[float] = []
    for value in seconds:
        t = _finite(value)
        if t is None or t < (times[-1] if times else 0.0):
            return None
        times.append(t)
    values: list[float] = []
    for value in scores:
        v = math.nan if value is None else _finite(value)
        if v is None:
            return None
        values.append(v)
    return {"heldout": record["heldout"], "laps": laps, "seconds": times, "scores": values}


def earlier_heldout(folder: Any, stamp: str, laps_before: int) -> dict[str, list[float]]:
    """The heldout trace of the laps up to ``laps_before`` that the checkpoint folder
    ``folder`` keeps (:data:`CHECKPOINT_HELDOUT_FILE`) for the heldout documents
    ``stamp``: what a resumed run's trace starts from.

    Empty where there is none (a fresh fit; a checkpoint folder whose fit ran
    without heldout documents), and, with a warning, where it is of other
    heldout documents, unreadable, not a trace, or not a regular file (a link
    or FIFO in its place): the fit goes on, its trace from this run. The trace
    this run writes replaces the name by a rename, never writing through it.
    """
    if folder is None:
        return {}
    try:
        if not guarded.is_file(folder, CHECKPOINT_HELDOUT_FILE):
            return {}
        raw = guarded.read_json(folder, CHECKPOINT_HELDOUT_FILE)
    except (OSError, ValueError, RecursionError) as exc:  # UnsafePath is a ValueError
        logger.warning("%s in %s is unreadable (%s): the heldout trace starts with this run",
                       CHECKPOINT_HELDOUT_FILE, folder, one_line(exc))  # fmt: skip
        return {}
    record = _read_trace(raw)
    if record is None:
        logger.warning("%s in %s is not a heldout trace: the heldout trace starts with this run",
                       CHECKPOINT_HELDOUT_FILE, folder)  # fmt: skip
        return {}
    if record["heldout"] != stamp:
        logger.warning(
            "the earlier runs of checkpoint %s scored other heldout documents: the heldout "
            "trace starts with this run", folder,
        )  # fmt: skip
        return {}
    kept = sum(1 for lap in record["laps"] if lap <= laps_before)  # a stop between the two
    return {name: record[name][:kept] for name in ("laps", "seconds", "scores")}


def format_fit_report(report: CorpusFitReport, *, title: str | None = None) -> str:
    """Readable multi-line summary of a :func:`fit_corpus_lda` report."""
    lines = [title] if title else []
    L = "dense" if report.L is None else report.L
    n_tokens = max(report.n_tokens, 1.0)
    lines.append(
        f"data: {report.n_docs:,} documents, {report.n_tokens:,.0f} tokens, "
        f"V={report.vocab_size:,} ({report.corpus})"
    )
    if report.max_components is None:
        lines.append(
            f"model: {report.model_name}, K={report.K}, L={L}, algorithm={report.algorithm}"
        )
    else:
        lines.append(
            f"model: {report.model_name}, K={report.K} topics at the end (at most "
            f"{report.max_components}), L={L}, algorithm={report.algorithm}"
        )
    resumed = f", {report.laps_this_run} this run" if report.laps_this_run != report.laps else ""
    lines.append(
        f"laps: {report.laps}{resumed} ({'converged' if report.converged else 'not converged'})"
    )
    if report.best_lap is not None:
        lines.append(
            f"early stopping: kept {_lap_name(report.best_lap)}, validation score "
            f"{report.validation_score:.4f} nats/token on the held-out batches"
            + ("" if report.best_lap == report.laps else " (later laps scored lower)")
        )
    if report.done_before:
        lines.append(
            "nothing to do: this command ran to its end before (its checkpoint records it "
            "done, over the same batches); the model is the one it saved"
        )
    lines.append(f"seconds: {report.seconds:.1f}")
    if np.isfinite(report.elbo_final):
        lines.append(
            f"final ELBO: {report.elbo_final:.1f} ({report.elbo_final / n_tokens:.4f} per token)"
        )
    else:
        lines.append(
            f"final ELBO: none (algorithm={report.algorithm} computes no ELBO; --heldout "
            "scores the topics)"
        )
    if report.heldout_score is not None:
        lines.append(
            f"heldout document completion: {report.heldout_score:.4f} nats/token "
            f"({report.n_heldout_docs:,} documents of {report.heldout})"
        )
    shown = report.top_words
    weights = report.topic_weights
    if shown and weights is not None:
        lines.append("")
        lines.append(
            f"top {len(shown[0])} words of the {len(shown)} heaviest topics, by weight E[beta_k]:"
        )
        lines.extend(
            f"  {k:>3}  {w:>6.3f}  {' '.join(words)}"
            for k, (w, words) in enumerate(zip(weights, shown, strict=True))
        )
    elif shown:
        lines.append("")
        lines.append(f"top {len(shown[0])} words of the first {len(shown)} topics:")
        lines.extend(f"  {k:>3}  {' '.join(words)}" for k, words in enumerate(shown))
    if report.model_dir:
        lines.append("")
        lines.append(f"model: {report.model_dir}")
    if report.elbo_plot:
        lines.append(f"picture: {report.elbo_plot}")
    for path in report.time_plots:
        lines.append(f"picture: {path}")
    if report.k_elbo_plot:
        lines.append(f"picture: {report.k_elbo_plot}")
    if report.dashboard:
        lines.append(f"Dask dashboard (while it ran): {report.dashboard}")
    return "\n".join(lines)
