"""Assignment entropy per cluster, ``H_k = -sum_n r_nk log r_nk`` (Eq. 24).

Cached per batch so that the memoized ELBO can be evaluated exactly from
statistics alone. ``0 log 0 = 0``.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def sparse_entropy(resp, idx, K):
    """Per-cluster entropy from L-sparse responsibilities. Returns (K,) float64."""
    out = np.zeros(K, dtype=np.float64)
    N, L = resp.shape
    for n in range(N):
        for j in range(L):
            r = resp[n, j]
            if r > 0.0:
                out[idx[n, j]] -= r * np.log(r)
    return out


@numba.njit(nogil=True, cache=True)
def dense_entropy(R):
    """Per-cluster entropy from dense responsibilities (N, K). Returns (K,)."""
    N, K = R.shape
    out = np.zeros(K, dtype=np.float64)
    for n in range(N):
        for k in range(K):
            r = R[n, k]
            if r > 0.0:
                out[k] -= r * np.log(r)
    return out
