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

A run can be checkpointed after every lap and when a stop is requested
(after the wave under way), and resumed from a :class:`LearnState` with the
memo it refers to: it then continues exactly as if never stopped. Batches
without memo in a resumed run (new data) are added to the statistics at
their first visit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lsdask import config
from lsdask.learn.base import (
    Callback,
    LearnResult,
    batch_costs,
    check_lap_converged,
    finite_or_raise,
    lap_order,
    log_lap,
    padded_trace,
    progress_bar,
    waves,
)
from lsdask.learn.memo_store import MemoryMemo
from lsdask.learn.state import LearnState
from lsdask.errors import FitInterrupted
from lsdask.learn.tasks import LocalStepTask
from lsdask.models.stats import SuffStats, sum_stats

logger = logging.getLogger(__name__)

#: called with (state, memo, init_stats or None) to write a checkpoint; returns its path
Checkpointer = Callable[[LearnState, Any, SuffStats | None], Any]


@dataclass
class MemoizedVI:
    """Memoized VI over fixed batches.

    Parameters
    ----------
    n_laps : int
        Laps to reach (counting laps done before a resume).
    tol : float
        Stop when the relative ELBO change between laps is below tol.
    batches_per_update : int or None
        Batches visited against the same globals before each global step;
        default the executor's number of parallel slots.
    shuffle : bool
        Visit batches in a fresh random order every lap. Batches that know
        their cost (``batch.cost``: tokens, rows) are grouped into waves of
        similar cost, the waves in a fresh random order (:func:`lap_order`).
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
        *,
        memo: Any = None,
        state: LearnState | None = None,
        init_stats: SuffStats | None = None,
        checkpoint: Checkpointer | None = None,
        stop_requested: Callable[[], bool] | None = None,
    ) -> LearnResult:
        """Run (or continue) memoized VI.

        ``glob`` are the initial globals; on a resume (``state`` given with a
        filled ``memo``) they are recomputed from the memo, except in an
        unfinished first lap, which goes on against ``init_stats``' globals.
        """
        task = LocalStepTask(model, sparsity)
        handles = executor.register(batches)
        costs = batch_costs(batches)
        B = len(handles)
        P = self.batches_per_update or executor.n_slots
        memo = MemoryMemo(B) if memo is None else memo
        state = state or LearnState()
        if state.rng_state is not None:
            rng.bit_generator.state = state.rng_state
        filling = not any(memo.has(b) for b in range(B)) or state.lap == 0
        # the driver's running total, updated in place (a private dense copy)
        total = sum_stats(memo.values()) if not filling else model.empty_stats().dense_copy()
        if not filling:
            glob = model.global_step(total)
        elif init_stats is not None:
            glob = model.global_step(init_stats)
        result = LearnResult(glob, total, memo=memo.as_list() if hasattr(memo, "as_list") else None)
        result.elbo_trace, result.lap_trace = list(state.elbo_trace), list(state.lap_trace)
        result.time_trace = list(state.time_trace)
        # checkpoints from before the size trace: nan where it was not kept
        result.size_trace = list(padded_trace(state.size_trace, len(state.elbo_trace)))
        t0 = time.perf_counter() - (state.time_trace[-1] if state.time_trace else 0.0)
        lap_elbos = list(state.lap_elbos)
        result.n_laps, result.converged = state.lap, state.converged

        def record(elbo: float, laps: float) -> None:
            result.size_trace.append(model.data_size(total))
            result.elbo_trace.append(float(elbo))
            result.lap_trace.append(laps)
            result.time_trace.append(time.perf_counter() - t0)

        def snapshot(lap_done: int, position: int, order: Any) -> LearnState:
            return LearnState(
                lap=lap_done, position=position,
                order=None if order is None else [int(b) for b in order],
                rng_state=rng.bit_generator.state, elbo_trace=list(result.elbo_trace),
                lap_trace=list(result.lap_trace), time_trace=list(result.time_trace),
                size_trace=list(result.size_trace),
                lap_elbos=list(lap_elbos), converged=result.converged,
                target_laps=self.n_laps,
            )  # fmt: skip

        for lap in range(state.lap + 1, self.n_laps + 1):
            if result.converged:
                break
            resuming_mid_lap = state.order is not None and lap == state.lap + 1
            if resuming_mid_lap:
                order, start = np.asarray(state.order), state.position
            else:
                order = lap_order(rng, B, P, costs) if self.shuffle else np.arange(B)
                start = 0
            bar = progress_bar(B, f"lap {lap}", self.progress)
            bar.update(start)
            lap_start = time.perf_counter()
            shared = executor.broadcast(model.for_local_step(glob))
            position = start
            lap_waves = list(waves(order[start:], P))
            pending = None
            if lap_waves:
                pending = executor.submit(task, [handles[b] for b in lap_waves[0]], shared)
            for i, wave in enumerate(lap_waves):
                fresh = executor.collect(pending)
                pending = None  # nothing of a collected wave stays alive on the workers
                if not filling:
                    for b, stats in zip(wave, fresh, strict=True):
                        old = memo.get(b)
                        total.replace_(old, stats)
                    glob = model.global_step(total)
                    shared = executor.broadcast(model.for_local_step(glob))
                position += len(wave)
                stopping = stop_requested is not None and stop_requested() and position < B
                if i + 1 < len(lap_waves) and not stopping:
                    # the workers start the next wave while the driver writes the
                    # memo and evaluates the ELBO
                    nxt = [handles[b] for b in lap_waves[i + 1]]
                    pending = executor.submit(task, nxt, shared)
                for b, stats in zip(wave, fresh, strict=True):
                    memo.put(b, stats)
                bar.update(len(wave))
                if not filling:
                    elbo = finite_or_raise(model.elbo(total, glob), "ELBO")
                    record(elbo, lap - 1 + position / B)
                if stopping:
                    bar.close()
                    path = None
                    if checkpoint is not None:
                        path = checkpoint(
                            snapshot(lap - 1, position, order), memo,
                            init_stats if filling else None,
                        )  # fmt: skip
                    raise FitInterrupted(path)
            bar.close()
            total = sum_stats(memo.values())  # re-anchor: exact sum of the memo (a fresh copy)
            glob = model.global_step(total)
            lap_elbos.append(finite_or_raise(model.elbo(total, glob), "ELBO"))
            if filling:
                record(lap_elbos[-1], float(lap))
                filling = False
            result.globals, result.stats, result.n_laps = glob, total.dense_copy(), lap
            done, change = check_lap_converged(lap_elbos, self.tol, lap, min_laps=2)
            result.converged = done
            log_lap(logger, lap, lap_elbos[-1], change, time.perf_counter() - lap_start,
                    (B - start) / B, model, total, executor)  # fmt: skip
            path = None if checkpoint is None else checkpoint(snapshot(lap, 0, None), memo, None)
            if callback is not None:
                callback(result)
            if stop_requested is not None and stop_requested() and not done and lap < self.n_laps:
                raise FitInterrupted(path)
        result.globals, result.stats = glob, total
        if hasattr(memo, "as_list"):
            result.memo = memo.as_list()
        return result
