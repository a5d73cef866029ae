"""ESVI-LDA token updates against one vocabulary block (esvi paper, Alg. 5, App. C).

A worker's documents are cut by vocabulary block into *pieces*: CSR rows
(``indptr``, block-local word ``cols``, ``counts``) with, per entry (a word
type in a document, standing for its ``c`` tokens), the kept responsibilities
``resp`` (C of them, topics ``idx``) and ``rest``, the mass the paper's TOPK
rule spreads evenly over the other ``K - C`` topics (0 under the L-sparse rule
and at ``C = K``).

One step updates every entry of a piece against a *snapshot*: the documents'
topic counts ``n_d`` (``doc_topic``), the block's ``lambda[v, k]`` (word-major,
one row per word of the block) and the topic totals through
``psi_pi = psi(sum_v lambda_kv)``::

    u_k = psi(alpha_k + n_dk) + psi(lambda_vk) - psi(pi_k)      (psi(sum gamma) cancels)
    phi = softmax(u)                              C = K
    phi = softmax(u) over the top C, 0 elsewhere  L-sparse rule
    phi_k = softmax(u)_k on the top C, the rest spread evenly  paper's TOPK rule

and adds the change of every entry, ``c (phi_new - phi_old)``, to ``n_d`` and
to the block, in place. Reading only the snapshot makes the step one block
coordinate update of the entries (Theorem 1 with the whole simplex), so it
does not depend on the order of the entries: they are visited document by
document, each document making its own passes (a fixed number, or until its
counts settle), and the block takes the changes only after the last document.
The weights ``exp(u_k)`` are products of a document factor (K exponentials per
document and pass) and a word factor (K per word and sub-step, for the words
the piece uses), so an entry costs K multiplications per pass, not K
exponentials; no copy of the block is made.
"""

from __future__ import annotations

import numba
import numpy as np

from lsdask.kernels.special import digamma
from lsdask.kernels.topl import _select


@numba.njit(nogil=True, cache=True)
def _add_entry(dt, lam_row, resp, idx, rest, scale, K):
    """Add ``scale`` times one entry's responsibilities to a document's counts
    ``dt`` (K,) and to its word's row ``lam_row`` (K,) of the block."""
    C = resp.shape[0]
    if rest > 0.0:
        s = scale * rest / (K - C)
        for k in range(K):
            dt[k] += s
            lam_row[k] += s
        for i in range(C):
            dt[idx[i]] -= s
            lam_row[idx[i]] -= s
    for i in range(C):
        dt[idx[i]] += scale * resp[i]
        lam_row[idx[i]] += scale * resp[i]


@numba.njit(nogil=True, cache=True)
def _entry_entropy(resp, rest, K):
    """``-sum_k phi_k log phi_k`` of one entry (the spread mass included)."""
    C = resp.shape[0]
    h = 0.0
    for i in range(C):
        r = resp[i]
        if r > 0.0:
            h -= r * np.log(r)
    if rest > 0.0:
        h -= rest * np.log(rest / (K - C))
    return h


@numba.njit(nogil=True, cache=True)
def _new_entry(w, C, paper_rule, order, resp, idx):
    """The entry's new responsibilities from its log weights ``w`` (K,); returns ``rest``."""
    K = w.shape[0]
    if C == K:
        for i in range(K):
            order[i] = i
    else:
        _select(w, C, order)
    wmax = w[order[0]]
    for i in range(1, C):
        if w[order[i]] > wmax:
            wmax = w[order[i]]
    kept = 0.0
    for i in range(C):
        e = np.exp(w[order[i]] - wmax)
        resp[i] = e
        idx[i] = order[i]
        kept += e
    total = kept
    if paper_rule and C < K:
        total = 0.0
        for k in range(K):
            total += np.exp(w[k] - wmax)
    for i in range(C):
        resp[i] /= total
    if paper_rule and C < K:
        rest = 1.0
        for i in range(C):
            rest -= resp[i]
        return max(rest, 0.0)
    return 0.0


