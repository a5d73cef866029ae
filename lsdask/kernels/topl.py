"""Top-L selection and responsibilities from log weights (paper Alg. 1).

Given log posterior weights ``W[n, k] = E[log pi_k] + E[log F(x_n | phi_k)]``
(Eq. 5), the dense responsibilities are ``r_n = softmax(W_n)`` and the L-sparse
ones (Eq. 8) keep only the L largest weights of each row and normalize over
them. Ties are broken explicitly: among equal weights the lower cluster index
ranks first, so exactly L indices are always returned, whatever the ties.
"""

from __future__ import annotations

import numba
import numpy as np

from lsdask.config import TOPL_INSERTION_MAX


# numba's stub of njit lacks ``_nrt``, an option numba itself accepts
@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _ranks_ahead(v, k, kept_v, kept_k):
    """Whether weight ``v`` of id ``k`` ranks ahead of a kept ``(kept_v, kept_k)``:
    a larger weight, or an equal one with the lower id."""
    return v > kept_v or (v == kept_v and k < kept_k)


# numba's stub of njit lacks ``_nrt``, an option numba itself accepts
@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _insert_sorted(vals, out, n_kept, L, v, k):
    """Insert weight ``v`` of id ``k`` into the descending buffer ``vals``/``out``
    holding ``n_kept`` of at most L entries; among equal weights the lower id
    stays ahead (ids arriving in increasing order: the earlier one). The caller
    has checked that v ranks. Returns the new ``n_kept``."""
    if n_kept == L:
        pos = L - 1  # the last kept entry drops out
    else:
        pos = n_kept
        n_kept += 1
    while pos > 0 and _ranks_ahead(v, k, vals[pos - 1], out[pos - 1]):
        vals[pos] = vals[pos - 1]
        out[pos] = out[pos - 1]
        pos -= 1
    vals[pos] = v
    out[pos] = k
    return n_kept


@numba.njit(nogil=True, cache=True)
def _select_insertion(w, L, out):
    """Top-L by insertion into a sorted buffer: O(K) for small L.

    ``out`` receives indices in descending weight order. Indices arrive in
    increasing order, so an incoming weight passes a kept one only if strictly
    larger: among ties the earlier (lower) index stays ahead.
    """
    vals = np.empty(L, dtype=np.float64)
    n_kept = 0
    for k in range(w.shape[0]):
        v = w[k]
        if n_kept == L and not (v > vals[L - 1]):
            continue
        n_kept = _insert_sorted(vals, out, n_kept, L, v, k)


@numba.njit(nogil=True, cache=True)
def _select_sort(w, L, out):
    """Top-L by a stable sort of the negated weights (lower index wins ties)."""
    order = np.argsort(-w, kind="mergesort")
    for j in range(L):
        out[j] = order[j]


@numba.njit(nogil=True, cache=True)
def _kth_smallest(w, kth):
    """The ``kth`` smallest (0-based) of ``w`` by a quickselect on a copy (median
    of three pivots, Hoare partition, which steps over runs of equal values);
    ``w`` must hold no NaN."""
    buf = w.copy()
    lo, hi = 0, buf.shape[0] - 1
    while lo < hi:
        a, b, c = buf[lo], buf[(lo + hi) >> 1], buf[hi]
        pivot = max(min(a, b), min(max(a, b), c))
        i, j = lo, hi
        while i <= j:
            while buf[i] < pivot:
                i += 1
            while buf[j] > pivot:
                j -= 1
            if i <= j:
                buf[i], buf[j] = buf[j], buf[i]
                i += 1
                j -= 1
        if kth <= j:
            hi = j
        elif kth >= i:
            lo = i
        else:  # between the two sides every value equals the pivot
            break
    return buf[kth]


@numba.njit(nogil=True, cache=True)
def _select_partition(w, L, out):
    """Top-L in O(K + L log L): the L-th largest weight ``t`` by a selection
    (a quickselect); the ids above ``t`` are kept and sorted (stable, by
    negated weight), then the lowest ids equal to ``t`` follow, already in
    order. The kept set and its order are those of :func:`_select_sort` (among
    equal weights the lower id first); when most weights tie at ``t`` (a
    document's topics outside its few, whose weights underflow to 0) only the
    few above it are sorted. Requires ``L < K`` and no NaN in ``w``
    (:func:`_select` checks)."""
    K = w.shape[0]
    t = _kth_smallest(w, K - L)
    n = 0
    for k in range(K):
        if w[k] > t:
            out[n] = k
            n += 1
    if n <= TOPL_INSERTION_MAX:  # a stable insertion sort, descending
        for i in range(1, n):
            k = out[i]
            v = w[k]
            pos = i
            while pos > 0 and v > w[out[pos - 1]]:
                out[pos] = out[pos - 1]
                pos -= 1
            out[pos] = k
    else:
        neg = np.empty(n, dtype=np.float64)
        above = out[:n].copy()
        for i in range(n):
            neg[i] = -w[above[i]]
        order = np.argsort(neg, kind="mergesort")  # ties keep their increasing ids
        for i in range(n):
            out[i] = above[order[i]]
    for k in range(K):  # the ties at t, lowest ids first (at least one is needed)
        if n == L:
            break
        if w[k] == t:
            out[n] = k
            n += 1


