"""``LDA(algorithm="svi-gibbs")``: stochastic VI with a sparse Gibbs local step.

What :meth:`lsdask.LDA.fit` runs for ``algorithm="svi-gibbs"``
(:class:`lsdask.learn.svi_gibbs.SviGibbs` over a
:class:`lsdask.io.doc_stream.DocumentStream`): its own checks, its own
checkpoint file, and the fitted attributes every LDA has, so that a model
fitted this way saves, loads, transforms and scores like any other.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lsdask import config
from lsdask.engine import make_executor
from lsdask.errors import DataError, FitInterrupted
from lsdask.estimators.params import AUTO
from lsdask.io.doc_stream import DocumentStream
from lsdask.learn.svi_gibbs import StreamState, SviGibbs
from lsdask.models.lda import LDAGlobals, LDAModel
from lsdask.models.stats import SuffStats
from lsdask.persist.resume import is_rerun, stop_on_signals
from lsdask.persist.svi_gibbs import checkpoint_path, load_stream_state, save_stream_state
from lsdask.validation import check_int

logger = logging.getLogger(__name__)

#: the name of the algorithm
SVI_GIBBS = "svi-gibbs"


@dataclass
class EpochResult:
    """What a fit's ``callback`` gets after every epoch of ``svi-gibbs``: the
    topics so far as ``globals`` (an :class:`LDAGlobals`), epochs made as
    ``n_laps``, seconds since the run started as ``time_trace``, and the
    stored entries of Ñ after each epoch as ``nonzero_trace``."""

    globals: LDAGlobals
    n_laps: int
    time_trace: list[float] = field(default_factory=list)
    nonzero_trace: list[int] = field(default_factory=list)


def check_svi_gibbs_params(est: Any) -> None:
    """What ``svi-gibbs`` asks beyond the parameter table."""
    check_int("gibbs_burnin", est.gibbs_burnin, 0, hint="B burn-in sweeps; 0 keeps every sweep.")
    check_int("gibbs_samples", est.gibbs_samples, 1, hint="S kept sweeps; at least one.")
    check_int("minibatch_size", est.minibatch_size, 1, hint="Documents per minibatch.")
    kappa = float(est.svi_kappa)
    if not 0.5 < kappa <= 1.0:
        raise ValueError(
            f"svi_kappa must be in (0.5, 1] for algorithm='svi-gibbs' (the step sizes "
            f"(delay + t) ** -kappa must sum to infinity and their squares not); got {kappa}"
        )
    if not float(est.svi_delay) > 0.0:
        raise ValueError(
            f"svi_delay must be > 0 for algorithm='svi-gibbs': rho_1 = (delay + 1) ** -kappa "
            f"= 1 would zero the running scale of the sparse topics; got {est.svi_delay}"
        )


def _settings(est: Any, V: int) -> dict[str, Any]:
    """The settings a resumed run must share with the checkpoint's."""
    return {
        "n_components": int(est.n_components),
        "vocab_size": int(V),
        "alpha": est.alpha if _learns_alpha(est) else float(est.alpha),
        "eta": float(est.eta),
        "gibbs_burnin": int(est.gibbs_burnin),
        "gibbs_samples": int(est.gibbs_samples),
        "gibbs_estimator": str(est.gibbs_estimator),
        "gibbs_weights": str(est.gibbs_weights),
        "gibbs_prune": float(est.gibbs_prune),
        "minibatch_size": int(est.minibatch_size),
        "svi_delay": float(est.svi_delay),
        "svi_kappa": float(est.svi_kappa),
    }


def _learns_alpha(est: Any) -> bool:
    return isinstance(est.alpha, str) and est.alpha == AUTO


def _start_alpha(est: Any) -> np.ndarray:
    """The per-topic prior the sampler starts from: alpha / K, or where it is
    learned ``config.GIBBS_LEARNED_ALPHA_START`` per topic."""
    K = int(est.n_components)
    if _learns_alpha(est):
        return np.full(K, float(config.GIBBS_LEARNED_ALPHA_START))
    return np.full(K, float(est.alpha) / K)