@numba.njit(nogil=True, cache=True)
def _add_doc(dt, resp, idx, rest, scale, K):
    """Add ``scale`` times one entry's responsibilities to a document's counts ``dt``."""
    C = resp.shape[0]
    if rest > 0.0:
        s = scale * rest / (K - C)
        for k in range(K):
            dt[k] += s
        for i in range(C):
            dt[idx[i]] -= s
    for i in range(C):
        dt[idx[i]] += scale * resp[i]


@numba.njit(nogil=True, cache=True)
def _add_dense(dt, resp, scale):
    """:func:`_add_doc` of an entry that keeps every topic (``C = K``, ``idx`` is
    ``0..K-1``, nothing spread): the same sums in the same order, without the
    indirection, so the loop vectorizes."""
    for k in range(resp.shape[0]):
        dt[k] += scale * resp[k]


@numba.njit(nogil=True, cache=True)
def _word_exps(lam, v, row, out):
    """``out = exp(psi(lambda_v) - max_k psi(lambda_vk))``, word ``v``'s factor of an
    entry's weights (``row``: (K,) float64 scratch)."""
    K = lam.shape[1]
    m = -np.inf
    for k in range(K):
        row[k] = digamma(np.float64(lam[v, k]))
        m = max(m, row[k])
    for k in range(K):
        out[k] = np.exp(row[k] - m)


@numba.njit(nogil=True, cache=True)
def block_word_exps(lam, used, out):
    """``out[u]``: the word factor (:func:`_word_exps`) of the block's word ``v =
    used[u]``, taken once per sub-step (the block does not change within one)."""
    row = np.empty(lam.shape[1], dtype=np.float64)
    for u in range(used.shape[0]):
        _word_exps(lam, used[u], row, out[u])


@numba.njit(nogil=True, cache=True)
def _new_entry_exps(p, C, paper_rule, order, resp, idx):
    """The entry's new responsibilities from its weights ``p`` (K,), ``p_k`` being
    ``exp(u_k)`` up to a common factor; returns ``(rest, ok)``, ``ok`` False when the
    kept weights underflowed (the caller then works in log space)."""
    K = p.shape[0]
    if C == K:  # every topic kept, in topic order
        kept = 0.0
        for k in range(K):
            kept += p[k]
        if not kept > 1e-250:
            return 0.0, False
        inv = 1.0 / kept
        for k in range(K):
            resp[k] = p[k] * inv
        return 0.0, True
    _select(p, C, order)
    kept = 0.0
    for i in range(C):
        kept += p[order[i]]
    if not kept > 1e-250:
        return 0.0, False
    total = kept
    if paper_rule and C < K:
        total = 0.0
        for k in range(K):
            total += p[k]
    inv = 1.0 / total
    for i in range(C):
        resp[i] = p[order[i]] * inv
        idx[i] = order[i]
    if paper_rule and C < K:
        rest = 1.0
        for i in range(C):
            rest -= resp[i]
        return max(rest, 0.0), True
    return 0.0, True


@numba.njit(nogil=True, cache=True)
def _new_entry_support(ps, support, n_s, K, C, paper_rule, order, resp, idx):
    """:func:`_new_entry_exps` (C < K) when only the topics ``support[:n_s]``
    (increasing) have a nonzero document factor: ``ps[i]`` is the weight of
    topic ``support[i]``, every other weight is exactly 0. The same numbers:
    the positive weights all lie in the support and are ranked alike (the
    lower topic first among ties); the kept zeros are the lowest topics of
    weight 0, as a selection over all K ranks them; sums that skip exact zeros
    are the same sums. Costs the support's size and C, not K. Returns
    ``(rest, ok)``; ``ok`` False also where a weight is NaN (the caller then
    takes the dense path)."""
    n_pos = 0
    for i in range(n_s):
        if ps[i] > 0.0:
            n_pos += 1
        elif ps[i] != ps[i]:
            return 0.0, False
    if n_pos == 0:
        return 0.0, False
    m = min(C, n_pos)
    _select(ps[:n_s], m, order)
    kept = 0.0
    for i in range(m):
        kept += ps[order[i]]
    if not kept > 1e-250:
        return 0.0, False
    total = kept
    if paper_rule:
        total = 0.0
        for i in range(n_s):
            total += ps[i]
    inv = 1.0 / total
    for i in range(m):
        resp[i] = ps[order[i]] * inv
        idx[i] = support[order[i]]
    n = m
    at = 0
    for k in range(K):  # the zeros, lowest topics first
        if n == C:
            break
        while at < n_s and support[at] < k:
            at += 1
        if at < n_s and support[at] == k and ps[at] > 0.0:
            continue
        resp[n] = 0.0
        idx[n] = k
        n += 1
    if paper_rule:
        rest = 1.0
        for i in range(C):
            rest -= resp[i]
        return max(rest, 0.0), True
    return 0.0, True


