"""Benchmark of ESVI (model-parallel LDA, exact mode) against memoized VI, and its scaling.

Everything is measured side by side in ONE run on one 2-worker LocalCluster,
with the LDA benchmark's priors (alpha = 0.5 in total, eta = 0.1), heldout
split and scorer (lsparse App. E document completion of the topics,
``harness.scoring``).

Rows (see ``pipelines/benchmarks/README_esvi.md``):

1. quality and speed on AP and 20 Newsgroups at one K: memoized VI
   (``LDA(algorithm="memo")``, L=8, the Gibbs start with ``--gibbs-sweeps``)
   for ``--laps`` laps against ESVI with P=2 blocks for ``--rotations``
   rotations: from random responsibilities (the paper's start, one pass per
   sub-step) at C=K, and from the same Gibbs start with up to
   ``--esvi-iters`` passes per sub-step, each document stopping once a pass
   moves its counts less than ``--esvi-tol``, at the estimator's default C
   (the sparsity L=8, the L-sparse rule: the run the targets are checked on),
   at C=K, and at C=K/4 under the L-sparse and the paper's rule: final
   heldout (nats/token), final ELBO per token, fit wall time (the start
   included);
2. scaling on 20 Newsgroups: ESVI C=K with P=1 (one worker) against P=2 (two
   workers), exact and stale totals (``pi_sync="stale"``) on the rotation
   schedule, and the nomadic schedule (``schedule="nomadic"``, stale totals),
   tokens per second of the rotations (the start excluded);
3. with ``--parts mixture`` (``esvi_mixture_part.py``): ESVI for the zero-mean
   Gaussian mixture on BSDS500 patches against memoized VI;
4. with ``--parts memory`` (``esvi_memory_part.py``): memoized LDA and ESVI
   P=2 at K=1,000, V=500,000 (synthetic) with the driver and each worker
   limited to 3 GiB. K in {128, 400} are not in this script's default run
   (``--K``).

Usage::

    nice -n 5 python pipelines/benchmarks/bench_esvi.py --quick    # a smoke run
    nice -n 5 python pipelines/benchmarks/bench_esvi.py --parts memory   # -> esvi-memory
    nice -n 5 python pipelines/benchmarks/bench_esvi.py --parts quality --K 64 --laps 10 \\
        --rotations 15          # -> esvi-quality; --K 128 --corpora ap -> esvi-quality-K128

    nice -n 5 python pipelines/benchmarks/bench_esvi.py --parts mixture   # the mixtures only

Writes ``pipelines/benchmarks/results/esvi{,-quick}.md`` and ``.json``;
``--parts mixture`` alone: ``esvi-mixture-<commit>{,-quick}``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import esvi_mixture_part
import numpy as np
from harness import cluster, corpora
from harness.machine import git_commit
from harness.priors import ALPHA, ETA
from harness.report import check, fmt, fmt_s, header, step_times, table
from harness.run import Run, log, options
from harness.scoring import score_topics


def rotation_scorer(data: Any, client: Any, scores: list[tuple[float, float]]) -> Any:
    """An ESVI fit's callback that scores the topics after every rotation (the
    blocks gathered into this process), appending (score, seconds it took) to
    ``scores``. The fit's time trace leaves the callback out (each rotation's
    clock goes on from the trace); its wall time does not."""
    from lsdask.models.esvi_lda import gather_topics

    def callback(run: Any) -> None:
        t = time.perf_counter()
        blocks = client.gather(list(run.blocks)) if client is not None else list(run.blocks)
        V = data.info["vocab_size"]
        score = score_topics(data.A, data.B, gather_topics(blocks, V))
        scores.append((score, time.perf_counter() - t))

    return callback


def fit_one(
    data: Any, client: Any, K: int, score_rotations: bool = False, **params: Any
) -> dict[str, Any]:
    """Fit lsdask LDA with ``params`` on the corpus; its heldout, ELBO and times
    (with ``score_rotations``, an ESVI fit's heldout after every rotation too)."""
    from lsdask import LDA

    lda = LDA(K, alpha=ALPHA, eta=ETA, client=client, random_state=0, tol=0, **params)
    scores: list[tuple[float, float]] = []
    callback = rotation_scorer(data, client, scores) if score_rotations else None
    t = time.perf_counter()
    lda.fit(data.train_path, callback=callback)
    wall = time.perf_counter() - t - sum(sec for _, sec in scores)  # without the scoring
    trace = np.asarray(lda.time_trace_, dtype=float)
    out = {
        "params": {k: v for k, v in params.items()},
        "wall_s": wall,
        "heldout": score_topics(data.A, data.B, lda.components_),
        "elbo_per_token": float(lda.elbo_trace_[-1] / data.n_tokens),
        "elbo_trace_per_token": (np.asarray(lda.elbo_trace_) / data.n_tokens).tolist(),
        "time_trace_s": trace.tolist(),
        "laps": int(lda.n_laps_),
    }
    if scores:
        out["heldout_trace"] = [h for h, _ in scores]
        out["scoring_s"] = sum(sec for _, sec in scores)  # left out of wall_s
        out["start_s"] = wall - float(trace[-1])  # the start, and the final gather
    if params.get("algorithm") == "esvi":
        out["rotation_s"] = float(trace[-1] / len(trace))
        out["tokens_per_s"] = float(data.n_tokens * len(trace) / trace[-1])
    log(f"  {params}: heldout {out['heldout']:.4f}, ELBO/token {out['elbo_per_token']:.4f}, "
        f"{wall:.1f} s")  # fmt: skip
    return out


#: ESVI as the estimator's defaults have it: C = the sparsity L (8), the L-sparse rule
DEFAULT_RUN = "esvi C=L=8 (default)"


def quality(
    data: Any, client: Any, K: int, laps: int, rotations: int, sweeps: int, iters: int,
    tol: float = 0.05,
) -> dict[str, Any]:  # fmt: skip
    C = max(1, K // 4)
    esvi = {"algorithm": "esvi", "n_blocks": 2, "n_laps": rotations}
    gibbs = {"init": "gibbs", "gibbs_sweeps": sweeps}
    warm = {**esvi, **gibbs, "esvi_iters": iters, "esvi_tol": tol}
    runs = {
        "memo": fit_one(data, client, K, algorithm="memo", n_laps=laps, **gibbs),
        "esvi C=K random start": fit_one(data, client, K, **esvi, topk=K),
        DEFAULT_RUN: fit_one(data, client, K, score_rotations=True, **warm),
        "esvi C=K": fit_one(data, client, K, score_rotations=True, **warm, topk=K),
        f"esvi C={C} lsparse": fit_one(data, client, K, score_rotations=True, **warm, topk=C),
        f"esvi C={C} paper": fit_one(data, client, K, **warm, topk=C, topk_rule="paper"),
    }
    for r in runs.values():
        r["reach"] = time_to_quality(r, runs["memo"])
    return {"K": K, "C": C, "runs": runs, "corpus": data.info}


def time_to_quality(run: dict[str, Any], memo: dict[str, Any]) -> dict[str, Any] | None:
    """The first rotation after which an ESVI run is at memoized VI's final
    quality (heldout at most 0.01 below it, ELBO per token within 0.5% of it),
    and the seconds to its end from the fit's start (the start included, the
    per-rotation scoring not); None for a run without per-rotation scores."""
    scores = run.get("heldout_trace")
    if not scores:
        return None
    elbo, times = run["elbo_trace_per_token"], run["time_trace_s"]
    for r, (h, e) in enumerate(zip(scores, elbo, strict=True)):
        if h - memo["heldout"] >= -0.01 and abs(e / memo["elbo_per_token"] - 1) <= 0.005:
            seconds = run["start_s"] + times[r]
            return {"rotation": r + 1, "seconds": seconds, "ratio": seconds / memo["wall_s"]}
    return {"rotation": None, "seconds": None, "ratio": None}


def scaling(data: Any, client: Any, K: int, rotations: int) -> dict[str, Any]:
    esvi = {"algorithm": "esvi", "n_laps": rotations, "topk": K}
    one = fit_one(data, client, K, n_blocks=1, **esvi)
    two = fit_one(data, client, K, n_blocks=2, **esvi)
    stale = fit_one(data, client, K, n_blocks=2, pi_sync="stale", **esvi)
    nomadic = fit_one(data, client, K, n_blocks=2, pi_sync="stale", schedule="nomadic", **esvi)
    return {
        "K": K, "P1": one, "P2": two, "P2 stale": stale, "P2 nomadic": nomadic,
        "speedup": two["tokens_per_s"] / one["tokens_per_s"],
        "speedup_stale": stale["tokens_per_s"] / one["tokens_per_s"],
        "speedup_nomadic": nomadic["tokens_per_s"] / one["tokens_per_s"],
    }  # fmt: skip


def time_lines(esvi: dict[str, Any], memo: dict[str, Any]) -> list[str]:
    """The time verdict: memo's quality reached by ESVI in at most 1.5x memo's
    fit time (where the rotations were scored), and the whole fit's ratio."""
    whole = esvi["wall_s"] / memo["wall_s"]
    reach = esvi.get("reach")
    if not reach:
        return [f"- ESVI time <= 1.5x memo: {check(whole <= 1.5)} ({whole:.2f}x, whole fits)"]
    ok = reach["ratio"] is not None and reach["ratio"] <= 1.5
    got = "never" if reach["ratio"] is None else (
        f"after rotation {reach['rotation']}: {reach['ratio']:.2f}x"
    )  # fmt: skip
    return [
        f"- ESVI reaches memo's final quality (heldout at most 0.01 below, ELBO/token within "
        f"0.5%) in <= 1.5x memo's fit time, its start included: {check(ok)} ({got}; the "
        f"whole {esvi['laps']} rotations: {whole:.2f}x)",
    ]


def render(res: dict[str, Any]) -> str:
    lines = header(res, "ESVI (model-parallel LDA and mixtures) against memoized VI")
    lines.append(step_times(res))
    lines.append("")
    for name, q in res.get("quality", {}).items():
        runs = q["runs"]
        memo = runs["memo"]
        lines += [
            f"## Quality and speed: {name}, K={q['K']}",
            "",
            f"{q['corpus']['train_docs']} training documents, {q['corpus']['train_tokens']:.0f} "
            f"tokens, V={q['corpus']['vocab_size']}; heldout {q['corpus']['test_docs']} "
            "documents (80/20 document completion).",
            "",
        ]
        rows = []
        for label, r in runs.items():
            reach = r.get("reach")
            at = "" if not reach else (
                "not reached" if reach["rotation"] is None
                else f"rotation {reach['rotation']}, {fmt_s(reach['seconds'])}, "
                f"{reach['ratio']:.2f}x"
            )  # fmt: skip
            rows.append([
                label, str(r["laps"]), fmt(r["heldout"], 4), fmt(r["elbo_per_token"], 4),
                fmt_s(r["wall_s"]), fmt(r["wall_s"] / memo["wall_s"], 2),
                fmt(r["heldout"] - memo["heldout"], 4),
                fmt(100 * (1 - r["elbo_per_token"] / memo["elbo_per_token"]), 2), at,
            ])  # fmt: skip
        lines += table(
            ["run", "laps/rotations", "heldout", "ELBO/token", "fit time", "time / memo",
             "heldout - memo", "ELBO/token vs memo (%, < 0: below)",
             "memo's quality reached (time / memo's fit)"], rows,
        )  # fmt: skip
        dense = runs["esvi C=K"]
        topk = runs[f"esvi C={q['C']} lsparse"]
        lines.append("")
        for label in (DEFAULT_RUN, "esvi C=K"):
            if label not in runs:  # results from before the default followed the sparsity
                continue
            esvi = runs[label]
            lines += [
                f"- {label}: heldout within 0.01 nats/token of memo (at most 0.01 below it): "
                f"{check(esvi['heldout'] - memo['heldout'] >= -0.01)}",
                f"- {label}: ELBO per token within 0.5% of memo: "
                f"{check(esvi['elbo_per_token'] / memo['elbo_per_token'] - 1 <= 0.005)}",
                *[f"- {label}: {line[2:]}" for line in time_lines(esvi, memo)],
            ]
        lines += [
            f"- TOPK C={q['C']} (L-sparse rule) heldout within 0.01 of C=K: "
            f"{check(abs(topk['heldout'] - dense['heldout']) <= 0.01)}",
            "",
        ]
    s = res.get("scaling")
    if s:
        lines += [
            f"## Scaling on 20 Newsgroups, K={s['K']}, C=K, exact mode",
            "",
        ]
        rows = [("1", s["P1"]), ("2", s["P2"])]
        if "P2 stale" in s:
            rows.append(("2, stale", s["P2 stale"]))
        if "P2 nomadic" in s:
            rows.append(("2, nomadic (stale totals)", s["P2 nomadic"]))
        lines += table(
            ["P", "tokens/s (rotations)", "s per rotation", "heldout", "ELBO/token"],
            [[p, fmt(r["tokens_per_s"], 0), fmt(r["rotation_s"], 2), fmt(r["heldout"], 4),
              fmt(r["elbo_per_token"], 4)] for p, r in rows],
        )  # fmt: skip
        lines += [
            "",
            f"- P=2 at least 1.5x the tokens/s of P=1: {check(s['speedup'] >= 1.5)} "
            f"({s['speedup']:.2f}x)",
        ]
        if "speedup_stale" in s:
            lines.append(
                f"- stale mode (round-robin totals), P=2: {s['speedup_stale']:.2f}x the tokens/s "
                "of P=1; it keeps the barrier of every sub-step (the views change only which "
                "totals a part reads), so it is not expected to be faster"
            )
        if "speedup_nomadic" in s:
            lines.append(
                f"- nomadic schedule (no barrier but at a rotation's end, blocks swapped "
                f"between idle parts, stale totals), P=2: {s['speedup_nomadic']:.2f}x the "
                "tokens/s of P=1; with two parts a swap needs both idle, so each part still "
                "waits for the other once per block: the schedule saves the driver's round "
                "trips of every sub-step (the totals' all-reduce and broadcast, the wait for "
                "the blocks' old copies to be freed), not that wait"
            )
        lines.append("")
    if res.get("mixture"):
        lines += esvi_mixture_part.render(res["mixture"])
    if res.get("memory"):
        from esvi_memory_part import render_memory

        lines += render_memory(res["memory"])
    done = {q["K"] for q in res.get("quality", {}).values()}
    lines += [
        "## Not run",
        "",
        f"- quality at K in {sorted({64, 128, 400} - done)} (`--K`).",
        "",
    ]
    if not res.get("memory"):
        lines.insert(-2, "- the memory-limit part (`--parts memory`).")
    if not res.get("mixture"):
        lines.insert(-2, "- the mixtures on BSDS patches (`--parts mixture`).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = options(__doc__, "AP only, K=16, few laps")
    parser.add_argument("--K", type=int, default=64)
    parser.add_argument("--laps", type=int, default=10, help="memoized VI laps")
    parser.add_argument("--rotations", type=int, default=20, help="ESVI rotations")
    parser.add_argument("--scaling-rotations", type=int, default=5, help="rotations, scaling")
    parser.add_argument("--corpora", default="ap,20news")
    parser.add_argument("--gibbs-sweeps", type=int, default=200, help="of every Gibbs start")
    parser.add_argument("--esvi-iters", type=int, default=100,
                        help="passes at most, Gibbs-start ESVI")  # fmt: skip
    parser.add_argument("--esvi-tol", type=float, default=0.05,
                        help="a document stops its passes below this")  # fmt: skip
    parser.add_argument("--parts", default="quality,scaling",
                        help="comma-separated: quality, scaling, memory, mixture")  # fmt: skip
    esvi_mixture_part.add_options(parser)
    parser.add_argument("--memory-K", type=int, default=1000)
    parser.add_argument("--memory-vocab", type=int, default=500_000)
    parser.add_argument("--memory-docs", type=int, default=25_000)
    parser.add_argument("--memory-doc-length", type=float, default=100)
    parser.add_argument("--memory-docs-per-row-group", type=int, default=500)
    parser.add_argument("--memory-topk", type=int, default=8, help="ESVI's C")
    parser.add_argument("--memory-limit-gib", type=float, default=3.0)
    parser.add_argument("--memory-timeout-s", type=float, default=900)
    parser.add_argument(
        "--memory-runs",
        default="memo-auto,memo-random,esvi-float32,esvi-float64",
        help="memo-<init> and esvi-<dtype> runs of the memory part",
    )
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    if args.quick:
        args.K, args.laps, args.rotations, args.corpora = 16, 3, 3, "ap"
        args.gibbs_sweeps = 20
        args.scaling_rotations = 2
        esvi_mixture_part.quick(args)
    stem = "esvi-quick" if args.quick else "esvi"
    if parts == {"mixture"}:
        stem = f"esvi-mixture-{git_commit().split()[0]}" + ("-quick" if args.quick else "")
    elif not args.quick and parts != {"quality", "scaling"}:  # a part alone: its own results
        stem = "esvi-" + "-".join(sorted(parts))
        if "quality" in parts and args.K != 64:
            stem += f"-K{args.K}"
    settings = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    run = Run(__file__, stem, args.out, argv, settings=settings)
    if "memory" in parts:
        from esvi_memory_part import memory_part

        log(f"memory part: K={args.memory_K}, V={args.memory_vocab} under "
            f"{args.memory_limit_gib:g} GiB")  # fmt: skip
        run.res["memory"] = run.step(
            "memory", lambda: memory_part(args, corpora.WORK_DIR / "esvi-memory-runs")
        )
    if not parts & {"quality", "scaling", "mixture"}:
        run.finish(render)
        return
    names = args.corpora.split(",") if parts & {"quality", "scaling"} else []
    data = corpora.load_corpora(names, corpora.CORPORA_DIR, corpora.WORK_DIR) if names else {}
    local, client = cluster.local_cluster(2)
    try:
        if "mixture" in parts:
            log("mixtures on BSDS500 patches")
            run.res["mixture"] = run.step(
                "mixture", lambda: esvi_mixture_part.run_part(args, client)
            )
        run.res["quality"] = {}
        for name in names if "quality" in parts else []:
            log(f"quality and speed on {name}, K={args.K}")
            run.res["quality"][name] = run.step(
                f"quality {name}", lambda n=name: quality(
                    data[n], client, args.K, args.laps, args.rotations, args.gibbs_sweeps,
                    args.esvi_iters, args.esvi_tol)
            )  # fmt: skip
        if "20news" in names and "scaling" in parts:
            log("scaling on 20news")
            run.res["scaling"] = run.step(
                "scaling", lambda: scaling(data["20news"], client, args.K, args.scaling_rotations)
            )
    finally:
        client.close()
        local.close()
    run.finish(render)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
