"""ESVI-LDA token updates against one vocabulary block (esvi paper, Alg. 5, App. C).

A worker's documents are cut by vocabulary block into *pieces*: CSR rows
(``indptr``, block-local word ``cols``, ``counts``) with, per entry (a word
type in a document, standing for its ``c`` tokens), the kept responsibilities
``resp`` (C of them, topics ``idx``) and ``rest``, the mass the paper's TOPK
rule spreads evenly over the other ``K - C`` topics (0 under the L-sparse rule
and at ``C = K``).

One step updates every entry of a piece against a *snapshot*: the documents'
topic counts ``n_d`` (``doc_topic``), the block's ``lambda[v, k]`` (word-major,
one row per word of the block) through ``elog_lam = psi(lambda)`` and the topic
totals through ``psi_pi = psi(sum_v lambda_kv)``::

    u_k = psi(alpha_k + n_dk) + psi(lambda_vk) - psi(pi_k)      (psi(sum gamma) cancels)
    phi = softmax(u)                              C = K
    phi = softmax(u) over the top C, 0 elsewhere  L-sparse rule
    phi_k = softmax(u)_k on the top C, the rest spread evenly  paper's TOPK rule

and writes the change of every entry, ``c (phi_new - phi_old)``, into the
output copies of ``n_d`` and of the block. Reading only the snapshot makes the
step one block coordinate update of the entries (Theorem 1 with the whole
simplex), so it does not depend on the order of the entries.
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
def esvi_block_step(
    indptr, cols, counts, resp, idx, rest, doc_topic, alpha, elog_lam, psi_pi, paper_rule,
    n_iters, new_resp, new_idx, new_rest, doc_topic_out, lam_out,
):  # fmt: skip
    """Update every entry of a piece against the snapshot; returns the piece's
    new entropy ``-sum c phi log phi``.

    With ``n_iters`` > 1, each document's entries are updated ``n_iters`` times
    against the block's snapshot, its counts ``n_d`` written after each pass
    (block coordinate ascent on the entries, then on ``q(pi_d)``); the first
    pass reads the snapshot of ``n_d``. The block receives the change from the
    first pass's input to the last pass's output.

    Parameters
    ----------
    indptr : (n_docs + 1,) int64; cols : (nnz,) int32 block-local words;
    counts : (nnz,) float64
    resp, idx, rest : (nnz, C) float64, (nnz, C) int32, (nnz,) float64, the
        entries' current responsibilities (read only)
    doc_topic : (n_docs, K) float64, ``n_d`` before the step (read only)
    alpha : (K,) float64; elog_lam : (V_b, K) ``psi(lambda)``; psi_pi : (K,)
    paper_rule : bool, spread the left-over mass (paper) or drop it (L-sparse)
    n_iters : int >= 1, passes over each document's entries
    new_resp, new_idx, new_rest : outputs of the shapes of ``resp``, ``idx``, ``rest``
    doc_topic_out : (n_docs, K), a copy of ``doc_topic`` that receives the changes
    lam_out : (V_b, K), a copy of the block's ``lambda`` that receives the changes
    """
    K = alpha.shape[0]
    C = resp.shape[1]
    w = np.empty(K, dtype=np.float64)
    et = np.empty(K, dtype=np.float64)
    order = np.empty(C, dtype=np.int32)
    H = 0.0
    for d in range(indptr.shape[0] - 1):
        lo = indptr[d]
        hi = indptr[d + 1]
        if lo == hi:
            continue
        for it in range(n_iters):
            src = doc_topic if it == 0 else doc_topic_out
            for k in range(K):
                et[k] = digamma(alpha[k] + src[d, k]) - psi_pi[k]
            for j in range(lo, hi):
                v = cols[j]
                c = counts[j]
                for k in range(K):
                    w[k] = et[k] + elog_lam[v, k]
                if it == 0:
                    _add_doc(doc_topic_out[d], resp[j], idx[j], rest[j], -c, K)
                else:
                    _add_doc(doc_topic_out[d], new_resp[j], new_idx[j], new_rest[j], -c, K)
                r = _new_entry(w, C, paper_rule, order, new_resp[j], new_idx[j])
                new_rest[j] = r
                _add_doc(doc_topic_out[d], new_resp[j], new_idx[j], r, c, K)
        for j in range(lo, hi):
            v = cols[j]
            c = counts[j]
            _add_doc(lam_out[v], resp[j], idx[j], rest[j], -c, K)
            _add_doc(lam_out[v], new_resp[j], new_idx[j], new_rest[j], c, K)
            H += c * _entry_entropy(new_resp[j], new_rest[j], K)
    return H


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