@numba.njit(nogil=True, cache=True)
def esvi_block_update(
    indptr, cols, counts, resp, idx, rest, compact, word_exps, doc_topic, alpha, lam, psi_pi,
    paper_rule, n_iters, tol, new_resp, new_idx, new_rest,
):  # fmt: skip
    """Update every entry of a piece against the snapshot, writing ``n_d`` and the
    block in place; returns ``(entropy -sum c phi log phi, passes)``, ``passes`` the
    passes over documents' entries made in all.

    Each document's entries in the block are updated up to ``n_iters`` times
    against the block's snapshot, ``n_d`` written after each pass (block
    coordinate ascent on the document's entries, then on its ``q(pi_d)``; the
    first pass reads the snapshot of ``n_d``); with ``tol > 0`` a document stops
    as soon as a pass moves none of its counts by ``tol`` or more (``max_k
    |Delta n_dk| < tol``, memoized VI's local step rule), with ``tol = 0`` it
    makes all ``n_iters``. The block and ``pi`` are the sub-step's snapshot for
    every document, so the documents are independent and each runs to its own
    end. The block receives the change from the first pass's input to the last
    pass's output, after the last document.

    An entry's weights ``exp(u_k)`` are the product of a document factor
    ``exp(psi(alpha_k + n_dk) - psi(pi_k))``, taken per document and pass, and a
    word factor taken once per sub-step (:func:`block_word_exps`), each scaled by
    its maximum; a product that underflows is redone in log space. At C < K only
    the topics of nonzero document factor are ranked (:func:`_new_entry_support`:
    the same numbers as ranking all K). The word
    factors come from the table ``word_exps`` or, when it is empty (a table of
    all the piece's words would not fit the memory the caller allows), are
    taken per document for its own entries, once before its passes: the same
    numbers, more digammas, and no array larger than the longest document.

    Parameters
    ----------
    indptr : (n_docs + 1,) int64; cols : (nnz,) int32 block-local words;
    counts : (nnz,) float64
    resp, idx, rest : (nnz, C) float64, (nnz, C) int32, (nnz,) float64, the
        entries' current responsibilities (read only)
    compact : (nnz,) int64, each entry's row in ``word_exps``
    word_exps : (n_used, K), :func:`block_word_exps` of the piece's words, or
        (0, K): the factors are then taken per document (its dtype is kept)
    doc_topic : (n_docs, K) float64, ``n_d``, updated in place
    alpha : (K,) float64; lam : (V_b, K) float64 or float32, the block, updated
        in place; psi_pi : (K,) ``psi(pi)``
    paper_rule : bool, spread the left-over mass (paper) or drop it (L-sparse)
    n_iters : int >= 1, passes over a document's entries at most
    tol : float >= 0, a document's convergence threshold (0: always ``n_iters``)
    new_resp, new_idx, new_rest : outputs of the shapes of ``resp``, ``idx``, ``rest``
    """
    K = alpha.shape[0]
    C = resp.shape[1]
    n_docs = indptr.shape[0] - 1
    nnz = cols.shape[0]
    p = np.empty(K, dtype=np.float64)
    w = np.empty(K, dtype=np.float64)
    et = np.empty(K, dtype=np.float64)
    ed = np.empty(K, dtype=np.float64)
    before = np.empty(K, dtype=np.float64)
    order = np.empty(C, dtype=np.int32)
    support = np.empty(K, dtype=np.int64)
    ps = np.empty(K, dtype=np.float64)
    table = word_exps.shape[0] > 0
    longest = 0
    if not table:
        for d in range(n_docs):
            longest = max(longest, indptr[d + 1] - indptr[d])
    doc_exps = np.empty((longest, K), dtype=word_exps.dtype)
    dense = C == K  # the new responsibilities keep topics 0..K-1 in order, nothing spread
    if dense:
        for j in range(nnz):
            for k in range(K):
                new_idx[j, k] = k
    passes = 0
    for d in range(n_docs):
        lo, hi = indptr[d], indptr[d + 1]
        if lo == hi:
            continue
        dt = doc_topic[d]
        if not table:
            for j in range(lo, hi):
                _word_exps(lam, cols[j], w, doc_exps[j - lo])
        for it in range(n_iters):
            passes += 1
            m = -np.inf
            for k in range(K):
                et[k] = digamma(alpha[k] + dt[k]) - psi_pi[k]
                m = max(m, et[k])
            n_s = 0
            for k in range(K):
                ed[k] = np.exp(et[k] - m)
                before[k] = dt[k]
                if ed[k] > 0.0:
                    support[n_s] = k
                    n_s += 1
            sparse = not dense and n_s < K  # some topics' factors underflowed to 0
            for j in range(lo, hi):
                c = counts[j]
                if it == 0:
                    _add_doc(dt, resp[j], idx[j], rest[j], -c, K)
                elif dense:
                    _add_dense(dt, new_resp[j], -c)
                else:
                    _add_doc(dt, new_resp[j], new_idx[j], new_rest[j], -c, K)
                ew = word_exps[compact[j]] if table else doc_exps[j - lo]
                ok = False
                if sparse:
                    for i in range(n_s):
                        ps[i] = ed[support[i]] * ew[support[i]]
                    r, ok = _new_entry_support(
                        ps, support, n_s, K, C, paper_rule, order, new_resp[j], new_idx[j]
                    )
                if not ok:
                    for k in range(K):
                        p[k] = ed[k] * ew[k]
                    r, ok = _new_entry_exps(p, C, paper_rule, order, new_resp[j], new_idx[j])
                if not ok:
                    v = cols[j]
                    for k in range(K):
                        w[k] = et[k] + digamma(np.float64(lam[v, k]))
                    r = _new_entry(w, C, paper_rule, order, new_resp[j], new_idx[j])
                new_rest[j] = r
                if dense:
                    _add_dense(dt, new_resp[j], c)
                else:
                    _add_doc(dt, new_resp[j], new_idx[j], r, c, K)
            if tol > 0.0:
                moved = 0.0
                for k in range(K):
                    moved = max(moved, abs(dt[k] - before[k]))
                if moved < tol:
                    break
    H = 0.0
    for j in range(nnz):
        v = cols[j]
        c = counts[j]
        _add_doc(lam[v], resp[j], idx[j], rest[j], -c, K)
        if dense:
            _add_dense(lam[v], new_resp[j], c)
        else:
            _add_doc(lam[v], new_resp[j], new_idx[j], new_rest[j], c, K)
        H += c * _entry_entropy(new_resp[j], new_rest[j], K)
    return H, passes


