"""Evaluation of topic models: heldout document completion and coherence.

- :func:`split_documents` and :func:`document_completion` follow lsparse
  App. E: each heldout document's word *types* are split at random (seeded)
  into 80% A and 20% B; ``q(pi_d)`` is fit on A by the dense local step
  (Alg. 2, no restarts) with topics fixed at their posterior mean
  ``phi_hat = E[phi]``; the score is
  ``sum_d sum_{n in B} log sum_k pi_hat_dk phi_hat_{k x_dn} / |B|`` with
  ``pi_hat_d = E[pi_d]``, in nats per token.
- :func:`umass_coherence` is Mimno et al.'s Eq. 13 (svigibbs paper):
  ``C(W) = sum_i sum_{j<i} log((D(w_i, w_j) + eps) / D(w_j))`` over a topic's
  top W words, with document frequencies from a reference corpus.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import scipy.sparse as sp

from lsdask.kernels.lda import lda_batch_step


def split_documents(
    X: sp.csr_matrix, fraction: float = 0.8, random_state: int | np.random.Generator = 0
) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Split each row's word types at random into A (``fraction``) and B (the rest).

    Documents with a single word type keep it in A (nothing to predict).
    ``random_state`` may be a Generator, drawn from row by row: splitting
    consecutive batches with one Generator splits them as their stack. A
    row's word types are split in word-id order, whatever order its entries
    are stored in, and a word stored twice counts once (its counts summed).
    """
    X = sp.csr_matrix(X)
    if not X.has_canonical_format:  # sorted, no duplicates: the split sees word types
        X = X.copy()
        X.sum_duplicates()
    rng = np.random.default_rng(random_state)
    in_a = np.zeros(X.nnz, dtype=bool)
    for d in range(X.shape[0]):
        lo, hi = X.indptr[d], X.indptr[d + 1]
        n = hi - lo
        n_a = max(1, round(fraction * n)) if n else 0
        in_a[lo + rng.permutation(n)[:n_a]] = True
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    A = sp.csr_matrix((X.data[in_a], (rows[in_a], X.indices[in_a])), shape=X.shape)
    B = sp.csr_matrix((X.data[~in_a], (rows[~in_a], X.indices[~in_a])), shape=X.shape)
    return A, B


def fit_document_topics(
    X: sp.csr_matrix,
    topics: np.ndarray,
    alpha: float | np.ndarray,
    *,
    max_iters: int = 100,
    conv_thresh: float = 0.05,
) -> np.ndarray:
    """``E[pi_d]`` for every row of X by the dense step with fixed topics (K, V).

    ``alpha`` is the document-topic prior: a float is the total concentration,
    ``alpha / K`` per topic; an array of K values is each topic's own ``alpha_k``
    (a learned prior, ``LDA.alpha_``).
    """
    X = sp.csr_matrix(X)
    K = topics.shape[0]
    a = np.full(K, alpha / K) if np.ndim(alpha) == 0 else np.asarray(alpha, dtype=np.float64)
    if a.shape != (K,):
        raise ValueError(
            f"alpha must be a number or one value per topic ({K}); got shape {a.shape}"
        )
    cols, local = np.unique(X.indices, return_inverse=True)
    C = np.ascontiguousarray(np.log(topics[:, cols]).T)
    doc_topic = np.zeros((X.shape[0], K))
    lda_batch_step(
        X.indptr.astype(np.int64), local.astype(np.int32), X.data.astype(np.float64),
        C,
        a, 0.0, 0, max_iters, conv_thresh, 1e-8, False, 0,
        np.zeros((K, cols.size)), doc_topic, np.zeros(K + 1),
    )  # fmt: skip
    theta = doc_topic + a
    return theta / theta.sum(axis=1, keepdims=True)


def document_completion_sums(
    A: sp.csr_matrix, B: sp.csr_matrix, topics: np.ndarray, alpha: float | np.ndarray, **kwargs
) -> tuple[float, float]:
    """``(sum of log p(B tokens), number of B tokens)`` given ``E[pi_d]`` fit on A:
    the parts of :func:`document_completion`, to add up over batches."""
    pi = fit_document_topics(A, topics, alpha, **kwargs)
    B = sp.csr_matrix(B)
    rows = np.repeat(np.arange(B.shape[0]), np.diff(B.indptr))
    prob = np.einsum("nk,kn->n", pi[rows], topics[:, B.indices])
    return float((B.data * np.log(prob)).sum()), float(B.data.sum())


def completion_score(loglik: float, tokens: float) -> float:
    """Nats per heldout token, or an error when the heldout halves hold none."""
    if tokens == 0:
        raise ValueError("the heldout halves hold no tokens; use longer documents")
    return loglik / tokens


def document_completion(
    A: sp.csr_matrix, B: sp.csr_matrix, topics: np.ndarray, alpha: float | np.ndarray, **kwargs
) -> float:
    """Heldout log-likelihood per token of B given ``E[pi_d]`` fit on A (App. E)."""
    return completion_score(*document_completion_sums(A, B, topics, alpha, **kwargs))