@numba.njit(nogil=True, cache=True)
def _select(w, L, out):
    """Top-L of ``w`` into ``out``, descending, the lower id first among ties:
    insertion for small L, else a selection and a sort of the L kept only (a
    full sort where ``w`` holds NaN, which ranks last, or L = K)."""
    if L <= TOPL_INSERTION_MAX:
        _select_insertion(w, L, out)
        return
    if L < w.shape[0]:
        clean = True
        for k in range(w.shape[0]):
            if w[k] != w[k]:
                clean = False
                break
        if clean:
            _select_partition(w, L, out)
            return
    _select_sort(w, L, out)


# numba's stub of njit lacks ``_nrt``, an option numba itself accepts
@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _select_pruned(table, row, shift, by_shift, n, L, floor, bound, vals, out):
    """Top-L of the weights ``w[k] = table[row, k] + shift[k]`` over the ``n``
    ids ``by_shift[:n]``, which come sorted by ``shift``, largest first; ``out``
    receives ids k in descending weight order, the lower id first among ties
    (so the result is that of :func:`_select` over the ids in increasing order).
    Requires ``L <= n``.

    ``bound`` bounds ``table[row]`` over the ids from above: once
    ``shift[k] + bound`` falls below the weight an id must reach, neither k
    nor any later id (no larger shift) can rank, and the scan stops. ``floor``
    must not exceed the L-th largest weight (``-inf`` when nothing is known):
    weights below it cannot rank. ``vals`` is scratch of length >= L. Raises
    if fewer than L weights reach ``floor`` (an invalid floor, or NaN weights),
    rather than leave ``out`` partly unfilled.

    Compiled without reference counting (``_nrt=False``, as the helpers it
    calls; it allocates nothing): the L-sparse LDA step calls it for every
    token, and taking a table and a row index rather than a row view keeps each
    call free of atomic reference-count updates, which cost about a fifth of
    that step's time.
    """
    n_kept = 0
    cut = floor
    for i in range(n):
        k = by_shift[i]
        if shift[k] + bound < cut:
            break  # rounding is monotone: no later weight reaches cut either
        v = table[row, k] + shift[k]
        if not (v >= cut):
            continue
        if n_kept == L and not _ranks_ahead(v, k, vals[L - 1], out[L - 1]):
            continue
        n_kept = _insert_sorted(vals, out, n_kept, L, v, k)
        if n_kept == L:
            cut = max(cut, vals[L - 1])
    if n_kept < L:
        raise ValueError("top-L selection: fewer than L weights reached the floor")


def select_top_l(w: np.ndarray, L: int) -> np.ndarray:
    """Indices of the ``L`` largest entries of ``w``, in descending order.

    Parameters
    ----------
    w : ndarray of shape (K,), float64
    L : int, 1 <= L <= K

    Returns
    -------
    ndarray of shape (L,), int32. Ties: the lower index ranks first.
    """
    w = np.ascontiguousarray(w, dtype=np.float64)
    out = np.empty(L, dtype=np.int32)
    _select(w, L, out)
    return out


@numba.njit(nogil=True, cache=True)
def topl_resp_from_log_weights(W, L):
    """TOPLRESPFROMWEIGHTS (Alg. 1, right) for every row of ``W``.

    Parameters
    ----------
    W : ndarray (N, K) float64, log weights.
    L : int, 1 <= L <= K.

    Returns
    -------
    resp : ndarray (N, L) float64, each row positive and summing to one.
    idx : ndarray (N, L) int32, cluster of each kept responsibility, in
        descending weight order.
    """
    N = W.shape[0]
    resp = np.empty((N, L), dtype=np.float64)
    idx = np.empty((N, L), dtype=np.int32)
    for n in range(N):
        _topl_resp_row(W[n], L, resp[n], idx[n])
    return resp, idx


@numba.njit(nogil=True, cache=True)
def _topl_resp_row(row, L, resp, idx):
    """One row of :func:`topl_resp_from_log_weights`: ``idx`` gets positions in ``row``."""
    _select(row, L, idx)
    wmax = row[idx[0]]
    total = 0.0
    for j in range(L):
        e = np.exp(row[idx[j]] - wmax)
        resp[j] = e
        total += e
    for j in range(L):
        resp[j] /= total


@numba.njit(nogil=True, cache=True)
def dense_resp_from_log_weights(W):
    """DENSERESPFROMWEIGHTS (Alg. 1, left): a stable row-wise softmax.

    Parameters
    ----------
    W : ndarray (N, K) float64.

    Returns
    -------
    R : ndarray (N, K) float64, rows sum to one.
    """
    N, K = W.shape
    return dense_resp_into(W, np.empty((N, K), dtype=np.float64))


@numba.njit(nogil=True, cache=True)
def dense_resp_into(W, R):
    """:func:`dense_resp_from_log_weights` written into ``R`` (may be ``W`` itself)."""
    N, K = W.shape
    for n in range(N):
        wmax = W[n, 0]
        for k in range(1, K):
            if W[n, k] > wmax:
                wmax = W[n, k]
        total = 0.0
        for k in range(K):
            e = np.exp(W[n, k] - wmax)
            R[n, k] = e
            total += e
        for k in range(K):
            R[n, k] /= total
    return R
