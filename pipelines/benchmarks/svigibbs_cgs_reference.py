"""Collapsed Gibbs sampling (tomotopy) at SVI-Gibbs's priors, scored as
bench_svigibbs scores every method: what the reference sampler of LDA reaches
with the whole corpus and many sweeps. Usage: python svigibbs_cgs_reference.py
K ETA SWEEPS (comma-separated checkpoints, e.g. 100,300,1000)."""

from __future__ import annotations

import sys
import time
import warnings

import bench_svigibbs as bs
import numpy as np
from harness.corpora import CORPORA_DIR, WORK_DIR, load_corpora


def main() -> None:
    import tomotopy as tp

    K, eta = int(sys.argv[1]), float(sys.argv[2])
    checkpoints = [int(x) for x in sys.argv[3].split(",")]
    data = load_corpora(["20news"], CORPORA_DIR, WORK_DIR)["20news"]
    X = data.X_train.tocsr()
    # alpha per topic, kept fixed (tomotopy re-estimates it every 10 sweeps by default)
    mdl = tp.LDAModel(k=K, alpha=bs.ALPHA_PER_TOPIC, eta=eta, seed=0)
    mdl.optim_interval = 0
    for d in range(X.shape[0]):
        lo, hi = X.indptr[d], X.indptr[d + 1]
        pairs = zip(X.indices[lo:hi], X.data[lo:hi], strict=True)
        words = [str(w) for w, c in pairs for _ in range(int(c))]
        if words:
            mdl.add_doc(words)
    done, t0 = 0, time.perf_counter()
    for sweeps in checkpoints:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mdl.train(sweeps - done, workers=1)
        done = sweeps
        ids = np.array([int(w) for w in mdl.vocabs])
        lam = np.full((K, X.shape[1]), eta)  # counts + eta; eta for words never seen
        for k in range(K):
            lam[k, ids] = np.asarray(mdl.get_topic_word_dist(k, normalize=False), np.float64)
        scores = {k: round(v, 3) for k, v in bs.evaluate(data, lam, eta).items()}
        print(f"K={K} eta={eta} sweeps={sweeps} {time.perf_counter() - t0:.0f} s: {scores}")


if __name__ == "__main__":
    main()
