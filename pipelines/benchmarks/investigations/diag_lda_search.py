"""Which changes to the search move lsdask's LDA fit toward tomotopy's optimum?

``diag_lda_optimum.py`` shows that the heldout gap to tomotopy (row 2 of
``bench_lda.py``, lsdask started by k-means++) is a local optimum of memoized
VI, not of its objective.
This diagnostic measures, on the same training documents, priors and heldout
split, how far some changes to the search move the L=8 fit:

- ``default``: k-means++ start, restart proposals on;
- ``no restarts``: the same without restart proposals (they only ever remove
  a topic from a document, so they push documents toward fewer topics);
- ``annealed alpha``: one full-batch lap at each per-topic alpha of a
  decreasing schedule (a flatter document-topic prior first), each lap
  started from the previous one's topics, then the default fit at the target
  alpha;
- ``merges``: from the default fit, rounds that merge the most similar pairs
  of topics (Bhattacharyya coefficient of their word distributions; a merged
  pair's counts are summed into one topic and the other is left empty), each
  followed by memoized VI laps; the ELBO of every round is exact, so this
  shows whether the objective prefers the merged topics;
- ``tomotopy n sweeps + VB``: collapsed Gibbs for n sweeps, then memoized VI
  from its topics: how much of the sampler's progress VB keeps and adds to;
- ``init='gibbs'``: the same idea inside lsdask (``LDA(init="gibbs")``, its
  own sampler on the initialization sample), then the default fit.

``--runs`` picks some of them (``default,gibbs-init``, ...); the report then
goes to ``lda-search-<runs>-<corpus>-K<K>.md``.

Usage::

    python pipelines/benchmarks/investigations/diag_lda_search.py [--corpus ap] [--K 100]

Writes ``pipelines/benchmarks/results/lda-search-<corpus>-K<K>.md``.
"""

from __future__ import annotations

import time

import _harness  # noqa: F401
import diag_lda_optimum as dg
import numpy as np
from harness.corpora import CorpusData
from harness.priors import ALPHA, ETA

#: per-topic alpha of the annealed laps (those above the target alpha / K are run)
ANNEAL_PER_TOPIC = (2.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.1, 0.1, 0.05, 0.05, 0.02, 0.02, 0.01)


#: the runs, in the order of the report
RUNS = ("default", "no-restarts", "anneal", "merges", "tomotopy", "gibbs-init")


def live_topics(counts: np.ndarray) -> np.ndarray:
    """Which topics hold more than one token."""
    return counts.sum(axis=1) > 1.0


def row(name: str, run: dict, laps: int | None = None, seconds: float | None = None) -> str:
    """A report line for ``run`` (``run_lsdask``'s result, or a sampler's with
    ``counts``, ``heldout`` and ``seconds`` only); ``laps`` and ``seconds``
    replace the run's own when a row counts earlier runs too."""
    laps = run.get("laps") if laps is None else laps
    seconds = run["seconds"] if seconds is None else seconds
    elbo = f"{run['elbo'][-1]:.4f}" if "elbo" in run else "-"
    return (
        f"| {name} | {int(live_topics(run['counts']).sum())} | {'-' if laps is None else laps} "
        f"| {seconds:.1f} | {elbo} | {run['heldout'][-1]:.4f} |"
    )


def annealed(data: CorpusData, K: int, schedule: list[float], laps: int) -> tuple[dict, int, float]:
    """One lap at each per-topic alpha of ``schedule``, then the default fit:
    (its run, laps in all, seconds in all)."""
    init, seconds = "kmeans++", 0.0
    for a in schedule:
        r = dg.run_lsdask(data, K, init, 1, alpha=a * K, restarts=False)
        init, seconds = r["counts"], seconds + r["seconds"]
    r = dg.run_lsdask(data, K, init, laps)
    return r, len(schedule) + r["laps"], seconds + r["seconds"]


def anneal_schedule(K: int) -> list[float]:
    """The per-topic alphas of ``ANNEAL_PER_TOPIC`` above the target ``ALPHA / K``."""
    return [a for a in ANNEAL_PER_TOPIC if a > ALPHA / K]


def merged(counts: np.ndarray, n_pairs: int) -> tuple[np.ndarray, float, float]:
    """``counts`` with its ``n_pairs`` most similar disjoint pairs of live topics
    merged; also the similarity of the first and last pair merged."""
    phi = (counts + ETA) / (counts + ETA).sum(axis=1, keepdims=True)
    root = np.sqrt(phi)
    sim = root @ root.T
    np.fill_diagonal(sim, -np.inf)
    live = live_topics(counts)
    out, used, sims = counts.copy(), set(), []
    K = counts.shape[0]
    for flat in np.argsort(sim, axis=None)[::-1]:
        j, k = divmod(int(flat), K)
        if j in used or k in used or not (live[j] and live[k]):
            continue
        out[j] += out[k]
        out[k] = 0.0
        used |= {j, k}
        sims.append(sim[j, k])
        if len(sims) == n_pairs:
            break
    return out, float(sims[0]), float(sims[-1])


