"""SVI-Gibbs: seconds per minibatch of 100 under two settings of the learner,
timed alternately on the same states at K=100 and K=1000, so that a shared
machine's load drift falls on both alike.

Each K's state is trained one epoch (eta 0.1, B=3 S=2, the mean weights;
under the learned prior where the prior is compared, so that both settings
sample against the same one, else under the first setting); then 12
minibatches of 100 of its documents are each stepped from copies of that
state under both settings, in alternating order. Medians of the last 10.

Usage: python svigibbs_paired_cost.py [estimator|alpha]
  estimator: the draws against the Rao-Blackwellised N-hat
  alpha (default): the fixed prior (0.1 per topic) against the learned one
"""

from __future__ import annotations

import copy
import os
import sys
import time
from typing import Any

import numpy as np
from harness.corpora import CORPORA_DIR, WORK_DIR, load_corpora

from lsdask.engine import SerialExecutor
from lsdask.io.doc_stream import DocumentStream
from lsdask.learn.svi_gibbs import SviGibbs, _Chain

#: what each comparison sets on the learner: (name, attribute, value) twice
COMPARISONS: dict[str, list[tuple[str, str, Any]]] = {
    "estimator": [("draws", "estimator", "draws"), ("rao-blackwell", "estimator", "rao-blackwell")],
    "alpha": [("fixed", "learn_alpha", False), ("learned", "learn_alpha", True)],
}


def step_seconds(learner: SviGibbs, stream: Any, state: Any, refs: np.ndarray) -> float:
    """Seconds of one step on ``refs`` from a copy of ``state`` (alone: no next
    minibatch started early)."""
    s = copy.deepcopy(state)
    s.queue, s.pos = refs, 0
    chain = _Chain(learner.alpha, learner.rebase_every, learner.reset_below)
    t0 = time.perf_counter()
    learner._minibatch(stream, SerialExecutor(), s, refs, chain)
    return time.perf_counter() - t0


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "alpha"
    settings = COMPARISONS[which]
    data = load_corpora(["20news"], CORPORA_DIR, WORK_DIR)["20news"]
    stream = DocumentStream(data.train_path)
    res: dict[int, dict[str, float]] = {}
    for K in (100, 1000):
        learner = SviGibbs(
            n_topics=K, alpha=np.full(K, 0.1), eta=0.1, burnin=3, samples=2,
            minibatch_size=100, delay=10.0, kappa=0.6, n_epochs=1, progress=False,
        )  # fmt: skip
        # trained under the learned prior where that is compared: both settings then
        # sample against the same prior, and differ by the learning alone
        name, attr, value = settings[1] if which == "alpha" else settings[0]
        setattr(learner, attr, value)
        state = learner.run(stream, SerialExecutor(), learner.start(stream, 0))
        order = np.random.default_rng(1).permutation(len(state.queue))
        times: dict[str, list[float]] = {s[0]: [] for s in settings}
        for i in range(12):
            refs = state.queue[order[i * 100 : (i + 1) * 100]]
            for name, attr, value in settings if i % 2 == 0 else settings[::-1]:
                setattr(learner, attr, value)
                took = step_seconds(learner, stream, state, refs)
                if i >= 2:  # the first two: warm-up (compile or cache load)
                    times[name].append(took)
        res[K] = {n: float(np.median(v)) for n, v in times.items()}
        print(K, res[K], "load", os.getloadavg()[0], flush=True)
    a, b = settings[0][0], settings[1][0]
    for n in (a, b):
        print(f"{n}: K=1000 / K=100 = {res[1000][n] / res[100][n]:.3f}")
    print(f"{b} / {a}: K=100 {res[100][b] / res[100][a]:.3f}, K=1000 "
          f"{res[1000][b] / res[1000][a]:.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
