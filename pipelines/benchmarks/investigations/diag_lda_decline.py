"""Why does LDA's heldout score fall lap after lap on the movie reviews?

Fits lsdask's ``LDA`` in one process on the first ``--docs`` training
documents of a corpus (``harness.corpora``; by default the IMDB reviews) and
scores the heldout split after every lap under the model's own prior (its
``alpha_``, learned or fixed), with the ELBO per token and the wall time since
the fit began (the start included). Each variant is a set of ``LDA``
keyword arguments (``--variant name:key=value,key=value``); the key
``topics=mean`` is no ``LDA`` argument but an experiment: the local step then
weighs topics by ``log E[phi]`` instead of ``E[log phi]`` (the ELBO printed is
then not the bound).

Usage::

    python pipelines/benchmarks/investigations/diag_lda_decline.py --docs 30000 --K 100 \\
        --variant 'auto:alpha=auto' --variant 'eta-auto:alpha=auto,eta=auto'

Prints a Markdown table per variant; nothing is written.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import _harness  # noqa: F401
import numpy as np
from harness import corpora

import lsdask
import lsdask.models.dirichlet_logs
from lsdask.evaluate import document_completion


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    name, _, spec = text.partition(":")
    kwargs: dict[str, Any] = {}
    for item in filter(None, spec.split(",")):
        key, _, value = item.partition("=")
        try:
            kwargs[key] = int(value)
        except ValueError:
            try:
                kwargs[key] = float(value)
            except ValueError:
                kwargs[key] = None if value == "None" else value
    return name, kwargs


def run_variant(data, X, K: int, laps: int, name: str, kwargs: dict[str, Any]) -> list[str]:
    rows = [f"\n### {name}: {kwargs}\n",
            "| lap | s | ELBO/token | heldout (own) | alpha total | eta |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    print("\n".join(rows), flush=True)
    tokens = float(X.sum())
    t0 = time.perf_counter()

    def on_lap(result) -> None:
        if result.n_laps == 0:  # the Gibbs start's snapshots: laps only
            return
        took = time.perf_counter() - t0
        g = result.globals
        score = document_completion(data.A, data.B, g.topics, g.alpha)
        elbo = result.elbo_trace[-1] / tokens
        rows.append(f"| {result.n_laps} | {took:.0f} | {elbo:.5f} | {score:.4f} | "
                    f"{g.alpha.sum():.3f} | {g.eta:.4g} |")  # fmt: skip
        print(rows[-1], flush=True)

    params = dict(n_laps=laps, tol=1e-12, random_state=0, progress=False, client="sync",
                  batch_size=1000)  # fmt: skip
    params.update(kwargs)
    mean_topics = params.pop("topics", None) == "mean"
    logs = lsdask.models.dirichlet_logs
    saved = logs.digamma
    logs.digamma = np.log if mean_topics else saved
    try:
        lsdask.LDA(K, **params).fit(X, callback=on_lap)
    finally:
        logs.digamma = saved
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="imdb", choices=corpora.CORPORA)
    parser.add_argument("--docs", type=int, default=30_000)
    parser.add_argument("--K", type=int, default=100)
    parser.add_argument("--laps", type=int, default=6)
    parser.add_argument("--variant", action="append", default=[])
    parser.add_argument("--corpora-dir", type=Path, default=corpora.CORPORA_DIR)
    parser.add_argument("--work-dir", type=Path, default=corpora.WORK_DIR)
    args = parser.parse_args(argv)
    data = corpora.load_corpora([args.corpus], args.corpora_dir, args.work_dir)[args.corpus]
    X = data.X_train[: args.docs]
    print(f"{args.corpus}: {X.shape[0]} documents, {X.sum():.0f} tokens, K={args.K}")
    for text in args.variant or ["default:alpha=auto"]:
        name, kwargs = parse_variant(text)
        run_variant(data, X, args.K, args.laps, name, kwargs)


if __name__ == "__main__":
    main()
