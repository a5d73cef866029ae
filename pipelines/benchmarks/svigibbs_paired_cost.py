"""SVI-Gibbs: seconds per minibatch of 100 under the draws and the
Rao-Blackwellised N-hat, timed alternately on the same states (trained one
epoch by the draws, eta 0.4, B=3 S=2) at K=100 and K=1000, so that a shared
machine's load drift falls on both alike. Medians of 10 minibatches after 2
warm-up ones. Usage: python svigibbs_paired_cost.py [CORPORA_DIR WORK_DIR]."""

import copy
import os
import sys
import time
from pathlib import Path

import numpy as np
from harness.corpora import CORPORA_DIR, WORK_DIR, load_corpora

from lsdask.engine import SerialExecutor
from lsdask.io.doc_stream import DocumentStream
from lsdask.learn.svi_gibbs import GibbsTask, SviGibbs

corpora = Path(sys.argv[1]) if len(sys.argv) > 1 else CORPORA_DIR
work = Path(sys.argv[2]) if len(sys.argv) > 2 else WORK_DIR
data = load_corpora(["20news"], corpora, work)["20news"]
stream = DocumentStream(data.train_path)
ex = SerialExecutor()
res = {}
for K in (100, 1000):
    L = SviGibbs(
        n_topics=K,
        alpha=np.full(K, 0.1),
        eta=0.4,
        burnin=3,
        samples=2,
        minibatch_size=100,
        delay=10.0,
        kappa=0.6,
        n_epochs=1,
        progress=False,
        estimator="draws",
    )
    st = L.start(stream, 0)
    st = L.run(stream, ex, st)
    refs_all = st.queue
    times = {"draws": [], "rao-blackwell": []}
    for i in range(12):
        refs = refs_all[i * 100 : (i + 1) * 100]
        for est in ("draws", "rao-blackwell") if i % 2 == 0 else ("rao-blackwell", "draws"):
            L.estimator = est
            s2 = copy.deepcopy(st)
            task = GibbsTask(3, 2, s2.seed, est, 16)
            t0 = time.perf_counter()
            L._minibatch(stream, ex, s2, refs, task)
            if i >= 2:  # first two: warm-up (compile or cache load)
                times[est].append(time.perf_counter() - t0)
    res[K] = {e: float(np.median(v)) for e, v in times.items()}
    print(K, res[K], "load", os.getloadavg()[0], flush=True)
for e in ("draws", "rao-blackwell"):
    print(e, "K=1000/K=100", res[1000][e] / res[100][e])
print(
    "RB/draws K=100",
    res[100]["rao-blackwell"] / res[100]["draws"],
    "K=1000",
    res[1000]["rao-blackwell"] / res[1000]["draws"],
)
