"""``GaussianMixture`` / ``MultinomialMixture(algorithm="esvi")``: the fit by ESVI
(:mod:`lsdask.learn.esvi_mixture`).

The components stay cut into ``n_blocks`` blocks, one per worker, and the
rows with their responsibilities stay where they were dealt; the driver
receives a few numbers per part and sub-step. At the end, ``fit`` gathers the
components' statistics (K x the observation model's) into the fitted
attributes, as the other algorithms give them.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from lsdask import config
from lsdask.config import LOST_WORKER_RETRIES
from lsdask.engine.partitions import open_partitions, reopen_partitions
from lsdask.errors import ClusterError
from lsdask.learn import initial_stats
from lsdask.learn.esvi_mixture import (
    check_mixture_parts,
    checkpoint_mixture,
    resume_mixture,
    rotate_mixture,
    start_mixture,
)
from lsdask.models import MixtureModel, SuffStats
from lsdask.models.esvi_mixture import ESVIMixture
from lsdask.persist.esvi_store import checkpoint_store
from lsdask.validation import check_sparsity

logger = logging.getLogger(__name__)
_package_logger = logging.getLogger("lsdask")


def start_stats(
    observation: Any, K: int, alpha: float, sample: Any, init: str, rng: np.random.Generator
) -> dict[str, np.ndarray]:
    """The statistics memoized VI starts from: ``sample`` hard-assigned to the seeds
    chosen by ``init`` (:func:`lsdask.learn.initial_stats`), for all K components."""
    stats = initial_stats(MixtureModel(observation, K, alpha), sample, init, rng)
    names = ["N", *observation.empty_stats(1)]
    return {n: np.asarray(stats.array(n), dtype=np.float64) for n in names}


def fit_mixture_esvi(
    est: Any, source: Any, observation: Any, rng: np.random.Generator, callback: Any = None
) -> Any:
    """Fit the mixture estimator ``est`` by ESVI in exact mode, in lockstep
    sub-steps or nomadic (``est.schedule``): ``n_laps`` rotations in all at most
    (fewer when the relative ELBO change of a rotation
    falls below ``tol``); ``callback(run)`` after every rotation. With
    ``checkpoint_dir``, every rotation is written block by block to its
    ``esvi/`` folder, as ESVI LDA writes it; with ``resume``, the fit goes on
    from the last complete rotation there (same settings and data); without
    it, a folder that holds a checkpoint is refused. A worker lost during a
    rotation, its checkpoint or the final gather is recovered from there too,
    by itself. Returns ``est``."""
    K = est.n_components
    if est.sparsity is not None:
        check_sparsity(est.sparsity, K)
        raise ValueError(
            f"sparsity={est.sparsity} is not supported with algorithm='esvi': each row keeps "
            "its responsibilities over all K components (Theorem 1 moves mass within a "
            "block); use sparsity=None"
        )
    if est.n_laps < 1:
        raise ValueError("n_laps must be at least 1 with algorithm='esvi' (rotations to run)")
    default_p = 1 if isinstance(est.client, str) and est.client == "sync" else est.n_workers or 2
    P = est.n_blocks or default_p
    check_mixture_parts(source.batch_rows, P, K)  # before a cluster is started
    sample = source.sample(config.INIT_SAMPLE_ROWS, rng, check=observation.check_data)
    observation = observation.with_data_defaults(sample)
    # the seeds drawn first, as memoized VI draws them: the same start for the same random_state
    start = start_stats(observation, K, float(est.alpha), sample, est.init, rng)
    model = ESVIMixture(observation, K, float(est.alpha), int(rng.integers(2**31)))
    store = checkpoint_store(est.checkpoint_dir, est.resume)
    settings = {
        "model": type(observation).__name__, "K": K, "P": P, "D": int(source.n_features),
        "alpha": float(est.alpha), "init": est.init, "seed": model.seed,
        "batches": [str(getattr(b, "key", i)) for i, b in enumerate(source.batches)],
    }  # fmt: skip
    if est.schedule != "rotation":  # checkpoints of the rotation schedule keep their settings
        settings["schedule"] = est.schedule
    previous_level = _package_logger.level
    if est.verbose:
        _package_logger.setLevel(logging.INFO if est.verbose == 1 else logging.DEBUG)
    parts, owned = open_partitions(est.client, P, est.n_workers)
    try:
        run = None
        if store is not None and est.resume:
            run = resume_mixture(model, parts, store, settings)
        if run is None:
            run = start_mixture(model, parts, source.batches, source.batch_rows, rng, lambda: start)
        converged = False
        losses = 0
        while True:
            try:
                while len(run.elbo_trace) < est.n_laps and not converged:
                    rotate_mixture(model, parts, run, 1, schedule=est.schedule)
                    if store is not None:
                        checkpoint_mixture(model, parts, run, store, settings)
                    losses = 0
                    if callback is not None:
                        callback(run)
                    trace = run.elbo_trace
                    if len(trace) > 1 and est.tol > 0:
                        converged = abs(trace[-1] - trace[-2]) <= est.tol * abs(trace[-2])
                blocks = parts.gather(run.blocks)  # K components' statistics: the fitted model
                break
            except ClusterError as exc:
                # a worker lost in a rotation, in its checkpoint or in the final
                # gather: go on from the last complete rotation written
                latest = None if store is None else store.latest()
                if store is None or latest is None or losses >= LOST_WORKER_RETRIES:
                    raise
                losses += 1
                logger.warning("%s; resuming from rotation %s", exc, latest["rotation"])
                parts.release(run.blocks + run.shards)
                parts = reopen_partitions(parts, P)
                resumed = resume_mixture(model, parts, store, settings)
                assert resumed is not None  # store.latest() was checked
                run = resumed
        parts.release(run.blocks + run.shards)
    finally:
        for obj in owned:
            obj.close()
        _package_logger.setLevel(previous_level)
    names = list(blocks[0].stats)
    stats = {n: np.zeros((K, *blocks[0].stats[n].shape[1:])) for n in names}
    for block in blocks:
        for n in names:
            stats[n][block.comps] = block.stats[n]
    mixture = MixtureModel(observation, K, float(est.alpha))
    est.model_ = mixture
    est.posterior_ = mixture.global_step(SuffStats(**stats))
    est.weights_ = mixture.allocation.mean_weights(est.posterior_.theta)
    est.elbo_trace_ = np.asarray(run.elbo_trace)
    est.substep_elbo_trace_ = np.asarray(run.substep_elbo)
    est.time_trace_ = np.asarray(run.time_trace)
    est.lap_trace_ = np.arange(1, len(run.elbo_trace) + 1, dtype=float)
    est.size_trace_ = np.full(len(run.elbo_trace), float(run.n_rows))
    est.n_laps_ = len(run.elbo_trace)
    est.converged_ = converged
    est.n_features_in_ = source.n_features
    est._set_fitted(mixture)
    est._record_fit_params()
    return est
