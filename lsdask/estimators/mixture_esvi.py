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
from lsdask.engine.partitions import open_partitions
from lsdask.learn import initial_stats
from lsdask.learn.esvi_mixture import rotate_mixture, start_mixture
from lsdask.models import MixtureModel, SuffStats
from lsdask.models.esvi_mixture import ESVIMixture
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


def fit_mixture_esvi(est: Any, source: Any, observation: Any, rng: np.random.Generator) -> Any:
    """Fit the mixture estimator ``est`` by ESVI in exact mode: ``n_laps``
    rotations at most (fewer when the relative ELBO change of a rotation falls
    below ``tol``). Returns ``est``."""
    K = est.n_components
    if est.sparsity is not None:
        check_sparsity(est.sparsity, K)
        raise ValueError(
            f"sparsity={est.sparsity} is not supported with algorithm='esvi': each row keeps "
            "its responsibilities over all K components (Theorem 1 moves mass within a "
            "block); use sparsity=None"
        )
    if est.checkpoint_dir is not None:
        raise ValueError(
            "checkpoint_dir is not supported with a mixture's algorithm='esvi' yet; leave it "
            "None or use algorithm='memo'"
        )
    if est.n_laps < 1:
        raise ValueError("n_laps must be at least 1 with algorithm='esvi' (rotations to run)")
    default_p = 1 if isinstance(est.client, str) and est.client == "sync" else est.n_workers or 2
    P = est.n_blocks or default_p
    sample = source.sample(config.INIT_SAMPLE_ROWS, rng, check=observation.check_data)
    observation = observation.with_data_defaults(sample)
    # the seeds drawn first, as memoized VI draws them: the same start for the same random_state
    start = start_stats(observation, K, float(est.alpha), sample, est.init, rng)
    model = ESVIMixture(observation, K, float(est.alpha), int(rng.integers(2**31)))
    previous_level = _package_logger.level
    if est.verbose:
        _package_logger.setLevel(logging.INFO if est.verbose == 1 else logging.DEBUG)
    parts, owned = open_partitions(est.client, P, est.n_workers)
    try:
        run = start_mixture(
            model, parts, source.batches, source.batch_rows, rng,
            lambda: start,
        )  # fmt: skip
        converged = False
        for _ in range(est.n_laps):
            rotate_mixture(model, parts, run, 1)
            trace = run.elbo_trace
            if len(trace) > 1 and est.tol > 0:
                if abs(trace[-1] - trace[-2]) <= est.tol * abs(trace[-2]):
                    converged = True
                    break
        blocks = parts.gather(run.blocks)  # K components' statistics: the fitted model
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