@numba.njit(nogil=True, cache=True)
def esvi_accumulate(indptr, cols, counts, resp, idx, rest, doc_topic_out, words_out):
    """Add a piece's entries into ``doc_topic_out`` (n_docs, K) and ``words_out``
    (rows indexed by ``cols``, K columns); returns the piece's entropy."""
    K = doc_topic_out.shape[1]
    H = 0.0
    for d in range(indptr.shape[0] - 1):
        for j in range(indptr[d], indptr[d + 1]):
            c = counts[j]
            _add_entry(doc_topic_out[d], words_out[cols[j]], resp[j], idx[j], rest[j], c, K)
            H += c * _entry_entropy(resp[j], rest[j], K)
    return H


@numba.njit(nogil=True, cache=True)
def esvi_doc_counts(indptr, counts, resp, idx, rest, doc_topic_out):
    """Add a piece's entries into ``doc_topic_out`` (n_docs, K) only; returns the
    piece's entropy (the words' statistics are summed apart, sparsely)."""
    K = doc_topic_out.shape[1]
    H = 0.0
    for d in range(indptr.shape[0] - 1):
        for j in range(indptr[d], indptr[d + 1]):
            c = counts[j]
            _add_doc(doc_topic_out[d], resp[j], idx[j], rest[j], c, K)
            H += c * _entry_entropy(resp[j], rest[j], K)
    return H
