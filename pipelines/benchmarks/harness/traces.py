"""Heldout score against wall time, lap after lap: lsdask's topic models at their
defaults beside tomotopy's ``LDAModel`` with its own defaults for alpha learning.

Each run's clock starts when the system is handed the documents (lsdask's
``fit`` call, tomotopy's model construction and ``add_doc``) and counts
everything until each snapshot, the start included, less the time spent
saving the snapshot. A snapshot holds the topics and the system's own
document-topic prior (lsdask's ``alpha_`` as the lap's globals hold it,
tomotopy's learned ``alpha``); every snapshot is then scored twice by
document completion (:mod:`lsdask.evaluate`): under that own prior and under
one common symmetric prior (``harness.priors.ALPHA`` in total).

For lsdask with early stopping each lap also records the lap the model keeps
(``best_lap``): the score a user holds after lap t is that of the kept lap,
``kept_own`` below, while ``own`` is the lap's own globals. The Gibbs start
hands its topics so far to the callback about every 30 seconds (lap 0); its
last snapshot is the start the laps go on from, and the falls are measured
from there on (laps, not the chain's sample-to-sample noise).
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from harness.peers import tomotopy_add_docs, tomotopy_pseudo_counts
from harness.priors import ALPHA

#: the lsdask systems, each at its defaults but K, eta and the laps
SYSTEMS = {
    "lda": "lsdask LDA() (alpha=0.5 fixed)",
    "lda-auto": 'lsdask LDA(alpha="auto")',
    "hdp": "lsdask HDP(max_components=K)",
}


class Snapshots:
    """Topic snapshots of one run, saved as float32 ``.npz`` with the own prior."""

    def __init__(self, folder: Path, prefix: str) -> None:
        self.folder, self.prefix = Path(folder).resolve(), prefix
        self.points: list[dict[str, Any]] = []
        self.excluded = 0.0
        self.t0 = time.perf_counter()

    def clock(self) -> float:
        return time.perf_counter() - self.t0 - self.excluded

    def save(self, topics: np.ndarray, alpha: np.ndarray, **info: Any) -> None:
        t = self.clock()
        s = time.perf_counter()
        path = self.folder / f"{self.prefix}-{len(self.points):03d}.npz"
        np.savez(path, topics=np.asarray(topics, np.float32), alpha=np.asarray(alpha, np.float64))
        self.points.append({"t": t, "path": str(path), **info})
        self.excluded += time.perf_counter() - s


def lsdask_run(
    data: Any,
    kind: str,
    K: int,
    eta: float,
    laps: int,
    seed: int,
    client: Any,
    folder: Path,
    prefix: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One lsdask fit at its defaults (but ``K``, ``eta``, ``laps`` and ``extra``) on
    the training corpus, a snapshot (file names ``prefix``-NNN, by default the
    kind's) after every lap."""
    from lsdask import HDP, LDA

    snaps = Snapshots(folder, prefix or kind)
    common = dict(eta=eta, n_laps=laps, random_state=seed, client=client, progress=False)
    common.update(extra)

    def on_lap(result: Any) -> None:
        g = result.globals
        snaps.save(g.topics, g.alpha, lap=int(result.n_laps), best_lap=result.best_lap,
                   K=int(g.topics.shape[0]), start=int(result.n_laps) == 0)  # fmt: skip

    snaps.t0 = time.perf_counter()
    if kind == "hdp":
        est = HDP(K, **common)
    elif kind == "lda-auto":
        est = LDA(K, alpha="auto", **common)
    else:
        est = LDA(K, **common)
    est.fit(data.train_path, callback=on_lap)
    return {
        "kind": kind, "label": SYSTEMS[kind], "points": snaps.points,
        "settings": {k: v for k, v in common.items() if k != "client"},
        "n_laps": int(est.n_laps_), "best_lap": est.best_lap_,
        "stopped_early": bool(est.best_lap_ is not None and est.converged_),
        "final_K": int(getattr(est, "n_components_", K)),
    }  # fmt: skip


