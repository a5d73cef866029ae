"""Where an HDP lap with moves spends its time, against an LDA lap at the same K.

Fits ``HDP(K, moves=("delete", "merge"))`` in process (``client="sync"``,
waves of 2 batches, a short Gibbs start) on a corpus for ``--laps`` laps and
keeps the state at the last lap's judgement (model, whole-data statistics, the
globals with the lap's plan, the memo's entries). On that state it measures:

- the judgement of the lap's moves (:meth:`HDPModel.judge_moves`), wall and
  CPU seconds, median of ``--reps``;
- one lap by hand, in CPU seconds: the local steps of every batch (the
  workers' part) and the driver's part (plan, a global step and ELBO per wave,
  the re-sum, the judgement), for the HDP with its plan and for
  ``LDA(K, alpha=0.5)`` from the same statistics; and the wall time a
  2-worker cluster would take for it, ``local / 2 + driver``.

CPU seconds are what a loaded, shared machine disturbs least. Run it with
``PYTHONPATH`` naming the copy of lsdask to measure (two copies: two runs)::

    PYTHONPATH=$PWD/pipelines/benchmarks:$PWD python pipelines/benchmarks/profiles/hdp_lap.py \\
        --corpus data/corpora/20news --k 100
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np


def capture(path: str, K: int, laps: int, sweeps: int) -> dict[str, Any]:
    """The state at the judgement of lap ``laps`` of an in-process HDP fit."""
    from lsdask import HDP
    from lsdask.learn import memo as memo_mod

    grabbed: dict[str, Any] = {}
    judge = memo_mod.MemoizedVI._judge_moves

    def grab(self: Any, run: Any) -> Any:
        if not run.filling and len(run.lap_elbos) == laps - 1:
            grabbed.update(model=run.model, total=run.total.dense_copy(), glob=run.glob,
                           entries=list(run.memo.values()), sparsity=run.task.sparsity)  # fmt: skip
        return judge(self, run)

    memo_mod.MemoizedVI._judge_moves = grab  # type: ignore[method-assign]
    try:
        HDP(K, moves=("delete", "merge"), sparsity=8, eta=0.1, n_laps=laps, random_state=0,
            client="sync", progress=False, gibbs_sweeps=sweeps, batches_per_update=2,
            tol=0.0).fit(path)  # fmt: skip
    finally:
        memo_mod.MemoizedVI._judge_moves = judge  # type: ignore[method-assign]
    return grabbed


def clocked(acc: dict[str, float], key: str, fn: Callable[[], Any]) -> Any:
    c0 = time.process_time()
    out = fn()
    acc[key] = acc.get(key, 0.0) + time.process_time() - c0
    return out


def hdp_lap(state: dict[str, Any], batches: list[Any]) -> dict[str, float]:
    """CPU seconds of one HDP lap by hand on the captured state, by part: ``local``
    (of which ``notes``, the delete candidates' target documents), ``driver`` (of
    which ``sticks``, the sticks' searches of the global steps), ``plan``, ``judge``."""
    from lsdask.models import hdp as hdp_module
    from lsdask.models.stats import sum_stats

    model, total, L = state["model"], state["total"], state["sparsity"]
    acc: dict[str, float] = {}
    notes, sticks = hdp_module.target_notes, type(model).fitted_sticks

    def timed_notes(*args: Any) -> Any:
        return clocked(acc, "notes", lambda: notes(*args))

    def timed_sticks(self: Any, *args: Any) -> Any:
        return clocked(acc, "sticks", lambda: sticks(self, *args))

    hdp_module.target_notes = timed_notes  # type: ignore[assignment]
    type(model).fitted_sticks = timed_sticks  # type: ignore[method-assign]
    try:
        lap = state["glob"].plan.lap
        g = clocked(
            acc, "plan", lambda: model.plan_moves(total, state["glob"].with_plan(None), lap)
        )
        memo: list[Any] = [None] * len(batches)
        for start in range(0, len(batches), 2):
            wave = list(range(start, min(start + 2, len(batches))))
            shared = g.for_workers()
            for b in wave:
                step = lambda b=b, s=shared: model.local_step(batches[b], s, L)  # noqa: E731
                memo[b] = clocked(acc, "local", step)
            g = clocked(acc, "driver", lambda g=g: model.global_step_from(total, model.carry(g)))
            clocked(acc, "driver", lambda g=g: model.elbo(total, g))
        whole = clocked(acc, "driver", lambda: sum_stats(memo))
        g = clocked(acc, "driver", lambda g=g: model.global_step_from(whole, model.carry(g)))
        clocked(acc, "judge", lambda: model.judge_moves(whole, g, memo, L))
    finally:
        hdp_module.target_notes = notes  # type: ignore[assignment]
        type(model).fitted_sticks = sticks  # type: ignore[method-assign]
    return acc


def lda_lap(state: dict[str, Any], batches: list[Any]) -> dict[str, float]:
    """CPU seconds of one ``LDA(K, alpha=0.5)`` lap by hand from the same statistics."""
    from lsdask.models.lda import LDAModel
    from lsdask.models.stats import SuffStats, sum_stats

    model, L = state["model"], state["sparsity"]
    lda = LDAModel(model.n_components, model.vocab_size, alpha=0.5, eta=model.eta,
                   options=model.options)  # fmt: skip
    fields = ("words", "H", "alloc", "N", "n_docs")
    total = SuffStats(**{k: v for k, v in state["total"].items() if k in fields})
    acc: dict[str, float] = {}
    g = lda.global_step(total)
    memo: list[Any] = [None] * len(batches)
    for start in range(0, len(batches), 2):
        wave = list(range(start, min(start + 2, len(batches))))
        shared = g.for_workers()
        for b in wave:
            memo[b] = clocked(acc, "local", lambda b=b, s=shared: lda.local_step(batches[b], s, L))
        g = clocked(acc, "driver", lambda: lda.global_step(total))
        clocked(acc, "driver", lambda g=g: lda.elbo(total, g))
    whole = clocked(acc, "driver", lambda: sum_stats(memo))
    clocked(acc, "driver", lambda: lda.elbo(whole, lda.global_step(whole)))
    return acc


def main() -> None:
    import lsdask
    from lsdask.io.corpus import Corpus, read_all

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--laps", type=int, default=6)  # the delete budget at its floor
    parser.add_argument("--gibbs-sweeps", type=int, default=100)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    state = capture(args.corpus, args.k, args.laps, args.gibbs_sweeps)
    model, total, glob, L = state["model"], state["total"], state["glob"], state["sparsity"]
    X = read_all(args.corpus).tocsr().astype(np.float64)
    size = Corpus.open(args.corpus).docs_per_row_group
    batches = [X[i : i + size] for i in range(0, X.shape[0], size)]
    print(f"lsdask from {lsdask.__file__}; K={model.n_components}, plan {glob.plan}")
    wall, cpu = [], []
    for _ in range(args.reps):
        t0, c0 = time.perf_counter(), time.process_time()
        outcome = model.judge_moves(total, glob, state["entries"], L)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    print(f"judgement: wall {np.median(wall):.2f} s, CPU {np.median(cpu):.2f} s (median of "
          f"{args.reps}); {outcome.summary()}")  # fmt: skip
    runs = [(hdp_lap(state, batches), lda_lap(state, batches)) for _ in range(args.reps)]
    h = {k: float(np.median([r[0].get(k, 0.0) for r in runs])) for k in
         ("local", "notes", "driver", "sticks", "plan", "judge")}  # fmt: skip
    lw = {k: float(np.median([r[1].get(k, 0.0) for r in runs])) for k in ("local", "driver")}
    hdp_wall = h["local"] / 2 + h["driver"] + h["plan"] + h["judge"]
    lda_wall = lw["local"] / 2 + lw["driver"]
    print(f"one lap, CPU s (median of {args.reps}): HDP local {h['local']:.3f} (notes "
          f"{h['notes']:.3f}), driver {h['driver']:.3f} (sticks {h['sticks']:.3f}), plan "
          f"{h['plan']:.3f}, judge {h['judge']:.3f}; LDA local {lw['local']:.3f}, driver "
          f"{lw['driver']:.3f}")  # fmt: skip
    print(f"2-worker lap (local / 2 + driver): HDP {hdp_wall:.2f} s, LDA {lda_wall:.2f} s, "
          f"ratio {hdp_wall / lda_wall:.2f}; without plan and judgement "
          f"{(hdp_wall - h['plan'] - h['judge']) / lda_wall:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
