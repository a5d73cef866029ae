"""Clocks for a shared, noisy machine: interleaved repetitions, wall and CPU time.

Absolute times on the machine these benchmarks run on move with what else it
runs, so candidates are timed side by side: after a warm-up call (which also
loads or compiles numba kernels) every candidate runs once per repetition, in
turn (A, B, A, B, ...), so a slow phase hits all of them, and the reports
compare medians as ratios.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np


def time_interleaved(
    fns: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1
) -> dict[str, dict[str, Any]]:
    """Median wall time of each callable, the candidates run alternately.

    Every callable is first run ``warmup`` times (numba compilation, caches),
    then all of them once per repetition, in turn. Returns, per name, the
    median (``median_s``) and every sample (``samples_s``).
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return {name: {"median_s": float(np.median(s)), "samples_s": s} for name, s in samples.items()}


def each(fn: Callable[[Any], Any], items: Iterable[Any]) -> None:
    """Call ``fn`` on every item and drop the results, as a model's block loop does
    (keeping them would time page faults of fresh memory instead of the kernel)."""
    for item in items:
        fn(item)


def seconds(fn: Callable[[], Any]) -> float:
    """Wall seconds of one call."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    """``fn()``'s result, its wall seconds and this process's CPU seconds (all threads)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def cpu_self() -> float:
    """CPU seconds (user + system) of this process, all its threads."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def worker_cpu(client: Any) -> float:
    """CPU seconds of all Dask worker processes together (0 without a client)."""
    if client is None:
        return 0.0
    return float(sum(client.run(cpu_self).values()))


def lap_seconds(est: Any) -> list[float]:
    """Seconds of each lap from a fitted estimator's traces (lap 1 from the learner's start)."""
    laps = np.asarray(est.lap_trace_)
    times = np.asarray(est.time_trace_)
    ends = [float(times[np.isclose(laps, k)][-1]) for k in range(1, int(est.n_laps_) + 1)]
    return list(np.diff([0.0, *ends]))


def steady_lap(laps: list[float]) -> float:
    """Median lap time excluding lap 1 (which fills the memo and loads numba caches)."""
    return float(np.median(laps[1:] if len(laps) > 1 else laps))


def steady_pass(passes: list[float], setup: float | None = None) -> float | None:
    """Median pass time, leaving out the first pass when there are more; a lone
    first pass counts without the ``setup`` seconds inside it."""
    if not passes:
        return None
    if len(passes) == 1:
        return passes[0] - (setup or 0.0)
    return float(np.median(passes[1:]))
