"""Small synthetic data sets with a known answer, embedded (no files needed).

:func:`make_bars_corpus` draws the classic "bars" corpus of Griffiths &
Steyvers (2004, "Finding scientific topics", Fig. 1): the vocabulary is the
``side * side`` pixels of a square image, each of the ``2 * side`` topics is
uniform over the pixels of one horizontal or one vertical bar, and documents
are drawn from LDA. A learned topic is right when it looks like a bar, which a
picture shows at a glance (:func:`lsdask.plotting.plot_topic_images`), and
:func:`match_topics` measures how far each learned topic is from its bar.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import scipy.sparse as sp

logger = logging.getLogger(__name__)

__all__ = ["bars_topics", "make_bars_corpus", "match_topics"]


def _check_positive_int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def bars_topics(side: int = 5) -> np.ndarray:
    """The ``2 * side`` bar topics over the pixels of a ``side x side`` image.

    Parameters
    ----------
    side : int, default 5
        Side of the square image; the vocabulary has ``side * side`` words
        (pixel ``(r, c)`` is word ``r * side + c``).

    Returns
    -------
    numpy.ndarray of float64, shape (2 * side, side * side)
        Rows ``0 .. side - 1`` are the horizontal bars (row ``r`` of the
        image), rows ``side .. 2 * side - 1`` the vertical bars (column ``c``);
        each row is uniform (``1 / side``) over its bar's pixels.
    """
    side = _check_positive_int("side", side)
    topics = np.zeros((2 * side, side, side))
    for i in range(side):
        topics[i, i, :] = 1.0 / side
        topics[side + i, :, i] = 1.0 / side
    return topics.reshape(2 * side, side * side)


def make_bars_corpus(
    n_docs: int = 2000,
    side: int = 5,
    doc_length: int = 50,
    doc_topic_prior: float = 1.0,
    random_state: int | None = 0,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Draw the "bars" corpus (Griffiths & Steyvers 2004) from LDA.

    Each document ``d`` draws topic proportions
    ``theta_d ~ Dirichlet(doc_topic_prior * ones(K))`` over the ``K = 2 * side``
    bar topics (:func:`bars_topics`), then ``doc_length`` words, each from a
    topic drawn from ``theta_d``. Its word counts are therefore
    ``Multinomial(doc_length, theta_d @ topics)``.

    Parameters
    ----------
    n_docs : int, default 2000
        Documents.
    side : int, default 5
        Side of the square image: ``V = side * side`` words, ``K = 2 * side``
        topics.
    doc_length : int, default 50
        Tokens per document.
    doc_topic_prior : float, default 1.0
        Concentration of *each* topic in the documents' Dirichlet prior (the
        total concentration is ``doc_topic_prior * K``; to fit the generating
        model with :class:`lsdask.LDA`, whose ``alpha`` is the total, pass
        ``alpha=doc_topic_prior * K``). With 1.0, as in Griffiths & Steyvers,
        a document mixes several bars; much smaller values make nearly
        single-bar documents.
    random_state : int or None, default 0
        Seed of :func:`numpy.random.default_rng`; the same seed gives the same
        corpus.

    Returns
    -------
    X : scipy.sparse.csr_matrix of float64, shape (n_docs, side * side)
        Word counts (integers stored as floats); column indices sorted.
    true_topics : numpy.ndarray of float64, shape (2 * side, side * side)
        The generating topics, rows summing to 1.

    Raises
    ------
    ValueError
        If a count is not a positive integer or ``doc_topic_prior`` is not a
        positive finite number.
    """
    n_docs = _check_positive_int("n_docs", n_docs)
    doc_length = _check_positive_int("doc_length", doc_length)
    topics = bars_topics(side)
    prior = float(doc_topic_prior)
    if not np.isfinite(prior) or prior <= 0:
        raise ValueError(f"doc_topic_prior must be a positive number; got {doc_topic_prior!r}")
    X = _draw_documents(topics, n_docs, doc_length, prior, np.random.default_rng(random_state))
    logger.info(
        "bars corpus: %d documents of %d tokens, %d topics over %d words",
        n_docs, doc_length, *topics.shape,
    )  # fmt: skip
    return X, topics


