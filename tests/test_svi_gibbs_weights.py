"""``gibbs_weights``: SVI-Gibbs sampling against the topics' posterior mean E[phi]
or against exp E[log phi] (the paper's Eq. 9)."""

from __future__ import annotations

import numpy as np
import pytest

import lsdask
from lsdask.evaluate import document_completion, split_documents
from tests.test_svi_gibbs import _corpus, svi_gibbs_kw
from tests.test_svi_gibbs_rb import resumes_as_before_the_choice


@pytest.fixture(scope="module")
def data():
    return _corpus(np.random.default_rng(7))


def _heldout(m, X) -> float:
    A, B = split_documents(X, 0.8, 0)
    return float(document_completion(A, B, m.topic_word_, m.alpha_))


def test_the_mean_learns_better_topics_at_small_eta():
    """At eta=0.1 exp psi(eta) is 3e-5 of a count's weight, so under the geometric
    weights a word's tokens stay on the topics that first took it; the mean
    weighs a missing word eta / lambda_k. and keeps moving. K=20 topics over 400
    words: the mean's heldout is well above the geometric's."""
    X, _ = _corpus(np.random.default_rng(7), n_docs=600, K=20, V=400)
    mean = lsdask.LDA(20, **svi_gibbs_kw(n_laps=6, alpha=2.0)).fit(X)
    geo = lsdask.LDA(20, **svi_gibbs_kw(n_laps=6, alpha=2.0, gibbs_weights="geometric")).fit(X)
    assert mean.gibbs_weights == "mean" and geo.gibbs_weights == "geometric"
    assert _heldout(mean, X) > _heldout(geo, X) + 0.1


def test_lda_refuses_unknown_weights(data):
    X, _ = data
    with pytest.raises(ValueError, match="gibbs_weights must be one of"):
        lsdask.LDA(5, **svi_gibbs_kw(n_laps=1, gibbs_weights="arithmetic")).fit(X)


def test_a_checkpoint_from_before_the_choice_resumes_as_geometric(data, tmp_path):
    """A checkpoint written before ``gibbs_weights`` existed was sampled against
    exp E[log phi]: it resumes as ``"geometric"`` and is refused, naming the
    setting, with the mean."""
    X, _ = data
    kw = svi_gibbs_kw(gibbs_weights="geometric", eta=0.4)
    resumes_as_before_the_choice(X, 5, kw, "gibbs_weights", "mean", tmp_path)
