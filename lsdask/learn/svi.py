"""Stochastic variational inference (Hoffman et al. 2013; lsparse Sec. 3.4).

Each update samples batches (a fresh permutation per lap), runs the local
step, scales their statistics by ``N / |batch|`` and takes a natural-gradient
step of size ``rho_t = (delay + t) ** (-kappa)``. The conjugate posteriors'
natural parameters are affine in the statistics, so the step is an
interpolation of statistics: ``S <- (1 - rho) S + rho (N/|b|) S_b``. The
recorded ELBO is the noisy estimate from the scaled batch statistics.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lsdask import config
from lsdask.learn.base import (
    Callback,
    LearnResult,
    Trace,
    finite_or_raise,
    next_globals,
    progress_bar,
    waves,
)
from lsdask.learn.protocols import Batch, Executor, G, Model
from lsdask.learn.tasks import LocalStepTask
from lsdask.models.stats import SuffStats

logger = logging.getLogger(__name__)


@dataclass
class StochasticVI:
    """SVI with learning rate ``(delay + t) ** (-kappa)``.

    Parameters
    ----------
    n_laps : int
        Passes over the data (each lap visits every batch once).
    delay, kappa : float
        Learning-rate schedule; ``kappa`` in (0.5, 1] for convergence.
    batches_per_update : int or None
        Batches per stochastic step; default the executor's parallel slots.
    n_total_rows : int or None
        N, to scale batch statistics by ``N / |batch|``; default assumes
        equal batches (``B / batches``).
    initial_stats : SuffStats or None
        Whole-data statistics the first step moves away from (e.g. the
        initialization sample's, scaled to N); the step counter then starts
        at 1 so the initialization is not discarded by ``rho_0 = 1``.
    """

    n_laps: int = 10
    delay: float = config.SVI_DELAY
    kappa: float = config.SVI_KAPPA
    batches_per_update: int | None = None
    n_total_rows: int | None = None
    initial_stats: SuffStats | None = None
    progress: bool | None = None

    def run(
        self,
        model: Model[G],
        executor: Executor,
        batches: Sequence[Batch],
        glob: G,
        rng: np.random.Generator,
        sparsity: int | None,
        callback: Callback[G] | None = None,
    ) -> LearnResult[G]:
        task = LocalStepTask(model, sparsity)
        handles = executor.register(batches)
        B = len(handles)
        P = self.batches_per_update or executor.n_slots
        result = LearnResult(glob, model.empty_stats())
        trace = Trace(result, B)
        state = self.initial_stats
        t = 0 if state is None else 1
        for lap in range(1, self.n_laps + 1):
            bar = progress_bar(B, f"lap {lap}", self.progress)
            for wave in waves(rng.permutation(B), P):
                shared = executor.broadcast(model.for_local_step(glob))
                batch = executor.map_sum(task, [handles[b] for b in wave], shared)
                n_batch = model.row_count(batch)
                scale = self.n_total_rows / n_batch if self.n_total_rows else B / len(wave)
                rho = (self.delay + t) ** (-self.kappa)
                scaled = batch * scale
                state = scaled if state is None else state * (1.0 - rho) + scaled * rho
                glob = next_globals(model, state, glob)
                elbo = finite_or_raise(model.elbo(scaled, glob), "ELBO estimate")
                trace.record(elbo, len(wave), model.data_size(scaled))
                t += 1
                bar.update(len(wave))
            bar.close()
            assert state is not None  # every lap visits at least one batch
            result.globals, result.stats, result.n_laps = glob, state, lap
            logger.info("svi lap %d: ELBO estimate %.6e, rho %.3g", lap, result.elbo_trace[-1], rho)
            if callback is not None:
                callback(result)
        return result
