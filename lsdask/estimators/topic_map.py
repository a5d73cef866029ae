"""The topic report's math: Jensen-Shannon distances, their 2-D map, term relevance.

- :func:`js_distances`: ``sqrt(JSD(phi_i, phi_j) / log 2)``, the Jensen-Shannon
  distance (a metric in [0, 1]) between every pair of topics, exact over the whole
  vocabulary (:mod:`lsdask.kernels.jensen_shannon`, rows in blocks on a few
  threads: memory is the K x K result, never K x K x V).
- :func:`classical_mds`: Torgerson's classical scaling of a distance matrix to
  2-D, the top eigenvectors of ``B = -J D^2 J / 2`` scaled by their eigenvalues'
  square roots.
- :func:`relevance` and :func:`relevance_candidates`: Sievert and Shirley's (2014)
  ``r(w, k | lambda) = lambda log phi_kw + (1 - lambda) log(phi_kw / p_w)``, and for
  each topic the few terms that are among its top ``R`` at any lambda of a grid,
  so that the page can re-rank them in the browser exactly as over the whole
  vocabulary (ties to the smaller word id).
"""

from __future__ import annotations

import itertools
import logging
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from lsdask.kernels.jensen_shannon import js_divergence_rows, row_entropies

logger = logging.getLogger(__name__)

__all__ = [
    "LAMBDAS",
    "classical_mds",
    "js_distances",
    "relevance",
    "relevance_candidates",
]

#: the lambdas of the page's slider, 0, 0.01, ..., 1 (``i / 100``, as the browser reads them)
LAMBDAS = tuple(i / 100 for i in range(101))


def js_distances(topics: np.ndarray, threads: int | None = None) -> np.ndarray:
    """(K, K) Jensen-Shannon distances ``sqrt(JSD / log 2)`` between the rows of
    ``topics`` (K, V), each a distribution over words."""
    P = np.ascontiguousarray(topics, dtype=np.float64)
    K = P.shape[0]
    H = row_entropies(P)
    out = np.zeros((K, K))
    # rows near the top have more pairs (j > i): blocks of about equal work
    cuts = np.unique(np.round(K - np.sqrt(np.linspace(1.0, 0.0, 33)) * K).astype(int))
    blocks = list(itertools.pairwise(cuts.tolist()))
    threads = threads or min(4, os.cpu_count() or 1)
    with ThreadPoolExecutor(threads) as pool:  # the kernel releases the GIL
        list(pool.map(lambda b: js_divergence_rows(P, H, int(b[0]), int(b[1]), out), blocks))
    return np.sqrt(np.clip(out / np.log(2.0), 0.0, 1.0))


def classical_mds(D: np.ndarray, dim: int = 2) -> np.ndarray:
    """(K, dim) points whose distances approximate the (K, K) distances ``D``
    (Torgerson's classical scaling; a dimension of a non-positive eigenvalue is 0)."""
    D = np.asarray(D, dtype=np.float64)
    K = D.shape[0]
    if K == 0:
        return np.zeros((0, dim))
    J = np.eye(K) - 1.0 / K
    B = -0.5 * J @ (D**2) @ J
    values, vectors = np.linalg.eigh((B + B.T) / 2)
    order = np.argsort(values)[::-1][:dim]
    points = np.zeros((K, dim))
    top = vectors[:, order] * np.sqrt(np.maximum(values[order], 0.0))
    points[:, : top.shape[1]] = top
    for d in range(points.shape[1]):  # a sign convention: the largest |value| positive
        if points[np.argmax(np.abs(points[:, d])), d] < 0:
            points[:, d] *= -1
    return points


def relevance(log_phi: np.ndarray, log_lift: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
    """``lambda log phi + (1 - lambda) log(phi / p_w)``, as the page computes it."""
    return lam * log_phi + (1.0 - lam) * log_lift


def relevance_candidates(
    log_phi: np.ndarray, log_p: np.ndarray, R: int, lambdas: tuple[float, ...] = LAMBDAS
) -> list[np.ndarray]:
    """For each topic, the word ids (sorted) among its top ``R`` by relevance at
    some lambda of ``lambdas``.

    ``log_phi`` is (K, V), ``log_p`` (V,) the words' log corpus probability
    (``-inf`` for a word the corpus lacks: never a candidate). A word is first
    kept only if ``max(log phi, log lift)`` reaches the ``R``-th largest
    ``min(log phi, log lift)``: relevance is linear in lambda, so a word below
    that is beaten at every lambda by the ``R`` words above it. Then every word
    candidate if it is among that lambda's ``R`` best, ties broken by the
    smaller word id as the page breaks them: at most ``R`` per lambda, however
    many words tie (an empty topic's words all do).
    """
    lams = np.asarray(lambdas, dtype=np.float64)[:, None]
    known = np.isfinite(log_p)
    ids_all = np.flatnonzero(known)
    R = min(R, ids_all.size)
    out = []
    for row in log_phi:
        a = row[known]
        b = a - log_p[known]
        if R == 0:
            out.append(np.zeros(0, dtype=np.int64))
            continue
        low = np.minimum(a, b)
        threshold = np.partition(low, low.size - R)[low.size - R]
        keep = np.maximum(a, b) >= threshold
        ids, a, b = ids_all[keep], a[keep], b[keep]
        r = relevance(a[None, :], b[None, :], lams)  # (lambdas, words)
        nth = np.partition(r, ids.size - R, axis=1)[:, ids.size - R][:, None]
        above, tied = r > nth, r == nth
        room = R - above.sum(axis=1, keepdims=True)  # the tied words that still fit,
        first = tied & (np.cumsum(tied, axis=1) <= room)  # the smallest ids first
        out.append(ids[(above | first).any(axis=0)].astype(np.int64))
    return out
