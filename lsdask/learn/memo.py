"""Memoized variational inference (lsparse Sec. 3.4; Hughes & Sudderth 2013).

The batches are fixed. The first lap visits every batch against the initial
globals and fills the memo (one full-batch VB step), so the objective is a
whole-data ELBO from the first value on. From then on, visiting batch b runs
the local step against the current globals and replaces its cached
statistics, ``S <- S - S_b(old) + S_b(new)``, then the global step follows.
A wave of P batches visited against the same globals is still exact block
coordinate ascent, so with a closed-form local step (any L) the ELBO never
decreases. At the end of every lap the whole-data statistics are re-summed
from the memo, so rounding never accumulates.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lsdask import config
from lsdask.learn.base import (
    Callback,
    LearnResult,
    Trace,
    check_lap_converged,
    finite_or_raise,
    progress_bar,
    waves,
)
from lsdask.learn.tasks import LocalStepTask
from lsdask.models.stats import SuffStats, sum_stats

logger = logging.getLogger(__name__)


@dataclass
class MemoizedVI:
    """Memoized VI over fixed batches.

    Parameters
    ----------
    n_laps : int
        Maximum passes over all batches.
    tol : float
        Stop when the relative ELBO change between laps is below tol.
    batches_per_update : int or None
        Batches visited against the same globals before each global step;
        default the executor's number of parallel slots.
    shuffle : bool
        Visit batches in a fresh random order every lap.
    progress : bool or None
        Progress bar per lap (None: only on a terminal).
    """

    n_laps: int = 10
    tol: float = config.DEFAULT_TOL
    batches_per_update: int | None = None
    shuffle: bool = True
    progress: bool | None = None

    def run(
        self,
        model: Any,
        executor: Any,
        batches: Sequence[Any],
        glob: Any,
        rng: np.random.Generator,
        sparsity: int | None,
        callback: Callback | None = None,
    ) -> LearnResult:
        task = LocalStepTask(model, sparsity)
        handles = executor.register(batches)
        B = len(handles)
        P = self.batches_per_update or executor.n_slots
        memo: list[SuffStats | None] = [None] * B
        total = model.empty_stats()
        result = LearnResult(glob, total, memo=memo)
        trace = Trace(result, B)
        lap_elbos: list[float] = []
        for lap in range(1, self.n_laps + 1):
            order = rng.permutation(B) if self.shuffle else np.arange(B)
            bar = progress_bar(B, f"lap {lap}", self.progress)
            first_lap = lap == 1
            shared = executor.broadcast(glob)
            for wave in waves(order, P):
                fresh = executor.map(task, [handles[b] for b in wave], shared)
                for b, stats in zip(wave, fresh, strict=True):
                    if not first_lap:
                        total = total - memo[b] + stats
                    memo[b] = stats
                bar.update(len(wave))
                if first_lap:
                    continue
                glob = model.global_step(total)
                trace.record(finite_or_raise(model.elbo(total, glob), "ELBO"), len(wave))
                shared = executor.broadcast(glob)
            bar.close()
            total = sum_stats(memo)  # re-anchor: exact sum of the memo
            glob = model.global_step(total)
            lap_elbos.append(finite_or_raise(model.elbo(total, glob), "ELBO"))
            if first_lap:
                trace.record(lap_elbos[-1], B)
            result.globals, result.stats, result.n_laps = glob, total, lap
            done, change = check_lap_converged(lap_elbos, self.tol, lap, min_laps=2)
            logger.info(
                "memo lap %d: ELBO %.6e (relative change %.3g), %.1f s",
                lap, lap_elbos[-1], change, trace.result.time_trace[-1],
            )  # fmt: skip
            if callback is not None:
                callback(result)
            if done:
                result.converged = True
                break
        return result