def _as_topic_rows(name: str, value: Any) -> np.ndarray:
    """A (K, V) array of non-negative rows, each normalized to sum to 1."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be a 2-D array of numbers: {err}") from err
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must have shape (K, V) with K, V >= 1; got {arr.shape}")
    if not np.all(np.isfinite(arr)) or arr.min() < 0:
        raise ValueError(f"{name} must hold finite, non-negative values")
    totals = arr.sum(axis=1, keepdims=True)
    if np.any(totals <= 0):
        raise ValueError(f"{name} has a row of zeros; every topic needs some weight")
    return arr / totals


def match_topics(true_topics: Any, learned_topics: Any) -> tuple[np.ndarray, np.ndarray]:
    """Match learned topics to true ones, one to one, minimizing the L1 distance.

    Both sets of rows are normalized to sum to 1 (so ``learned_topics`` may
    be pseudo-counts such as :attr:`lsdask.LDA.components_`); the pairs are
    the Hungarian assignment (:func:`scipy.optimize.linear_sum_assignment`)
    of the matrix of L1 distances ``sum_v |p_v - q_v|``, which lie in
    ``[0, 2]``.

    Parameters
    ----------
    true_topics : array-like, shape (K_true, V)
    learned_topics : array-like, shape (K_learned, V)

    Returns
    -------
    match : numpy.ndarray of int64, shape (K_true,)
        ``match[k]`` is the learned topic matched to true topic ``k``, or -1
        when there are fewer learned topics than true ones and ``k`` is left
        over.
    distances : numpy.ndarray of float64, shape (K_true,)
        L1 distance of each match (NaN where ``match`` is -1).

    Raises
    ------
    ValueError
        If an input is not 2-D, the vocabularies differ in size, or a row is
        negative, not finite or all zeros.
    """
    from scipy.optimize import linear_sum_assignment

    true = _as_topic_rows("true_topics", true_topics)
    learned = _as_topic_rows("learned_topics", learned_topics)
    if true.shape[1] != learned.shape[1]:
        raise ValueError(
            f"true_topics and learned_topics must have the same number of words (columns); "
            f"got shapes {true.shape} and {learned.shape}"
        )
    cost = np.abs(true[:, None, :] - learned[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    match = np.full(true.shape[0], -1, dtype=np.int64)
    distances = np.full(true.shape[0], np.nan)
    match[rows] = cols
    distances[rows] = cost[rows, cols]
    return match, distances


def _draw_documents(
    topics: np.ndarray, n_docs: int, doc_length: int, prior: float, rng: np.random.Generator
) -> sp.csr_matrix:
    """LDA's documents: ``theta_d ~ Dir(prior)`` per topic, then ``doc_length`` words
    from ``theta_d @ topics``, as sorted CSR counts."""
    K = topics.shape[0]
    theta = rng.dirichlet(np.full(K, prior), size=n_docs)
    word_probs = theta @ topics
    word_probs /= word_probs.sum(axis=1, keepdims=True)
    X = sp.csr_matrix(rng.multinomial(doc_length, word_probs).astype(np.float64))
    X.sort_indices()
    return X


def make_topics_corpus(
    n_topics: int = 30,
    vocab_size: int = 400,
    n_docs: int = 2000,
    doc_length: int = 80,
    doc_topic_prior: float = 0.1,
    topic_word_prior: float = 0.05,
    random_state: int | None = 0,
) -> tuple[sp.csr_matrix, np.ndarray]:
    """A corpus drawn from LDA with ``n_topics`` random topics ``phi_k ~
    Dir(topic_word_prior)`` over ``vocab_size`` words: a known number of topics
    less regular than the bars' (topics of unequal size and overlap).

    Documents as in :func:`make_bars_corpus` (``doc_topic_prior`` per topic).
    Returns ``(X (n_docs, vocab_size) CSR counts, true_topics (n_topics,
    vocab_size))``; the same seed gives the same corpus.
    """
    K = _check_positive_int("n_topics", n_topics)
    V = _check_positive_int("vocab_size", vocab_size)
    n_docs = _check_positive_int("n_docs", n_docs)
    doc_length = _check_positive_int("doc_length", doc_length)
    for name, value in (
        ("doc_topic_prior", doc_topic_prior),
        ("topic_word_prior", topic_word_prior),
    ):
        if not (np.isfinite(float(value)) and float(value) > 0):
            raise ValueError(f"{name} must be a positive number; got {value!r}")
    rng = np.random.default_rng(random_state)
    topics = rng.dirichlet(np.full(V, float(topic_word_prior)), size=K)
    X = _draw_documents(topics, n_docs, doc_length, float(doc_topic_prior), rng)
    logger.info(
        "generated corpus: %d documents of %d tokens, %d topics over %d words",
        n_docs, doc_length, K, V,
    )  # fmt: skip
    return X, topics