def top_word_ids(topics: np.ndarray, n: int) -> np.ndarray:
    """(K, n) word ids of each topic's n most probable words, most probable first."""
    part = np.argpartition(-topics, min(n, topics.shape[1] - 1), axis=1)[:, :n]
    order = np.argsort(-np.take_along_axis(topics, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def umass_coherence(
    topics: np.ndarray,
    X: sp.csr_matrix | Iterable[sp.csr_matrix],
    top_n: int = 10,
    eps: float = 1.0,
) -> np.ndarray:
    """UMass coherence of each topic's top ``top_n`` words over documents X (Eq. 13).

    ``X`` is a document-word matrix or an iterable of them (batches of one
    corpus, read one at a time).
    """
    top = top_word_ids(topics, top_n)
    words = np.unique(top)
    co = np.zeros((words.size, words.size))
    for batch in [X] if sp.issparse(X) or isinstance(X, np.ndarray) else X:
        present = (sp.csr_matrix(batch)[:, words] > 0).astype(np.float64)
        co += np.asarray((present.T @ present).todense())
    pos = {w: i for i, w in enumerate(words)}
    scores = np.zeros(topics.shape[0])
    for k, row in enumerate(top):
        ids = [pos[w] for w in row]
        total = 0.0
        for i in range(1, len(ids)):
            for j in range(i):
                df = co[ids[j], ids[j]]
                if df > 0:
                    total += np.log((co[ids[i], ids[j]] + eps) / df)
        scores[k] = total
    return scores


class CoDocumentCounts:
    """Document frequencies of each topic's top words and of their pairs, added up
    batch by batch: UMass (:func:`umass_coherence`) and NPMI from one pass.

    ``top`` is ``(K, n)`` word ids, most probable first. Only the ``K n (n - 1) / 2``
    pairs the topics use are kept (not the square of the distinct top words: K =
    1,000 topics hold up to 10,000 of them), so memory is ``O(K n^2)``.
    """

    def __init__(self, top: np.ndarray) -> None:
        self.top = np.asarray(top, dtype=np.int64)
        self.words, local = np.unique(self.top, return_inverse=True)
        self.local = local.reshape(self.top.shape)
        i, j = np.tril_indices(self.top.shape[1], -1)  # pairs j < i, as Eq. 13 sums
        self.pair_i, self.pair_j = i, j
        self.n_docs = 0.0
        self.df = np.zeros(self.words.size)  # documents holding each distinct top word
        self.co = np.zeros((self.top.shape[0], i.size))  # documents holding both words

    def add(self, X: sp.csr_matrix) -> None:
        """Count the documents (rows) of ``X``."""
        present = (sp.csr_matrix(X)[:, self.words] > 0).astype(np.float64).tocsc()
        self.n_docs += X.shape[0]
        self.df += np.asarray(present.sum(axis=0)).ravel()
        both = (present.T @ present).tocsr()
        a, b = self.local[:, self.pair_i], self.local[:, self.pair_j]
        self.co += np.asarray(both[a.ravel(), b.ravel()]).reshape(a.shape)

    def umass(self, eps: float = 1.0) -> np.ndarray:
        """Each topic's UMass coherence (Eq. 13): ``sum_{j<i} log((D(w_i, w_j) + eps) /
        D(w_j))``, a pair whose ``w_j`` no document holds left out."""
        df_j = self.df[self.local[:, self.pair_j]]
        terms = np.log((self.co + eps) / np.where(df_j > 0, df_j, 1.0))
        return np.where(df_j > 0, terms, 0.0).sum(axis=1)

    def npmi(self) -> np.ndarray:
        """Each topic's NPMI (:func:`npmi_coherence`), the mean over its word pairs."""
        if self.pair_i.size == 0 or self.n_docs == 0:
            return np.zeros(self.top.shape[0])
        N = self.n_docs
        p_i = self.df[self.local[:, self.pair_i]] / N
        p_j = self.df[self.local[:, self.pair_j]] / N
        p_ij = self.co / N
        with np.errstate(divide="ignore", invalid="ignore"):
            pmi = np.log(p_ij / (p_i * p_j))
            score = pmi / -np.log(p_ij)
        score = np.where(p_ij >= 1.0, 1.0, score)  # in every document: total co-occurrence
        score = np.where(p_ij > 0, score, -1.0)  # never together (or a word never seen)
        return score.mean(axis=1)


def npmi_coherence(
    topics: np.ndarray, X: sp.csr_matrix | Iterable[sp.csr_matrix], top_n: int = 10
) -> np.ndarray:
    """NPMI coherence (Bouma 2009) of each topic's top ``top_n`` words over documents X.

    For each pair of top words, ``NPMI = log(P(w_i, w_j) / (P(w_i) P(w_j))) /
    -log P(w_i, w_j)``, the probabilities the fractions of documents holding the
    words; averaged over the ``n (n - 1) / 2`` pairs. It lies in [-1, 1]: -1 for
    words never in one document, 0 for independent ones, 1 for words always
    together. ``X`` is a document-word matrix or an iterable of batches.
    """
    counts = CoDocumentCounts(top_word_ids(topics, top_n))
    for batch in [X] if sp.issparse(X) or isinstance(X, np.ndarray) else X:
        counts.add(sp.csr_matrix(batch))
    return counts.npmi()
