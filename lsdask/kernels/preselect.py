"""Exact top-L responsibilities from cheap, reduced-precision log weights.

A model whose log weights are one big matrix product ``W = F A + c`` can
compute that product in float32 (half the time of float64) if it also gives a
rigorous bound on the error of every entry: ``|W[n, k] - W32[n, k]| <=
s_n t_k``. Then the top L of the exact row lie among the *candidates*

    {k : W32[n, k] + s_n t_k >= tau_n},  tau_n = L-th largest of W32[n, k] - s_n t_k,

because at least L clusters have an exact weight >= tau_n and every other
cluster's exact weight is below it. The candidates (typically L plus a few)
are then weighed exactly in float64 and the top L of those are the top L of
the exact row, with the same tie rule (lower cluster index first): the
result is what :func:`lsdask.kernels.topl_resp_from_log_weights` gives on the
exact weights, at the cost of the float32 product plus a few exact pairs.

The bound for a float32 dot product of length m of float64 vectors f, a
(each rounded to float32 first, then multiplied and summed in any order,
FMA or not) is ``|fl32(f . a) - f . a| <= (gamma_m + 2u + u^2) sum_i |f_i a_i|``
with ``gamma_m = m u / (1 - m u)``, ``u = 2^-24`` (Higham, *Accuracy and
Stability of Numerical Algorithms*, Sec. 3.1), and ``sum_i |f_i a_i| <= |f| |a|``
(Cauchy-Schwarz). Whatever order a BLAS sums in, ``gamma_m`` grows with m, so
:func:`float32_product` splits the M features into blocks of at most
``FLOAT32_BLOCK``, one product per block, and adds the n_b partial products:
the error is then within ``gamma_{m_b + n_b - 1}`` instead of ``gamma_M``, at
about the same cost. A tighter bound leaves fewer weights within reach of the
top L, so fewer candidates need their exact weights; see
:func:`float32_dot_error_factor`.

That relative bound holds while nothing underflows. Below 2^-126 float32 is
subnormal and a rounding (of an input, or of a product) errs by up to
``eta = 2^-150`` absolutely, whatever the size of the value: at most
``eta (|a_i| + |f_i|)`` per term from the inputs and ``eta`` per product (sums
of subnormals are exact), at most doubled by the summation's relative error,
so ``2 eta (sqrt(m) (|f| + |a|) + 2 m)`` is added to the bound
(:func:`float32_underflow_error`; Higham Sec. 2.1).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from lsdask.kernels.grouping import group_by_key
from lsdask.kernels.topl import _select, _topl_resp_row

FLOAT32_UNIT_ROUNDOFF = 2.0**-24

#: the absolute error of a float32 rounding in the subnormal range
FLOAT32_UNDERFLOW = 2.0**-150

# 8 float64 roundings: the candidates' margin also covers the float64 arithmetic
# of the approximate weight and its offset
_F64_SLACK = 8.0 * 2.0**-53

#: longest stretch of features summed by one float32 product (see the module doc)
FLOAT32_BLOCK = 256


def float32_blocks(M: int) -> np.ndarray:
    """Edges of the feature blocks of :func:`float32_product`: equal blocks of
    at most ``FLOAT32_BLOCK``."""
    n_blocks = max(1, -(-M // FLOAT32_BLOCK))
    return np.linspace(0, M, n_blocks + 1).round().astype(np.int64)


def float32_dot_error_factor(edges: np.ndarray) -> float:
    """``g`` with ``|float32_product(f, a) - f . a| <= g |f|_2 |a|_2`` for float64
    vectors rounded to float32, each block multiplied-and-summed in float32
    in any order and the block sums added in float32; 1% added for the
    rounding of the norms and of the bound itself."""
    u = FLOAT32_UNIT_ROUNDOFF
    n = int(np.diff(edges).max()) + len(edges) - 2  # m_b + n_b - 1
    if n * u >= 0.5:
        raise ValueError(f"blocks of {n} terms are too long for a float32 error bound")
    return 1.01 * (n * u / (1.0 - n * u) + 2.0 * u + u * u)


def float32_underflow_error(M: int, f_norm: float, a_norm: float) -> float:
    """The absolute term of the bound of :func:`float32_product` for length-M
    vectors of norms at most ``f_norm`` and ``a_norm`` (see the module doc)."""
    return 2.0 * FLOAT32_UNDERFLOW * (math.sqrt(M) * (f_norm + a_norm) + 2.0 * M)


def float32_product(F, coef_blocks, edges, out, scratch):
    """``out = F @ coef`` in float32, block of features by block (``coef_blocks[b]``
    holds rows ``edges[b]:edges[b + 1]`` of coef): the product whose error
    :func:`float32_dot_error_factor` bounds. ``scratch`` is like ``out``."""
    np.matmul(F[:, edges[0] : edges[1]], coef_blocks[0], out=out)
    for b in range(1, len(coef_blocks)):
        np.matmul(F[:, edges[b] : edges[b + 1]], coef_blocks[b], out=scratch)
        out += scratch
    return out


@numba.njit(nogil=True, cache=True)
def bounded_candidates(W_low, offset, row_err, col_err, abs_err, L):
    """Candidate clusters of every row for an exact top L.

    Parameters
    ----------
    W_low : ndarray (N, K) float32 (or float64): the approximate product part
    offset : ndarray (K,) float64, added exactly: the approximate weight is
        ``W_low[n, k] + offset[k]``
    row_err, col_err : ndarray (N,), (K,) float64, abs_err : float: the error
        of entry (n, k) is at most ``row_err[n] * col_err[k] + abs_err`` (the
        kernel adds a few float64 roundings of the weight and the offset to it,
        for its own float64 arithmetic and the caller's)
    L : int, 1 <= L <= K

    Returns
    -------
    indptr : int64 (N + 1,), cand : int32 (indptr[N],): row n's candidates are
    ``cand[indptr[n]:indptr[n + 1]]``, increasing, at least L of them. A row
    with a non-finite weight or bound takes all K clusters.
    """
    N, K = W_low.shape
    approx = np.empty(K)
    margin = np.empty(K)
    lower = np.empty(K)
    top = np.empty(L, dtype=np.int32)
    indptr = np.zeros(N + 1, dtype=np.int64)
    buf = np.empty(N * K, dtype=np.int32)  # room for every cluster of every row
    p = 0
    for n in range(N):
        s = row_err[n]
        finite = True
        for k in range(K):
            approx[k] = np.float64(W_low[n, k]) + offset[k]
            margin[k] = s * col_err[k] + abs_err + _F64_SLACK * (abs(approx[k]) + abs(offset[k]))
            lower[k] = approx[k] - margin[k]
            finite = finite and math.isfinite(lower[k])
        t = -np.inf  # a non-finite row: every cluster
        if finite:
            _select(lower, L, top)
            t = lower[top[L - 1]]
        for k in range(K):
            if t == -np.inf or approx[k] + margin[k] >= t:
                buf[p] = k
                p += 1
        indptr[n + 1] = p
    return indptr, buf[:p].copy()


def stack_candidates(parts: list) -> tuple[np.ndarray, np.ndarray]:
    """One ``(indptr, cand)`` for a batch from those of its blocks, in order."""
    counts = [np.zeros(1, dtype=np.int64)] + [np.diff(indptr) for indptr, _ in parts]
    cands = [cand for _, cand in parts] or [np.zeros(0, dtype=np.int32)]
    return np.cumsum(np.concatenate(counts)), np.concatenate(cands)


@numba.njit(nogil=True, cache=True)
def topl_resp_from_candidates(indptr, cand, exact, L):
    """:func:`lsdask.kernels.topl_resp_from_log_weights` of rows given by their
    candidates: ``exact[p]`` is the exact weight of cluster ``cand[p]``.

    Returns ``(resp, idx)``, both (N, L); each row's candidates must be
    increasing and at least L (as :func:`bounded_candidates` makes them).
    """
    N = indptr.shape[0] - 1
    resp = np.empty((N, L), dtype=np.float64)
    idx = np.empty((N, L), dtype=np.int32)
    pos = np.empty(L, dtype=np.int32)
    for n in range(N):
        lo = indptr[n]
        _topl_resp_row(exact[lo : indptr[n + 1]], L, resp[n], pos)
        for j in range(L):
            idx[n, j] = cand[lo + pos[j]]
    return resp, idx


@numba.njit(nogil=True, cache=True)
def pair_quadratic_forms(X, A, centers, indptr, cand, out):
    """``out[p] = (x_n - c_k)^T A[k] (x_n - c_k)``, ``k = cand[p]``, for every
    candidate p of row n, grouped by cluster: one BLAS product per cluster.

    X : (N, D) float64; A : (K, D, D) float64 symmetric; centers : (K, D)
    float64 (zeros for plain quadratic forms); out : (indptr[N],).
    """
    N, D = X.shape
    K = A.shape[0]
    rows = np.empty(cand.shape[0], dtype=np.int64)
    for n in range(N):
        for p in range(indptr[n], indptr[n + 1]):
            rows[p] = n
    start, order = group_by_key(cand, K)
    largest = 0
    for k in range(K):
        largest = max(largest, start[k + 1] - start[k])
    Y = np.empty((largest, D), dtype=np.float64)
    Z = np.empty((largest, D), dtype=np.float64)  # one buffer: no fresh pages per cluster
    for k in range(K):
        m = start[k + 1] - start[k]
        if m == 0:
            continue
        c = centers[k]
        for i in range(m):
            src = X[rows[order[start[k] + i]]]
            for d in range(D):
                Y[i, d] = src[d] - c[d]
        np.dot(Y[:m], A[k], Z[:m])
        for i in range(m):
            q = 0.0
            for d in range(D):
                q += Z[i, d] * Y[i, d]
            out[order[start[k] + i]] = q
    return out
