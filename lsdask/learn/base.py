"""What every learning algorithm shares: the result, waves of batches, and
convergence by relative ELBO change between laps (after scikit-learn's
mixture base: the loop and stopping rule live here, the steps in subclasses)."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, cast

import numpy as np
import numpy.typing as npt

from lsdask.config import PROGRESS
from lsdask.learn.protocols import (
    Batch,
    CountsTokens,
    Executor,
    G,
    HasCost,
    Model,
    StepsFromPrevious,
)
from lsdask.models.stats import SuffStats


@dataclass
class LearnResult(Generic[G]):
    """What a run produced: the globals and whole-data statistics ``S`` at the end.

    ``elbo_trace`` has one value per global update (per batch visit when one
    batch is visited per update); ``lap_trace`` the lap (fractional) of each
    value, ``time_trace`` the seconds since the start and ``size_trace`` the
    data the ELBO was over (``model.data_size``: tokens of LDA, rows of a
    mixture), which changes when retraining takes in or drops batches. For a
    model with moves (:class:`~lsdask.learn.protocols.HasMoves`), ``model`` is the
    one the run ended with and ``components_trace`` its size after every lap.
    ``memo_store`` is the run's memo as the loop reads it (with the moves it
    still owes applied on reading, :mod:`lsdask.learn.pending_maps`).
    With early stopping (:mod:`lsdask.learn.early_stopping`), ``validation_trace``
    holds the validation score of the start (lap 0, the initial globals) and after
    every lap, ``best_lap`` the lap that scored
    best so far and ``best_globals`` its globals; at the end ``globals``,
    ``stats`` and ``model`` are those of ``best_lap``.
    """

    globals: G
    stats: SuffStats
    elbo_trace: list[float] = field(default_factory=list)
    lap_trace: list[float] = field(default_factory=list)
    time_trace: list[float] = field(default_factory=list)
    size_trace: list[float] = field(default_factory=list)
    n_laps: int = 0
    converged: bool = False
    memo: list[SuffStats | None] | None = None
    model: Any = None
    components_trace: list[float] = field(default_factory=list)
    memo_store: Any = None
    validation_trace: list[float] = field(default_factory=list)
    best_lap: int | None = None
    best_globals: Any = None


def carried_of(model: Model[G], glob: G) -> dict[str, list[float]] | None:
    """What the next global step of ``model`` starts from, of the globals ``glob``
    (:class:`~lsdask.learn.protocols.StepsFromPrevious`); None for a model whose
    global step is a function of the statistics alone."""
    return model.carry(glob) if isinstance(model, StepsFromPrevious) else None


def next_globals(model: Model[G], stats: SuffStats, previous: G) -> G:
    """The global step that replaces the globals ``previous``: from the statistics
    alone, or, for a :class:`~lsdask.learn.protocols.StepsFromPrevious` model,
    also from what of ``previous`` its search starts from."""
    if isinstance(model, StepsFromPrevious):
        return cast(G, model.global_step_from(stats, model.carry(previous)))
    return model.global_step(stats)


def resumed_globals(model: Model[G], stats: SuffStats, carried: Mapping[str, Any] | None) -> G:
    """The globals a stopped run had, from its memo's statistics and what its
    checkpoint carried (:func:`carried_of`): for a
    :class:`~lsdask.learn.protocols.StepsFromPrevious` model restored as they were;
    otherwise, or without ``carried``, the global step of the statistics."""
    if carried is not None and isinstance(model, StepsFromPrevious):
        return cast(G, model.restore_globals(stats, carried))
    return model.global_step(stats)


def padded_trace(values: Iterable[float] | None, n: int) -> npt.NDArray[np.float64]:
    """The last ``n`` values of a trace as float64, nan in front where it does not
    reach back that far (a trace kept only since a later version)."""
    trace = (
        np.asarray([] if values is None else values, dtype=np.float64)[-n:] if n else np.empty(0)
    )
    return np.concatenate([np.full(n - len(trace), np.nan), trace])


class Trace:
    """Accumulates the per-update traces and logs one line per lap."""

    def __init__(self, result: LearnResult[G], n_batches: int) -> None:
        self.result = result
        self.n_batches = n_batches
        self.t0 = time.perf_counter()
        self.visited = 0

    def record(self, elbo: float, n_visited: int, size: float) -> None:
        self.visited += n_visited
        self.result.size_trace.append(float(size))
        self.result.elbo_trace.append(float(elbo))
        self.result.lap_trace.append(self.visited / self.n_batches)
        self.result.time_trace.append(time.perf_counter() - self.t0)


def lap_order(
    rng: np.random.Generator, n_batches: int, size: int, costs: Sequence[float] | None = None
) -> npt.NDArray[np.int64]:
    """A fresh random visiting order for one lap, cut into waves of ``size`` by :func:`waves`.

    With ``costs`` (work per batch: tokens of a corpus row group, rows of a
    chunk), batches of similar cost share a wave, so the wave's parallel tasks
    finish together instead of waiting for the largest; the full waves come in
    a random order, the cheapest, incomplete one (if any) last. Without costs,
    or one batch per wave, a plain permutation.
    """
    if costs is None or size <= 1:
        return rng.permutation(n_batches)
    # decreasing cost, equal costs (chunks of one size) in a fresh random order
    by_cost = np.lexsort((rng.random(n_batches), -np.asarray(costs, dtype=np.float64)))
    full = n_batches // size * size
    groups = [by_cost[i : i + size] for i in range(0, full, size)]
    order = [groups[g] for g in rng.permutation(len(groups))]
    return np.concatenate([*order, by_cost[full:]])  # an incomplete wave last, so waves stay whole


def batch_costs(batches: Sequence[Batch]) -> list[float] | None:
    """Each batch's :attr:`~lsdask.learn.protocols.HasCost.cost`, or None unless
    every batch has a finite one."""
    try:
        costs = [float(b.cost) if isinstance(b, HasCost) else np.nan for b in batches]
    except (TypeError, ValueError):  # e.g. a dask chunk of unknown size
        return None
    return costs if all(np.isfinite(costs)) else None


def waves(order: Iterable[int], size: int) -> Iterator[list[int]]:
    """Consecutive groups of ``size`` batch indices."""
    indices = list(order)
    for start in range(0, len(indices), size):
        yield indices[start : start + size]


def in_waves(executor: Any, task: Any, batches: Sequence[Any], posterior: Any) -> Iterator[Any]:
    """``task(batch, posterior)`` for every batch, in order; one wave of as many tasks
    as the executor runs at once is computed while the one before is handed out."""
    handles = executor.register(batches)
    shared = executor.broadcast(posterior)
    groups = [[handles[i] for i in wave] for wave in waves(range(len(handles)), executor.n_slots)]
    pending = executor.submit(task, groups[0], shared) if groups else None
    for i in range(len(groups)):
        done = executor.collect(pending)
        if i + 1 < len(groups):
            pending = executor.submit(task, groups[i + 1], shared)
        yield from done


def relative_change(new: float, old: float) -> float:
    """``|new - old| / |old|`` (old at least the smallest positive double)."""
    return abs(new - old) / max(abs(old), 1e-300)


def shows_bar(enabled: bool | None) -> bool:
    """Whether :func:`progress_bar` draws a bar: as asked, else on a terminal."""
    return sys.stderr.isatty() if enabled is None else bool(enabled)


class ProgressBar(Protocol):
    """What the loops use of a tqdm bar."""

    def update(self, n: int = 1) -> object: ...

    def close(self) -> None: ...


def progress_bar(total: int, desc: str, enabled: bool | None) -> ProgressBar:
    """A tqdm bar on a terminal (or when asked), else a no-op stand-in."""
    if shows_bar(enabled):
        from tqdm.auto import tqdm

        bar: ProgressBar = tqdm(total=total, desc=desc, leave=False)
        return bar
    return _NoBar()


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


#: called with the result so far after every lap
Callback = Callable[[LearnResult[G]], None]


def check_lap_converged(
    lap_elbos: list[float], tol: float, lap: int, min_laps: int
) -> tuple[bool, float]:
    """Converged when the lap-to-lap relative ELBO change drops below tol."""
    if len(lap_elbos) < 2 or lap < min_laps:
        return False, float("nan")
    change = relative_change(lap_elbos[-1], lap_elbos[-2])
    return bool(change < tol), change


def finite_or_raise(value: float, what: str) -> float:
    """``value``, or a FloatingPointError saying what to change where it is not finite."""
    if not np.isfinite(value):
        raise FloatingPointError(
            f"the {what} became {value}; the data may hold extreme values, or the prior is "
            "too weak for this data scale (raise prior_scale)"
        )
    return value


def log_lap(
    log: logging.Logger,
    lap: int,
    elbo: float,
    change: float,
    seconds: float,
    fraction: float,
    model: Model[G],
    stats: SuffStats,
    executor: Executor,
) -> None:
    """One line per lap: ELBO and its change, throughput and memory.

    ``fraction`` is the share of the data visited in this lap (less than one
    for a lap resumed part-way).
    """
    if not log.isEnabledFor(logging.INFO):
        return
    seconds = max(seconds, 1e-9)
    rows = model.row_count(stats) * fraction / seconds
    since = "first lap" if np.isnan(change) else f"relative change {change:.3g}"
    parts = [f"lap {lap}: ELBO {elbo:.6e} ({since}), {seconds:.1f} s"]
    parts.append(f"{rows:,.0f} rows/s")
    if isinstance(model, CountsTokens):
        parts.append(f"{model.token_count(stats) * fraction / seconds:,.0f} tokens/s")
    parts.append(f"driver RSS {_rss_mib():,.0f} MiB")
    worker_rss = executor.memory()
    if worker_rss:
        parts.append("workers RSS " + "/".join(f"{r / 2**20:,.0f}" for r in worker_rss) + " MiB")
    log.info(", ".join(parts), extra=PROGRESS)


def _rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20
