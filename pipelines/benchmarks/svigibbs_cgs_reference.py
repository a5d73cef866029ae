"""Collapsed Gibbs sampling (tomotopy) at SVI-Gibbs's priors, scored as
bench_svigibbs scores every method: what the reference sampler of LDA reaches
with the whole corpus and many sweeps. Usage: python svigibbs_cgs_reference.py
K ETA SWEEPS [auto] (SWEEPS comma-separated checkpoints, e.g. 100,300,1000;
``auto``: alpha learned every 10 sweeps, tomotopy's default, from 0.1 per
topic, and heldout completion under the learned prior reported too)."""

from __future__ import annotations

import sys
import time

import bench_svigibbs as bs
import numpy as np
from harness.corpora import CORPORA_DIR, WORK_DIR, load_corpora
from harness.peers import tomotopy_lda, tomotopy_pseudo_counts, tomotopy_train


def main() -> None:
    K, eta = int(sys.argv[1]), float(sys.argv[2])
    checkpoints = [int(x) for x in sys.argv[3].split(",")]
    data = load_corpora(["20news"], CORPORA_DIR, WORK_DIR)["20news"]
    X = data.X_train.tocsr()
    learned = len(sys.argv) > 4 and sys.argv[4] == "auto"
    # alpha per topic, kept fixed unless learned as tomotopy does by default
    mdl = tomotopy_lda(X, K, seed=0, alpha=bs.ALPHA_PER_TOPIC, eta=eta)
    if learned:
        mdl.optim_interval = 10
    done, t0, cache = 0, time.perf_counter(), {}
    for sweeps in checkpoints:
        tomotopy_train(mdl, sweeps - done, workers=1)
        done = sweeps
        lam = tomotopy_pseudo_counts(mdl, K, X.shape[1], cache, eta)
        got = bs.evaluate(data, lam, eta, np.asarray(mdl.alpha) if learned else None)
        scores = {k: round(v, 3) for k, v in got.items()}
        print(f"K={K} eta={eta} sweeps={sweeps} {time.perf_counter() - t0:.0f} s: {scores}")


if __name__ == "__main__":
    main()
