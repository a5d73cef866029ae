"""Where a 2-worker HDP lap spends what an LDA lap at the same K does not.

Fits ``HDP(K, moves=("delete", "merge"))`` and ``LDA(K, alpha=0.5)``, alternated
on one 2-worker LocalCluster (one thread each), ``--reps`` times each, and
records for every lap after the first (the memo's fill):

- the driver's wall and CPU seconds (``time.process_time``: every thread of the
  driver, Dask's IO thread included) by phase of memoized VI, each without the
  phases it calls: waiting for a wave's results (``collect``), ``S``'s update
  (``replace``), the global steps (``global``, the lap's end's included),
  sending the globals (``broadcast``) and the next wave (``submit``), memoizing
  (``put``), the ELBO (``elbo``), the rest of the lap's end (``end``: re-sum,
  log line, checkpoint), the moves' plan (``plan``) and judgement (``judge``);
  ``other`` is the rest of the lap;
- the worker processes' CPU seconds in the lap (psutil, asked before and after
  it), and from Dask's task stream the workers' ``compute`` seconds and the
  time in which no worker, or one worker, computes;
- the bytes of what is sent and returned (pickled, protocol 5): the globals
  broadcast per wave, the task (the model rides in it) per batch, and each
  batch's statistics, by field.

Wall seconds on a shared machine move with the load; the CPU seconds, busy
fractions and bytes are what to compare. Run it with ``PYTHONPATH`` naming the
copy of lsdask to measure::

    PYTHONPATH=$PWD nice -n 5 python pipelines/benchmarks/profiles/hdp_dask_lap.py \\
        --corpus data/corpora/20news --k 200 --laps 5 --reps 2
"""

from __future__ import annotations

import argparse
import pickle
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

PHASES = ("collect", "replace", "global", "broadcast", "submit", "put", "elbo", "end", "plan",
          "judge")  # fmt: skip


