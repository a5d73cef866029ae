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

The loop reads as the algorithm: :meth:`MemoizedVI.run` makes laps
(:meth:`~MemoizedVI._lap`); a lap visits waves of batches
(:meth:`~MemoizedVI._wave`), re-anchors ``S`` and tests convergence
(:meth:`~MemoizedVI._end_lap`); a stop (:meth:`~MemoizedVI._should_stop`)
writes a checkpoint (:meth:`~MemoizedVI._checkpoint`) first. Where the run
stands lives in one :class:`_Run`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, cast

import numpy as np
import numpy.typing as npt

from lsdask import config
from lsdask.errors import FitInterrupted
from lsdask.learn.base import (
    Callback,
    LearnResult,
    ProgressBar,
    batch_costs,
    carried_of,
    check_lap_converged,
    finite_or_raise,
    lap_order,
    log_lap,
    next_globals,
    padded_trace,
    progress_bar,
    resumed_globals,
    waves,
)
from lsdask.learn.early_stopping import Best, EarlyStopping
from lsdask.learn.memo_store import MemoryMemo
from lsdask.learn.pending_maps import PendingMaps
from lsdask.learn.protocols import (
    Batch,
    Executor,
    G,
    Handle,
    HasMoves,
    InMemoryMemo,
    MemoStore,
    Model,
    Pending,
)
from lsdask.learn.state import LearnState
from lsdask.learn.tasks import LocalStepTask
from lsdask.models.stats import SuffStats, sum_stats

logger = logging.getLogger(__name__)

#: called with (state, memo, init_stats or None) to write a checkpoint, and the
#: keyword ``best_stats`` where early stopping keeps an earlier lap; returns its path
Checkpointer = Callable[..., Path]


@dataclass
class _Run(Generic[G]):
    """One call of :meth:`MemoizedVI.run`: what it works with and where it stands."""

    # what the run works with
    model: Model[G]
    executor: Executor
    task: LocalStepTask[G]
    handles: list[Handle]  # one per batch, from executor.register
    costs: list[float] | None  # each batch's work, to group waves (lap_order)
    wave_size: int  # P, batches visited against the same globals
    memo: MemoStore  # S_b of every visited batch
    rng: np.random.Generator
    resumed: LearnState  # where the run started (a fresh LearnState when new)
    init_stats: SuffStats | None  # the initial globals' statistics, for checkpoints
    checkpoint: Checkpointer | None
    stop_requested: Callable[[], bool] | None
    callback: Callback[G] | None

    # where it stands
    glob: G  # the current globals
    total: SuffStats  # S, the whole-data statistics (a private dense copy, updated in place)
    filling: bool  # the first lap, which fills the memo against the initial globals
    lap_elbos: list[float]  # the ELBO at the end of every lap
    result: LearnResult[G]  # traces so far
    t0: float  # time.perf_counter() at the start (earlier by a resumed run's time)

    @property
    def n_batches(self) -> int:
        return len(self.handles)


