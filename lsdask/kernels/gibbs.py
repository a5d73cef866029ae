"""One sweep of collapsed Gibbs sampling for LDA, with sparse per-token work.

Every token ``i`` of document ``d`` with word ``w`` and topic ``z_i`` is
taken out of the counts and drawn again from (Griffiths & Steyvers 2004)

    p(z_i = k | rest) ∝ (n_dk + a) (n_wk + eta) / (n_k + V eta),

then put back. The weight splits in two buckets (SparseLDA, Yao, Mimno & McCallum
2009, splits it in three; two pay when ``a`` is small, as LDA's alpha / K):

    document bucket  n_dk (n_wk + eta) / (n_k + V eta)   nonzero only on the
                     document's own topics, summed exactly per token;
    prior bucket     a (n_wk + eta) / (n_k + V eta)        over all K topics,
                     bounded above by
                     ``a (n_w / (min_k n_k + V eta) + eta sum_k 1 / (n_k + V eta))``
                     (``n_w``: the word's count without the token; the sum is
                     kept current as the counts change).

A token's one uniform ``u`` is spread over ``D + bound`` (``D`` the document
bucket's total). Below ``D`` it picks a document topic, which costs the
document's active topics only. Otherwise the prior bucket's total ``B`` is
computed (O(K)) and the rest of ``u`` decides between the two buckets so
that, over ``u``, the document bucket is chosen with probability exactly
``D / (D + B)`` and each topic with exactly its weight: the draw is exact,
with no rejection, and the O(K) part runs only on a fraction about
``bound / (D + bound)`` of the tokens: small for LDA's alpha / K, more when
``a`` is large or a topic is empty (the bound's ``min_k n_k`` is then 0).

The counts are integers: ``ndk`` (documents x K), ``nwk`` (V x K, one word's
topics contiguous), ``nk`` (K,); ``word_total`` (V,) holds each word's number
of tokens (constant while sampling). The draws use the caller's uniforms, one
per token, so a sweep is a pure function of its inputs.
"""

from __future__ import annotations

import numba
import numpy as np

# The prior bucket's bound is widened by this relative margin so that rounding
# in the exact sum can never put it above the bound.
_BOUND_MARGIN = 1e-9


@numba.njit(nogil=True, cache=True, inline="always")
def _invert(cumulative, n, target):
    """First index whose cumulative weight exceeds ``target`` (the last when
    rounding leaves none)."""
    j = 0
    while j < n - 1 and cumulative[j] <= target:
        j += 1
    return j


@numba.njit(nogil=True, cache=True)
def sparse_gibbs_sweep(doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, uniforms):
    """Resample every token's topic once, in document order, in place.

    Parameters
    ----------
    doc_ptr : int64 (n_docs + 1,); tokens of document d are ``doc_ptr[d]:doc_ptr[d + 1]``
    words : int32 (n_tokens,) word ids; z : int32 (n_tokens,) topics
    ndk : int32 (n_docs, K); nwk : int32 (V, K); nk : int64 (K,)
    word_total : int64 (V,), ``nwk.sum(axis=1)``
    a : float, alpha / K; eta : float
    uniforms : float64 (n_tokens,) in [0, 1), token i's at ``uniforms[i]``

    Returns
    -------
    int, how many draws summed the prior bucket over all K topics.
    """
    no_moves = np.empty((3, 0), dtype=np.int32)
    return _sweep(doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, uniforms, 0, no_moves)[0]


@numba.njit(nogil=True, cache=True)
def gibbs_sweep_moves(doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, uniforms, moves):
    """:func:`sparse_gibbs_sweep` over the tokens ``doc_ptr[0]:doc_ptr[-1]``
    (a run of documents; token i's uniform at ``uniforms[i - doc_ptr[0]]``),
    recording every token that changed topic: ``moves[:, j]`` = (word, old
    topic, new topic), j < the number returned. ``moves`` (3, at least the
    run's tokens) int32, or (3, 0) to record nothing. Returns ``(full sums,
    tokens moved)``."""
    n_tokens = doc_ptr[-1] - doc_ptr[0]
    if uniforms.shape[0] < n_tokens:
        raise ValueError("gibbs_sweep_moves: fewer uniforms than the run's tokens")
    if moves.shape[0] != 3 or 0 < moves.shape[1] < n_tokens:
        raise ValueError("gibbs_sweep_moves: moves must be (3, >= the run's tokens) or (3, 0)")
    return _sweep(doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, uniforms, doc_ptr[0], moves)