def main(argv: list[str] | None = None) -> int:
    ap = dg.corpus_arguments(__doc__)
    ap.add_argument("--laps", type=int, default=30, help="most laps of each fit")
    ap.add_argument("--merge-rounds", type=int, default=4)
    ap.add_argument("--merge-pairs", type=int, default=10, help="pairs merged per round")
    ap.add_argument("--merge-laps", type=int, default=10, help="laps after each merge round")
    ap.add_argument("--sweeps", default="100,300,1000", help="tomotopy sweeps before VB")
    ap.add_argument("--polish-laps", type=int, default=10)
    ap.add_argument("--gibbs-init-sweeps", default="100,300", help="sweeps of init='gibbs'")
    ap.add_argument("--runs", default=",".join(RUNS), help="which runs, comma-separated")
    args = ap.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    data = dg.load_corpus(args)
    K = args.K
    rows: list[str] = []

    def add(line: str) -> None:
        rows.append(line)
        print(line, flush=True)

    runs = set(args.runs.split(","))
    unknown = runs - set(RUNS)
    if unknown:
        ap.error(f"--runs: unknown {sorted(unknown)}; choose from {', '.join(RUNS)}")
    if runs & {"default", "merges"}:
        base = dg.run_lsdask(data, K, "kmeans++", args.laps)
    if "default" in runs:
        add(row("default (k-means++, restarts on)", base))
    if "no-restarts" in runs:
        add(row("no restarts", dg.run_lsdask(data, K, "kmeans++", args.laps, restarts=False)))
    if "anneal" in runs:
        schedule = anneal_schedule(K)
        r, laps, seconds = annealed(data, K, schedule, args.laps)
        add(row(f"annealed alpha ({len(schedule)} laps, alpha/K from {schedule[0]} to "
                f"{schedule[-1]}, no restarts), then default", r, laps, seconds))  # fmt: skip
    if "merges" in runs:
        counts, laps, seconds = base["counts"], base["laps"], base["seconds"]
        for i in range(args.merge_rounds):
            init, first, last = merged(counts, args.merge_pairs)
            r = dg.run_lsdask(data, K, init, args.merge_laps)
            counts, laps, seconds = r["counts"], laps + r["laps"], seconds + r["seconds"]
            add(row(f"default + {i + 1} merge round(s) of {args.merge_pairs} pairs "
                    f"(similarity {first:.2f}..{last:.2f})", r, laps, seconds))  # fmt: skip
    if "tomotopy" in runs:
        for n in (int(s) for s in args.sweeps.split(",")):
            gibbs, gibbs_s = dg.gibbs_counts(data.X_train, K, n, dg.SEED)
            sampler = {"counts": gibbs, "heldout": [dg.heldout(data, gibbs)], "seconds": gibbs_s}
            add(row(f"tomotopy, {n} sweeps", sampler))
            r = dg.run_lsdask(data, K, gibbs, args.polish_laps)
            add(row(f"tomotopy, {n} sweeps, then VB", r, seconds=gibbs_s + r["seconds"]))
    if "gibbs-init" in runs:
        for n in (int(s) for s in args.gibbs_init_sweeps.split(",")):
            r = dg.run_lsdask(data, K, "gibbs", args.laps, gibbs_sweeps=n)
            add(row(f"lsdask init='gibbs' ({n} sweeps on the init sample), then default", r))
    command = (
        "python pipelines/benchmarks/investigations/diag_lda_search.py "
        f"--corpus {args.corpus} --K {K}" + ("" if runs == set(RUNS) else f" --runs {args.runs}")
    )
    lines = dg.report_head(f"LDA search diagnostic ({args.corpus}, K={K})", command, started)
    lines += [
        f"Priors alpha = {ALPHA} (alpha/K per topic), eta = {ETA}; the heldout split of "
        f"`bench_lda.py` ({data.info['test_docs']} documents, word types 80/20, seed {dg.SEED}). "
        f"lsdask: L=8 memoized VI in-process, at most {args.laps} laps per fit (fewer when "
        "the ELBO converges). Live topics: more than one token. Seconds: all training in the "
        "row (tomotopy: 2 threads).",
        "",
        "| run | live topics | laps | s | ELBO/token | heldout |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    kind = "search" if runs == set(RUNS) else f"search-{'-'.join(sorted(runs))}"
    dg.write_report(kind, args, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
