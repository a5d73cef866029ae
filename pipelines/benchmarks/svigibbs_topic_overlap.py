"""SVI-Gibbs and gensim's online VB at K=200, eta 0.1, on lsdask's minibatches of 100
(seed 0, 2 epochs): how alike each method's topics are. Prints the number of
distinct top-10 word sets over the K topics, the mean number of top-10 words two
topics share, and the UMass worst decile, which rises when topics are copies of
a few (a copy scores as its original). Usage: python svigibbs_topic_overlap.py."""

from __future__ import annotations

import itertools

import bench_svigibbs as bs
import numpy as np
from harness.corpora import CORPORA_DIR, WORK_DIR, load_corpora

from lsdask.evaluate import umass_coherence

K, ETA, EPOCHS = 200, 0.1, 2


def describe(name: str, lam: np.ndarray, X) -> None:
    top = np.argsort(-lam, axis=1)[:, :10]
    sets = [frozenset(t) for t in top]
    shared = np.mean([len(a & b) for a, b in itertools.combinations(sets, 2)])
    coherence = umass_coherence(lam / lam.sum(axis=1, keepdims=True), iter([X]), 10)
    worst = np.sort(coherence)[: K // 10].mean()
    print(f"{name}: {len(set(sets))} distinct top-10 sets of {K}, {shared:.2f} top words "
          f"shared per pair, UMass worst decile {worst:.1f}")  # fmt: skip


def main() -> None:
    from gensim.models import LdaModel

    data = load_corpora(["20news"], CORPORA_DIR, WORK_DIR)["20news"]
    r = bs.lsdask_run(
        data, K, eta=ETA, burnin=3, samples=2, minibatch=100, delay=10.0, epochs=EPOCHS,
        estimator="rao-blackwell", score=False, keep_topics=True,
    )  # fmt: skip
    V = data.X_train.shape[1]
    model = LdaModel(
        num_topics=K, id2word={i: str(i) for i in range(V)}, alpha=bs.ALPHA_PER_TOPIC, eta=ETA,
        decay=bs.KAPPA, offset=10.0, chunksize=100, update_every=1, passes=1, iterations=50,
        eval_every=None, random_state=0,
    )  # fmt: skip
    for rows in bs.rows_of(data, r["log"]):
        model.update(bs.gensim_bow(data.X_train[rows]), chunks_as_numpy=True)
    describe("gensim", model.state.get_lambda(), data.X_train)
    describe("lsdask svi-gibbs (mean)", r["lam"], data.X_train)


if __name__ == "__main__":
    main()
