"""The heldout score of topics, for lsdask and every peer alike.

The score is lsparse App. E document completion
(:func:`lsdask.evaluate.document_completion`): for each heldout document,
q(pi_d) is fit on its part A with the topics fixed, and the log-likelihood
per token of its part B is reported (nats/token; higher is better). It is
computed from a method's topic-word matrix, so every method is scored by the
same code.

Time to quality: the snapshots of a group of training runs are scored after
all of them ran (not on their clocks), two at a time on the Dask workers;
the quality threshold is the best score any run reached minus a tolerance,
and a run's time to quality is the clock of its first scored snapshot at or
above it. Primary snapshots are all scored; fine ones are scored by
bisection only where a run crossed the threshold.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from harness.priors import ALPHA, ETA


def score_topics(A: Any, B: Any, topics: np.ndarray, alpha: float = ALPHA) -> float:
    """Heldout score (nats/token) of a (K, V) topic-word matrix, rows normalized here."""
    from lsdask.evaluate import document_completion

    return document_completion(A, B, topics / topics.sum(axis=1, keepdims=True), alpha)


def score_counts(A: Any, B: Any, counts: np.ndarray) -> float:
    """Heldout score of topic-word counts: their posterior mean, counts + eta."""
    return score_topics(A, B, counts + ETA)


def score_snapshot(path: str, A: Any, B: Any, alpha: float) -> tuple[float, float]:
    """Heldout score of one saved topic snapshot, and its seconds (runs on a worker)."""
    from lsdask.evaluate import document_completion

    t = time.perf_counter()
    topics = np.load(path).astype(np.float64)
    topics /= topics.sum(axis=1, keepdims=True)
    score = document_completion(A, B, topics, alpha)
    return float(score), time.perf_counter() - t


def score_runs(
    client: Any,
    runs: list[dict[str, Any]],
    AB: tuple[Any, Any],
    *,
    quality_tol: float,
    bisect_rounds: int,
    max_scoring_s: float,
) -> tuple[int, float]:
    """Score the runs' primary snapshots on the workers, then bisect with the fine
    ones where each run crossed the threshold (up to ``bisect_rounds`` rounds;
    rounds after the second only while scoring took under ``max_scoring_s``).

    Each run's ``points`` (from :class:`~harness.budget.Recorder`) get ``score``
    and ``eval_s``; returns the number of snapshots scored and the seconds.
    """
    t0 = time.perf_counter()
    A_f, B_f = AB
    n_scored = 0

    def score(keys: list[tuple[int, int]]) -> None:
        futs = {
            key: client.submit(
                score_snapshot,
                runs[key[0]]["points"][key[1]]["path"],
                A_f,
                B_f,
                ALPHA,
                pure=False,
            )
            for key in keys
        }
        for (i, j), fut in futs.items():
            sc, secs = fut.result()
            runs[i]["points"][j]["score"] = sc
            runs[i]["points"][j]["eval_s"] = secs

    primary = [
        (i, j) for i, r in enumerate(runs) for j, p in enumerate(r["points"]) if p["primary"]
    ]
    score(primary)
    n_scored += len(primary)
    for round_ in range(bisect_rounds):
        keys = bisection_keys(runs, quality_tol)
        if not keys or (round_ >= 2 and time.perf_counter() - t0 > max_scoring_s):
            break
        score(keys)
        n_scored += len(keys)
    return n_scored, time.perf_counter() - t0


def bisection_keys(runs: list[dict], quality_tol: float) -> list[tuple[int, int]]:
    """For each run, the unscored snapshot halfway between its last scored point
    below the threshold and its first scored point above it (if any)."""
    scored = [p["score"] for r in runs for p in r["points"] if "score" in p]
    if not scored:
        return []
    thr = max(scored) - quality_tol
    keys = []
    for i, r in enumerate(runs):
        pts = r["points"]
        hit = next((j for j, p in enumerate(pts) if p.get("score", -np.inf) >= thr), None)
        if hit is None:
            continue
        below = max((j for j in range(hit) if "score" in pts[j]), default=-1)
        between = [j for j in range(below + 1, hit) if "score" not in pts[j]]
        if between:
            keys.append((i, between[len(between) // 2]))
    return keys


def drop_snapshot_paths(runs: list[dict[str, Any]]) -> None:
    """Keep the scored points as ``points`` and the others as ``points_unscored``,
    without the snapshots' file paths (the files are deleted after scoring)."""
    for run in runs:
        run["points_unscored"] = [
            {k: v for k, v in p.items() if k != "path"} for p in run["points"] if "score" not in p
        ]
        run["points"] = [
            {k: v for k, v in p.items() if k != "path"} for p in run["points"] if "score" in p
        ]


def time_to_quality(res: dict[str, Any], quality_tol: float) -> bool:
    """The best score of ``res["runs"]``, the threshold, and each run's final score,
    best score and time (and pass) at which it first reached the threshold.
    False when no snapshot was scored."""
    runs = res["runs"]
    scored = [(p["score"], r["label"]) for r in runs for p in r["points"] if "score" in p]
    if not scored:
        res["best"] = None
        return False
    best, best_by = max(scored)
    thr = best - quality_tol
    res["best"], res["best_by"], res["threshold"] = best, best_by, thr
    for r in runs:
        pts = [p for p in r["points"] if "score" in p]
        r["final_score"] = pts[-1]["score"] if pts else None
        r["best_score"] = max(p["score"] for p in pts) if pts else None
        hit = next((p for p in pts if p["score"] >= thr), None)
        r["time_to_quality_s"] = hit["t"] if hit else None
        r["pass_at_quality"] = hit["pass"] if hit else None
    return True
