"""What LDA's Gibbs start gives memoized VI: its sample, its length, later laps.

Three measurements on the training documents and heldout split of
``bench_lda.py`` (in one process, lsdask's sampler in two threads), each a
table of heldout scores (nats/token) of the sampler's own topic-word counts
(``raw``) and of L=8 memoized VI started from them:

- ``sample``: 1,000 sweeps over all training documents, one chain per seed,
  against chains over random samples of ``--sample-docs`` documents (the
  sample k-means++ starts from);
- ``curve``: one chain over all documents, scored at several sweep counts;
- ``drift``: from one 1,000-sweep start, the ELBO and heldout score after
  every one of 15 laps, restart proposals on and off.

Usage::

    python pipelines/benchmarks/investigations/diag_lda_start.py --what sample --corpus 20news
    python pipelines/benchmarks/investigations/diag_lda_start.py --what curve --corpus ap
    python pipelines/benchmarks/investigations/diag_lda_start.py --what drift --corpus ap

Prints a Markdown table; nothing is written.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import _harness  # noqa: F401
import numpy as np
from harness import corpora
from harness.corpora import CorpusData
from harness.priors import ALPHA, ETA
from harness.scoring import score_counts

import lsdask
from lsdask.evaluate import document_completion
from lsdask.learn.gibbs_start import gibbs_sample


def vi_from(data: CorpusData, topic_word: np.ndarray, laps: int, **kw) -> lsdask.LDA:
    K = topic_word.shape[0]
    callback = kw.pop("callback", None)
    est = lsdask.LDA(
        K, sparsity=8, alpha=ALPHA, eta=ETA, init=topic_word, n_laps=laps,
        random_state=0, progress=False, client="sync",
        batch_size=data.info["docs_per_batch"], **kw,
    )  # fmt: skip
    return est.fit(data.X_train, callback=callback)


def sample_table(data: CorpusData, K: int, seeds: list[int], sample_docs: int) -> list[str]:
    rows = ["| documents | seed | sweeps s | raw | after 1 lap of VI |", "|---|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    X = data.X_train
    for n in (X.shape[0], sample_docs):
        for seed in seeds:
            rng = np.random.default_rng(seed)
            Xs = X if n >= X.shape[0] else X[np.sort(rng.choice(X.shape[0], n, replace=False))]
            t = time.perf_counter()
            g = gibbs_sample(Xs, K, ALPHA, ETA, 1000, rng, progress=False)
            took = time.perf_counter() - t
            est = vi_from(data, g.topic_word, 1)
            vi = document_completion(data.A, data.B, est.topic_word_, ALPHA)
            raw = score_counts(data.A, data.B, g.topic_word)
            rows.append(f"| {Xs.shape[0]:,} | {seed} | {took:.1f} | {raw:.4f} | {vi:.4f} |")
            print(rows[-1], flush=True)
    return rows


def curve_table(data: CorpusData, K: int, sweeps: list[int]) -> list[str]:
    """Chains of each length from the same seed: the first ``s`` sweeps of a
    longer chain are the chain of ``s`` sweeps (the same random numbers)."""
    rows = ["| sweeps | sweeps s | raw | after 2 laps of VI |", "|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    for s in sweeps:
        t = time.perf_counter()
        g = gibbs_sample(data.X_train, K, ALPHA, ETA, s, np.random.default_rng(0), False)
        took = time.perf_counter() - t
        topics = vi_from(data, g.topic_word, 2).topic_word_
        vi = document_completion(data.A, data.B, topics, ALPHA)
        raw = score_counts(data.A, data.B, g.topic_word)
        rows.append(f"| {s} | {took:.1f} | {raw:.4f} | {vi:.4f} |")
        print(rows[-1], flush=True)
    return rows


def drift_table(data: CorpusData, K: int, laps: int) -> list[str]:
    g = gibbs_sample(data.X_train, K, ALPHA, ETA, 1000, np.random.default_rng(0), False)
    tokens = float(data.X_train.sum())
    rows = ["| restarts | lap | ELBO/token | heldout |", "|---|---|---|---|"]
    print("\n".join(rows), flush=True)
    for restarts in (True, False):

        def on_lap(result, restarts=restarts):
            if result.n_laps == 0:  # the Gibbs start's snapshots: laps only
                return
            score = document_completion(data.A, data.B, result.globals.topics, ALPHA)
            elbo = result.elbo_trace[-1] / tokens
            rows.append(f"| {restarts} | {result.n_laps} | {elbo:.5f} | {score:.4f} |")
            print(rows[-1], flush=True)

        vi_from(data, g.topic_word, laps, tol=1e-12, restarts=restarts, callback=on_lap)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--what", choices=("sample", "curve", "drift"), required=True)
    parser.add_argument("--corpus", default="20news", choices=("ap", "20news"))
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--sample-docs", type=int, default=10_000)
    parser.add_argument("--sweeps", default="100,300,500,700,1000")
    parser.add_argument("--laps", type=int, default=15)
    parser.add_argument("--corpora-dir", type=Path, default=corpora.CORPORA_DIR)
    parser.add_argument("--work-dir", type=Path, default=corpora.WORK_DIR)
    args = parser.parse_args(argv)
    corpora.ensure_corpora(args.corpora_dir)
    data = corpora.prepare_corpus(args.corpus, args.corpora_dir, args.work_dir)
    print(f"{args.what}: {args.corpus}, K={args.K}, alpha={ALPHA}, eta={ETA}\n")
    if args.what == "sample":
        seeds = [int(s) for s in args.seeds.split(",")]
        sample_table(data, args.K, seeds, args.sample_docs)
    elif args.what == "curve":
        curve_table(data, args.K, [int(s) for s in args.sweeps.split(",")])
    else:
        drift_table(data, args.K, args.laps)


if __name__ == "__main__":
    main()
