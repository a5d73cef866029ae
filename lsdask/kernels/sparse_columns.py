"""(K, V) matrices that are mostly one value: their other entries, by row and by column.

A topic model's posterior ``lambda`` (K x V) equals the prior ``eta`` wherever
no token of word v was ever given to topic k; with the L-sparse local step
that is most entries. These
kernels find the other entries without building the (K, V) array (by row,
in the order the driver sums them), group them by column (word) so that a
batch can rebuild just the rows of its own vocabulary, and let the
transcendental functions of a sum over all K x V entries (digamma, lgamma)
be evaluated once per stored entry, not K x V times.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def entries_unequal_to(A, shift, b):
    """The entries of ``shift + A`` (K, V) that differ from ``b``, by row.

    Returns ``(row_ptr, cols, values)``: row k's entries are ``shift + A[k,
    cols[q]] = values[q]`` for ``q in row_ptr[k]:row_ptr[k + 1]``, columns
    increasing (CSR). Two passes over A, allocating nothing of its size: with
    ``A`` the statistics and ``shift = b`` the prior, these are the entries of
    the posterior concentrations ``b + A`` that are not the prior, without
    building that (K, V) array. NaN differs from everything, so it is kept.
    """
    K, V = A.shape
    row_ptr = np.zeros(K + 1, dtype=np.int64)
    for k in range(K):
        n = 0
        for v in range(V):
            n += shift + A[k, v] != b
        row_ptr[k + 1] = row_ptr[k] + n
    nnz = row_ptr[K]
    cols = np.empty(nnz, dtype=np.int32)
    values = np.empty(nnz)
    q = 0
    for k in range(K):
        for v in range(V):
            x = shift + A[k, v]
            if x != b:
                cols[q] = v
                values[q] = x
                q += 1
    return row_ptr, cols, values


@numba.njit(nogil=True, cache=True)
def rows_to_columns(row_ptr, cols, V):
    """The same entries grouped by column: ``(indptr, rows, position)``, where
    row-major entry q lands at ``position[q]`` of the column-grouped list, whose
    column v is ``indptr[v]:indptr[v + 1]`` with rows increasing."""
    K = row_ptr.shape[0] - 1
    nnz = cols.shape[0]
    indptr = np.zeros(V + 1, dtype=np.int64)
    for q in range(nnz):
        indptr[cols[q] + 1] += 1
    for v in range(V):
        indptr[v + 1] += indptr[v]
    fill = indptr[:V].copy()
    rows = np.empty(nnz, dtype=np.int32)
    position = np.empty(nnz, dtype=np.int64)
    for k in range(K):
        for q in range(row_ptr[k], row_ptr[k + 1]):
            p = fill[cols[q]]
            fill[cols[q]] = p + 1
            rows[p] = k
            position[q] = p
    return indptr, rows, position


@numba.njit(nogil=True, cache=True)
def row_sums_at_entries(row_ptr, cols, weights, A):
    """Per row k of ``A`` (K, V): the sum of the whole row, the sum over the
    stored columns ``cols[row_ptr[k]:row_ptr[k + 1]]``, and the sum of
    ``A * weights`` there. Reads A row by row, in order."""
    K, V = A.shape
    total = np.zeros(K)
    at = np.zeros(K)
    weighted = np.zeros(K)
    for k in range(K):
        s = 0.0
        for v in range(V):
            s += A[k, v]
        total[k] = s
        s_at = 0.0
        s_w = 0.0
        for q in range(row_ptr[k], row_ptr[k + 1]):
            x = A[k, cols[q]]
            s_at += x
            s_w += x * weights[q]
        at[k] = s_at
        weighted[k] = s_w
    return total, at, weighted


@numba.njit(nogil=True, cache=True)
def fill_transposed_columns(cols, base, indptr, rows, values, out):
    """``out[i, k]`` = column ``cols[i]`` of the stored matrix, transposed:
    ``values`` where an entry is stored, else ``base[k]``. ``out`` is (len(cols), K)."""
    K = base.shape[0]
    for i in range(cols.shape[0]):
        v = cols[i]
        for k in range(K):
            out[i, k] = base[k]
        for p in range(indptr[v], indptr[v + 1]):
            out[i, rows[p]] = values[p]


@numba.njit(nogil=True, cache=True)
def add_entries(dest, rows, cols, values, sign):
    """In place ``dest[rows, cols] += values`` (sign > 0) or ``-= values``, each
    (row, col) pair at most once: the rounding of numpy's fancy-indexed update."""
    for p in range(values.shape[0]):
        if sign > 0:
            dest[rows[p], cols[p]] += values[p]
        else:
            dest[rows[p], cols[p]] -= values[p]
