"""One sweep of collapsed Gibbs sampling for LDA (Griffiths & Steyvers 2004).

Every token ``i`` of document ``d`` with word ``w`` and topic ``z_i`` is
taken out of the counts and drawn again from

    p(z_i = k | rest) ∝ (n_dk + a) (n_wk + eta) / (n_k + V eta),

then put back (the reciprocals ``1 / (n_k + V eta)`` are kept, so a weight
costs multiplies only). The counts are integers: ``ndk`` (documents x K), ``nwk``
(V x K, so that one word's topics are contiguous) and ``nk`` (K,). The draws
use the caller's uniforms, one per token, so a sweep is a pure function of
its inputs and can be checked against a plain reference.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True)
def gibbs_sweep(doc_ptr, words, z, ndk, nwk, nk, a, eta, uniforms):
    """Resample every token's topic once, in document order, in place.

    Parameters
    ----------
    doc_ptr : int64 (n_docs + 1,); tokens of document d are ``doc_ptr[d]:doc_ptr[d + 1]``
    words : int32 (n_tokens,) word ids; z : int32 (n_tokens,) topics
    ndk : int32 (n_docs, K); nwk : int32 (V, K); nk : int64 (K,)
    a : float, alpha / K; eta : float
    uniforms : float64 (n_tokens,) in [0, 1)
    """
    K = nk.shape[0]
    V_eta = nwk.shape[0] * eta
    inverse = np.empty(K)  # 1 / (n_k + V eta), kept current: a multiply per topic, not a divide
    for j in range(K):
        inverse[j] = 1.0 / (nk[j] + V_eta)
    cumulative = np.empty(K)
    for d in range(doc_ptr.shape[0] - 1):
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            w = words[i]
            k = z[i]
            ndk[d, k] -= 1
            nwk[w, k] -= 1
            nk[k] -= 1
            inverse[k] = 1.0 / (nk[k] + V_eta)
            total = 0.0
            for j in range(K):
                total += (ndk[d, j] + a) * (nwk[w, j] + eta) * inverse[j]
                cumulative[j] = total
            target = uniforms[i] * total
            k = 0
            while k < K - 1 and cumulative[k] <= target:
                k += 1
            z[i] = k
            ndk[d, k] += 1
            nwk[w, k] += 1
            nk[k] += 1
            inverse[k] = 1.0 / (nk[k] + V_eta)
