"""The clock of one training run under a wall-clock budget, and its topic snapshots.

Every method of a time-to-quality comparison trains under the same rules:

- its clock counts seconds since the start of training, minus the time taken
  to save topic snapshots (:class:`Recorder`);
- it stops at its first check after the budget is spent (:class:`BudgetStop`,
  raised from inside its training loop); the first pass may run past the
  budget, up to a hard cap, because memoized VI changes no topic before the
  end of its first lap;
- a run stopped inside a pass is scored at the state it reached.

lsdask's learners are stopped by :class:`BudgetExecutor`, an executor that
checks the clock before every wave of batch tasks.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.engine import DaskExecutor


class BudgetStop(Exception):
    """Raised inside a training loop when its budget is spent."""


class Recorder:
    """Wall clock of one training run (snapshot time excluded) and its topic snapshots.

    ``pass_end`` is called after every pass. The topics are saved (float32,
    to ``snap_dir``) on two levels:

    - *primary* snapshots, all scored: after each of the first
      ``first_passes`` passes, then whenever the clock grew by ``ratio`` and
      ``min_gap`` seconds since the last primary one, and always the last pass;
    - *fine* snapshots in between (clock grown by ``fine_ratio`` and
      ``fine_min_gap``), scored only where needed to pin down the time at
      which the run crossed the quality threshold (bisection, after all runs).
    """

    def __init__(
        self,
        budget: float,
        hard_cap: float,
        snap_dir: Path,
        prefix: str,
        first_passes: int,
        *,
        ratio: float,
        min_gap: float,
        fine_ratio: float,
        fine_min_gap: float,
    ) -> None:
        self.budget = budget
        self.hard_cap = hard_cap * budget
        self.ratio = ratio
        self.min_gap = min_gap
        self.fine_ratio = fine_ratio
        self.fine_min_gap = fine_min_gap
        self.snap_dir = snap_dir
        self.prefix = prefix
        self.first_passes = first_passes
        self.setup_s: float | None = None  # lsdask: clock at its first batch task
        self.points: list[dict[str, Any]] = []
        self.pass_ends: list[tuple[float, float]] = []
        self.excluded = 0.0
        self.passes = 0.0
        self.t0 = time.perf_counter()

    def start(self) -> None:
        self.t0 = time.perf_counter()
        self.excluded = 0.0

    def clock(self) -> float:
        return time.perf_counter() - self.t0 - self.excluded

    def over_budget(self) -> bool:
        return self.clock() >= self.budget

    def stop_mid_pass(self) -> bool:
        """Stop inside a pass: after the first pass once over budget, or past the hard cap."""
        c = self.clock()
        return (c >= self.budget and self.passes >= 1) or c >= self.hard_cap

    def pass_end(
        self, passes: float, topics: Callable[[], np.ndarray], force: bool = False
    ) -> None:
        t = self.clock()
        self.passes = passes
        self.pass_ends.append((float(passes), t))
        primary = [p["t"] for p in self.points if p["primary"]]
        last = primary[-1] if primary else None
        due = last is None or (t >= last * self.ratio and t - last >= self.min_gap)
        if force or passes <= self.first_passes or due or t >= self.budget:
            self.snapshot(passes, t, topics, primary=True)
            return
        last = self.points[-1]["t"]
        if t >= last * self.fine_ratio and t - last >= self.fine_min_gap:
            self.snapshot(passes, t, topics, primary=False)

    def snapshot(
        self, passes: float, t: float, topics: Callable[[], np.ndarray], primary: bool = True
    ) -> None:
        s = time.perf_counter()
        path = self.snap_dir / f"{self.prefix}-{len(self.points):03d}.npy"
        np.save(path, np.asarray(topics(), dtype=np.float32))
        self.points.append(
            {"pass": float(passes), "t": float(t), "path": str(path), "primary": primary}
        )
        self.excluded += time.perf_counter() - s

    def pass_seconds(self) -> list[float]:
        """Seconds of each whole pass (the first includes the setup inside the clock)."""
        ends = [(p, t) for p, t in self.pass_ends if float(p).is_integer()]
        times = [t for _, t in ends]
        return list(np.diff([0.0, *times]))


class BudgetExecutor(DaskExecutor):
    """lsdask's Dask executor on a shared client, plus: stop before a wave once the
    budget is spent, and keep a reference to the newest statistics of every batch
    (the memo), so that a run stopped mid-lap can be scored at its current globals."""

    def __init__(self, client: Any, rec: Recorder, n_batches: int) -> None:
        super().__init__(client)
        self.rec = rec
        self.n_batches = n_batches
        self.index: dict[int, int] = {}
        self.memo: dict[int, Any] = {}
        self.in_flight: dict[int, list] = {}
        self.model: Any = None
        self.batches_in_lap = 0
        self.stopped_at_lap_end = False

    def register(self, batches: Any) -> list:
        handles = super().register(batches)
        self.index = {id(h): i for i, h in enumerate(handles)}
        return handles

    # memoized VI submits a wave (``submit``), and while the workers run it
    # the driver finishes the previous one; ``map`` = collect(submit(...))
    def submit(self, fn: Any, handles: Any, shared: Any) -> Any:
        if self.rec.stop_mid_pass():
            raise BudgetStop()
        if self.rec.setup_s is None:
            self.rec.setup_s = self.rec.clock()
        self.model = getattr(fn, "model", None)
        pending = super().submit(fn, handles, shared)
        self.in_flight[id(pending)] = list(handles)
        return pending

    def collect(self, pending: Any) -> list:
        out = super().collect(pending)
        handles = self.in_flight.pop(id(pending), [])
        for h, stats in zip(handles, out, strict=True):
            self.memo[self.index.get(id(h), id(h))] = stats
        self.batches_in_lap += len(out)
        return out

    def current_topics(self) -> np.ndarray:
        """E[phi] at the globals of the memo (valid from lap 2 on)."""
        stats = list(self.memo.values())
        total = stats[0]
        for st in stats[1:]:
            total = total + st
        return self.model.global_step(total).topics


def run_budgeted(rec: Recorder, train: Callable[[], dict], client: Any = None) -> dict:
    """One training run on ``rec``'s clock: ``train()`` (which starts the clock and
    returns why it stopped and its cores), its wall and CPU seconds (this process
    and the Dask workers of ``client``), its passes and snapshots. An error is
    recorded, not raised, so that the other runs go on."""
    from harness.run import log
    from harness.timing import cpu_self, worker_cpu

    cpu0, wcpu0, wall0 = cpu_self(), worker_cpu(client), time.perf_counter()
    try:
        info, error = train(), None
    except Exception as exc:  # keep the other runs going; report it
        info = {"stop": "error", "cores": None, "cores_note": ""}
        error = f"{type(exc).__name__}: {exc}"
        log(f"    ERROR {error}\n{traceback.format_exc()}")
    wall = time.perf_counter() - wall0
    cpu = (cpu_self() - cpu0) + (worker_cpu(client) - wcpu0)
    run = {
        "train_s": rec.clock(),
        "wall_s_incl_snapshots": wall,
        "snapshot_s": rec.excluded,
        "cpu_s": cpu,
        "measured_cores": cpu / wall if wall > 0 else None,
        "passes": rec.passes,
        "setup_s": rec.setup_s,
        "pass_ends": rec.pass_ends,
        "pass_s": rec.pass_seconds(),
        "points": rec.points,
        "error": error,
        **info,
    }
    log(
        f"    {rec.passes:g} passes in {run['train_s']:.1f} s, stop: {info['stop']}, "
        f"{len(rec.points)} snapshots, {run['measured_cores'] or 0:.2f} cores measured"
    )
    return run


def throughput(runs: list[dict], tokens_per_pass: float) -> None:
    """Each run's steady seconds per pass (median after the first) and tokens per
    second, in all and per core."""
    from harness.timing import steady_pass

    for r in runs:
        steady = steady_pass(r["pass_s"], r.get("setup_s"))
        r["steady_pass_s"] = steady
        r["tokens_per_pass"] = tokens_per_pass
        if steady and r.get("cores"):
            r["tokens_per_s"] = tokens_per_pass / steady
            r["tokens_per_s_per_core"] = tokens_per_pass / steady / r["cores"]
        else:
            r["tokens_per_s"] = r["tokens_per_s_per_core"] = None
