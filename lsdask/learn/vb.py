"""Full-batch variational Bayes: every batch's local step against the same
globals, then one global step per lap. The ELBO never decreases."""

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
    check_lap_converged,
    finite_or_raise,
    next_globals,
)
from lsdask.learn.protocols import Batch, Executor, G, Model
from lsdask.learn.tasks import LocalStepTask

logger = logging.getLogger(__name__)


@dataclass
class FullBatchVB:
    """Full-batch VB. Parameters as :class:`lsdask.learn.MemoizedVI`."""

    n_laps: int = 10
    tol: float = config.DEFAULT_TOL
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
        result = LearnResult(glob, model.empty_stats())
        trace = Trace(result, len(handles))
        for lap in range(1, self.n_laps + 1):
            total = executor.map_sum(task, handles, executor.broadcast(model.for_local_step(glob)))
            glob = next_globals(model, total, glob)
            elbo = finite_or_raise(model.elbo(total, glob), "ELBO")
            trace.record(elbo, len(handles), model.data_size(total))
            result.globals, result.stats, result.n_laps = glob, total, lap
            done, change = check_lap_converged(result.elbo_trace, self.tol, lap, min_laps=2)
            logger.info("vb lap %d: ELBO %.6e (relative change %.3g)", lap, elbo, change)
            if callback is not None:
                callback(result)
            if done:
                result.converged = True
                break
        return result
