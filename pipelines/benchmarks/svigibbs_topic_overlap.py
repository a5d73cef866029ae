"""SVI-Gibbs and gensim's online VB at eta 0.1 on lsdask's minibatches (seed 0):
how alike each method's topics are, and what its least coherent topics hold.
Prints the number of distinct top-10 word sets over the K topics, the mean
number of top-10 words two topics share, the UMass worst decile (which rises
when topics are copies of a few: a copy scores as its original), and the
tokens the worst decile's topics hold. Usage: python svigibbs_topic_overlap.py
[K EPOCHS MINIBATCH] (default 200 2 100; gensim is left out at K > 200)."""

from __future__ import annotations

import itertools
import sys

import bench_svigibbs as bs
import numpy as np
from harness.corpora import CORPORA_DIR, WORK_DIR, load_corpora

from lsdask.evaluate import umass_coherence

ETA = 0.1


def describe(name: str, lam: np.ndarray, X) -> None:
    K = lam.shape[0]
    top = np.argsort(-lam, axis=1)[:, :10]
    sets = [frozenset(t) for t in top]
    shared = np.mean([len(a & b) for a, b in itertools.combinations(sets, 2)])
    coherence = umass_coherence(lam / lam.sum(axis=1, keepdims=True), iter([X]), 10)
    worst = np.argsort(coherence)[: K // 10]
    tokens = lam.sum(axis=1) - ETA * lam.shape[1]
    print(f"{name}: {len(set(sets))} distinct top-10 sets of {K}, {shared:.2f} top words "
          f"shared per pair, UMass worst decile {coherence[worst].mean():.1f}; its topics "
          f"hold {np.median(tokens[worst]):.0f} tokens (median; the others "
          f"{np.median(np.delete(tokens, worst)):.0f}), {tokens[worst].sum() / tokens.sum():.1%} "
          f"of all")  # fmt: skip


def main() -> None:
    from gensim.models import LdaModel

    K, epochs, minibatch = (int(a) for a in sys.argv[1:4]) if len(sys.argv) > 3 else (200, 2, 100)
    data = load_corpora(["20news"], CORPORA_DIR, WORK_DIR)["20news"]
    r = bs.lsdask_run(
        data, K, eta=ETA, burnin=3, samples=2, minibatch=minibatch, delay=10.0, epochs=epochs,
        estimator="rao-blackwell", score=False, keep_topics=True,
    )  # fmt: skip
    describe("lsdask svi-gibbs (mean)", r["lam"], data.X_train)
    if K > 200:
        return
    V = data.X_train.shape[1]
    model = LdaModel(
        num_topics=K, id2word={i: str(i) for i in range(V)}, alpha=bs.ALPHA_PER_TOPIC, eta=ETA,
        decay=bs.KAPPA, offset=10.0, chunksize=minibatch, update_every=1, passes=1, iterations=50,
        eval_every=None, random_state=0,
    )  # fmt: skip
    for rows in bs.rows_of(data, r["log"]):
        model.update(bs.gensim_bow(data.X_train[rows]), chunks_as_numpy=True)
    describe("gensim", model.state.get_lambda(), data.X_train)


if __name__ == "__main__":
    main()