def tomotopy_run(
    data: Any,
    K: int,
    eta: float,
    sweeps: int,
    seed: int,
    workers: int,
    folder: Path,
    prefix: str = "tomotopy",
) -> dict[str, Any]:
    """tomotopy ``LDAModel(k=K, eta=eta)`` with its defaults otherwise (alpha=0.1 per
    topic, re-estimated every 10 sweeps from sweep 0: ``optim_interval=10``,
    ``burn_in=0``), ``sweeps`` sweeps on ``workers`` threads, snapshots every 10
    sweeps up to 100, then every 50."""
    import tomotopy as tp

    snaps = Snapshots(folder, prefix)
    mdl = tp.LDAModel(k=K, eta=eta, seed=seed)
    tomotopy_add_docs(mdl, data.X_train)
    cache: dict[str, Any] = {}
    done = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        while done < sweeps:
            step = 10 if done < 100 else 50
            mdl.train(step, workers=workers)
            done += step
            lam = tomotopy_pseudo_counts(mdl, K, data.vocab_size, cache, eta)
            snaps.save(lam / lam.sum(axis=1, keepdims=True), np.asarray(mdl.alpha), sweeps=done)
    return {
        "kind": "tomotopy",
        "label": f"tomotopy LDAModel(k={K}, eta={eta}) defaults: alpha=0.1/topic, "
                 f"optim_interval=10; {workers} threads",
        "points": snaps.points, "settings": {"k": K, "eta": eta, "sweeps": sweeps,
                                             "workers": workers, "seed": seed},
    }  # fmt: skip


def score_npz(path: str, A: Any, B: Any) -> tuple[float, float]:
    """Own-prior and common-prior scores of one snapshot (runs on a worker)."""
    from lsdask.evaluate import document_completion

    z = np.load(path)
    topics = z["topics"].astype(np.float64)
    topics /= topics.sum(axis=1, keepdims=True)
    return (
        float(document_completion(A, B, topics, z["alpha"])),
        float(document_completion(A, B, topics, ALPHA)),
    )


def score_runs(runs: list[dict[str, Any]], data: Any, client: Any) -> None:
    """Score every snapshot (own and common prior) on the cluster; add
    ``own``/``common`` to each point and, for lsdask, ``kept_own``/``kept_common``
    (the scores of the lap the model keeps)."""
    A_f = client.scatter(data.A, broadcast=True, hash=False)
    B_f = client.scatter(data.B, broadcast=True, hash=False)
    futures = [(p, client.submit(score_npz, p["path"], A_f, B_f, pure=False))
               for r in runs for p in r["points"]]  # fmt: skip
    for p, f in futures:
        p["own"], p["common"] = f.result()
    for p, _ in futures:
        Path(p.pop("path")).unlink()
    for r in runs:
        by_lap = {p.get("lap"): p for p in r["points"]}
        for p in r["points"]:
            kept = by_lap.get(p.get("best_lap")) or p
            p["kept_own"], p["kept_common"] = kept["own"], kept["common"]


def time_to(points: list[dict[str, Any]], score: float, key: str) -> float | None:
    """The clock of the first point whose ``key`` reaches ``score``."""
    return next((p["t"] for p in points if p[key] >= score), None)


def score_at(points: list[dict[str, Any]], t: float, key: str) -> float | None:
    """``key`` of the last point at or before ``t`` seconds."""
    before = [p for p in points if p["t"] <= t]
    return before[-1][key] if before else None


def largest_fall(points: list[dict[str, Any]], key: str) -> float:
    """How far below its best so far the trace ``key`` fell at worst (>= 0)."""
    best, fall = -np.inf, 0.0
    for p in points:
        best = max(best, p[key])
        fall = max(fall, best - p[key])
    return float(fall)


