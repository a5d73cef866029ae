"""Sufficient-statistic summaries from L-sparse and dense responsibilities.

One kernel serves every "sum of r times a per-row vector" statistic (Eq. 7,
Eq. 30): with ``rows = x`` it gives ``sum_n r_nk x_n``, with ``rows = x**2``
the diagonal second moments, and with ``rows = vech(x x^T)``
(:func:`lsdask.kernels.outer_features`) the full second moments
``S_k = sum_n r_nk x_n x_n^T``. The sparse versions cost O(N L M), the dense
twins O(N K M) (a BLAS product).

For a whole batch the full second moments are cheaper grouped by cluster
(:func:`sparse_outer_sums`): the (row, cluster) pairs are sorted by cluster
and each ``S_k = Y_k^T Y_k`` is one BLAS product of the ``sqrt(r)``-scaled
D-wide rows, instead of a scatter of D(D+1)/2-wide feature rows.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from scipy.linalg.blas import dgemm

from lsdask.kernels.grouping import group_by_key


@numba.njit(nogil=True, cache=True)
def sparse_counts(resp, idx, K):
    """``N_k = sum_n r_nk`` from L-sparse responsibilities. Returns (K,) float64."""
    out = np.zeros(K, dtype=np.float64)
    N, L = resp.shape
    for n in range(N):
        for j in range(L):
            out[idx[n, j]] += resp[n, j]
    return out


def dense_counts(R: np.ndarray) -> np.ndarray:
    """``N_k = sum_n r_nk`` from dense responsibilities (N, K)."""
    return R.sum(axis=0)


@numba.njit(nogil=True, cache=True)
def sparse_weighted_rows(rows, resp, idx, out):
    """``out[k] += sum_n r_nk rows[n]`` with L-sparse responsibilities.

    Accumulates into ``out`` so that a batch processed in row blocks needs no
    per-block (K, M) temporaries.

    Parameters
    ----------
    rows : ndarray (N, M) float64
    resp, idx : ndarray (N, L) float64 / int32
    out : ndarray (K, M) float64, updated in place

    Returns
    -------
    out
    """
    N, M = rows.shape
    L = resp.shape[1]
    for n in range(N):
        for j in range(L):
            r = resp[n, j]
            if r == 0.0:
                continue
            dst = out[idx[n, j]]
            src = rows[n]
            for m in range(M):
                dst[m] += r * src[m]
    return out


@numba.njit(nogil=True, cache=True)
def sparse_outer_sums(X, resp, idx, out):
    """``out[k] += vech(sum_n r_nk x_n x_n^T)`` with L-sparse responsibilities.

    Parameters
    ----------
    X : ndarray (N, D) float64, C-contiguous
    resp, idx : ndarray (N, L) float64 / int32
    out : ndarray (K, D(D+1)/2) float64, updated in place (vech order of
        :func:`lsdask.kernels.outer_features`)

    Returns
    -------
    out
    """
    N, D = X.shape
    L = resp.shape[1]
    K = out.shape[0]
    keys = np.empty(N * L, dtype=np.int32)
    rows = np.empty(N * L, dtype=np.int64)
    weights = np.empty(N * L, dtype=np.float64)
    n_pairs = 0
    for n in range(N):
        for j in range(L):
            r = resp[n, j]
            if r > 0.0:
                keys[n_pairs] = idx[n, j]
                rows[n_pairs] = n
                weights[n_pairs] = math.sqrt(r)
                n_pairs += 1
    start, order = group_by_key(keys[:n_pairs], K)
    largest = 0
    for k in range(K):
        largest = max(largest, start[k + 1] - start[k])
    Y = np.empty((largest, D), dtype=np.float64)
    for k in range(K):
        m = start[k + 1] - start[k]
        if m == 0:
            continue
        for i in range(m):
            p = order[start[k] + i]
            w = weights[p]
            src = X[rows[p]]
            for d in range(D):
                Y[i, d] = w * src[d]
        Yk = Y[:m]
        S = np.dot(Yk.T, Yk)
        v = 0
        for a in range(D):
            for b in range(a, D):
                out[k, v] += S[a, b]
                v += 1
    return out


def dense_weighted_rows(rows: np.ndarray, R: np.ndarray, out: np.ndarray) -> np.ndarray:
    """Dense twin of :func:`sparse_weighted_rows`: ``out += R.T @ rows``.

    One BLAS ``gemm`` with ``beta = 1`` writes into ``out`` directly: a block of
    K x D(D+1)/2 second moments makes no (K, M) temporary, which in a Dask
    worker (small ``MALLOC_TRIM_THRESHOLD_``) would be fresh pages every block.
    """
    if rows.shape[0] == 0:
        return out
    # out.T (M, K) is Fortran-ordered: out.T += rows.T @ R, in place
    res = dgemm(1.0, rows.T, R.T, beta=1.0, c=out.T, trans_b=1, overwrite_c=1)
    if not np.shares_memory(res, out):  # BLAS had to copy (e.g. out not contiguous)
        out[...] = res.T
    return out


@numba.njit(nogil=True, cache=True)
def sparse_weighted_csr_rows(indptr, indices, data, resp, idx, out):
    """Word-count statistics ``out[k, v] += sum_n r_nk x_nv`` for CSR rows.

    Parameters
    ----------
    indptr, indices, data : CSR arrays of an (N, V) count matrix.
    resp, idx : ndarray (N, L)
    out : ndarray (K, V) float64, updated in place

    Returns
    -------
    out
    """
    N, L = resp.shape
    for n in range(N):
        for j in range(L):
            r = resp[n, j]
            k = idx[n, j]
            for p in range(indptr[n], indptr[n + 1]):
                out[k, indices[p]] += r * data[p]
    return out


@numba.njit(nogil=True, cache=True)
def dense_weighted_csr_rows(indptr, indices, data, R, out):
    """Dense twin of :func:`sparse_weighted_csr_rows`: all K clusters per row."""
    N, K = R.shape
    for n in range(N):
        for p in range(indptr[n], indptr[n + 1]):
            v = indices[p]
            c = data[p]
            for k in range(K):
                out[k, v] += R[n, k] * c
    return out


@numba.njit(nogil=True, cache=True)
def sparse_to_dense(resp, idx, K):
    """Scatter L-sparse responsibilities into a dense (N, K) array."""
    N, L = resp.shape
    R = np.zeros((N, K), dtype=np.float64)
    for n in range(N):
        for j in range(L):
            R[n, idx[n, j]] += resp[n, j]
    return R