@dataclass
class _Lap:
    """The lap under way."""

    number: int  # laps done before it, plus one
    order: npt.NDArray[np.int64]  # the batches in visiting order
    start: int  # batches of ``order`` visited before this run (a lap resumed part-way)
    waves: list[list[int]]  # the rest of ``order``, cut into waves
    bar: ProgressBar
    started: float  # time.perf_counter() at its start
    position: int  # batches of ``order`` visited
    shared: Handle  # the globals the workers run against
    pending: Pending | None = None  # the wave submitted and not yet collected


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
    command : dict or None
        The command running the fit, kept in every checkpoint
        (:attr:`lsdask.learn.state.LearnState.command`).
    early_stopping : EarlyStopping or None
        Scores every lap's globals on validation documents; the run returns the
        best lap's and ends once its patience runs out.
    """

    n_laps: int = 10
    tol: float = config.DEFAULT_TOL
    batches_per_update: int | None = None
    shuffle: bool = True
    progress: bool | None = None
    command: dict[str, Any] | None = None  # recorded in every checkpoint (LearnState.command)
    early_stopping: EarlyStopping | None = None

    def run(
        self,
        model: Model[G],
        executor: Executor,
        batches: Sequence[Batch],
        glob: G | None,
        rng: np.random.Generator,
        sparsity: int | None,
        callback: Callback[G] | None = None,
        *,
        memo: MemoStore | None = None,
        state: LearnState | None = None,
        init_stats: SuffStats | None = None,
        checkpoint: Checkpointer | None = None,
        stop_requested: Callable[[], bool] | None = None,
        best_model: Model[G] | None = None,
        best_stats: SuffStats | None = None,
    ) -> LearnResult[G]:
        """Run (or continue) memoized VI.

        Parameters
        ----------
        model, executor, batches
            The model's math, where its tasks run, and the fixed batches.
        glob
            The initial globals. On a resume (``state`` given with a filled
            ``memo``) they are recomputed from the memo (and ``state.carried``,
            where the model's global step starts from its previous globals),
            except in an unfinished first lap, which goes on against ``init_stats``' globals
            (``glob`` may then be None).
        rng
            Draws each lap's visiting order; a resumed run restores its state.
        sparsity
            L of the local step (None: dense responsibilities).
        callback
            Called with the result so far after every lap.
        memo
            Where each batch's statistics are kept (default in memory).
        state
            Where a resumed run stands (:class:`LearnState`).
        init_stats
            The statistics the initial globals came from, kept in a checkpoint
            written before the memo is filled.
        checkpoint
            Writes a checkpoint after every lap and on a stop.
        stop_requested
            Asked after every wave and lap; when true the run writes a
            checkpoint and raises :class:`lsdask.errors.FitInterrupted`.
        best_model, best_stats
            A resumed run's early-stopping best lap, where the checkpoint kept it
            apart from the memo (``state.best`` names it).

        Returns
        -------
        LearnResult
            The globals and ``S`` after the last lap, and the traces.
        """
        run = self._start(
            model=model, executor=executor, batches=batches, glob=glob, rng=rng,
            sparsity=sparsity, callback=callback, memo=memo, state=state or LearnState(),
            init_stats=init_stats, checkpoint=checkpoint, stop_requested=stop_requested,
            best_model=best_model, best_stats=best_stats,
        )  # fmt: skip
        for number in range(run.resumed.lap + 1, self.n_laps + 1):
            if run.result.converged:
                break
            self._lap(run, number)
        run.result.globals, run.result.stats = run.glob, run.total
        best = None if self.early_stopping is None else self.early_stopping.best
        if best is not None:
            run.result.best_lap = best.lap
            if best.lap != run.result.n_laps:
                logger.info("keeping lap %d, the best on the validation documents", best.lap)
                run.result.globals, run.result.stats = best.glob, best.stats
                run.result.model = best.model
        if isinstance(getattr(run.memo, "inner", run.memo), InMemoryMemo):
            run.result.memo = run.memo.as_list()  # type: ignore[attr-defined]
        return run.result

    # ---- the run

    def _start(
        self,
        *,
        model: Model[G],
        executor: Executor,
        batches: Sequence[Batch],
        glob: G | None,
        rng: np.random.Generator,
        sparsity: int | None,
        callback: Callback[G] | None,
        memo: MemoStore | None,
        state: LearnState,
        init_stats: SuffStats | None,
        checkpoint: Checkpointer | None,
        stop_requested: Callable[[], bool] | None,
        best_model: Model[G] | None,
        best_stats: SuffStats | None,
    ) -> _Run[G]:
        """Register the batches and set ``S`` and the globals: from the memo when
        it holds a finished lap, else the initial globals (of ``init_stats``
        where given) against which the first lap fills the memo."""
        model = _resized_as_carried(model, state.carried)
        if state.pending and isinstance(model, HasMoves):  # moves owed to unvisited entries
            memo = PendingMaps(
                memo if memo is not None else MemoryMemo(len(batches)), model.apply_move_map,
                [(p["map"], set(p["batches"])) for p in state.pending],
            )  # fmt: skip
        task = LocalStepTask(model, sparsity)
        handles = executor.register(batches)
        costs = batch_costs(batches)
        B = len(handles)
        P = self.batches_per_update or executor.n_slots
        memo = MemoryMemo(B) if memo is None else memo
        if state.rng_state is not None:
            rng.bit_generator.state = state.rng_state
        filling = not any(memo.has(b) for b in range(B)) or state.lap == 0
        # the driver's running total, updated in place (a private dense copy)
        total = sum_stats(memo.values()) if not filling else model.empty_stats().dense_copy()
        if not filling:  # the globals of the checkpoint, recomputed from the memo
            glob = resumed_globals(model, total, state.carried)
        elif init_stats is not None:
            glob = model.global_step(init_stats)
        if glob is None:
            raise ValueError(
                "MemoizedVI.run needs the initial globals (glob), init_stats to compute "
                "them from, or a memo of a finished lap"
            )
        listed = memo.as_list() if isinstance(memo, InMemoryMemo) else None
        result = LearnResult(glob, total, memo=listed)
        result.elbo_trace, result.lap_trace = list(state.elbo_trace), list(state.lap_trace)
        result.time_trace = list(state.time_trace)
        # checkpoints from before the size trace: nan where it was not kept
        result.size_trace = list(padded_trace(state.size_trace, len(state.elbo_trace)))
        result.model, result.components_trace = model, list(state.components_trace)
        t0 = time.perf_counter() - (state.time_trace[-1] if state.time_trace else 0.0)
        result.n_laps, result.converged = state.lap, state.converged
        if self.early_stopping is not None:
            best = _resumed_best(model, glob, total, state, best_model, best_stats)
            self.early_stopping.restore(state.validation_trace, best)
            if filling and not state.validation_trace:  # the start is lap 0's candidate
                start_stats = init_stats if init_stats is not None else model.empty_stats()
                self.early_stopping.after_lap(0, model, glob, start_stats)
                best = self.early_stopping.best
            result.validation_trace = list(self.early_stopping.trace)
            if best is not None:
                result.best_lap, result.best_globals = best.lap, best.glob
        return _Run(
            model=model, executor=executor, task=task, handles=handles, costs=costs,
            wave_size=P, memo=memo, rng=rng, resumed=state, init_stats=init_stats,
            checkpoint=checkpoint, stop_requested=stop_requested, callback=callback,
            glob=glob, total=total, filling=filling, lap_elbos=list(state.lap_elbos),
            result=result, t0=t0,
        )  # fmt: skip

    def _lap(self, run: _Run[G], number: int) -> None:
        """One pass over the batches: its waves in turn, then the lap's end."""
        lap = self._begin_lap(run, number)
        for i in range(len(lap.waves)):
            self._wave(run, lap, i)
        lap.bar.close()
        self._end_lap(run, lap)

    def _begin_lap(self, run: _Run[G], number: int) -> _Lap:
        """The lap's visiting order (a fresh one, or the stopped lap's where a run
        resumes part-way), the globals sent, and its first wave started."""
        B, P = run.n_batches, run.wave_size
        resumed = run.resumed
        if resumed.order is not None and number == resumed.lap + 1:
            order, start = np.asarray(resumed.order), resumed.position
        else:
            order = lap_order(run.rng, B, P, run.costs) if self.shuffle else np.arange(B)
            start = 0
        bar = progress_bar(B, f"lap {number}", self.progress)
        bar.update(start)
        started = time.perf_counter()
        model = run.model
        if start == 0 and not run.filling and isinstance(model, HasMoves) and model.has_moves:
            run.glob = model.plan_moves(run.total, run.glob, number)
        shared = run.executor.broadcast(run.model.for_local_step(run.glob))
        lap = _Lap(
            number=number, order=order, start=start, waves=list(waves(order[start:], P)),
            bar=bar, started=started, position=start, shared=shared,
        )  # fmt: skip
        if lap.waves:
            lap.pending = self._submit(run, lap.waves[0], shared)
        return lap

    def _wave(self, run: _Run[G], lap: _Lap, i: int) -> None:
        """Visit wave ``i``: its statistics replace the memoized ones in ``S``,
        ``S <- S - S_b(old) + S_b(new)``, then the global step; the next wave
        starts against the new globals while the driver memoizes this one's
        statistics and evaluates the ELBO. The first lap only fills the memo
        (its globals stay the initial ones)."""
        wave = lap.waves[i]
        fresh: list[SuffStats] = run.executor.collect(lap.pending)
        lap.pending = None  # nothing of a collected wave stays alive on the workers
        if not run.filling:
            for b, stats in zip(wave, fresh, strict=True):
                run.total.replace_(run.memo.get(b), stats)
            run.glob = next_globals(run.model, run.total, run.glob)
            lap.shared = run.executor.broadcast(run.model.for_local_step(run.glob))
        lap.position += len(wave)
        stopping = self._should_stop(run, more_to_do=lap.position < run.n_batches)
        if i + 1 < len(lap.waves) and not stopping:
            lap.pending = self._submit(run, lap.waves[i + 1], lap.shared)
        for b, stats in zip(wave, fresh, strict=True):
            run.memo.put(b, stats)
        lap.bar.update(len(wave))
        if not run.filling:
            elbo = finite_or_raise(run.model.elbo(run.total, run.glob), "ELBO")
            self._record(run, elbo, lap.number - 1 + lap.position / run.n_batches)
        if stopping:
            lap.bar.close()
            raise FitInterrupted(self._checkpoint(run, lap.number - 1, lap.position, lap.order))

    def _end_lap(self, run: _Run[G], lap: _Lap) -> None:
        """Re-anchor ``S`` to the exact sum of the memo, take the global step,
        test convergence, log, checkpoint, and stop where asked."""
        run.total = sum_stats(run.memo.values())  # a fresh copy: rounding never accumulates
        run.glob = next_globals(run.model, run.total, run.glob)
        known = self._judge_moves(run)  # the objective, where the judgement computed it
        elbo = run.model.elbo(run.total, run.glob) if known is None else known
        run.lap_elbos.append(finite_or_raise(elbo, "ELBO"))
        if run.filling:
            self._record(run, run.lap_elbos[-1], float(lap.number))
            run.filling = False
        result = run.result
        result.globals, result.stats, result.n_laps = run.glob, run.total.dense_copy(), lap.number
        result.model, result.memo_store = run.model, run.memo
        if isinstance(run.model, HasMoves):
            result.components_trace.append(float(run.model.n_components))
        done, change = check_lap_converged(run.lap_elbos, self.tol, lap.number, min_laps=2)
        early = self.early_stopping
        if early is not None:
            stale = early.after_lap(lap.number, run.model, run.glob, run.total)
            result.validation_trace = list(early.trace)
            assert early.best is not None
            result.best_lap, result.best_globals = early.best.lap, early.best.glob
            if stale and not done:
                logger.info("early stop: %d laps without a better validation score", early.patience)
                done = True
        result.converged = done
        B = run.n_batches
        log_lap(logger, lap.number, run.lap_elbos[-1], change, time.perf_counter() - lap.started,
                (B - lap.start) / B, run.model, run.total, run.executor)  # fmt: skip
        path = self._checkpoint(run, lap.number, 0, None)
        if run.callback is not None:
            run.callback(result)
        if self._should_stop(run, more_to_do=not done and lap.number < self.n_laps):
            raise FitInterrupted(path)

    def _judge_moves(self, run: _Run[G]) -> float | None:
        """Judge the moves the lap prepared (a model with moves, after its first
        lap): apply the accepted ones to every batch's memo entry, re-sum ``S`` and
        go on with the resized model; the globals lose the lap's plan either way.
        Returns the objective of the globals it leaves where the judgement computed
        it (nothing accepted), else None."""
        model = run.model
        if run.filling or not (isinstance(model, HasMoves) and model.has_moves):
            return None
        started = time.perf_counter()
        outcome = model.judge_moves(run.total, run.glob, run.memo.values(), run.task.sparsity)
        if outcome.n_accepted:
            memo = _pending(run.memo, model)
            for b in sorted(outcome.eager_batches):
                entry = memo.get(b)
                if entry is not None:
                    memo.put(b, outcome.edit(b, entry))
            lazy = {b for b in range(run.n_batches) if memo.has(b)} - outcome.eager_batches
            memo.add(outcome.move_map(), lazy)
            run.memo = memo
            run.model = outcome.model
            run.task = LocalStepTask(run.model, run.task.sparsity)
            # re-summed from the entries as read (a resumed run sums the same)
            run.total = sum_stats(run.memo.values())
            run.glob = resumed_globals(run.model, run.total, outcome.carried)
        else:  # the same statistics and sticks: the topics need not be recomputed
            run.glob = outcome.kept_globals(run.glob)
        logger.info("%s (%.2f s)", outcome.summary(), time.perf_counter() - started)
        return None if outcome.n_accepted else outcome.kept_objective

    # ---- the steps' parts

    def _submit(self, run: _Run[G], wave: list[int], shared: Handle) -> Pending:
        """Start the local step of the wave's batches against ``shared``."""
        return run.executor.submit(run.task, [run.handles[b] for b in wave], shared)

    def _record(self, run: _Run[G], elbo: float, laps: float) -> None:
        """Append one value to every trace (``laps``: the fractional lap)."""
        run.result.size_trace.append(run.model.data_size(run.total))
        run.result.elbo_trace.append(float(elbo))
        run.result.lap_trace.append(laps)
        run.result.time_trace.append(time.perf_counter() - run.t0)

    def _should_stop(self, run: _Run[G], more_to_do: bool) -> bool:
        """Whether a stop was requested while there is work left to stop."""
        return run.stop_requested is not None and run.stop_requested() and more_to_do

    def _checkpoint(
        self,
        run: _Run[G],
        lap_done: int,
        position: int,
        order: npt.NDArray[np.int64] | None,
    ) -> Path | None:
        """Write a checkpoint of the run after ``lap_done`` laps and ``position``
        batches of ``order`` (None at a lap's end); its path, or None without a
        checkpointer. Before the memo is filled it keeps ``init_stats``."""
        if run.checkpoint is None:
            return None
        best = None if self.early_stopping is None else self.early_stopping.best
        # an earlier lap's statistics (or the last lap's, once a wave changed the memo)
        kept = {} if best is None or (best.lap == lap_done and not position) else {
            "best_stats": best.stats
        }  # fmt: skip
        return run.checkpoint(
            self._snapshot(run, lap_done, position, order),
            run.memo,
            run.init_stats if run.filling else None,
            **kept,
        )

    def _snapshot(
        self,
        run: _Run[G],
        lap_done: int,
        position: int,
        order: npt.NDArray[np.int64] | None,
    ) -> LearnState:
        """Where the run stands, enough to continue it exactly."""
        result = run.result
        return LearnState(
            lap=lap_done, position=position,
            order=None if order is None else [int(b) for b in order],
            rng_state=run.rng.bit_generator.state, elbo_trace=list(result.elbo_trace),
            lap_trace=list(result.lap_trace), time_trace=list(result.time_trace),
            size_trace=list(result.size_trace),
            lap_elbos=list(run.lap_elbos), converged=result.converged,
            target_laps=self.n_laps, carried=carried_of(run.model, run.glob),
            components_trace=list(result.components_trace),
            validation_trace=list(result.validation_trace), best=self._best_record(),
            validation_keys=[] if self.early_stopping is None else list(self.early_stopping.keys),
            pending=run.memo.pending() if isinstance(run.memo, PendingMaps) else [],
            command=None if self.command is None else dict(self.command),
        )  # fmt: skip

    def _best_record(self) -> dict[str, Any] | None:
        """Early stopping's best lap as a checkpoint records it (None without one)."""
        best = None if self.early_stopping is None else self.early_stopping.best
        if best is None:
            return None
        return {
            "lap": best.lap, "score": best.score, "n_components": best.model.n_components,
            "carried": carried_of(best.model, best.glob),
        }  # fmt: skip


def _resumed_best(
    model: Model[G],
    glob: G,
    total: SuffStats,
    state: LearnState,
    best_model: Model[G] | None,
    best_stats: SuffStats | None,
) -> Best | None:
    """Early stopping's best lap of a checkpoint: its own statistics where the
    checkpoint kept them, else the memo's (the checkpoint's own lap)."""
    record = state.best
    if record is None:
        return None
    if best_stats is not None:
        best_model = best_model if best_model is not None else model
        best_glob = resumed_globals(best_model, best_stats, record["carried"])
        return Best(record["lap"], record["score"], best_glob, best_stats, best_model)
    if record["lap"] != state.lap or state.position:
        raise ValueError(
            f"the checkpoint names lap {record['lap']} as early stopping's best but keeps "
            "no statistics of it (best.npz); the file was modified. Start a new checkpoint "
            "folder or fit with early_stopping=False"
        )
    return Best(record["lap"], record["score"], glob, total.dense_copy(), model)


def _resized_as_carried(model: Model[G], carried: dict[str, list[float]] | None) -> Model[G]:
    """The model a checkpoint's run was at: a model with moves resized to the
    number of sticks its checkpoint carried (moves accepted before the stop)."""
    if carried is None or not isinstance(model, HasMoves) or "rho" not in carried:
        return model
    K = len(carried["rho"])
    return cast(Model[G], model.resized(K)) if K != model.n_components else model


def _pending(memo: MemoStore, model: HasMoves) -> PendingMaps:
    """``memo`` as a :class:`PendingMaps` (itself where it is one)."""
    return memo if isinstance(memo, PendingMaps) else PendingMaps(memo, model.apply_move_map, [])