def from_last_start(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points from the Gibbs start's last snapshot (lap 0) on: the laps."""
    starts = [i for i, p in enumerate(points) if p.get("start")]
    return points[starts[-1] :] if starts else points


def summarize(runs: list[dict[str, Any]], reference_t: float) -> None:
    """Add each run's summary: first and final scores, the largest fall of what
    the user holds (the kept lap's own-prior score) below its best, and the time
    to reach tomotopy's own-prior score at ``reference_t`` seconds."""
    tomo = next((r for r in runs if r["kind"] == "tomotopy"), None)
    target = None if tomo is None else score_at(tomo["points"], reference_t, "own")
    for r in runs:
        pts = r["points"]
        key = "own" if r["kind"] == "tomotopy" else "kept_own"
        r["first"] = {"t": pts[0]["t"], "own": pts[0]["own"]} if pts else None
        r["final_own"] = pts[-1][key] if pts else None
        r["final_common"] = pts[-1][key.replace("own", "common")] if pts else None
        laps = from_last_start(pts)
        r["largest_fall"] = largest_fall(laps, key) if pts else None
        r["lap_largest_fall"] = largest_fall(laps, "own") if pts else None
        r["target"] = target
        r["time_to_target"] = None if target is None else time_to(pts, target, key)


def render(runs: list[dict[str, Any]], title: str, reference_t: float) -> list[str]:
    """A Markdown table of the runs' summaries and their traces."""
    lines = [f"#### {title}", "",
             "| system | first score (own) @ s | final own [common] @ s | laps (kept) | "
             "largest fall of the kept model / of the lap's globals | "
             f"time to tomotopy's {reference_t:.0f}-s score |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    tomo_t = None
    for r in runs:
        if r["kind"] == "tomotopy":
            tomo_t = r["time_to_target"]
    for r in runs:
        pts = r["points"]
        if not pts:
            lines.append(f"| {r['label']} | no snapshot | | | | |")
            continue
        laps = (f"{pts[-1]['sweeps']} sweeps" if r["kind"] == "tomotopy"
                else f"{r['n_laps']} ({r['best_lap']})")  # fmt: skip
        hit = r["time_to_target"]
        ratio = "" if hit is None or not tomo_t else f" ({hit / tomo_t:.2f}x)"
        lines.append(
            f"| {r['label']} | {r['first']['own']:.4f} @{r['first']['t']:.0f} | "
            f"{r['final_own']:.4f} [{r['final_common']:.4f}] @{pts[-1]['t']:.0f} | {laps} | "
            f"{r['largest_fall']:.4f} / {r['lap_largest_fall']:.4f} | "
            f"{'not reached' if hit is None else f'{hit:.0f} s'}{ratio} |"
        )
    lines += ["", "Traces (seconds: own-prior score [common prior]; lsdask: the lap's globals, "
              "then * where the model keeps an earlier lap; s: a snapshot of the Gibbs start, "
              "the last of them its end, lap 0):", ""]  # fmt: skip
    for r in runs:
        cells = []
        for p in r["points"]:
            mark = "" if p.get("best_lap") in (None, p.get("lap")) else f" *{p['kept_own']:.4f}"
            when = f"s{p['t']:.0f}" if p.get("start") else f"{p['t']:.0f}"
            cells.append(f"{when}: {p['own']:.4f} [{p['common']:.4f}]{mark}")
        lines.append(f"- {r['label']}: " + ", ".join(cells))
    return lines


def laps_part(
    data: Any,
    *,
    K: int,
    eta: float,
    laps: int,
    systems: tuple[str, ...],
    sweeps: int,
    reference_t: float,
    seed: int,
    workers: int,
    client: Any,
    folder: Path,
    log: Any = print,
) -> dict[str, Any]:
    """tomotopy, then each lsdask system, on ``data`` at (K, eta): traced, scored,
    summarized (see :func:`summarize`)."""
    folder.mkdir(parents=True, exist_ok=True)
    log(f"  {data.name} K={K} eta={eta}: tomotopy, {sweeps} sweeps")
    runs = [tomotopy_run(data, K, eta, sweeps, seed, workers, folder)]
    for kind in systems:
        log(f"  {data.name} K={K} eta={eta}: {SYSTEMS[kind]}, {laps} laps at most")
        runs.append(lsdask_run(data, kind, K, eta, laps, seed, client, folder))
    score_runs(runs, data, client)
    summarize(runs, reference_t)
    return {"corpus": data.name, "K": K, "eta": eta, "laps": laps, "runs": runs,
            "reference_t": reference_t}  # fmt: skip


def laps_targets(block: dict[str, Any], fall_tol: float = 0.003) -> list[list[str]]:
    """Rows (what, measured, target, result) of the issue's targets for one block."""
    runs = block["runs"]
    tomo = next(r for r in runs if r["kind"] == "tomotopy")
    rows = []
    for r in runs:
        if r["kind"] == "tomotopy" or r["final_own"] is None:
            continue
        name = f"{block['corpus']} eta={block['eta']} {r['label']}"
        fall = r["largest_fall"]
        rows.append(
            [
                f"{name}: largest fall of the kept model's own-prior score below its best",
                f"{fall:.4f}",
                f"<= {fall_tol}",
                "PASS" if fall <= fall_tol else "FAIL",
            ]
        )
        gap = r["final_own"] - tomo["final_own"]
        rows.append(
            [
                f"{name}: final own-prior score minus tomotopy's after "
                f"{tomo['points'][-1]['sweeps']} sweeps",
                f"{gap:+.4f}",
                ">= 0",
                "PASS" if gap >= 0 else "FAIL",
            ]
        )
        t, t_tomo = r["time_to_target"], tomo["time_to_target"]
        ratio = None if t is None or not t_tomo else t / t_tomo
        rows.append(
            [
                f"{name}: time to tomotopy's {block['reference_t']:.0f}-s score / tomotopy's",
                "not reached" if ratio is None else f"{ratio:.2f}x",
                "<= 1.0x",
                "PASS" if ratio is not None and ratio <= 1.0 else "FAIL",
            ]
        )
    return rows  # fmt: skip
