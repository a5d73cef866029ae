"""Jensen-Shannon divergences between the rows of a matrix of distributions.

``JSD(p, q) = H(m) - (H(p) + H(q)) / 2`` with ``m = (p + q) / 2`` and
``H(p) = -sum_w p_w log p_w`` (nats; ``0 log 0 = 0``): one logarithm per pair
and word, the row entropies computed once.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def row_entropies(P):
    """``H(p)`` of every row of ``P`` (K, V). Returns (K,) float64."""
    K, V = P.shape
    out = np.zeros(K, dtype=np.float64)
    for k in range(K):
        s = 0.0
        for w in range(V):
            a = P[k, w]
            if a > 0.0:
                s -= a * np.log(a)
        out[k] = s
    return out


@numba.njit(nogil=True, cache=True, fastmath=True)
def js_divergence_rows(P, H, lo, hi, out):
    """``out[i, j] = out[j, i] = JSD(P[i], P[j])`` for ``lo <= i < hi`` and every
    ``j > i``, given the row entropies ``H``; clipped at 0 against round-off."""
    K, V = P.shape
    for i in range(lo, hi):
        for j in range(i + 1, K):
            s = 0.0
            for w in range(V):
                m = 0.5 * (P[i, w] + P[j, w])
                if m > 0.0:
                    s -= m * np.log(m)
            d = s - 0.5 * (H[i] + H[j])
            if d < 0.0:
                d = 0.0
            out[i, j] = d
            out[j, i] = d
