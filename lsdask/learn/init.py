"""Initial global parameters from chosen example observations.

``kmeans++``: seeds drawn one by one (greedily, best of a few candidates)
with probability proportional to the Bregman divergence (the observation
model's own) from each sample row to its nearest seed so far
(Arthur & Vassilvitskii 2007; Banerjee et al. 2005).
``random``: seeds drawn uniformly. Either way every row of the
initialization sample is then hard-assigned to its nearest seed, and the
global step turns those statistics into the first ``q(pi), q(phi)``.
"""

from __future__ import annotations

import logging
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from lsdask.models.mixture import MixtureModel
from lsdask.models.observation import ObservationModel, P
from lsdask.models.stats import SuffStats

logger = logging.getLogger(__name__)

INIT_METHODS = ("kmeans++", "random")

#: an initialization sample: dense rows, or a CSR matrix of counts
Sample: TypeAlias = "np.ndarray | sp.csr_matrix"


def _nearest(
    observation: ObservationModel[P], X: Sample, seeds: np.ndarray, rows: object = None
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int32]]:
    """Each row's divergence to its nearest seed, and that seed; ``rows`` is
    ``observation.divergence_sample(X)`` if the caller has it."""
    closest = np.full(X.shape[0], np.inf)
    nearest = np.zeros(X.shape[0], dtype=np.int32)
    rows = observation.divergence_sample(X) if rows is None else rows
    for j, s in enumerate(seeds):
        d = observation.divergence(rows, X[s : s + 1])[:, 0]
        better = d < closest
        closest[better] = d[better]
        nearest[better] = j
    return closest, nearest


def kmeans_plus_plus(
    observation: ObservationModel[P], X: Sample, K: int, rng: np.random.Generator
) -> tuple[np.ndarray, npt.NDArray[np.int32]]:
    """K seed rows chosen by greedy k-means++ under ``observation.divergence``.

    Each step draws ``2 + log K`` candidates with probability proportional to
    the divergence to the nearest seed so far and keeps the one that lowers
    the total divergence most (the greedy variant scikit-learn uses).
    Returns the seed row indices and, for every row, its nearest seed.
    """
    n = X.shape[0]
    n_trials = 2 + int(np.log(K))
    seeds = [int(rng.integers(n))]
    rows = observation.divergence_sample(X)
    closest, nearest = _nearest(observation, X, np.asarray(seeds), rows)
    for j in range(1, K):
        closest[seeds] = 0.0
        total = closest.sum()
        if total > 0 and np.isfinite(total):
            candidates = rng.choice(n, size=n_trials, p=closest / total)
        else:  # every row coincides with a seed: take any unused row
            candidates = rng.choice(np.setdiff1d(np.arange(n), seeds), size=1)
        div = observation.divergence(rows, X[candidates])
        best = int(np.argmin(np.minimum(closest[:, None], div).sum(axis=0)))
        seeds.append(int(candidates[best]))
        better = div[:, best] < closest
        closest[better] = div[better, best]
        nearest[better] = j
    nearest[seeds] = np.arange(K)
    return np.asarray(seeds), nearest


def choose_seeds(
    observation: ObservationModel[P], X: Sample, K: int, method: str, rng: np.random.Generator
) -> tuple[np.ndarray, npt.NDArray[np.int32]]:
    """K distinct seed rows of X and each row's nearest seed."""
    n = X.shape[0]
    if K > n:
        raise ValueError(
            f"n_components={K} exceeds the {n} observations available to initialize from; "
            "use fewer components or more data"
        )
    if method == "kmeans++":
        return kmeans_plus_plus(observation, X, K, rng)
    if method == "random":
        seeds = rng.choice(n, size=K, replace=False)
        _, nearest = _nearest(observation, X, seeds)
        nearest[seeds] = np.arange(K)
        return seeds, nearest
    raise ValueError(f"init must be one of {INIT_METHODS}; got {method!r}")


def initial_stats(
    model: MixtureModel[P], X: Sample, method: str, rng: np.random.Generator
) -> SuffStats:
    """Statistics of the sample X hard-assigned to seeds chosen by ``method``."""
    K = model.n_components
    seeds, nearest = choose_seeds(model.observation, X, K, method, rng)
    logger.debug("initial seeds (%s): %s", method, seeds[:20])
    resp = np.ones((X.shape[0], 1))
    idx = nearest.astype(np.int32)[:, None]
    obs_stats = model.observation.empty_stats(K)
    model.observation.summarize_sparse(model.observation.prepare(X), resp, idx, obs_stats)
    counts = np.bincount(nearest, minlength=K).astype(np.float64)
    return SuffStats(N=counts, H=np.zeros(K), **obs_stats)