class Clock:
    """Wall and CPU seconds by phase and lap, each phase without those it calls."""

    def __init__(self) -> None:
        self.lap = 0
        self.inner: list[list[float]] = []  # the wall and CPU seconds of nested phases
        self.wall: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.cpu: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.laps: dict[int, tuple[float, float, float, float]] = {}  # t0, t1, cpu, wall
        self.worker_cpu: dict[int, float] = {}  # the worker processes' CPU s of each lap
        self.kept: dict[str, list[Any]] = defaultdict(list)  # lap 2's, to size

    def sizes(self) -> dict[str, float]:
        """Median pickled bytes of what lap 2 sent and received."""
        out: dict[str, list[int]] = defaultdict(list)
        for what, objs in self.kept.items():
            for obj in objs:
                out[what].append(nbytes(obj))
                if what == "result":
                    for k, v in obj.items():
                        out[f"result.{k}"].append(nbytes(v))
                    if obj.notes:
                        out["result.notes"].append(nbytes(obj.notes))
        return {k: float(np.median(v)) for k, v in out.items()}

    def timed(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` timed as ``phase``; the phases it calls are taken out of its time."""

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.inner.append([0.0, 0.0])
            w0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                w, c = time.perf_counter() - w0, time.process_time() - c0
                iw, ic = self.inner.pop()
                self.wall[self.lap][phase] += w - iw
                self.cpu[self.lap][phase] += c - ic
                if self.inner:
                    self.inner[-1][0] += w
                    self.inner[-1][1] += c

        return wrapper


def nbytes(obj: Any) -> int:
    return len(pickle.dumps(obj, protocol=5))


def worker_cpu(client: Any) -> float:
    """CPU seconds the worker processes have used so far, together."""

    def cpu() -> float:
        import psutil

        t = psutil.Process().cpu_times()
        return float(t.user + t.system)

    return float(sum(client.run(cpu).values()))


def instrument(clock: Clock, client: Any) -> Callable[[], None]:
    """Wrap memoized VI's phases, the executor and the models; returns the undo."""
    from lsdask.engine.dask_executor import DaskExecutor
    from lsdask.learn import memo as memo_mod
    from lsdask.learn.memo_store import MemoryMemo
    from lsdask.models.hdp import HDPModel
    from lsdask.models.lda import LDAModel
    from lsdask.models.stats import SuffStats

    saved: list[tuple[Any, str, Any]] = []

    def patch(owner: Any, name: str, new: Any) -> None:
        saved.append((owner, name, owner.__dict__[name] if isinstance(owner, type) else
                      getattr(owner, name)))  # fmt: skip
        setattr(owner, name, new)

    MVI = memo_mod.MemoizedVI
    lap_fn = MVI._lap

    def lap(self: Any, run: Any, number: int) -> None:
        clock.lap = number
        k0 = worker_cpu(client)
        t0, c0, w0 = time.time(), time.process_time(), time.perf_counter()
        lap_fn(self, run, number)
        clock.laps[number] = (t0, time.time(), time.process_time() - c0,
                              time.perf_counter() - w0)  # fmt: skip
        clock.worker_cpu[number] = worker_cpu(client) - k0

    patch(MVI, "_lap", lap)
    patch(MVI, "_end_lap", clock.timed("end", MVI._end_lap))
    patch(MVI, "_judge_moves", clock.timed("judge", MVI._judge_moves))
    patch(memo_mod, "next_globals", clock.timed("global", memo_mod.next_globals))
    patch(SuffStats, "replace_", clock.timed("replace", SuffStats.replace_))
    patch(MemoryMemo, "put", clock.timed("put", MemoryMemo.put))
    patch(HDPModel, "plan_moves", clock.timed("plan", HDPModel.plan_moves))
    patch(HDPModel, "elbo", clock.timed("elbo", HDPModel.elbo))
    patch(LDAModel, "elbo", clock.timed("elbo", LDAModel.elbo))

    collect, broadcast, submit = DaskExecutor.collect, DaskExecutor.broadcast, DaskExecutor.submit

    def collect_sized(self: Any, pending: Any) -> Any:
        out = clock.timed("collect", collect)(self, pending)
        if clock.lap == 2:  # sized after the fit, off the lap's clock
            clock.kept["result"].extend(out)
        return out

    def broadcast_sized(self: Any, obj: Any) -> Any:
        if clock.lap == 2:
            clock.kept["globals"].append(obj)
        return clock.timed("broadcast", broadcast)(self, obj)

    def submit_sized(self: Any, fn: Any, handles: Any, shared: Any) -> Any:
        if clock.lap == 2:
            clock.kept["task"].append(fn)
            clock.kept["batch handle"].append(handles[0])
        return clock.timed("submit", submit)(self, fn, handles, shared)

    patch(DaskExecutor, "collect", collect_sized)
    patch(DaskExecutor, "broadcast", broadcast_sized)
    patch(DaskExecutor, "submit", submit_sized)

    def undo() -> None:
        for owner, name, old in reversed(saved):
            setattr(owner, name, old)

    return undo


def busy(stream: list[dict[str, Any]], t0: float, t1: float) -> dict[str, float]:
    """Seconds of each task-stream action that fall in ``[t0, t1]`` (clipped)."""
    out: dict[str, float] = defaultdict(float)
    for task in stream:
        for ss in task.get("startstops", ()):
            a, b = max(ss["start"], t0), min(ss["stop"], t1)
            if b > a:
                out[ss["action"]] += b - a
    return out


def idle(stream: list[dict[str, Any]], t0: float, t1: float) -> tuple[float, float]:
    """``(both, one)``: seconds of ``[t0, t1]`` in which no worker computes (the
    driver's critical path) and in which exactly one does (a wave's imbalance)."""
    edges: list[tuple[float, int]] = []
    for task in stream:
        for ss in task.get("startstops", ()):
            a, b = max(ss["start"], t0), min(ss["stop"], t1)
            if ss["action"] == "compute" and b > a:
                edges += [(a, 1), (b, -1)]
    edges.sort()
    time_at = defaultdict(float)
    level, last = 0, t0
    for t, step in edges:
        time_at[min(level, 2)] += t - last
        level, last = level + step, t
    time_at[min(level, 2)] += t1 - last
    return time_at[0], time_at[1]


def one_fit(kind: str, args: argparse.Namespace, client: Any) -> dict[str, Any]:
    from distributed import get_task_stream

    from lsdask import HDP, LDA

    common: dict[str, Any] = dict(sparsity=8, eta=0.1, n_laps=args.laps, random_state=0,
                                  client=client, progress=False, tol=0.0,
                                  gibbs_sweeps=args.gibbs_sweeps)  # fmt: skip
    if kind == "hdp":
        est = HDP(args.k, alpha=0.5, gamma=10.0, moves=("delete", "merge"), **common)
    else:
        est = LDA(args.k, alpha=0.5, **common)
    clock = Clock()
    undo = instrument(clock, client)
    try:
        with get_task_stream(client=client) as ts:
            est.fit(args.corpus)
    finally:
        undo()
    laps = {}
    for n, (t0, t1, cpu, wall) in sorted(clock.laps.items()):
        if n < 2:
            continue
        b = busy(ts.data, t0, t1)
        b["both idle"], b["one idle"] = idle(ts.data, t0, t1)
        phases_w = dict(clock.wall[n])
        phases_c = dict(clock.cpu[n])
        phases_w["other"] = wall - sum(phases_w.values())
        phases_c["other"] = cpu - sum(phases_c.values())
        laps[n] = {"wall": wall, "cpu": cpu, "worker_cpu": clock.worker_cpu[n], "busy": dict(b),
                   "phases_wall": phases_w, "phases_cpu": phases_c}  # fmt: skip
    sizes = clock.sizes()
    return {"kind": kind, "laps": laps, "bytes": sizes,
            "K": int(getattr(est, "n_components_", args.k))}  # fmt: skip


def summary(fits: list[dict[str, Any]]) -> None:
    for kind in ("lda", "hdp"):
        runs = [f for f in fits if f["kind"] == kind]
        laps = [lap for f in runs for lap in f["laps"].values()]
        if not laps:
            continue
        med = lambda xs: float(np.median(xs))  # noqa: E731
        wall, cpu = med([x["wall"] for x in laps]), med([x["cpu"] for x in laps])
        comp = med([x["busy"].get("compute", 0.0) for x in laps])
        wcpu = med([x["worker_cpu"] for x in laps])
        other_actions = sorted({a for x in laps for a in x["busy"]} - {"compute"})
        print(f"\n== {kind.upper()} (K end {[f['K'] for f in runs]}; {len(laps)} laps, medians)")
        print(f"lap wall {wall:.3f} s, driver CPU {cpu:.3f} s, workers' CPU {wcpu:.3f} s, "
              f"workers' compute (task stream) {comp:.3f} s "
              f"(busy {comp / (2 * wall):.0%} of 2 x wall)" + "".join(
                  f", {a} {med([x['busy'].get(a, 0.0) for x in laps]):.3f} s"
                  for a in other_actions))  # fmt: skip
        names = [*PHASES, "other"]
        print("phase      " + " ".join(f"{p:>9}" for p in names))
        print(
            "wall s     "
            + " ".join(f"{med([x['phases_wall'].get(p, 0.0) for x in laps]):9.3f}" for p in names)
        )
        print(
            "CPU s      "
            + " ".join(f"{med([x['phases_cpu'].get(p, 0.0) for x in laps]):9.3f}" for p in names)
        )
        for f in runs:
            for n, x in sorted(f["laps"].items()):
                pw, pc = x["phases_wall"], x["phases_cpu"]
                moves_w = pw.get("plan", 0) + pw.get("judge", 0)
                moves_c = pc.get("plan", 0) + pc.get("judge", 0)
                print(
                    f"  lap {n}: wall {x['wall']:.2f}, driver CPU {x['cpu']:.2f}, workers' CPU "
                    f"{x['worker_cpu']:.2f}; plan+judge wall {moves_w:.2f} CPU {moves_c:.2f}"
                )
        sizes: dict[str, list[float]] = defaultdict(list)
        for f in runs:
            for k, v in f["bytes"].items():
                sizes[k].append(v)
        print("bytes (median): " + ", ".join(
            f"{k} {med(v) / 1024:,.0f} KiB" for k, v in sorted(sizes.items())))  # fmt: skip


def main() -> None:
    import lsdask
    from lsdask.engine.dask_executor import start_local_cluster

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--k", type=int, default=200)
    parser.add_argument("--laps", type=int, default=5)
    parser.add_argument("--gibbs-sweeps", type=int, default=100)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--kinds", default="lda,hdp")
    args = parser.parse_args()
    from distributed import Client

    print(f"lsdask from {lsdask.__file__}")
    with start_local_cluster(2) as cluster, Client(cluster) as client:
        fits = []
        for rep in range(args.reps):
            for kind in args.kinds.split(","):
                t0 = time.perf_counter()
                fits.append(one_fit(kind, args, client))
                print(f"rep {rep} {kind}: {time.perf_counter() - t0:.0f} s", flush=True)
        summary(fits)


if __name__ == "__main__":
    main()
