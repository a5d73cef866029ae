"""``lsdask demo``: the patch GMM and the bars LDA on one local cluster, no download.

Its options are the demo's own settings (the GMM's K, L and laps, the bars
LDA's laps), with the demo's defaults.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from lsdask.cli.options import add_execution, add_verbose, client_from_args, out_path
from lsdask.estimators.gaussian import GaussianMixture
from lsdask.jobs.bars_lda import bars_hdp, bars_lda
from lsdask.jobs.cluster import describe_client
from lsdask.jobs.demo import format_demo_report, run_full_demo
from lsdask.jobs.patch_gmm import PATCH_ALPHA
from lsdask.validation import parse_positive_int

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="patch GMM on a photograph, LDA and HDP on synthetic bars (no download)",
        description=(
            "Cut the two halves of a photograph shipped with matplotlib into 8x8 patches (one "
            "trains, one is held out), fit an L-sparse and a dense zero-mean Gaussian mixture; "
            "then fit L-sparse LDA to the synthetic bars corpus, and an HDP that learns how many "
            "topics it has from a larger start; all on one local Dask cluster. Reports heldout "
            "scores and pictures (elbo.png, clusters.png, topics.png, hdp_topics.png, "
            "hdp_k_elbo.png)."
        ),
    )
    demo.add_argument("--out", type=out_path, default=Path("lsdask-demo"), help="output folder")
    demo.add_argument(
        "--components", type=parse_positive_int, default=25, help="GMM K (default 25)"
    )
    demo.add_argument("--sparsity", type=parse_positive_int, default=4, help="GMM L (default 4)")
    demo.add_argument("--laps", type=parse_positive_int, default=10, help="GMM laps (default 10)")
    demo.add_argument(
        "--bars-laps", type=parse_positive_int, default=20, help="bars LDA laps (default 20)"
    )
    demo.add_argument(
        "--hdp-topics", type=parse_positive_int, default=40,
        help="topics the bars HDP starts with, to fall to the 10 bars (default 40)",
    )  # fmt: skip
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    add_execution(demo, scheduler=False)
    add_verbose(demo, argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    client, n_workers = client_from_args(args)
    print(
        f"lsdask demo: patch GMM (K={args.components}, L={args.sparsity} and dense), then "
        f"bars LDA and HDP, {describe_client(client, n_workers)} ..."
    )
    sys.stdout.flush()
    verbose = 1 if args.verbose else 0
    gmm = GaussianMixture(
        args.components, sparsity=args.sparsity, n_laps=args.laps, alpha=PATCH_ALPHA,
        random_state=args.seed, client=client, n_workers=n_workers, verbose=verbose,
        progress=None,
    )  # fmt: skip
    lda = bars_lda(n_laps=args.bars_laps, random_state=args.seed)
    lda.set_params(verbose=verbose, progress=None)
    hdp = bars_hdp(args.hdp_topics, random_state=args.seed)
    hdp.set_params(verbose=verbose, progress=None)
    report = run_full_demo(gmm, lda, args.out, random_state=args.seed, hdp=hdp)
    print(format_demo_report(report))
    print(f"\ntotal time: {report.seconds:.1f} s")
    return 0
