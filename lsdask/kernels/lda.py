"""The LDA local step for one batch of documents (lsparse Alg. 2, App. D).

Each document is a list of U unique word types ``w_u`` with counts ``c_u``.
Given topic log-probabilities ``C[w, k] = E[log phi_kw]`` (rows for the
batch's own vocabulary) and the document-topic prior ``a = alpha / K``, the
local step alternates

    N_dk = sum_u c_u r_uk,   P_dk = psi(N_dk + a),
    r_u = RESP(C[w_u] + P_d)            (dense softmax, or top-L),

from ``r_u = RESP(C[w_u])`` (uniform document-topic probabilities), until
``max_k |Delta N_dk| < conv_thresh`` or ``max_iters``. The L-sparse step keeps
an active set ``A_d = {k : N_dk > eps}`` and works over it only; it selects
each token's top L afresh in the first 5 iterations and every 10th, and
otherwise reweights the topics of the token's last selection, a topic that
left the active set weighing 0 (App. D.3: its mass never rises again).
Restart proposals (lsparse Sec. 5; Hughes et al. 2015) then try removing
active topics in turn, smallest mass first, up to ``restarts`` proposals per
document: the topic's mass is dropped, ``restart_iters`` iterations run, and
the proposal is kept only if the document's ELBO

    L_d = sum_u c_u sum_k r_uk (C[w_u, k] - log r_uk)
          + c_Dir(a 1_K) - c_Dir(N_d + a)

improves. Everything here is serial and ``nogil``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from lsdask.config import TOPL_INSERTION_MAX
from lsdask.kernels.special import digamma
from lsdask.kernels.topl import _select, _select_pruned


@numba.njit(nogil=True, cache=True)
def _log_norm_prior(a, K):
    return math.lgamma(a * K) - K * math.lgamma(a)


@numba.njit(nogil=True, cache=True)
def _log_norm_doc(N, a, active, n_active, K):
    """c_Dir(N + a) using only the active topics (the rest hold N = 0)."""
    total = a * K
    s = (K - n_active) * math.lgamma(a)
    for j in range(n_active):
        k = active[j]
        total += N[k]
        s += math.lgamma(N[k] + a)
    return math.lgamma(total) - s


@numba.njit(nogil=True, cache=True)
def _log_norm_doc_dense(N, a, K):
    """c_Dir(N + a) over all K topics, one lgamma per nonzero N_k."""
    total = a * K
    s = 0.0
    n_zero = 0
    for k in range(K):
        if N[k] == 0.0:
            n_zero += 1
        else:
            total += N[k]
            s += math.lgamma(N[k] + a)
    return math.lgamma(total) - (s + n_zero * math.lgamma(a))


@numba.njit(nogil=True, cache=True)
def _sparse_doc_elbo(words, counts, C, resp, idx, N, a, active, n_active, K):
    value = 0.0
    for u in range(words.shape[0]):
        w = words[u]
        for j in range(resp.shape[1]):
            r = resp[u, j]
            if r > 0.0:
                value += counts[u] * r * (C[w, idx[u, j]] - math.log(r))
    return value + _log_norm_prior(a, K) - _log_norm_doc(N, a, active, n_active, K)


@numba.njit(nogil=True, cache=True)
def _dense_doc_elbo(words, counts, C, R, N, a, K):
    value = 0.0
    for u in range(words.shape[0]):
        row = C[words[u]]
        for k in range(K):
            r = R[u, k]
            if r > 0.0:
                value += counts[u] * r * (row[k] - math.log(r))
    total = a * K
    s = 0.0
    for k in range(K):
        total += N[k]
        s += math.lgamma(N[k] + a)
    return value + _log_norm_prior(a, K) - (math.lgamma(total) - s)


# rows of C spanning more than this many nats take the exact log-space path
# (below it, exp(C - max C) * exp(P - max P) can neither underflow to an all-zero
# row nor lose a responsibility larger than ~1e-260)
_PRODUCT_MAX_SPREAD = 600.0


@numba.njit(nogil=True, cache=True)
def _exp_rows(words, C, E, exact):
    """``E[u] = exp(C[w_u] - max C[w_u])``; ``exact[u]`` where the row spreads too far."""
    K = C.shape[1]
    for u in range(words.shape[0]):
        row = C[words[u]]
        hi = row[0]
        lo = row[0]
        for k in range(1, K):
            hi = max(hi, row[k])
            lo = min(lo, row[k])
        exact[u] = not (hi - lo <= _PRODUCT_MAX_SPREAD)  # also catches -inf and nan
        for k in range(K):
            E[u, k] = math.exp(row[k] - hi)


@numba.njit(nogil=True, cache=True)
def _dense_iterations(words, counts, C, E, exact, a, max_iters, conv_thresh, R, N, trace):
    """Dense iterations in place from document-topic counts N; returns iterations run.

    ``exp(C[w] + P) = exp(C[w]) * exp(P)``: with ``E`` from ``_exp_rows`` an
    iteration costs K exponentials plus a multiply per (word, topic), not an
    exponential per (word, topic); rows flagged ``exact`` use the log-space softmax.
    ``trace[i]`` receives the document ELBO after iteration i (if long enough).
    """
    U = words.shape[0]
    K = C.shape[1]
    P = np.empty(K)
    eP = np.empty(K)
    W = np.empty(K)
    N_new = np.empty(K)
    it = 0
    while it < max_iters:
        it += 1
        pmax = -np.inf
        for k in range(K):
            P[k] = digamma(N[k] + a)
            pmax = max(pmax, P[k])
        for k in range(K):
            eP[k] = math.exp(P[k] - pmax)
            N_new[k] = 0.0
        for u in range(U):
            c = counts[u]
            if exact[u]:
                row = C[words[u]]
                wmax = -np.inf
                for k in range(K):
                    W[k] = row[k] + P[k]
                    wmax = max(wmax, W[k])
                s = 0.0
                for k in range(K):
                    R[u, k] = math.exp(W[k] - wmax)
                    s += R[u, k]
            else:
                s = 0.0
                for k in range(K):
                    R[u, k] = E[u, k] * eP[k]
                    s += R[u, k]
            inv = 1.0 / s
            for k in range(K):
                R[u, k] *= inv
                N_new[k] += c * R[u, k]
        delta = 0.0
        for k in range(K):
            delta = max(delta, abs(N_new[k] - N[k]))
            N[k] = N_new[k]
        if it < trace.shape[0]:
            trace[it] = _dense_doc_elbo(words, counts, C, R, N, a, K)
        if delta < conv_thresh:
            break
    return it


@numba.njit(nogil=True, cache=True)
def dense_doc_step(
    words, counts, C, a, max_iters, conv_thresh, eps, restarts, restart_iters, R, trace
):
    """DENSESTEPFORDOC with restart proposals: dense responsibilities ``R`` (U, K).

    ``trace`` receives the document ELBO after the initialization (index 0)
    and after every iteration of the main run, as far as it is long (pass an
    empty array to skip that work). Returns
    ``(N_d, elbo_d, iterations, restarts tried, restarts accepted)``.
    """
    E = np.empty((words.shape[0], C.shape[1]))
    exact = np.empty(words.shape[0], dtype=np.bool_)
    _exp_rows(words, C, E, exact)
    return _dense_doc(
        words, counts, C, E, exact, a, max_iters, conv_thresh, eps, restarts, restart_iters, R,
        trace, True,
    )  # fmt: skip


@numba.njit(nogil=True, cache=True)
def _dense_doc(
    words, counts, C, E, exact, a, max_iters, conv_thresh, eps, restarts, restart_iters, R,
    trace, want_elbo,
):  # fmt: skip
    """``dense_doc_step`` given ``E, exact`` of the document's words (``_exp_rows``);
    the returned ELBO is nan unless ``want_elbo`` or restarts."""
    U = words.shape[0]
    K = C.shape[1]
    N = np.zeros(K)
    for u in range(U):
        s = 0.0
        for k in range(K):
            s += E[u, k]
        for k in range(K):
            R[u, k] = E[u, k] / s
            N[k] += counts[u] * R[u, k]
    if trace.shape[0] > 0:
        trace[0] = _dense_doc_elbo(words, counts, C, R, N, a, K)
    its = _dense_iterations(words, counts, C, E, exact, a, max_iters, conv_thresh, R, N, trace)
    tried = 0
    accepted = 0
    if not (want_elbo or (restarts > 0 and U > 0)):
        return N, np.nan, its, tried, accepted
    elbo = _dense_doc_elbo(words, counts, C, R, N, a, K)
    if restarts > 0 and U > 0:
        no_trace = np.empty(0)
        for k_drop in np.argsort(N):
            if N[k_drop] <= eps:
                continue
            if tried >= restarts:
                break
            tried += 1
            N2 = N.copy()
            N2[k_drop] = 0.0
            R2 = R.copy()
            _dense_iterations(
                words, counts, C, E, exact, a, restart_iters, conv_thresh, R2, N2, no_trace
            )
            elbo2 = _dense_doc_elbo(words, counts, C, R2, N2, a, K)
            if elbo2 > elbo:
                accepted += 1
                elbo = elbo2
                N = N2
                R[:] = R2
    return N, elbo, its, tried, accepted


# numba's stub of njit lacks ``_nrt``, an option numba itself accepts
@numba.njit(nogil=True, cache=True, _nrt=False)  # type: ignore[call-overload]
def _token_exps(C, w, idx, u, m, E):
    """``E[u, j] = exp(C[w, idx[u, j]] - max)`` over the token's first m topics;
    False where they spread too far for the product form (then use log space).
    No reference counting (``_nrt=False``): it runs for every selected token."""
    hi = C[w, idx[u, 0]]
    lo = hi
    for j in range(1, m):
        v = C[w, idx[u, j]]
        hi = max(hi, v)
        lo = min(lo, v)
    for j in range(m):
        E[u, j] = math.exp(C[w, idx[u, j]] - hi)
    return hi - lo <= _PRODUCT_MAX_SPREAD


@numba.njit(nogil=True, cache=True)
def _order_by(P, active, n_active, by_P, scratch):
    """``by_P[:n_active]``: the active topics by decreasing ``P`` (few: by insertion)."""
    if n_active <= 64:
        for j in range(n_active):
            k = active[j]
            i = j
            while i > 0 and P[by_P[i - 1]] < P[k]:
                by_P[i] = by_P[i - 1]
                i -= 1
            by_P[i] = k
    else:
        for j in range(n_active):
            scratch[j] = -P[active[j]]
        order = np.argsort(scratch[:n_active])
        for j in range(n_active):
            by_P[j] = active[order[j]]


@numba.njit(nogil=True, cache=True)
def _sparse_iterations(
    words, counts, C, row_max, a, L, max_iters, conv_thresh, eps, resp, idx, N, active, n_active,
    select_first,
):  # fmt: skip
    """Run L-sparse iterations in place; returns (n_active, iterations run).

    Every token is selected afresh in iterations ``1..select_first`` (at least
    the first: ``select_first >= 1``) and every 10th: it takes the top
    ``min(L, |A_d|)`` of ``C[w_u, k] + P_k`` over the active topics. In between
    a token keeps the topics of its last selection and is only reweighted; a
    topic that left the active set weighs 0 from then on (its mass "never rises
    again", App. D.3), and a token none of whose topics is still active is
    selected again. A reweighting costs a multiply per topic:
    ``exp(C + P) = E * exp(P - max P)`` with ``E = exp(C - max C)`` over the
    token's topics, kept from its selection.

    For ``nL <= TOPL_INSERTION_MAX`` a selection scans the active topics by
    decreasing ``P`` and stops once ``P + row_max[u]`` cannot reach the L-th
    weight (``row_max[u]`` bounds ``C[words[u]]`` from above), so topics of
    little mass in the document are not looked at; the selected topics are
    those of a full scan, ties included. Larger nL sort all active weights.

    Once a selection finds at most L active topics, every token takes all of
    them, and since the active set only shrinks, the tokens share one list of
    topics from then on: the iterations run over that list (the same
    arithmetic, without per-token topic ids), and later selections, which
    would choose every active topic again, cost nothing. (A separate loop on
    purpose: without per-token topic ids the same work costs less than in the
    per-token loop with selections switched off.)
    """
    U = words.shape[0]
    K = C.shape[1]
    P = np.zeros(K)
    eP = np.zeros(K)
    is_active = np.zeros(K, dtype=np.bool_)
    vals = np.empty(L)
    chosen = np.empty(L, dtype=np.int64)
    E = np.empty((U, L))
    product = np.empty(U, dtype=np.bool_)
    n_slots = np.zeros(U, dtype=np.int64)  # topics of each token's last selection
    N_new = np.zeros(K)
    by_P = np.empty(K, dtype=np.int64)  # the active topics, largest P first ...
    sorted_at = 0  # ... as of this iteration (sorted when first needed)
    scratch = np.empty(K)
    shared = False  # every token holds the topics shared_topic[:n_shared], in that order
    shared_topic = np.empty(L, dtype=np.int64)
    shared_w = np.empty(L)
    shared_N = np.empty(L)
    n_shared = 0
    dropped = np.empty(K, dtype=np.int64)  # the topics that left in the last iteration
    n_dropped = 0
    for j in range(n_active):
        is_active[active[j]] = True
    for k in range(K):  # inactive from the start: no token weighs them either
        if not is_active[k] and N[k] != 0.0:
            dropped[n_dropped] = k
            n_dropped += 1
    # E, product and n_slots need no start values: iteration 1 selects every
    # token (select_first >= 1) and fills them
    it = 0
    while it < max_iters:
        if n_active == 0:
            # every topic's mass is at most eps (counts that vanish): nothing
            # holds a token, and no topic has mass
            for u in range(U):
                for j in range(L):
                    resp[u, j] = 0.0
            for k in range(K):
                N[k] = 0.0
            break
        it += 1
        select_all = it <= select_first or it % 10 == 0
        pmax = -np.inf
        for j in range(n_active):
            k = active[j]
            P[k] = digamma(N[k] + a)
            pmax = max(pmax, P[k])
        for j in range(n_active):
            k = active[j]
            eP[k] = math.exp(P[k] - pmax)
        nL = min(L, n_active)
        if select_all and not shared and n_active <= L:
            shared = True
            n_shared = n_active
            for j in range(n_active):
                shared_topic[j] = active[j]
            for u in range(U):
                for j in range(n_active):
                    idx[u, j] = active[j]
                for j in range(n_active, L):
                    idx[u, j] = active[0]
                    resp[u, j] = 0.0
                product[u] = _token_exps(C, words[u], idx, u, n_active, E)
        if shared:
            for j in range(n_shared):
                k = shared_topic[j]
                shared_w[j] = eP[k] if is_active[k] else 0.0
                shared_N[j] = 0.0
            for u in range(U):
                s = 0.0
                if product[u]:
                    for j in range(n_shared):
                        e = E[u, j] * shared_w[j]
                        resp[u, j] = e
                        s += e
                if not s > 1e-250:  # log space: spread too wide, or the product underflowed
                    s = _log_space_weights(
                        C, words[u], P, is_active, shared_topic, n_shared, resp, u
                    )
                inv = 1.0 / s if s > 0.0 else 0.0  # s = 0 only without active topics
                c = counts[u]
                for j in range(n_shared):
                    r = resp[u, j] * inv
                    resp[u, j] = r
                    shared_N[j] += c * r
            for j in range(n_shared):
                N_new[shared_topic[j]] = shared_N[j]
        else:
            for k in range(K):
                N_new[k] = 0.0
            for u in range(U):
                w = words[u]
                m = n_slots[u]
                select = select_all
                if not select:
                    select = True
                    for j in range(m):
                        if is_active[idx[u, j]]:
                            select = False
                            break
                if select:
                    if nL <= TOPL_INSERTION_MAX:
                        # the token's own topics, if nL of them are still active,
                        # bound the nL-th weight from below: most of the others
                        # then cost one comparison each
                        floor = np.inf
                        n_live = 0
                        for j in range(m):
                            k = idx[u, j]
                            if is_active[k]:
                                n_live += 1
                                floor = min(floor, C[w, k] + P[k])
                        if n_live < nL:
                            floor = -np.inf
                        if sorted_at != it:
                            _order_by(P, active, n_active, by_P, scratch)
                            sorted_at = it
                        _select_pruned(C, w, P, by_P, n_active, nL, floor, row_max[u], vals, chosen)
                    else:
                        for j in range(n_active):
                            scratch[j] = C[w, active[j]] + P[active[j]]
                        _select(scratch[:n_active], nL, chosen)
                        for j in range(nL):
                            chosen[j] = active[chosen[j]]
                    for j in range(nL):
                        idx[u, j] = chosen[j]
                    for j in range(nL, L):
                        idx[u, j] = chosen[0]
                        resp[u, j] = 0.0
                    product[u] = _token_exps(C, w, idx, u, nL, E)
                    n_slots[u] = m = nL
                s = 0.0
                if product[u]:
                    for j in range(m):
                        k = idx[u, j]
                        e = E[u, j] * eP[k] if is_active[k] else 0.0
                        resp[u, j] = e
                        s += e
                if not s > 1e-250:  # log space: spread too wide, or the product underflowed
                    s = _log_space_weights(C, w, P, is_active, idx[u], m, resp, u)
                inv = 1.0 / s if s > 0.0 else 0.0  # s = 0 only without active topics
                c = counts[u]
                for j in range(m):
                    r = resp[u, j] * inv
                    resp[u, j] = r
                    N_new[idx[u, j]] += c * r
        delta = 0.0
        for j in range(n_active):
            k = active[j]
            delta = max(delta, abs(N_new[k] - N[k]))
            N[k] = N_new[k]
        for j in range(n_dropped):
            N[dropped[j]] = 0.0  # inactive since the last iteration: no token weighs it
        kept = 0
        n_dropped = 0
        for j in range(n_active):
            k = active[j]
            if N[k] > eps:
                active[kept] = k
                kept += 1
            else:
                is_active[k] = False
                dropped[n_dropped] = k
                n_dropped += 1
        shrank = kept < n_active
        n_active = kept
        if delta < conv_thresh and not shrank:
            break
    return n_active, it


@numba.njit(nogil=True, cache=True)
def _log_space_weights(C, w, P, is_active, topics, m, resp, u):
    """``resp[u, j] = exp(C[w, k] + P[k] - max)`` for the active ``k = topics[j]``
    (0 for the others), j < m; returns their sum. The exact path for tokens
    whose weights the product form cannot hold."""
    wmax = -np.inf
    for j in range(m):
        k = topics[j]
        if is_active[k]:
            wmax = max(wmax, C[w, k] + P[k])
    s = 0.0
    for j in range(m):
        k = topics[j]
        e = math.exp(C[w, k] + P[k] - wmax) if is_active[k] else 0.0
        resp[u, j] = e
        s += e
    return s


@numba.njit(nogil=True, cache=True)
def sparse_doc_step(
    words, counts, C, a, L, max_iters, conv_thresh, eps, restarts, restart_iters, resp, idx,
):  # fmt: skip
    """LSPARSESTEPFORDOC with restart proposals, for one document.

    Fills ``resp`` and ``idx`` (U, L) and returns
    ``(N_d, elbo_d, iterations, restarts tried, restarts accepted)``.
    """
    row_max = np.empty(words.shape[0])
    _sparse_init(words, C, L, resp, idx, row_max)
    return _sparse_doc(
        words, counts, C, row_max, a, L, max_iters, conv_thresh, eps, restarts, restart_iters,
        resp, idx,
    )  # fmt: skip


@numba.njit(nogil=True, cache=True)
def _sparse_init(rows, C, L, resp, idx, row_max):
    """Top-L responsibilities of ``C[rows[u]]`` alone (uniform document-topic
    probabilities): the start of every document's L-sparse step; ``row_max[u]``
    receives the row's maximum."""
    K = C.shape[1]
    nL = min(L, K)
    top = np.empty(nL, dtype=np.int32)
    for u in range(rows.shape[0]):
        row = C[rows[u]]
        _select(row, nL, top)
        wmax = row[top[0]]
        row_max[u] = wmax
        s = 0.0
        for j in range(nL):
            idx[u, j] = top[j]
            resp[u, j] = math.exp(row[top[j]] - wmax)
            s += resp[u, j]
        for j in range(L):
            if j >= nL:
                idx[u, j] = top[0]
            resp[u, j] = resp[u, j] / s if j < nL else 0.0


@numba.njit(nogil=True, cache=True)
def _sparse_doc(
    words, counts, C, row_max, a, L, max_iters, conv_thresh, eps, restarts, restart_iters, resp,
    idx,
):  # fmt: skip
    """``sparse_doc_step`` from the initial ``resp, idx`` already in place."""
    U = words.shape[0]
    K = C.shape[1]
    N = np.zeros(K)
    for u in range(U):
        for j in range(L):
            N[idx[u, j]] += counts[u] * resp[u, j]
    active = np.empty(K, dtype=np.int64)
    n_active = 0
    for k in range(K):
        if N[k] > eps:
            active[n_active] = k
            n_active += 1
    if U == 0:
        return N, _log_norm_prior(a, K) - _log_norm_doc(N, a, active, 0, K), 0, 0, 0
    n_active, its = _sparse_iterations(
        words, counts, C, row_max, a, L, max_iters, conv_thresh, eps, resp, idx, N, active,
        n_active, 5,
    )  # fmt: skip
    elbo = _sparse_doc_elbo(words, counts, C, resp, idx, N, a, active, n_active, K)
    tried = 0
    accepted = 0
    if restarts > 0 and n_active > 1:
        order = np.argsort(N[active[:n_active]])
        candidates = active[:n_active][order].copy()
        for k_drop in candidates:
            if N[k_drop] <= eps:
                continue  # already gone after an earlier accepted proposal
            if tried >= restarts:
                break
            tried += 1
            N2 = N.copy()
            N2[k_drop] = 0.0
            active2 = np.empty(K, dtype=np.int64)
            n2 = 0
            for j in range(n_active):
                if active[j] != k_drop:
                    active2[n2] = active[j]
                    n2 += 1
            if n2 == 0:
                continue
            resp2 = resp.copy()
            idx2 = idx.copy()
            n2, _ = _sparse_iterations(
                words, counts, C, row_max, a, L, restart_iters, conv_thresh, eps, resp2, idx2, N2,
                active2, n2, 1,
            )  # fmt: skip
            elbo2 = _sparse_doc_elbo(words, counts, C, resp2, idx2, N2, a, active2, n2, K)
            if elbo2 > elbo:
                accepted += 1
                elbo = elbo2
                N = N2
                active = active2
                n_active = n2
                resp[:] = resp2
                idx[:] = idx2
    return N, elbo, its, tried, accepted


@numba.njit(nogil=True, cache=True)
def lda_batch_step(
    indptr, words, counts, C, a, L, max_iters, conv_thresh, eps, restarts, restart_iters,
    out_words, doc_topic,
):  # fmt: skip
    """Local step for every document of a batch, summarized.

    Parameters
    ----------
    indptr : int64 (n_docs + 1,); words : int32 (nnz,) ids into the batch's
    vocabulary (0 .. V_b - 1); counts : float64 (nnz,)
    C : float64 (V_b, K), ``E[log phi]`` (transposed) of the batch's vocabulary
    a : float, alpha / K
    restarts : int, restart proposals per document (0: none; True counts as 1)
    restart_iters : int, iterations run for each proposal
    L : int, sparsity; ``L <= 0`` runs the dense step (``L = K`` runs the sparse
        code with every topic kept)
    out_words : float64 (K, V_b), receives ``sum_d sum_u c_du r_duk`` at w_du
    doc_topic : float64 (n_docs, K), receives N_dk

    Returns
    -------
    (entropy, allocation term, iterations, restarts tried, restarts accepted),
    where entropy is ``-sum c r log r`` and the allocation term is
    ``sum_d c_Dir(a) - c_Dir(N_d + a)`` (App. C).
    """
    n_docs = indptr.shape[0] - 1
    K = C.shape[1]
    dense = L <= 0
    entropy = 0.0
    alloc = 0.0
    iters = 0
    tried = 0
    accepted = 0
    prior = _log_norm_prior(a, K)
    no_trace = np.empty(0)
    # what depends on a word alone is computed once per batch, not per document
    V_b = C.shape[0]
    vocab = np.arange(V_b)
    if dense:
        E_words = np.empty((V_b, K))
        exact_words = np.empty(V_b, dtype=np.bool_)
        _exp_rows(vocab, C, E_words, exact_words)
    else:
        resp_words = np.empty((V_b, L))
        idx_words = np.empty((V_b, L), dtype=np.int32)
        max_words = np.empty(V_b)
        _sparse_init(vocab, C, L, resp_words, idx_words, max_words)
    for d in range(n_docs):
        lo = indptr[d]
        hi = indptr[d + 1]
        w = words[lo:hi]
        c = counts[lo:hi]
        U = hi - lo
        if dense:
            R = np.empty((U, K))
            E = np.empty((U, K))
            exact = np.empty(U, dtype=np.bool_)
            for u in range(U):
                E[u] = E_words[w[u]]
                exact[u] = exact_words[w[u]]
            N, _, its, t, acc = _dense_doc(
                w, c, C, E, exact, a, max_iters, conv_thresh, eps, restarts, restart_iters, R,
                no_trace, False,
            )  # fmt: skip
            for u in range(U):
                for k in range(K):
                    r = R[u, k]
                    if r > 0.0:
                        entropy -= c[u] * r * math.log(r)
                        out_words[k, w[u]] += c[u] * r
        else:
            resp = np.empty((U, L))
            idx = np.empty((U, L), dtype=np.int32)
            row_max = np.empty(U)
            for u in range(U):  # element by element: no array views per token
                for j in range(L):
                    resp[u, j] = resp_words[w[u], j]
                    idx[u, j] = idx_words[w[u], j]
                row_max[u] = max_words[w[u]]
            N, _, its, t, acc = _sparse_doc(
                w, c, C, row_max, a, L, max_iters, conv_thresh, eps, restarts, restart_iters,
                resp, idx,
            )  # fmt: skip
            for u in range(U):
                for j in range(L):
                    r = resp[u, j]
                    if r > 0.0:
                        entropy -= c[u] * r * math.log(r)
                        out_words[idx[u, j], w[u]] += c[u] * r
        alloc += prior - _log_norm_doc_dense(N, a, K)
        iters += its
        tried += t
        accepted += acc
        doc_topic[d] = N
    return entropy, alloc, iters, tried, accepted
