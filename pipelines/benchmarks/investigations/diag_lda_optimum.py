"""Why lsdask's LDA ends below tomotopy's heldout score: objective or optimizer?

Row 2 of ``bench_lda.py`` found tomotopy's collapsed Gibbs sampler ahead of
every variational method started by k-means++ at the same priors. This
diagnostic tells apart the two explanations:

- the variational objective prefers worse topics (then memoized VI started
  from the sampler's topics would drift away from them, its ELBO rising while
  the heldout score falls);
- memoized VI stops in a worse local optimum (then, started from the
  sampler's topics, it keeps a higher ELBO than its own fit and a heldout
  score as good as the sampler's).

It trains tomotopy on the benchmark's training documents, then runs lsdask
L=8 memoized VI twice with the same priors: from tomotopy's topic-word counts
(``init=`` an array) and from the k-means++ start, scoring the heldout
documents (the benchmark's split) after every lap.

Usage::

    python pipelines/benchmarks/investigations/diag_lda_optimum.py [--corpus ap] [--K 100]

Writes ``pipelines/benchmarks/results/lda-optimum-<corpus>-K<K>.md``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import _harness  # noqa: F401
import numpy as np
from harness import RESULTS_DIR, corpora, peers
from harness.machine import describe
from harness.priors import ALPHA, ETA
from harness.scoring import score_counts

import lsdask
from lsdask.evaluate import document_completion

SEED = 0  # the benchmark's seed: its heldout split and the runs' random state


def gibbs_counts(X, K: int, iterations: int, seed: int) -> tuple[np.ndarray, float]:
    """tomotopy's topic-word counts (K, V) after ``iterations`` sweeps, and seconds."""
    mdl = peers.tomotopy_lda(X, K, seed)
    t0 = time.perf_counter()
    peers.tomotopy_train(mdl, iterations, workers=2)
    seconds = time.perf_counter() - t0
    return peers.tomotopy_counts(mdl, K, X.shape[1]), seconds


def heldout(data: corpora.CorpusData, counts: np.ndarray) -> float:
    return score_counts(data.A, data.B, counts)


def run_lsdask(data: corpora.CorpusData, K: int, init, laps: int, **options) -> dict:
    """L=8 memoized VI in-process from ``init``, scored after every lap;
    ``options`` go to ``lsdask.LDA`` (``restarts``, ``alpha``, ``tol``, ...)."""
    scores: list[float] = []

    def after_lap(result) -> None:
        if result.n_laps == 0:  # the Gibbs start's snapshots: laps only
            return
        topics = result.globals.topics
        scores.append(document_completion(data.A, data.B, topics, ALPHA))

    options = {"alpha": ALPHA, **options}
    est = lsdask.LDA(
        K, sparsity=8, eta=ETA, n_laps=laps, init=init, random_state=SEED, client="sync",
        **options,
    )  # fmt: skip
    t0 = time.perf_counter()
    est.fit(data.train_path, callback=after_lap)
    return {
        "seconds": time.perf_counter() - t0,
        "laps": int(est.n_laps_),
        "elbo": est.elbo_trace_ / data.n_tokens,
        "heldout": scores,
        "mass": np.sort(est.components_.sum(axis=1) - ETA * data.vocab_size)[::-1],
        "counts": est.components_ - ETA,
    }


def corpus_arguments(doc: str) -> argparse.ArgumentParser:
    """The options every LDA diagnostic takes: which corpus and K, where data lives,
    where the report goes."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--corpus", default="ap", choices=["ap", "20news"])
    ap.add_argument("--K", type=int, default=100)
    ap.add_argument("--corpora-dir", type=Path, default=corpora.CORPORA_DIR)
    ap.add_argument("--work-dir", type=Path, default=corpora.WORK_DIR)
    ap.add_argument("--out", type=Path, default=RESULTS_DIR, help="results folder")
    return ap


def load_corpus(args: argparse.Namespace) -> corpora.CorpusData:
    """Row 2's training documents and heldout split of ``args.corpus`` (ingested if missing)."""
    corpora.ensure_corpora(args.corpora_dir)
    return corpora.prepare_corpus(args.corpus, args.corpora_dir, args.work_dir, seed=SEED)


def report_head(title: str, command: str, started: str) -> list[str]:
    """Title, command, start, commit and CPU of a diagnostic's report."""
    info = describe()
    return [
        f"# {title}",
        "",
        f"Command: `{command}`  ",
        f"Started {started}; git {info['git_commit']}; {info['cpu']}.",
        "",
    ]


def write_report(kind: str, args: argparse.Namespace, lines: list[str]) -> None:
    """Print ``lines`` and write them to ``<out>/lda-<kind>-<corpus>-K<K>.md``."""
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"lda-{kind}-{args.corpus}-K{args.K}.md").write_text("\n".join(lines))
    print("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = corpus_arguments(__doc__)
    ap.add_argument("--gibbs-iterations", type=int, default=1000)
    ap.add_argument("--laps", type=int, default=40)
    args = ap.parse_args(argv)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    data = load_corpus(args)
    K = args.K
    counts, gibbs_s = gibbs_counts(data.X_train, K, args.gibbs_iterations, SEED)
    gibbs_score = heldout(data, counts)
    print(f"tomotopy, {args.gibbs_iterations} sweeps ({gibbs_s:.1f} s): {gibbs_score:.4f}")
    runs = {
        "from tomotopy's topics": run_lsdask(data, K, counts, args.laps),
        "from k-means++": run_lsdask(data, K, "kmeans++", args.laps),
    }
    gibbs_mass = np.sort(counts.sum(axis=1))[::-1]
    command = (
        "python pipelines/benchmarks/investigations/diag_lda_optimum.py "
        f"--corpus {args.corpus} --K {K}"
    )
    lines = report_head(f"LDA optimum diagnostic ({args.corpus}, K={K})", command, started)
    lines += [
        f"Priors alpha = {ALPHA} (alpha/K per topic), eta = {ETA}; the heldout split of "
        f"`bench_lda.py` ({data.info['test_docs']} documents, word types 80/20, seed {SEED}). "
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
