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
#
# ``a`` is the document-topic prior: a scalar (every topic's a_k) or a K-vector;
# ``a_rest`` the prior of a leftover topic that holds no tokens (0: none).


def _prior(a, K):
    return np.broadcast_to(np.asarray(a, dtype=np.float64), (K,))


def c_dir(theta):
    """c_Dir(theta) = lnGamma(sum theta) - sum lnGamma(theta) (lsparse Eq. 49)."""
    from scipy.special import gammaln

    theta = np.asarray(theta, dtype=np.float64)
    return float(gammaln(theta.sum()) - gammaln(theta).sum())


def _with_rest(theta, a_rest):
    return np.append(theta, a_rest) if a_rest > 0 else np.asarray(theta, dtype=np.float64)


def lda_start_weights(C_rows, a):
    """The start's weights ``C[w_u] + log a_k - max_j log a_j``: the log of the
    prior's mean E[pi_dk] up to a term common to every topic (0 for a uniform prior)."""
    log_a = np.log(_prior(a, C_rows.shape[1]))
    return C_rows + (log_a - log_a.max())[None, :]


def lda_doc_elbo(words, counts, C, R, N, a, a_rest=0.0):
    """sum_u c_u sum_k r (C - log r) + c_Dir(a, a_rest) - c_Dir(N + a, a_rest)."""
    a = _prior(a, C.shape[1])
    with np.errstate(divide="ignore", invalid="ignore"):
        rlogr = np.where(R > 0, R * np.log(np.where(R > 0, R, 1.0)), 0.0)
    value = float((counts[:, None] * (R * C[words] - rlogr)).sum())
    return value + c_dir(_with_rest(a, a_rest)) - c_dir(_with_rest(N + a, a_rest))