def _resumed(est: Any, settings: dict[str, Any]) -> StreamState | None:
    folder = est.checkpoint_dir
    if folder is None:
        if est.resume:
            raise ValueError("resume=True needs checkpoint_dir: the folder to resume from")
        return None
    loaded = load_stream_state(folder)
    if loaded is None:
        return None
    if not est.resume:
        raise ValueError(
            f"{checkpoint_path(folder)} holds a checkpoint; pass resume=True (lsdask fit "
            "--resume DIR) to continue it, or give another checkpoint folder"
        )
    state, saved = loaded
    # written before the estimator, the weights or the pruning were a choice
    saved = {"gibbs_estimator": "draws", "gibbs_weights": "geometric", "gibbs_prune": 0.0,
             **saved}  # fmt: skip
    differ = {k: (saved.get(k), v) for k, v in settings.items() if saved.get(k) != v}
    if differ:
        what = ", ".join(f"{k}: checkpoint {a!r}, asked {b!r}" for k, (a, b) in differ.items())
        raise ValueError(
            f"the checkpoint in {folder} was written by another fit ({what}); resume with "
            "the same settings, or start a new checkpoint folder"
        )
    return state


def fit_svi_gibbs(
    est: Any,
    X: Any,
    callback: Any = None,
    vocabulary: Any = None,
    check_words: Callable[[Any, int], list[str]] | None = None,
) -> Any:
    """Fit ``est`` (an :class:`lsdask.LDA`) by SVI-Gibbs; returns it. ``check_words``
    checks a matrix's ``vocabulary`` against its number of columns."""
    check_svi_gibbs_params(est)
    if not (isinstance(est.init, str) and est.init == "auto"):
        logger.info("algorithm='svi-gibbs' starts the topics at the prior; init is not used")
    stream = DocumentStream(X)
    V = stream.n_features
    vocab = stream.vocab
    if vocab is None and vocabulary is not None:
        vocab = list(vocabulary) if check_words is None else check_words(vocabulary, V)
    if stream.n_docs == 0:
        raise DataError(f"{stream.description}: holds no documents; nothing to learn from")
    K = int(est.n_components)
    if est.gibbs_weights == "geometric" and float(est.eta) < 0.2:
        logger.warning(
            "svi-gibbs (gibbs_weights='geometric') with eta=%g: exp psi(eta) is so small that a "
            "word's tokens go almost only to topics already holding it, and the topics stop "
            "changing after the first epoch; "
            "eta=0.3-0.4, or gibbs_weights='mean', is recommended (docs/algorithms.md)",
            float(est.eta),
        )
    if not _learns_alpha(est) and float(est.alpha) / K < 0.01:
        logger.warning(
            "svi-gibbs with alpha=%g at K=%d is %.2g per topic: documents' starts stick to a "
            "few topics; the paper's 0.1 per topic is alpha=%g",
            float(est.alpha), K, float(est.alpha) / K, 0.1 * K,
        )  # fmt: skip
    settings = _settings(est, V)
    learner = SviGibbs(
        n_topics=K,
        alpha=_start_alpha(est),
        learn_alpha=_learns_alpha(est),
        eta=float(est.eta),
        burnin=int(est.gibbs_burnin),
        samples=int(est.gibbs_samples),
        estimator=str(est.gibbs_estimator),
        weights=str(est.gibbs_weights),
        prune=float(est.gibbs_prune),
        minibatch_size=int(est.minibatch_size),
        delay=float(est.svi_delay),
        kappa=float(est.svi_kappa),
        n_epochs=int(est.n_laps),
        progress=est.progress,
    )
    state = _resumed(est, settings)
    command_id = getattr(est, "_command_id", None)  # set by ``lsdask fit`` (jobs.corpus_lda)
    if state is None:
        state = learner.start(stream, np.random.default_rng(est.random_state).integers(2**62))
    elif is_rerun(state.command, command_id):
        # the same command, interrupted (its output not written): finish what it asked
        assert state.command is not None
        learner.n_epochs = int(state.command["target"])
        logger.info("rerun of an interrupted command: %d epochs in all", learner.n_epochs)
    elif state.finished:
        learner.n_epochs = state.epoch + int(est.n_laps)  # a finished run: n_laps more
    state.command = (
        None
        if command_id is None
        else {"id": command_id, "target": learner.n_epochs, "done": False}
    )
    data = getattr(est, "_command_data", None)  # what the command trains on
    if state.command is not None and data is not None:
        state.command["data"] = data

    def model_of(s: StreamState) -> LDAModel:
        prior = s.topics.prior
        alpha = float(est.alpha) if prior is None else tuple(prior.alpha.tolist())
        # a learned prior is the model's (saved as alpha="auto"), not a fixed one
        return LDAModel(K, V, alpha=alpha, eta=float(est.eta), learn_alpha=prior is not None)

    def on_epoch(s: StreamState) -> None:
        if callback is not None:
            glob = model_of(s).global_step(_stats(s, V))
            callback(EpochResult(glob, s.epoch, list(s.time_trace), list(s.nonzero_trace)))

    def write(s: StreamState) -> None:
        if est.checkpoint_dir is not None:
            save_stream_state(est.checkpoint_dir, s, settings)

    package_logger = logging.getLogger("lsdask")
    previous_level = package_logger.level
    if est.verbose:
        package_logger.setLevel(logging.INFO if est.verbose == 1 else logging.DEBUG)
    executor = make_executor(est.client, est.n_workers)
    try:
        with stop_on_signals(True) as stop_requested:
            state = learner.run(
                stream, executor, state, on_epoch=on_epoch, checkpoint=write,
                stop_requested=stop_requested,
            )  # fmt: skip
            if not state.finished:  # a stop was asked: the checkpoint (if any) is written
                # raised inside the block, which records the signal's number (for the
                # exit status: 143 for SIGTERM, 130 for Ctrl-C)
                raise FitInterrupted(est.checkpoint_dir)
    finally:
        if executor is not est.client:
            executor.close()
        package_logger.setLevel(previous_level)
    stats = _stats(state, V)
    model = model_of(state)
    glob = model.global_step(stats)
    n = len(state.nonzero_trace)
    est.elbo_trace_ = np.full(n, np.nan)  # SVI-Gibbs computes no ELBO
    est.lap_trace_ = np.arange(1, n + 1, dtype=np.float64)
    est.time_trace_ = np.asarray(state.time_trace, dtype=np.float64)
    est.size_trace_ = np.asarray(state.docs_trace, dtype=np.float64)
    est.nonzero_trace_ = np.asarray(state.nonzero_trace, dtype=np.int64)
    est.n_laps_ = state.epoch
    est.n_steps_ = state.step
    est.driver_share_ = state.driver_seconds / max(
        state.driver_seconds + state.task_seconds, 1e-300
    )
    est.converged_ = False
    est.n_features_in_ = V
    est._set_fitted(model, glob, stats, vocab)
    if len(state.alpha_trace) == n:
        est.alpha_trace_ = np.asarray(state.alpha_trace, dtype=np.float64)
    else:  # a checkpoint written before the trace was kept: a fixed alpha
        est.alpha_trace_ = np.full(n, float(np.sum(_start_alpha(est))))
    est._record_fit_params()
    return est


def _stats(state: StreamState, V: int) -> SuffStats:
    """Statistics whose global step gives ``lambda = eta + Ñ``."""
    words = state.topics.n_tilde()
    return SuffStats(
        words=words,
        H=np.zeros(1),
        alloc=np.zeros(1),
        N=words.sum(axis=1),
        n_docs=np.array([float(sum(state.sizes))]),
    )
