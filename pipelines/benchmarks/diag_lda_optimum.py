"""Why lsdask's LDA ends below tomotopy's heldout score: objective or optimizer?

Row 2 of ``bench_lda.py`` finds tomotopy's collapsed Gibbs sampler 0.06-0.09
nats/token ahead of every variational method at the same priors. This
diagnostic tells apart the two explanations:

- the variational objective prefers worse topics (then memoized VI started
  from the sampler's topics would drift away from them, its ELBO rising while
  the heldout score falls);
- memoized VI stops in a worse local optimum (then, started from the
  sampler's topics, it keeps a higher ELBO than its own fit and a heldout
  score as good as the sampler's).

It trains tomotopy on the benchmark's training documents, then runs lsdask
L=8 memoized VI twice with the same priors: from tomotopy's topic-word counts
(``init=`` an array) and from its default k-means++ start, scoring the
heldout documents (the benchmark's split) after every lap.

Usage::

    python pipelines/benchmarks/diag_lda_optimum.py [--corpus ap] [--K 100]

Writes ``pipelines/benchmarks/results/lda-optimum-<corpus>-K<K>.md``.
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import bench_lda as bl
import numpy as np
from bench_machine import machine_info

import lsdask
from lsdask.evaluate import document_completion


def gibbs_counts(X, K: int, iterations: int, seed: int) -> tuple[np.ndarray, float]:
    """tomotopy's topic-word counts (K, V) after ``iterations`` sweeps, and seconds."""
    mdl = bl.tomotopy_lda(X, K, seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mdl.train(iterations, workers=2)
    seconds = time.perf_counter() - t0
    lam = bl.tomotopy_pseudo_counts(mdl, K, X.shape[1], {})
    return np.maximum(lam - bl.ETA, 0.0), seconds  # tomotopy adds eta


def heldout(data: bl.CorpusData, counts: np.ndarray) -> float:
    phi = counts + bl.ETA
    return document_completion(data.A, data.B, phi / phi.sum(axis=1, keepdims=True), bl.ALPHA)


def run_lsdask(data: bl.CorpusData, K: int, init, laps: int, **options) -> dict:
    """L=8 memoized VI in-process from ``init``, scored after every lap;
    ``options`` go to ``lsdask.LDA`` (``restarts``, ``alpha``, ``tol``)."""
    scores: list[float] = []

    def after_lap(result) -> None:
        topics = result.globals.topics
        scores.append(document_completion(data.A, data.B, topics, bl.ALPHA))

    options = {"alpha": bl.ALPHA, **options}
    est = lsdask.LDA(
        K, sparsity=8, eta=bl.ETA, n_laps=laps, init=init, random_state=0, client="sync",
        **options,
    )  # fmt: skip
    t0 = time.perf_counter()
    est.fit(data.train_path, callback=after_lap)
    return {
        "seconds": time.perf_counter() - t0,
        "laps": int(est.n_laps_),
        "elbo": est.elbo_trace_ / data.n_tokens,
        "heldout": scores,
        "mass": np.sort(est.components_.sum(axis=1) - bl.ETA * data.vocab_size)[::-1],
        "counts": est.components_ - bl.ETA,
    }


def corpus_arguments(doc: str) -> argparse.ArgumentParser:
    """The options every LDA diagnostic takes: which corpus and K, and where data lives."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--corpus", default="ap", choices=["ap", "20news"])
    ap.add_argument("--K", type=int, default=100)
    ap.add_argument("--corpora-dir", type=Path, default=bl.REPO / "data/corpora")
    ap.add_argument("--work-dir", type=Path, default=bl.REPO / "data/lda_bench")
    return ap


def load_corpus(args: argparse.Namespace) -> bl.CorpusData:
    """Row 2's training documents and heldout split of ``args.corpus`` (ingested if missing)."""
    bl.ensure_corpora(args.corpora_dir)
    args.work_dir.mkdir(parents=True, exist_ok=True)
    return bl.prepare_corpus(bl.FULL, args.corpus, args.corpora_dir, args.work_dir)


def write_report(kind: str, args: argparse.Namespace, lines: list[str]) -> None:
    """Print ``lines`` and write them to ``results/lda-<kind>-<corpus>-K<K>.md``."""
    (bl.RESULTS_DIR / f"lda-{kind}-{args.corpus}-K{args.K}.md").write_text("\n".join(lines))
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = corpus_arguments(__doc__)
    ap.add_argument("--gibbs-iterations", type=int, default=1000)
    ap.add_argument("--laps", type=int, default=40)
    args = ap.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    cfg = bl.FULL
    data = load_corpus(args)
    K = args.K
    counts, gibbs_s = gibbs_counts(data.X_train, K, args.gibbs_iterations, cfg.seed)
    gibbs_score = heldout(data, counts)
    print(f"tomotopy, {args.gibbs_iterations} sweeps ({gibbs_s:.1f} s): {gibbs_score:.4f}")
    runs = {
        "from tomotopy's topics": run_lsdask(data, K, counts, args.laps),
        "from k-means++ (default)": run_lsdask(data, K, "kmeans++", args.laps),
    }
    info = machine_info({"lsdask": "lsdask", "tomotopy": "tomotopy"})
    gibbs_mass = np.sort(counts.sum(axis=1))[::-1]
    lines = [
        f"# LDA optimum diagnostic ({args.corpus}, K={K})",
        "",
        f"Command: `python pipelines/benchmarks/diag_lda_optimum.py --corpus {args.corpus} "
        f"--K {K}`  ",
        f"Started {started}; git {info.get('git_commit')}; {info.get('cpu')}.",
        "",
        f"Priors alpha = {bl.ALPHA} (alpha/K per topic), eta = {bl.ETA}; the heldout split of "
        f"`bench_lda.py` ({cfg.n_test} documents, word types 80/20, seed {cfg.seed}). "
        f"tomotopy: {args.gibbs_iterations} collapsed Gibbs sweeps, 2 threads, "
        f"{gibbs_s:.1f} s; its topics score **{gibbs_score:.4f}** nats/token.",
        "",
        "lsdask: L=8 memoized VI, in-process, up to "
        f"{args.laps} laps (stops earlier when the ELBO converges).",
        "",
        "| start | laps | s | ELBO/token after lap 1 | final ELBO/token | heldout after lap 1 "
        "| lap 3 | lap 10 | final heldout |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in runs.items():
        h = r["heldout"]

        def at(lap: int, h=h) -> str:
            return f"{h[lap - 1]:.4f}" if len(h) >= lap else "-"

        lines.append(
            f"| {name} | {r['laps']} | {r['seconds']:.1f} | {r['elbo'][0]:.4f} | "
            f"{r['elbo'][-1]:.4f} | {at(1)} | {at(3)} | {at(10)} | {h[-1]:.4f} |"
        )
    lines += [
        "",
        "Tokens per topic, largest five: "
        + "; ".join(
            f"{name}: {', '.join(f'{m:,.0f}' for m in r['mass'][:5])}" for name, r in runs.items()
        )
        + f"; tomotopy: {', '.join(f'{m:,.0f}' for m in gibbs_mass[:5])}.",
        "",
    ]
    write_report("optimum", args, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