def lda_dense_doc(words, counts, C, a, max_iters=100, conv_thresh=0.05, a_rest=0.0):
    """DENSESTEPFORDOC without restarts: returns (R, N, ELBO after each iteration)."""
    from scipy.special import digamma

    a = _prior(a, C.shape[1])
    R = softmax_rows(lda_start_weights(C[words], a))
    N = counts @ R
    trace = [lda_doc_elbo(words, counts, C, R, N, a, a_rest)]
    for _ in range(max_iters):
        R = softmax_rows(C[words] + digamma(N + a)[None, :])
        N_new = counts @ R
        delta = np.abs(N_new - N).max() if N.size else 0.0
        N = N_new
        trace.append(lda_doc_elbo(words, counts, C, R, N, a, a_rest))
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
    active topics (``"few"``). (``a_rest`` cancels in every step.)"""
    from scipy.special import digamma

    U, K = len(words), C.shape[1]
    a = _prior(a, K)
    nL = min(L, K)
    idx = np.zeros((U, L), dtype=np.int64)
    resp = np.zeros((U, L))
    start = lda_start_weights(C[words], a)
    for u in range(U):
        top = top_l(start[u], nL)
        idx[u, :nL] = top
        idx[u, nL:] = top[0]
        e = np.exp(start[u, top] - start[u, top].max())
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
        P[active] = digamma(N[active] + a[active])
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


def lda_prior_stats(doc_topic, a, a_rest=0.0):
    """What a batch gives the prior's fit, from its documents' ``N_d`` (D, K), over
    all K (+ 1) topics: ``S`` (K + 1,) with ``S_k = sum_d psi(theta_dk) - psi(Theta_d)``
    (``S[K]`` the leftover's, 0 without one), ``W = sum_d sum_k (N_dk - theta_dk)
    E[log pi_dk]``, ``Cdir = sum_d c_Dir(theta_d)`` and ``alloc = sum_d c_Dir(a) -
    c_Dir(theta_d)``, at ``theta_d = N_d + a``, ``Theta_d = sum_k theta_dk + a_rest``."""
    from scipy.special import digamma

    doc_topic = np.asarray(doc_topic, dtype=np.float64)
    D, K = doc_topic.shape
    a = _prior(a, K)
    S = np.zeros(K + 1)
    W = Cdir = alloc = 0.0
    for d in range(D):
        theta = _with_rest(doc_topic[d] + a, a_rest)
        elog = digamma(theta) - digamma(theta.sum())
        N = np.append(doc_topic[d], 0.0) if a_rest > 0 else doc_topic[d]
        S[: theta.size] += elog
        W += float(((N - theta) * elog).sum())
        Cdir += c_dir(theta)
        alloc += c_dir(_with_rest(a, a_rest)) - c_dir(theta)
    return S, W, Cdir, alloc


def lda_alloc_at(doc_topic, a, a_rest, a_new, a_rest_new=None):
    """The allocation term (lsparse Eq. 45) at the prior ``a_new`` with every
    ``q(pi_d) = Dir(N_d + a)`` held fixed: ``sum_d c_Dir(a_new) - c_Dir(theta_d) +
    sum_k (N_dk + a_new_k - theta_dk) E[log pi_dk]``."""
    from scipy.special import digamma

    doc_topic = np.asarray(doc_topic, dtype=np.float64)
    K = doc_topic.shape[1]
    a, a_new = _prior(a, K), _prior(a_new, K)
    a_rest_new = a_rest if a_rest_new is None else a_rest_new
    total = 0.0
    for N in doc_topic:
        theta = _with_rest(N + a, a_rest)
        elog = digamma(theta) - digamma(theta.sum())
        prior = _with_rest(a_new, a_rest_new) if a_rest > 0 else a_new
        counts = np.append(N, 0.0) if a_rest > 0 else N
        total += c_dir(prior) - c_dir(theta) + float(((counts + prior - theta) * elog).sum())
    return total


def eq9_weights(view, local_word: int, ndk: np.ndarray) -> np.ndarray:
    """SVI-Gibbs Eq. 9 over all K topics: ``(a_k + n_dk) exp E[log phi_kw]``,
    with exp E[log phi] = exp psi(lambda_kw) / exp psi(sum_w lambda_kw) rebuilt
    densely from the view's entries."""
    return (view.alpha + ndk) * view.dense_weights(local_word)


def plain_draw(u: float, weights: np.ndarray) -> int:
    """The topic ``u`` in [0, 1) picks by a linear scan of the cumulative weights."""
    x = u * weights.sum()
    for k, w in enumerate(weights):
        x -= w
        if x < 0:
            return k
    return int(np.flatnonzero(weights > 0)[-1])


def eq9_pieces(view, local_word: int, ndk: np.ndarray, active: np.ndarray):
    """Eq. 9's weights as (topic, weight) pieces in the buckets' order (word
    entries as stored, the document's topics in ``active`` order, then every
    topic's smoothing weight), computed over all K topics from dense arrays:
    the O(K) sampler laid out as the bucketed one walks it."""
    start, stop = view.w_indptr[local_word], view.w_indptr[local_word + 1]
    topics = list(view.w_topics[start:stop])
    excess = view.w_excess[start:stop]
    weights = [(view.alpha[k] + ndk[k]) * e for k, e in zip(topics, excess, strict=True)]
    topics += list(active)
    weights += [ndk[k] * view.smooth[k] for k in active]
    topics += list(range(ndk.size))
    weights += list(view.alpha * view.smooth)
    return np.array(topics), np.array(weights)


def enumerated_doc_counts(alpha: np.ndarray, phi_w: np.ndarray) -> np.ndarray:
    """E[N_k] under q*(z_d) of SVI-Gibbs Eq. 3 for one document, by enumerating all
    K ** N assignments: ``phi_w`` (N, K) holds exp E[log phi] of each token's word.
    Returns (N, K): the probability of each token's topic."""
    from itertools import product
    from math import lgamma

    N, K = phi_w.shape
    out = np.zeros((N, K))
    total = 0.0
    for z in product(range(K), repeat=N):
        n = np.bincount(z, minlength=K)
        logp = sum(lgamma(alpha[k] + n[k]) - lgamma(alpha[k]) for k in range(K))
        p = np.exp(logp) * np.prod([phi_w[i, z[i]] for i in range(N)])
        total += p
        for i in range(N):
            out[i, z[i]] += p
    return out / total
