"""The score job: a saved LDA or HDP model's heldout document completion on a corpus.

``lsdask score`` prints :func:`format_score` of :func:`score_model`. The score is
the one ``lsdask fit --heldout`` reports at the end of a fit, computed by the same
method, :meth:`lsdask.LDA.score` (lsparse App. E, :mod:`lsdask.evaluate`): each
heldout document's word types are split at random into 80% A and 20% B, the
document's topic weights are fit on A with the topics fixed, and the B tokens'
log-likelihood is averaged: nats per token, and the perplexity ``exp(-nats/token)``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from lsdask.estimators.hdp import HDP
from lsdask.evaluate import completion_score
from lsdask.jobs.inputs import check_same_vocab, loaded_topic_model, open_corpus
from lsdask.validation import check_int

logger = logging.getLogger(__name__)

__all__ = ["ScoreReport", "format_score", "score_model"]


@dataclass
class ScoreReport:
    """What :func:`score_model` computed.

    Attributes
    ----------
    model : str
        The model (its folder, or the estimator's class for one in memory);
        ``model_name`` ``"LDA"`` or ``"HDP"``.
    K : int
        Its topics.
    alpha : array of K
        The document-topic prior ``alpha_k`` the score used (``LDA.alpha_``:
        alpha / K each unless learned; an HDP's ``alpha E[beta_k]``);
        ``learned_alpha`` whether LDA learned it (``alpha="auto"``).
    eta : float
        The topic-word prior.
    heldout : str
        The heldout corpus; ``n_docs`` and ``n_tokens`` its size.
    n_scored_tokens : float
        The tokens scored: those of the 20% of each document's word types
        predicted from the other 80%.
    nats_per_token : float
        Their log-likelihood per token; ``perplexity`` is ``exp(-nats_per_token)``.
    seed : int
        The seed of the 80/20 split (``lsdask fit --heldout`` scores with 0).
    """

    model: str
    model_name: str
    K: int
    alpha: np.ndarray
    learned_alpha: bool
    eta: float
    heldout: str
    n_docs: int
    n_tokens: float
    n_scored_tokens: float
    nats_per_token: float
    perplexity: float
    seed: int


def score_model(model: Any, heldout: Any, *, seed: int = 0) -> ScoreReport:
    """Heldout document completion of a saved model on a corpus, in nats per token.

    Parameters
    ----------
    model : str, os.PathLike, lsdask.LDA or lsdask.HDP
        A model directory (:func:`lsdask.persist.load_model`) or fitted model.
    heldout : str, os.PathLike or Corpus
        Documents over the model's vocabulary, read batch by batch.
    seed : int, default 0
        Seed of the 80/20 split of each document's word types; 0 gives the
        number ``lsdask fit --heldout`` reported for the same corpus.

    Returns
    -------
    ScoreReport

    Raises
    ------
    FileNotFoundError
        For a missing model or corpus.
    ValueError
        For a corrupt model, a corpus over another vocabulary, one without
        documents, or one whose documents leave no token to score.
    """
    seed = check_int("seed", seed, 0)
    lda = loaded_topic_model(model)
    docs = open_corpus(heldout, "heldout corpus")
    where = str(model) if not hasattr(model, "components_") else type(model).__name__
    check_same_vocab(lda.vocabulary_, docs, "heldout corpus", f"the model {where}")
    if docs.n_docs == 0:
        raise ValueError(
            f"heldout corpus {docs.path} holds no documents; score a corpus of documents "
            "over the model's vocabulary (lsdask ingest ... --vocab TRAINING_CORPUS)"
        )
    logger.info("scoring %s on %s: %d documents", where, docs.path, docs.n_docs)
    loglik, n_scored = lda.score_sums(docs, random_state=seed)
    if n_scored == 0:
        raise ValueError(
            f"heldout corpus {docs.path}: its documents leave no token to score (the 20% "
            "of a document's word types that are scored is empty below 3 word types); "
            "score longer documents"
        )
    nats = completion_score(loglik, n_scored)
    return ScoreReport(
        model=where,
        model_name="HDP" if isinstance(lda, HDP) else "LDA",
        K=int(lda.model_.n_components),
        alpha=np.asarray(lda.alpha_, dtype=np.float64),
        learned_alpha=bool(lda.model_.learn_alpha),
        eta=float(lda.eta_),
        heldout=docs.path,
        n_docs=docs.n_docs,
        n_tokens=docs.n_tokens,
        n_scored_tokens=n_scored,
        nats_per_token=nats,
        perplexity=math.exp(-nats),
        seed=seed,
    )


def _prior_line(report: ScoreReport) -> str:
    """What document-topic prior the score used."""
    alpha, K = report.alpha, report.K
    total, low, high = float(alpha.sum()), float(alpha.min()), float(alpha.max())
    if report.model_name == "HDP":
        return (
            f"prior used: the HDP's alpha_k = alpha E[beta_k], from {low:.3g} to {high:.3g} "
            f"(sum {total:.4g}); eta = {report.eta:.4g}"
        )
    if report.learned_alpha:
        return (
            f"prior used: the learned alpha_k, from {low:.3g} to {high:.3g} (alpha = sum "
            f"{total:.4g}); eta = {report.eta:.4g}"
        )
    return (
        f"prior used: alpha_k = alpha / K = {total:.4g} / {K} = {high:.4g} per topic; "
        f"eta = {report.eta:.4g}"
    )


def format_score(report: ScoreReport) -> str:
    """A few lines of a :func:`score_model` report: the model, its prior, the data
    scored, nats per token and perplexity."""
    return "\n".join(
        [
            f"model: {report.model_name}, K={report.K} ({report.model})",
            _prior_line(report),
            f"heldout: {report.n_docs:,} documents, {report.n_tokens:,.0f} tokens "
            f"({report.heldout})",
            f"scored: {report.n_scored_tokens:,.0f} tokens (each document's 20% of word types "
            f"predicted from the other 80%, split seed {report.seed})",
            f"heldout log-likelihood: {report.nats_per_token:.6f} nats/token",
            f"perplexity: {report.perplexity:.4f} (exp of {-report.nats_per_token:.6f})",
        ]
    )
