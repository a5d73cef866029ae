"""Per-row features that turn quadratic forms into one BLAS product.

``vech(x x^T)`` lists the upper triangle (diagonal included) of the outer
product row by row: ``x_0 x_0, x_0 x_1, ..., x_0 x_{D-1}, x_1 x_1, ...``. With
``a = vech(A)`` whose off-diagonal entries are doubled,
``x^T A x = vech(x x^T) . a``, so all N x K Mahalanobis terms are a single
(N, D(D+1)/2) x (D(D+1)/2, K) matrix product.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def outer_features(X):
    """``vech(x_n x_n^T)`` for every row. X (N, D) -> (N, D(D+1)/2) float64."""
    N, D = X.shape
    return outer_features_into(X, np.empty((N, D * (D + 1) // 2), dtype=np.float64))


@numba.njit(nogil=True, cache=True)
def outer_features_into(X, F):
    """:func:`outer_features` written into ``F`` (N, D(D+1)/2); returns F."""
    N, D = X.shape
    for n in range(N):
        base = 0
        for i in range(D):
            xi = X[n, i]
            out = F[n, base : base + D - i]  # slices on both sides: LLVM vectorizes
            tail = X[n, i:]  # the loop (not so with F[n, m] and a running counter)
            for j in range(D - i):
                out[j] = xi * tail[j]
            base += D - i
    return F


@numba.njit(nogil=True, cache=True)
def unpack_symmetric(V, D):
    """Inverse of vech for a stack: V (K, D(D+1)/2) -> (K, D, D) symmetric."""
    K = V.shape[0]
    out = np.empty((K, D, D), dtype=np.float64)
    for k in range(K):
        m = 0
        for i in range(D):
            for j in range(i, D):
                out[k, i, j] = V[k, m]
                out[k, j, i] = V[k, m]
                m += 1
    return out


def pack_quadratic(A: np.ndarray) -> np.ndarray:
    """Coefficients ``a`` with ``vech(x x^T) . a = x^T A x`` for a stack (K, D, D)."""
    D = A.shape[-1]
    iu, ju = np.triu_indices(D)
    coef = A[:, iu, ju] * np.where(iu == ju, 1.0, 2.0)
    return np.ascontiguousarray(coef)


def unpack_quadratic(coef: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_quadratic`, exactly (the halving is exact in binary):
    coef (K, D(D+1)/2) -> (K, D, D) symmetric."""
    M = coef.shape[-1]
    D = (math.isqrt(8 * M + 1) - 1) // 2
    if D * (D + 1) // 2 != M:
        raise ValueError(f"expected D(D+1)/2 coefficients per row; got {M}")
    iu, ju = np.triu_indices(D)
    halved = np.ascontiguousarray(coef * np.where(iu == ju, 1.0, 0.5))
    return unpack_symmetric(halved, D)


@numba.njit(nogil=True, cache=True)
def csr_matmul(indptr, indices, data, B):
    """``X @ B`` for a CSR matrix X (N, V) and a dense B (V, K) -> (N, K) float64."""
    N = indptr.shape[0] - 1
    K = B.shape[1]
    out = np.zeros((N, K), dtype=np.float64)
    for n in range(N):
        for p in range(indptr[n], indptr[n + 1]):
            row = B[indices[p]]
            c = data[p]
            for k in range(K):
                out[n, k] += c * row[k]
    return out
