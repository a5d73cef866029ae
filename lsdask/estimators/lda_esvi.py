"""``LDA(algorithm="esvi")``: the fit by ESVI (:mod:`lsdask.learn.esvi`).

The topic-word parameters stay cut into ``n_blocks`` vocabulary blocks, one
per worker, for the whole run; only the K topic totals travel to the driver
after every sub-step. At the end, ``fit`` gathers the blocks into
``components_`` (K x V) so that the fitted estimator scores, transforms and
saves like any other: the one point where the whole of lambda is in one
process.
"""

from __future__ import annotations

import logging
import os
from typing import Any

import numpy as np

from lsdask.config import LOST_WORKER_RETRIES
from lsdask.engine.partitions import open_partitions, reopen_partitions
from lsdask.errors import ClusterError
from lsdask.learn import esvi
from lsdask.models.esvi_lda import ESVILDA, VocabPartition, gather_topics
from lsdask.models.stats import SuffStats
from lsdask.persist.esvi_store import ESVIStore

logger = logging.getLogger(__name__)
_package_logger = logging.getLogger("lsdask")


def check_esvi_settings(est: Any, vocab_size: int) -> tuple[int, int]:
    """``(P, C)`` for a fit over ``vocab_size`` words, or a ValueError naming the
    parameter and the fix."""
    for name in ("alpha", "eta"):
        if isinstance(getattr(est, name), str):
            raise ValueError(
                f"{name}='auto' is not supported with algorithm='esvi': the priors are fixed "
                f"during the rotations; give a number ({name}=0.5) or use algorithm='memo'"
            )
    default_p = 1 if isinstance(est.client, str) and est.client == "sync" else est.n_workers or 2
    P = est.n_blocks or default_p
    if P > vocab_size:
        raise ValueError(
            f"n_blocks={P} is larger than the vocabulary ({vocab_size} words): every block "
            f"needs at least one word. Use n_blocks <= {vocab_size}"
        )
    K = est.n_components
    C = K if est.topk is None else est.topk
    if not 1 <= C <= K:
        raise ValueError(f"topk must be an integer in [1, {K}] (K); got {C!r}")
    return P, C


def fit_esvi(est: Any, source: Any, vocab: list[str] | None, *, callback: Any = None) -> Any:
    """Fit the LDA estimator ``est`` to the batches of ``source`` by ESVI in exact
    mode; ``n_laps`` rotations in all at most (fewer when the relative ELBO change
    of a rotation falls below ``tol``). With ``checkpoint_dir``, every rotation is
    written block by block to its ``esvi/`` folder; with ``resume``, the fit goes
    on from the last complete rotation there (same settings and batches), up to
    ``n_laps`` rotations in all; without it, a folder that holds a checkpoint is
    refused. A worker lost during a rotation, its checkpoint or the final gather
    is recovered from there too, by itself. Returns ``est``."""
    V, K = source.n_features, est.n_components
    P, C = check_esvi_settings(est, V)
    if est.n_laps < 1:
        raise ValueError("n_laps must be at least 1 with algorithm='esvi' (rotations to run)")
    priors = est._priors()
    rng = np.random.default_rng(est.random_state)
    warm = not (isinstance(est.init, str) and est.init in ("auto", "random"))
    model = ESVILDA(
        K, V, np.full(K, priors["alpha"] / K), priors["eta"], C, est.topk_rule,
        int(rng.integers(2**31)), est.esvi_iters, warm,
    )  # fmt: skip

    def start_counts() -> np.ndarray:
        """The start's topic-word counts (K, V), made in the driver (init='gibbs',
        'kmeans++' or an array), as for memoized VI."""
        lda = est._model(V)
        sample, counts = est._init_inputs(lda, source, rng)
        stats = est._initial_stats(lda, sample, rng, counts, source.n_rows)
        return np.asarray(stats.array("words"), dtype=np.float64)

    store = None
    if est.checkpoint_dir is not None:
        store = ESVIStore(os.path.join(os.fspath(est.checkpoint_dir), "esvi"))
        if store.exists() and not est.resume:
            raise ValueError(
                f"{store.folder} holds an ESVI checkpoint; pass resume=True (lsdask fit "
                "--resume DIR) to continue it, or give another checkpoint folder (or remove "
                "that one) to start afresh"
            )
    settings = {
        "K": K, "V": V, "P": P, "C": C, "rule": est.topk_rule, "alpha": priors["alpha"],
        "eta": priors["eta"], "seed": model.seed, "esvi_iters": est.esvi_iters,
        "init": est.init if isinstance(est.init, str) else "counts",
        "batches": [str(getattr(b, "key", i)) for i, b in enumerate(source.batches)],
    }  # fmt: skip
    previous_level = _package_logger.level
    if est.verbose:
        _package_logger.setLevel(logging.INFO if est.verbose == 1 else logging.DEBUG)
    parts, owned = open_partitions(est.client, P, est.n_workers)
    try:
        run = None
        if store is not None and est.resume:
            run = esvi.resume(model, parts, store, settings)
        if run is None:
            run = esvi.start(
                model, parts, source.batches, VocabPartition.balanced, rng,
                start_counts if warm else None,
            )  # fmt: skip
        converged = False
        losses = 0
        while True:
            try:
                while len(run.elbo_trace) < est.n_laps and not converged:
                    esvi.rotate(model, parts, run, 1)
                    if store is not None:
                        esvi.checkpoint(model, parts, run, store, settings)
                    losses = 0
                    if callback is not None:
                        callback(run)
                    trace = run.elbo_trace
                    if len(trace) > 1 and est.tol > 0:
                        converged = abs(trace[-1] - trace[-2]) <= est.tol * abs(trace[-2])
                # the whole model: asked for by fit's attributes
                blocks = parts.gather(run.blocks)
                break
            except ClusterError as exc:
                # a worker lost in a rotation, in its checkpoint or in the final
                # gather: go on from the last complete rotation written
                latest = None if store is None else store.latest()
                if latest is None or losses >= LOST_WORKER_RETRIES:
                    raise
                losses += 1
                logger.warning("%s; resuming from rotation %s", exc, latest["rotation"])
                parts.release(run.blocks + run.shards)
                parts = reopen_partitions(parts, P)
                resumed = esvi.resume(model, parts, store, settings)
                assert resumed is not None  # store.latest() was checked
                run = resumed
        sums = run.sums
        parts.release(run.blocks + run.shards)
    finally:
        for obj in owned:
            obj.close()
        _package_logger.setLevel(previous_level)
    lam = gather_topics(blocks, V)
    lda = est._model(V)
    counts = lam - model.eta
    stats = SuffStats(
        words=counts,
        H=np.array([sums["H"]]),
        alloc=np.array([sums["alloc"]]),
        N=counts.sum(axis=1),
        n_docs=np.array([float(source.n_rows)]),
    )
    est._set_fitted(lda, lda.global_step(stats), stats, vocab)
    est.elbo_trace_ = np.asarray(run.elbo_trace)
    est.substep_elbo_trace_ = np.asarray(run.substep_elbo)
    est.time_trace_ = np.asarray(run.time_trace)
    est.lap_trace_ = np.arange(1, len(run.elbo_trace) + 1, dtype=float)
    est.size_trace_ = np.full(len(run.elbo_trace), run.n_tokens)
    est.alpha_trace_ = np.full(len(run.elbo_trace), float(model.alpha.sum()))
    est.n_laps_ = len(run.elbo_trace)
    est.converged_ = converged
    est.n_features_in_ = V
    est._components_trace = []
    est.block_mass_ = np.asarray(run.partition.mass)
    est._record_fit_params()
    return est
