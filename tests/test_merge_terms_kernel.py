"""The merge terms of ``lda_batch_step_pairs`` against a numpy reference.

The reference runs the per-document steps (``sparse_doc_step``,
``dense_doc_step``: the same iterations the batch kernel runs) to get every
token's responsibilities and ``N_d``, then forms the merged topic's entropy
change, ``E[log pi]`` sum and ``c_Dir`` change with scipy's special functions.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import digamma, gammaln

from lsdask.kernels.lda import dense_doc_step, lda_batch_step, lda_batch_step_pairs, sparse_doc_step


def _topics(rng, K, V):
    lam = 0.1 + rng.gamma(0.05, 20.0, size=(K, V))
    return (digamma(lam) - digamma(lam.sum(1, keepdims=True))).T.copy()


def _docs(rng, V, D):
    docs = []
    for U in rng.integers(0, 15, size=D):
        words = np.sort(rng.choice(V, size=int(U), replace=False)).astype(np.int32)
        docs.append((words, rng.integers(1, 6, size=int(U)).astype(np.float64)))
    return docs


def _pair_arrays(pairs, K):
    pj = np.array([j for j, _ in pairs], dtype=np.int64)
    pk = np.array([k for _, k in pairs], dtype=np.int64)
    pair_map = np.full((K, K), -1, dtype=np.int32)
    for p, (j, k) in enumerate(pairs):
        pair_map[j, k] = pair_map[k, j] = p
    return pair_map, pj, pk


def _reference(docs, C, a, a_rest, L, pairs):
    K = C.shape[1]
    H = np.zeros(len(pairs))
    S = np.zeros(len(pairs))
    Cd = np.zeros(len(pairs))
    for words, counts in docs:
        U = len(words)
        if L <= 0:
            R = np.empty((U, K))
            N, *_ = dense_doc_step(
                words, counts, C, a, a_rest, 100, 0.05, 1e-8, 5, 3, R, np.empty(0)
            )
        else:
            resp, idx = np.empty((U, L)), np.empty((U, L), dtype=np.int32)
            N, *_ = sparse_doc_step(
                words, counts, C, a, a_rest, L, 100, 0.05, 1e-8, 5, 3, resp, idx
            )
            R = np.zeros((U, K))
            for u in range(U):
                for j in range(L):
                    R[u, idx[u, j]] += resp[u, j]
        theta = N + a
        total = theta.sum() + a_rest
        for p, (j, k) in enumerate(pairs):
            rj, rk = R[:, j], R[:, k]
            both = (rj > 0) & (rk > 0)
            t = rj[both] + rk[both]
            H[p] -= np.sum(
                counts[both]
                * (t * np.log(t) - rj[both] * np.log(rj[both]) - rk[both] * np.log(rk[both]))
            )
            S[p] += digamma(theta[j] + theta[k]) - digamma(total)
            Cd[p] += gammaln(theta[j]) + gammaln(theta[k]) - gammaln(theta[j] + theta[k])
    return H, S, Cd


@pytest.mark.parametrize("L", [0, 1, 3, 12])
@pytest.mark.parametrize("a_rest", [0.0, 0.3])
def test_merge_terms_match_reference(L, a_rest):
    rng = np.random.default_rng(7 + L)
    K, V, D = 12, 60, 30
    C = _topics(rng, K, V)
    a = rng.uniform(0.02, 0.5, size=K)
    docs = _docs(rng, V, D)
    pairs = [(0, 1), (2, 7), (11, 3), (4, 5), (6, 9)]
    pair_map, pj, pk = _pair_arrays(pairs, K)
    indptr = np.concatenate([[0], np.cumsum([len(w) for w, _ in docs])]).astype(np.int64)
    words = np.concatenate([w for w, _ in docs]).astype(np.int32)
    counts = np.concatenate([c for _, c in docs])
    out = np.zeros((K, V))
    doc_topic, S = np.zeros((D, K)), np.zeros(K + 1)
    H, S_pair, C_pair = np.full(5, 9.0), np.full(5, 9.0), np.full(5, 9.0)
    lda_batch_step_pairs(
        indptr, words, counts, C, a, a_rest, L, 100, 0.05, 1e-8, 5, 3, out, doc_topic, S,
        pair_map, pj, pk, H, S_pair, C_pair,
    )  # fmt: skip
    ref_H, ref_S, ref_C = _reference(docs, C, a, a_rest, L, pairs)
    np.testing.assert_allclose(H, ref_H, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(S_pair, ref_S, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(C_pair, ref_C, rtol=1e-9, atol=1e-9)
    assert (H <= 1e-12).all()  # merging never adds entropy
    # the statistics themselves are those of the plain kernel
    out2, doc_topic2, S2 = np.zeros((K, V)), np.zeros((D, K)), np.zeros(K + 1)
    plain = lda_batch_step(
        indptr, words, counts, C, a, a_rest, L, 100, 0.05, 1e-8, 5, 3, out2, doc_topic2, S2
    )
    np.testing.assert_array_equal(out, out2)
    np.testing.assert_array_equal(S, S2)
    np.testing.assert_array_equal(doc_topic, doc_topic2)
    assert plain[0] == pytest.approx(
        lda_batch_step_pairs(
            indptr, words, counts, C, a, a_rest, L, 100, 0.05, 1e-8, 5, 3, out, doc_topic, S,
            pair_map, pj, pk, H, S_pair, C_pair,
        )[0], rel=1e-14,
    )  # fmt: skip
