"""Grouping (row, cluster) pairs by cluster, so each cluster's rows meet one BLAS call."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def group_by_key(keys, n_keys):
    """Counting sort: ``(start, order)`` with the positions of key k (in
    increasing position) at ``order[start[k]:start[k + 1]]``."""
    start = np.zeros(n_keys + 1, dtype=np.int64)
    for p in range(keys.shape[0]):
        start[keys[p] + 1] += 1
    for k in range(n_keys):
        start[k + 1] += start[k]
    fill = start[:n_keys].copy()
    order = np.empty(keys.shape[0], dtype=np.int64)
    for p in range(keys.shape[0]):
        k = keys[p]
        order[fill[k]] = p
        fill[k] += 1
    return start, order
