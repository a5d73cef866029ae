"""The HDP's moves find the number of topics of corpora drawn with a known one.

Bars (10 topics) and a generated corpus (30 random topics), each started at 50
and at 100 topics, five seeds each: the final K must be within 10% of the truth
with every true topic matched by a learned one (the Hungarian matching of
:func:`lsdask.synthetic.match_topics`), in at least 4 of the 5 seeds. The model's
priors are those the corpus was drawn with (the document concentration in
total, eta): what is tested is the moves, not a prior's misfit.
"""

from __future__ import annotations

import numpy as np
import pytest

import lsdask
from lsdask.synthetic import make_bars_corpus, make_topics_corpus, match_topics

SEEDS = range(5)


def _bars(seed: int):
    X, topics = make_bars_corpus(600, doc_topic_prior=0.1, random_state=seed)
    return X, topics, {"alpha": 1.0, "eta": 0.1}, 8, 0.15


def _generated(seed: int):
    X, topics = make_topics_corpus(
        n_topics=30, vocab_size=300, n_docs=1500, doc_length=60, doc_topic_prior=0.1,
        topic_word_prior=0.05, random_state=seed,
    )  # fmt: skip
    return X, topics, {"alpha": 3.0, "eta": 0.05}, 12, 0.35


@pytest.mark.parametrize("start", [50, 100])
@pytest.mark.parametrize("corpus", [_bars, _generated], ids=["bars10", "generated30"])
def test_started_large_the_hdp_ends_at_the_true_number_of_topics(corpus, start):
    outcomes = []
    for seed in SEEDS:
        X, topics, priors, laps, max_l1 = corpus(seed)
        model = lsdask.HDP(
            start, sparsity=4, n_laps=laps, batch_size=300, client="sync", random_state=seed,
            **priors,
        )  # fmt: skip
        model.fit(X)
        truth = topics.shape[0]
        _, l1 = match_topics(topics, model.components_)
        K = model.n_components_
        assert model.n_components_trace_[0] == start and np.all(
            np.diff(model.n_components_trace_) <= 0
        )
        outcomes.append((K, float(l1.max()), abs(K - truth) <= 0.1 * truth and l1.max() <= max_l1))
    assert sum(ok for *_, ok in outcomes) >= 4, outcomes
