"""The topics job: a saved LDA or HDP model's top words, with UMass coherence over a corpus.

``lsdask topics`` prints :func:`format_topics` of :func:`topic_report`; for a model
with learned priors (``alpha="auto"``, ``eta="auto"``) also each topic's ``alpha_k``
and the learned totals; for an HDP each topic's weight ``E[beta_k]``, the topics
ordered by it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lsdask.jobs.inputs import check_same_vocab, loaded_topic_model, open_corpus

__all__ = ["TopicReport", "format_topics", "topic_report"]


@dataclass
class TopicReport:
    """What :func:`topic_report` read.

    Attributes
    ----------
    K, n_top : int
        Topics, and words shown per topic.
    share : array of K
        Each topic's share of the training tokens.
    top_words : list of K lists of str
    coherence : array of K or None
        UMass coherence of each topic's top words over ``corpus`` (None
        without one); ``mean_coherence`` their mean.
    corpus : str or None
    alpha : array of K or None
        Each topic's document-topic prior ``alpha_k`` (``LDA.alpha_``: alpha / K
        each unless learned).
    learned_alpha, learned_eta : bool
        Whether the model learned alpha (``alpha="auto"``) and eta; ``eta`` its eta.
    weights : array of K or None
        An HDP's topic weights ``E[beta_k]`` (``HDP.topic_weights_``, decreasing:
        the topics are in that order); ``leftover`` the mass beyond K. None for LDA.
    """

    K: int
    n_top: int
    share: np.ndarray
    top_words: list[list[str]]
    coherence: np.ndarray | None = None
    mean_coherence: float | None = None
    corpus: str | None = None
    alpha: np.ndarray | None = None
    learned_alpha: bool = False
    eta: float | None = None
    learned_eta: bool = False
    weights: np.ndarray | None = None
    leftover: float | None = None


def topic_report(model: Any, *, n_top: int = 10, corpus: Any = None) -> TopicReport:
    """Each topic's top words, and their UMass coherence over a corpus.

    Parameters
    ----------
    model : str, os.PathLike, lsdask.LDA or lsdask.HDP
        A model directory (:func:`lsdask.persist.load_model`) or fitted model.
    n_top : int, default 10
        Words per topic.
    corpus : str, os.PathLike, Corpus or None, default None
        Reference documents for UMass coherence (Mimno et al. 2011), read
        batch by batch; None skips it.

    Returns
    -------
    TopicReport

    Raises
    ------
    FileNotFoundError, ValueError
        For a missing or corrupt model, a missing corpus or one over
        another vocabulary.
    """
    if isinstance(n_top, bool) or not isinstance(n_top, int) or n_top < 1:
        raise ValueError(f"n_top must be a positive integer; got {n_top!r}")
    lda = loaded_topic_model(model)
    mass = np.maximum(lda.components_ - lda.eta_, 0.0).sum(axis=1)  # tokens per topic
    report = TopicReport(
        K=int(lda.model_.n_components),
        n_top=n_top,
        share=mass / mass.sum() if mass.sum() > 0 else mass,
        top_words=lda.top_words(n_top),
        alpha=np.asarray(lda.alpha_),
        learned_alpha=bool(lda.model_.learn_alpha),
        eta=float(lda.eta_),
        learned_eta=bool(lda.model_.learn_eta),
    )
    weights = getattr(lda, "topic_weights_", None)
    if weights is not None:
        report.weights = np.asarray(weights)
        report.leftover = float(lda.leftover_weight_)
    if corpus is not None:
        docs = open_corpus(corpus, "corpus")
        if lda.vocabulary_ is not None:
            check_same_vocab(lda.vocabulary_, docs, "corpus", "the model")
        report.coherence = lda.coherence(docs, n_top)
        report.mean_coherence = float(np.mean(report.coherence))
        report.corpus = docs.path
    return report


def format_topics(report: TopicReport) -> str:
    """One line per topic of a :func:`topic_report` (a learned ``alpha_k`` and the
    coherence first, if any), then the mean coherence and the learned priors."""
    coherence = report.coherence
    alpha = report.alpha if report.learned_alpha else None
    prior = "" if alpha is None else f"  {'alpha_k':>8}"
    umass = "" if coherence is None else f"  {'UMass':>8}"
    weights = report.weights
    weight = "" if weights is None else f"  {'E[beta]':>7}"
    lines = [f"{'topic':>5}{weight}  {'share':>6}{prior}{umass}  top {report.n_top} words"]
    for k, words in enumerate(report.top_words):
        weight = "" if weights is None else f"  {weights[k]:>7.4f}"
        prior = "" if alpha is None else f"  {alpha[k]:>8.3g}"
        umass = "" if coherence is None else f"  {coherence[k]:>8.2f}"
        lines.append(f"{k:>5}{weight}  {report.share[k]:>6.1%}{prior}{umass}  {' '.join(words)}")
    if coherence is not None:
        lines.append(
            f"mean UMass coherence of {report.K} topics (top {report.n_top} words, "
            f"documents of {report.corpus}): {report.mean_coherence:.3f}"
        )
    if alpha is not None:
        lines.append(
            f"learned document-topic prior: alpha = sum_k alpha_k = {float(alpha.sum()):.4g} "
            f"over {report.K} topics (alpha_k from {float(alpha.min()):.3g} to "
            f"{float(alpha.max()):.3g})"
        )
    if weights is not None and report.leftover is not None:
        lines.append(
            f"HDP: {report.K} topics by weight E[beta_k] (sum {float(weights.sum()):.4f}; "
            f"the mass beyond them {report.leftover:.4g})"
        )
    if report.learned_eta and report.eta is not None:
        lines.append(f"learned topic-word prior: eta = {report.eta:.4g}")
    return "\n".join(lines)