@numba.njit(nogil=True, cache=True)
def _sweep(doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, uniforms, first, moves):
    """The sweep; token i's uniform is ``uniforms[i - first]``; moves are
    recorded when ``moves`` has room for them (not with a (3, 0) array)."""
    record = moves.shape[1] > 0
    n_moved = 0
    K = nk.shape[0]
    V_eta = nwk.shape[0] * eta
    inverse = np.empty(K)  # 1 / (n_k + V eta), kept current
    inverse_sum = 0.0  # sum_k inverse[k], kept current
    min_nk = nk[0]  # a lower bound of min_k n_k: exact here, lowered when a count drops below it
    for j in range(K):
        inverse[j] = 1.0 / (nk[j] + V_eta)
        inverse_sum += inverse[j]
        min_nk = min(min_nk, nk[j])
    active = np.empty(K, dtype=np.int32)  # the document's topics with n_dk > 0, in any order
    slot = np.zeros(K, dtype=np.int32)  # position of a topic in ``active`` (read only for those)
    doc_cumulative = np.empty(K)
    prior_cumulative = np.empty(K)
    full_sums = 0
    for d in range(doc_ptr.shape[0] - 1):
        n_active = 0
        for k in range(K):
            if ndk[d, k] > 0:
                active[n_active] = k
                slot[k] = n_active
                n_active += 1
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            w = words[i]
            k = z[i]
            ndk[d, k] -= 1
            nwk[w, k] -= 1
            nk[k] -= 1
            inverse_sum -= inverse[k]
            inverse[k] = 1.0 / (nk[k] + V_eta)
            inverse_sum += inverse[k]
            min_nk = min(min_nk, nk[k])
            if ndk[d, k] == 0:  # k leaves the document's topics: the last one takes its place
                last = active[n_active - 1]
                active[slot[k]] = last
                slot[last] = slot[k]
                n_active -= 1
            D = 0.0
            for j in range(n_active):
                t = active[j]
                D += ndk[d, t] * (nwk[w, t] + eta) * inverse[t]
                doc_cumulative[j] = D
            bound = a * ((word_total[w] - 1) / (min_nk + V_eta) + eta * inverse_sum)
            bound *= 1.0 + _BOUND_MARGIN
            u = uniforms[i - first] * (D + bound)
            if u < D:
                k = active[_invert(doc_cumulative, n_active, u)]
            else:
                full_sums += 1
                B = 0.0
                for t in range(K):
                    B += (nwk[w, t] + eta) * inverse[t]
                    prior_cumulative[t] = B
                B_a = a * B
                v = (u - D) / bound  # uniform in [0, 1), given u >= D
                # P(prior | u >= D) that makes P(prior) = B_a / (D + B_a) overall; 1 with no
                # document bucket (D = 0); written so that no product can overflow
                p_prior = 1.0 if n_active == 0 else (B_a / bound) * ((bound + D) / (D + B_a))
                if v < p_prior or n_active == 0:
                    k = _invert(prior_cumulative, K, v / p_prior * B)
                else:
                    target = (v - p_prior) / (1.0 - p_prior) * D
                    k = active[_invert(doc_cumulative, n_active, target)]
            if record and k != z[i]:
                moves[0, n_moved] = w
                moves[1, n_moved] = z[i]
                moves[2, n_moved] = k
                n_moved += 1
            z[i] = k
            ndk[d, k] += 1
            nwk[w, k] += 1
            nk[k] += 1
            inverse_sum -= inverse[k]
            inverse[k] = 1.0 / (nk[k] + V_eta)
            inverse_sum += inverse[k]
            if ndk[d, k] == 1:
                active[n_active] = k
                slot[k] = n_active
                n_active += 1
    return full_sums, n_moved


@numba.njit(nogil=True, cache=True)
def apply_moves(nwk, nk, words, old, new):
    """Move tokens between topics in the counts: token ``i`` (word
    ``words[i]``) leaves topic ``old[i]`` for ``new[i]``."""
    for i in range(words.shape[0]):
        nwk[words[i], old[i]] -= 1
        nwk[words[i], new[i]] += 1
        nk[old[i]] -= 1
        nk[new[i]] += 1
