"""Slow, obviously correct numpy references for every fast kernel."""

from __future__ import annotations

import numpy as np


def top_l(w: np.ndarray, L: int) -> np.ndarray:
    """Indices of the L largest entries, descending; ties: lower index first."""
    order = sorted(range(len(w)), key=lambda k: (-w[k], k))
    return np.asarray(order[:L], dtype=np.int64)


def softmax_rows(W: np.ndarray) -> np.ndarray:
    out = np.zeros_like(W, dtype=np.float64)
    for n in range(W.shape[0]):
        e = np.exp(W[n] - W[n].max())
        out[n] = e / e.sum()
    return out


def topl_resp(W: np.ndarray, L: int) -> tuple[np.ndarray, np.ndarray]:
    resp = np.zeros((W.shape[0], L))
    idx = np.zeros((W.shape[0], L), dtype=np.int64)
    for n in range(W.shape[0]):
        idx[n] = top_l(W[n], L)
        e = np.exp(W[n, idx[n]] - W[n, idx[n]].max())
        resp[n] = e / e.sum()
    return resp, idx


def densify(resp: np.ndarray, idx: np.ndarray, K: int) -> np.ndarray:
    R = np.zeros((resp.shape[0], K))
    for n in range(resp.shape[0]):
        for j in range(resp.shape[1]):
            R[n, idx[n, j]] += resp[n, j]
    return R


def weighted_rows(rows: np.ndarray, R: np.ndarray) -> np.ndarray:
    """sum_n R[n, k] rows[n] by explicit loops."""
    out = np.zeros((R.shape[1], rows.shape[1]))
    for n in range(rows.shape[0]):
        for k in range(R.shape[1]):
            out[k] += R[n, k] * rows[n]
    return out


def weighted_outer(X: np.ndarray, R: np.ndarray) -> np.ndarray:
    """S_k = sum_n r_nk x_n x_n^T as full (K, D, D) matrices."""
    return np.einsum("nk,ni,nj->kij", R, X, X)


def entropy(R: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.where(R > 0, R * np.log(R), 0.0).sum(axis=0)


def vech_rows(X: np.ndarray) -> np.ndarray:
    D = X.shape[1]
    iu, ju = np.triu_indices(D)
    return np.stack([np.outer(x, x)[iu, ju] for x in X]) if len(X) else np.zeros((0, len(iu)))


# --- LDA local step (lsparse Alg. 2), plain numpy + scipy ---------------------


def lda_doc_elbo(words, counts, C, R, N, a):
    """sum_u c_u sum_k r (C - log r) + c_Dir(a) - c_Dir(N + a)."""
    from scipy.special import gammaln

    K = C.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        rlogr = np.where(R > 0, R * np.log(np.where(R > 0, R, 1.0)), 0.0)
    value = float((counts[:, None] * (R * C[words] - rlogr)).sum())
    prior = gammaln(a * K) - K * gammaln(a)
    post = gammaln(N.sum() + a * K) - gammaln(N + a).sum()
    return value + prior - post


def lda_dense_doc(words, counts, C, a, max_iters=100, conv_thresh=0.05):
    """DENSESTEPFORDOC without restarts: returns (R, N, ELBO after each iteration)."""
    from scipy.special import digamma

    R = softmax_rows(C[words])
    N = counts @ R
    trace = [lda_doc_elbo(words, counts, C, R, N, a)]
    for _ in range(max_iters):
        R = softmax_rows(C[words] + digamma(N + a)[None, :])
        N_new = counts @ R
        delta = np.abs(N_new - N).max() if N.size else 0.0
        N = N_new
        trace.append(lda_doc_elbo(words, counts, C, R, N, a))
        if delta < conv_thresh:
            break
    return R, N, trace


def lda_sparse_doc(words, counts, C, a, L, max_iters=100, conv_thresh=0.05, eps=1e-8, seen=None):
    """LSPARSESTEPFORDOC without restarts, with the selection schedule of
    lsdask.kernels.lda: select every token in iterations 1-5 and every 10th,
    and a token none of whose topics is still active; otherwise reweight the
    topics of each token's last selection, those that left the active set
    weighing 0. ``seen``, a dict, counts the reweightings that met a topic
    gone from the active set (``"gone"``) and the iterations with at most L
    active topics (``"few"``)."""
    from scipy.special import digamma

    U, K = len(words), C.shape[1]
    nL = min(L, K)
    idx = np.zeros((U, L), dtype=np.int64)
    resp = np.zeros((U, L))
    for u in range(U):
        top = top_l(C[words[u]], nL)
        idx[u, :nL] = top
        idx[u, nL:] = top[0]
        e = np.exp(C[words[u], top] - C[words[u], top].max())
        resp[u, :nL] = e / e.sum()
    N = counts @ densify(resp, idx, K)
    active = [k for k in range(K) if N[k] > eps]
    n_slots = np.full(U, nL)
    it, shrank = 0, False
    while it < max_iters and U:
        if not active:  # no topic holds more than eps: no responsibilities, no mass
            resp[:] = 0.0
            N = np.zeros(K)
            break
        it += 1
        P = np.zeros(K)
        P[active] = digamma(N[active] + a)
        nL = min(L, len(active))
        if seen is not None and len(active) <= L:
            seen["few"] = seen.get("few", 0) + 1
        for u in range(U):
            gone = not set(idx[u, : n_slots[u]].tolist()) & set(active)
            if it <= 5 or it % 10 == 0 or gone:
                w = C[words[u], active] + P[active]
                chosen = top_l(w, nL)
                idx[u, :nL] = np.asarray(active)[chosen]
                idx[u, nL:] = idx[u, 0]
                n_slots[u] = nL
            topics = idx[u, : n_slots[u]]
            live = np.isin(topics, active)
            if seen is not None and not live.all():
                seen["gone"] = seen.get("gone", 0) + 1
            w = C[words[u], topics] + P[topics]
            e = np.where(live, np.exp(w - w[live].max()), 0.0)
            resp[u] = 0.0
            resp[u, : n_slots[u]] = e / e.sum()
        N_new = counts @ densify(resp, idx, K)
        delta = max(abs(N_new[k] - N[k]) for k in active)
        N = N_new
        kept = [k for k in active if N[k] > eps]
        shrank = len(kept) < len(active)
        active = kept
        if delta < conv_thresh and not shrank:
            break
    return resp, idx, N
