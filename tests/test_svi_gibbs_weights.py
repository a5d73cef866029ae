"""``gibbs_weights``: SVI-Gibbs sampling against the topics' posterior mean E[phi]
or against exp E[log phi] (the paper's Eq. 9)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import lsdask
from lsdask.evaluate import document_completion, split_documents
from lsdask.persist.svi_gibbs import checkpoint_path
from tests.test_svi_gibbs import _corpus


@pytest.fixture(scope="module")
def data():
    return _corpus(np.random.default_rng(7))


def _kw(**kw):
    base = dict(
        algorithm="svi-gibbs", alpha=1.0, eta=0.1, minibatch_size=40, gibbs_burnin=2,
        gibbs_samples=2, random_state=3, client="sync", svi_delay=10.0,
    )  # fmt: skip
    return {**base, **kw}


def _heldout(m, X) -> float:
    A, B = split_documents(X, 0.8, 0)
    return float(document_completion(A, B, m.topic_word_, m.alpha_))


def test_the_mean_learns_better_topics_at_small_eta():
    """At eta=0.1 exp psi(eta) is 3e-5 of a count's weight, so under the geometric
    weights a word's tokens stay on the topics that first took it; the mean
    weighs a missing word eta / lambda_k. and keeps moving. K=20 topics over 400
    words: the mean's heldout is well above the geometric's."""
    X, _ = _corpus(np.random.default_rng(7), n_docs=600, K=20, V=400)
    mean = lsdask.LDA(20, n_laps=6, **_kw(alpha=2.0)).fit(X)
    geo = lsdask.LDA(20, n_laps=6, **_kw(alpha=2.0, gibbs_weights="geometric")).fit(X)
    assert mean.gibbs_weights == "mean" and geo.gibbs_weights == "geometric"
    assert _heldout(mean, X) > _heldout(geo, X) + 0.1


def test_lda_refuses_unknown_weights(data):
    X, _ = data
    with pytest.raises(ValueError, match="gibbs_weights must be one of"):
        lsdask.LDA(5, n_laps=1, **_kw(gibbs_weights="arithmetic")).fit(X)


def test_a_checkpoint_from_before_the_choice_resumes_as_geometric(data, tmp_path):
    """A checkpoint written before ``gibbs_weights`` existed was sampled against
    exp E[log phi]: it resumes as ``"geometric"`` and is refused, naming the
    setting, with the mean."""
    X, _ = data
    kw = _kw(gibbs_weights="geometric", eta=0.4)
    straight = lsdask.LDA(5, n_laps=3, **kw).fit(X)
    ck = tmp_path / "ck"
    lsdask.LDA(5, n_laps=2, checkpoint_dir=str(ck), **kw).fit(X)
    path = checkpoint_path(ck)
    with np.load(path) as f:
        arrays = dict(f)
    meta = json.loads(arrays["meta"].tobytes().decode())
    del meta["settings"]["gibbs_weights"]
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(path.with_suffix(".tmp.npz"), **arrays)
    path.with_suffix(".tmp.npz").replace(path)
    with pytest.raises(ValueError, match="gibbs_weights: checkpoint 'geometric', asked 'mean'"):
        lsdask.LDA(5, n_laps=1, checkpoint_dir=str(ck), resume=True,
                   **{**kw, "gibbs_weights": "mean"}).fit(X)  # fmt: skip
    again = lsdask.LDA(5, n_laps=1, checkpoint_dir=str(ck), resume=True, **kw).fit(X)
    np.testing.assert_array_equal(straight.components_, again.components_)
