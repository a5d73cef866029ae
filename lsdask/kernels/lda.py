"""The LDA local step for one batch of documents (lsparse Alg. 2, App. D).

Each document is a list of U unique word types ``w_u`` with counts ``c_u``.
Given topic log-probabilities ``C[w, k] = E[log phi_kw]`` (rows for the
batch's own vocabulary) and the document-topic prior ``a = (a_1, ..., a_K)``
(``a_k = alpha / K`` for LDA's symmetric prior, a learned or the HDP's
``alpha E[beta_k]`` otherwise) with ``a_rest``, the prior mass of a leftover
topic that holds no tokens (0 for LDA; the HDP's ``alpha E[beta_{K+1}]``), the
local step alternates

    N_dk = sum_u c_u r_uk,   theta_dk = N_dk + a_k,   P_dk = psi(theta_dk),
    r_u = RESP(C[w_u] + P_d)            (dense softmax, or top-L),

(``psi(Theta_d)``, ``Theta_d = sum_k theta_dk + a_rest``, is common to every
topic and cancels in RESP) from ``r_u = RESP(C[w_u] + log a)``: the topics
weighed by the prior's mean document-topic probabilities ``E[pi_dk] = a_k / A``
(``A = sum_k a_k + a_rest``), as the HDP supplement (Sec. E) suggests
(``pi~_dk = E[beta_k]``), until ``max_k |Delta N_dk| < conv_thresh`` or
``max_iters``. The start adds ``log a_k - max_j log a_j``: exactly 0.0 for a
uniform prior, whose start is then ``RESP(C[w_u])``. (Not the prior's
``E[log pi_dk] = psi(a_k) - psi(A)``: ``psi(a) ~ -1/a`` for small a puts a topic
of ``a_k = 0.01`` about 100 nats down, so no document would start on it, and the
L-sparse step never takes up a topic it did not start with.) The L-sparse step
keeps an active set ``A_d = {k : N_dk > eps}`` and works over it only; it selects
each token's top L afresh in the first 5 iterations and every 10th, and
otherwise reweights the topics of the token's last selection, a topic that
left the active set weighing 0 (App. D.3: its mass never rises again).
Restart proposals (lsparse Sec. 5; Hughes et al. 2015) then try removing
active topics in turn, smallest mass first, up to ``restarts`` proposals per
document: the topic's mass is dropped, ``restart_iters`` iterations run, and
the proposal is kept only if the document's ELBO

    L_d = sum_u c_u sum_k r_uk (C[w_u, k] - log r_uk) + c_Dir(a) - c_Dir(theta_d)

improves, with ``c_Dir(a) = lnGamma(sum_k a_k) - sum_k lnGamma(a_k)`` (Eq. 49)
over the K topics and, where ``a_rest > 0``, the leftover one.

Inactive topics (``N_dk = 0``) contribute to the ``c_Dir`` terms only through
totals computed once per batch (``sum_k a_k``, ``sum_k lnGamma(a_k)``), so a
document costs O(active topics) special functions. A uniform prior keeps the
scalar arithmetic of ``K lnGamma(a)``, ``a K``: its results do not depend on
how the prior was passed. Everything here is serial and ``nogil``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from lsdask.config import TOPL_INSERTION_MAX
from lsdask.kernels.special import digamma
from lsdask.kernels.topl import _select, _select_pruned


@numba.njit(nogil=True, cache=True)
def prior_terms(a, a_rest):
    """What the ``c_Dir`` terms need of the prior ``(a_1..a_K, a_rest)``, once per batch.

    Returns ``(A, lg_total, c_prior, lg_rest, uniform)``: ``A = sum_k a_k + a_rest``,
    ``lg_total = sum_k lnGamma(a_k)``, ``c_prior = c_Dir(a, a_rest)`` (Eq. 49; the
    leftover entry only where ``a_rest > 0``), ``lg_rest = lnGamma(a_rest)`` (0 where
    ``a_rest = 0``) and whether the prior is uniform (every ``a_k`` equal, no leftover):
    then ``A = a_1 K`` and ``lg_total = K lnGamma(a_1)``, the scalar prior's arithmetic.
    """
    K = a.shape[0]
    a0 = a[0]
    uniform = a_rest == 0.0
    for k in range(K):
        if a[k] != a0:
            uniform = False
            break
    if uniform:
        lg0 = math.lgamma(a0)
        return a0 * K, K * lg0, math.lgamma(a0 * K) - K * lg0, 0.0, True
    total = 0.0
    lg = 0.0
    for k in range(K):
        total += a[k]
        lg += math.lgamma(a[k])
    lg_rest = 0.0
    if a_rest > 0.0:
        total += a_rest
        lg_rest = math.lgamma(a_rest)
    return total, lg, math.lgamma(total) - lg - lg_rest, lg_rest, False


@numba.njit(nogil=True, cache=True)
def start_offsets(a):
    """``log a_k - max_j log a_j``: the log of the prior's mean document-topic
    probabilities up to a common term (exactly 0.0 for a uniform prior)."""
    K = a.shape[0]
    off = np.empty(K)
    hi = -np.inf
    for k in range(K):
        off[k] = math.log(a[k])
        hi = max(hi, off[k])
    for k in range(K):
        off[k] -= hi
    return off


@numba.njit(nogil=True, cache=True)
def _log_norm_doc(N, a, prior, active, n_active):
    """c_Dir(N + a) using only the active topics (the rest hold N = 0)."""
    A, lg_total, _, lg_rest, uniform = prior
    K = a.shape[0]
    total = A
    if uniform:
        s = (K - n_active) * math.lgamma(a[0])
        for j in range(n_active):
            k = active[j]
            total += N[k]
            s += math.lgamma(N[k] + a[k])
        return math.lgamma(total) - s
    s = lg_total + lg_rest
    for j in range(n_active):
        k = active[j]
        total += N[k]
        s += math.lgamma(N[k] + a[k]) - math.lgamma(a[k])
    return math.lgamma(total) - s


@numba.njit(nogil=True, cache=True)
def _log_norm_doc_dense(N, a, prior):
    """c_Dir(N + a) over all K topics, one lgamma per nonzero N_k."""
    A, lg_total, _, lg_rest, uniform = prior
    K = a.shape[0]
    total = A
    s = 0.0
    if uniform:
        n_zero = 0
        for k in range(K):
            if N[k] == 0.0:
                n_zero += 1
            else:
                total += N[k]
                s += math.lgamma(N[k] + a[k])
        return math.lgamma(total) - (s + n_zero * math.lgamma(a[0]))
    for k in range(K):
        if N[k] != 0.0:
            total += N[k]
            s += math.lgamma(N[k] + a[k]) - math.lgamma(a[k])
    return math.lgamma(total) - (s + lg_total + lg_rest)


@numba.njit(nogil=True, cache=True)
def _sparse_doc_elbo(words, counts, C, resp, idx, N, a, prior, active, n_active):
    value = 0.0
    for u in range(words.shape[0]):
        w = words[u]
        for j in range(resp.shape[1]):
            r = resp[u, j]
            if r > 0.0:
                value += counts[u] * r * (C[w, idx[u, j]] - math.log(r))
    return value + prior[2] - _log_norm_doc(N, a, prior, active, n_active)


@numba.njit(nogil=True, cache=True)
def _dense_doc_elbo(words, counts, C, R, N, a, prior):
    K = C.shape[1]
    value = 0.0
    for u in range(words.shape[0]):
        row = C[words[u]]
        for k in range(K):
            r = R[u, k]
            if r > 0.0:
                value += counts[u] * r * (row[k] - math.log(r))
    total = prior[0]
    s = 0.0
    for k in range(K):
        total += N[k]
        s += math.lgamma(N[k] + a[k])
    if not prior[4]:
        s += prior[3]
    return value + prior[2] - (math.lgamma(total) - s)


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
def _dense_iterations(words, counts, C, E, exact, a, prior, max_iters, conv_thresh, R, N, trace):
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
            P[k] = digamma(N[k] + a[k])
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
            trace[it] = _dense_doc_elbo(words, counts, C, R, N, a, prior)
        if delta < conv_thresh:
            break
    return it


@numba.njit(nogil=True, cache=True)
def dense_doc_step(
    words, counts, C, a, a_rest, max_iters, conv_thresh, eps, restarts, restart_iters, R, trace
):
    """DENSESTEPFORDOC with restart proposals: dense responsibilities ``R`` (U, K).

    ``a`` (K,) is the document-topic prior and ``a_rest`` the leftover topic's
    (see the module docstring). ``trace`` receives the document ELBO after the
    initialization (index 0) and after every iteration of the main run, as far
    as it is long (pass an empty array to skip that work). Returns
    ``(N_d, elbo_d, iterations, restarts tried, restarts accepted)``.
    """
    E = np.empty((words.shape[0], C.shape[1]))
    exact = np.empty(words.shape[0], dtype=np.bool_)
    _exp_rows(words, C, E, exact)
    prior = prior_terms(a, a_rest)
    E0 = E if prior[4] else _start_rows(words, C, start_offsets(a))
    return _dense_doc(
        words, counts, C, E, E0, exact, a, prior, max_iters, conv_thresh, eps, restarts,
        restart_iters, R, trace, True,
    )  # fmt: skip


@numba.njit(nogil=True, cache=True)
def _start_rows(words, C, off):
    """``exp(W_u - max W_u)`` of the start's weights ``W_u = C[w_u] + off``, in log
    space (exact however far the row spreads), once per batch word."""
    K = C.shape[1]
    E0 = np.empty((words.shape[0], K))
    for u in range(words.shape[0]):
        row = C[words[u]]
        hi = -np.inf
        for k in range(K):
            hi = max(hi, row[k] + off[k])
        for k in range(K):
            E0[u, k] = math.exp(row[k] + off[k] - hi)
    return E0


@numba.njit(nogil=True, cache=True)
def _dense_doc(
    words, counts, C, E, E0, exact, a, prior, max_iters, conv_thresh, eps, restarts,
    restart_iters, R, trace, want_elbo,
):  # fmt: skip
    """``dense_doc_step`` given ``E, exact`` of the document's words (``_exp_rows``) and
    ``E0``, the start's unnormalized weights (``E`` itself for a uniform prior); the
    returned ELBO is nan unless ``want_elbo`` or restarts."""
    U = words.shape[0]
    K = C.shape[1]
    N = np.zeros(K)
    for u in range(U):
        s = 0.0
        for k in range(K):
            s += E0[u, k]
        for k in range(K):
            R[u, k] = E0[u, k] / s
            N[k] += counts[u] * R[u, k]
    if trace.shape[0] > 0:
        trace[0] = _dense_doc_elbo(words, counts, C, R, N, a, prior)
    its = _dense_iterations(
        words, counts, C, E, exact, a, prior, max_iters, conv_thresh, R, N, trace
    )
    tried = 0
    accepted = 0
    if not (want_elbo or (restarts > 0 and U > 0)):
        return N, np.nan, its, tried, accepted
    elbo = _dense_doc_elbo(words, counts, C, R, N, a, prior)
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
                words, counts, C, E, exact, a, prior, restart_iters, conv_thresh, R2, N2,
                no_trace,
            )  # fmt: skip
            elbo2 = _dense_doc_elbo(words, counts, C, R2, N2, a, prior)
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
            P[k] = digamma(N[k] + a[k])
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
    words, counts, C, a, a_rest, L, max_iters, conv_thresh, eps, restarts, restart_iters, resp,
    idx,
):  # fmt: skip
    """LSPARSESTEPFORDOC with restart proposals, for one document.

    ``a`` (K,) is the document-topic prior and ``a_rest`` the leftover topic's
    (see the module docstring). Fills ``resp`` and ``idx`` (U, L) and returns
    ``(N_d, elbo_d, iterations, restarts tried, restarts accepted)``.
    """
    row_max = np.empty(words.shape[0])
    prior = prior_terms(a, a_rest)
    _sparse_init(words, C, start_offsets(a), prior[4], L, resp, idx, row_max)
    return _sparse_doc(
        words, counts, C, row_max, a, prior, L, max_iters, conv_thresh, eps, restarts,
        restart_iters, resp, idx,
    )  # fmt: skip


@numba.njit(nogil=True, cache=True)
def _start_token(w, nL, L, top, resp, idx, u):
    """Token u's start: the top ``nL`` of the weights ``w`` (K,), normalized; the
    slots beyond ``nL`` hold 0 at the first topic. Returns the largest weight."""
    _select(w, nL, top)
    wmax = w[top[0]]
    s = 0.0
    for j in range(nL):
        idx[u, j] = top[j]
        resp[u, j] = math.exp(w[top[j]] - wmax)
        s += resp[u, j]
    for j in range(L):
        if j >= nL:
            idx[u, j] = top[0]
        resp[u, j] = resp[u, j] / s if j < nL else 0.0
    return wmax


@numba.njit(nogil=True, cache=True)
def _sparse_init(rows, C, off, uniform, L, resp, idx, row_max):
    """Top-L responsibilities of ``C[rows[u]] + off`` (``off = start_offsets(a)``: the
    prior's mean document-topic probabilities; all 0.0 where ``uniform``): the start of
    every document's L-sparse step; ``row_max[u]`` receives the maximum of
    ``C[rows[u]]``."""
    K = C.shape[1]
    nL = min(L, K)
    top = np.empty(nL, dtype=np.int32)
    shifted = np.empty(K)
    for u in range(rows.shape[0]):
        row = C[rows[u]]
        if uniform:  # the weights are the row itself: its largest is the first selected
            row_max[u] = _start_token(row, nL, L, top, resp, idx, u)
            continue
        hi = row[0]
        for k in range(K):
            hi = max(hi, row[k])
            shifted[k] = row[k] + off[k]
        row_max[u] = hi
        _start_token(shifted, nL, L, top, resp, idx, u)


@numba.njit(nogil=True, cache=True)
def _sparse_doc(
    words, counts, C, row_max, a, prior, L, max_iters, conv_thresh, eps, restarts, restart_iters,
    resp, idx,
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
        return N, prior[2] - _log_norm_doc(N, a, prior, active, 0), 0, 0, 0
    n_active, its = _sparse_iterations(
        words, counts, C, row_max, a, L, max_iters, conv_thresh, eps, resp, idx, N, active,
        n_active, 5,
    )  # fmt: skip
    elbo = _sparse_doc_elbo(words, counts, C, resp, idx, N, a, prior, active, n_active)
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
            elbo2 = _sparse_doc_elbo(words, counts, C, resp2, idx2, N2, a, prior, active2, n2)
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
def _merged_entropy(r, s):
    """``-[(r + s) log(r + s) - r log r - s log s]``: the entropy a token's
    responsibilities lose when two topics become one (0 where either is 0)."""
    if r <= 0.0 or s <= 0.0:
        return 0.0
    t = r + s
    return -(t * math.log(t) - r * math.log(r) - s * math.log(s))


@numba.njit(nogil=True, cache=True)
def lda_batch_step(
    indptr, words, counts, C, a, a_rest, L, max_iters, conv_thresh, eps, restarts, restart_iters,
    out_words, doc_topic, S,
):  # fmt: skip
    """Local step for every document of a batch, summarized.

    Parameters
    ----------
    indptr : int64 (n_docs + 1,); words : int32 (nnz,) ids into the batch's
    vocabulary (0 .. V_b - 1); counts : float64 (nnz,)
    C : float64 (V_b, K), ``E[log phi]`` (transposed) of the batch's vocabulary
    a : float64 (K,), the document-topic prior ``a_k`` (``alpha / K`` each for
        LDA's symmetric prior)
    a_rest : float, the prior of a leftover topic that holds no tokens (0: none,
        as in LDA; the HDP's ``alpha E[beta_{K+1}]``)
    restarts : int, restart proposals per document (0: none; True counts as 1)
    restart_iters : int, iterations run for each proposal
    L : int, sparsity; ``L <= 0`` runs the dense step (``L = K`` runs the sparse
        code with every topic kept)
    out_words : float64 (K, V_b), receives ``sum_d sum_u c_du r_duk`` at w_du
    doc_topic : float64 (n_docs, K), receives N_dk
    S : float64 (K + 1,), receives ``S_k = sum_d E[log pi_dk] = sum_d psi(theta_dk)
        - psi(Theta_d)`` at ``theta_d = N_d + a``, ``Theta_d = sum_k theta_dk + a_rest``;
        ``S[K]`` the leftover topic's (0 where ``a_rest = 0``, which has none)

    Returns
    -------
    (entropy, alloc, W, Cdir, iterations, restarts tried, restarts accepted),
    where entropy is ``-sum c r log r``, alloc the allocation term
    ``sum_d c_Dir(a) - c_Dir(theta_d)`` (App. C, Eq. 45 at the optimal ``q(pi_d)``),
    ``W = sum_d sum_k (N_dk - theta_dk) E[log pi_dk] = -(a . S[:K] + a_rest S[K])``
    and ``Cdir = sum_d c_Dir(theta_d)`` (over K + 1 entries where ``a_rest > 0``).
    With the ``q(pi_d)`` held fixed, the allocation term at another prior ``a'`` is
    ``D c_Dir(a') + a' . S + W - Cdir`` (D documents; ``alloc`` at ``a' = a``): what
    the prior is fitted to (:mod:`lsdask.models.dirichlet_prior`).

    ``S`` costs one digamma per active topic of each document: ``S_k = D psi(a_k) +
    sum_{d: N_dk > 0} [psi(theta_dk) - psi(a_k)] - sum_d psi(Theta_d)``.
    """
    no_pairs = np.zeros((0, 0), dtype=np.int32)
    no_ids = np.zeros(0, dtype=np.int64)
    none = np.zeros(0)
    return lda_batch_step_pairs(
        indptr, words, counts, C, a, a_rest, L, max_iters, conv_thresh, eps, restarts,
        restart_iters, out_words, doc_topic, S, no_pairs, no_ids, no_ids, none, none, none,
    )  # fmt: skip


@numba.njit(nogil=True, cache=True)
def lda_batch_step_pairs(
    indptr, words, counts, C, a, a_rest, L, max_iters, conv_thresh, eps, restarts, restart_iters,
    out_words, doc_topic, S, pair_map, pair_j, pair_k, pair_H, pair_S, pair_C,
):  # fmt: skip
    """:func:`lda_batch_step` that also sums, for each candidate merge ``p`` of the
    topics ``pair_j[p]`` and ``pair_k[p]``, what the batch's statistics become if the
    two were one topic (responsibilities and ``q(pi_d)`` entries added, the HDP's
    merge move):

    - ``pair_H[p]`` receives the change of the entropy,
      ``-sum c [(r_j + r_k) log(r_j + r_k) - r_j log r_j - r_k log r_k]`` (<= 0);
    - ``pair_S[p]`` the merged topic's ``sum_d E[log pi_d] = sum_d psi(theta_dj +
      theta_dk) - psi(Theta_d)``;
    - ``pair_C[p]`` the change of ``Cdir``, ``sum_d lnGamma(theta_dj) +
      lnGamma(theta_dk) - lnGamma(theta_dj + theta_dk)``.

    ``pair_map`` (K, K) holds the pair's index at ``[j, k]`` and ``[k, j]`` and -1
    elsewhere (read by the L-sparse step; (0, 0) where there are no pairs). A token
    costs O(L^2) lookups for the sparse step (only its entries of topics in some pair
    look up), O(pairs) for the dense one.
    """
    n_pairs = pair_j.shape[0]
    n_docs = indptr.shape[0] - 1
    K = C.shape[1]
    dense = L <= 0
    entropy = 0.0
    alloc = 0.0
    norms = 0.0
    iters = 0
    tried = 0
    accepted = 0
    prior = prior_terms(a, a_rest)
    A = prior[0]
    uniform = prior[4]
    off = start_offsets(a)
    psi_a = np.empty(K)
    for k in range(K):
        psi_a[k] = digamma(a[k])
        S[k] = 0.0
    psi_theta = 0.0  # sum_d psi(Theta_d)
    pair_L = L if n_pairs > 0 else 0  # the L-sparse step's pair lookups per token entry
    paired = np.zeros(K, dtype=np.bool_)  # topics in some pair: only their entries look up
    for p in range(n_pairs):
        paired[pair_j[p]] = True
        paired[pair_k[p]] = True
    pair_psi = np.empty(n_pairs)  # psi(a_j + a_k): a document holding neither topic
    pair_lg = np.empty(n_pairs)
    for p in range(n_pairs):
        aj, ak = a[pair_j[p]], a[pair_k[p]]
        pair_psi[p] = digamma(aj + ak)
        pair_lg[p] = math.lgamma(aj) + math.lgamma(ak) - math.lgamma(aj + ak)
        pair_H[p] = 0.0
        pair_S[p] = 0.0
        pair_C[p] = 0.0
    no_trace = np.empty(0)
    # what depends on a word alone is computed once per batch, not per document
    V_b = C.shape[0]
    vocab = np.arange(V_b)
    if dense:
        E_words = np.empty((V_b, K))
        exact_words = np.empty(V_b, dtype=np.bool_)
        _exp_rows(vocab, C, E_words, exact_words)
        E0_words = E_words if uniform else _start_rows(vocab, C, off)
    else:
        resp_words = np.empty((V_b, L))
        idx_words = np.empty((V_b, L), dtype=np.int32)
        max_words = np.empty(V_b)
        _sparse_init(vocab, C, off, uniform, L, resp_words, idx_words, max_words)
    for d in range(n_docs):
        lo = indptr[d]
        hi = indptr[d + 1]
        w = words[lo:hi]
        c = counts[lo:hi]
        U = hi - lo
        if dense:
            R = np.empty((U, K))
            E = np.empty((U, K))
            E0 = E if uniform else np.empty((U, K))
            exact = np.empty(U, dtype=np.bool_)
            for u in range(U):
                E[u] = E_words[w[u]]
                if not uniform:
                    E0[u] = E0_words[w[u]]
                exact[u] = exact_words[w[u]]
            N, _, its, t, acc = _dense_doc(
                w, c, C, E, E0, exact, a, prior, max_iters, conv_thresh, eps, restarts,
                restart_iters, R, no_trace, False,
            )  # fmt: skip
            for u in range(U):
                for k in range(K):
                    r = R[u, k]
                    if r > 0.0:
                        entropy -= c[u] * r * math.log(r)
                        out_words[k, w[u]] += c[u] * r
                for p in range(n_pairs):
                    pair_H[p] += c[u] * _merged_entropy(R[u, pair_j[p]], R[u, pair_k[p]])
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
                w, c, C, row_max, a, prior, L, max_iters, conv_thresh, eps, restarts,
                restart_iters, resp, idx,
            )  # fmt: skip
            for u in range(U):
                for j in range(L):
                    r = resp[u, j]
                    if r > 0.0:
                        entropy -= c[u] * r * math.log(r)
                        out_words[idx[u, j], w[u]] += c[u] * r
                        if not paired[idx[u, j]]:  # its row of pair_map holds only -1
                            continue
                        for j2 in range(j + 1, pair_L):
                            p = pair_map[idx[u, j], idx[u, j2]]
                            if p >= 0 and resp[u, j2] > 0.0:
                                pair_H[p] += c[u] * _merged_entropy(r, resp[u, j2])
        norm = _log_norm_doc_dense(N, a, prior)
        alloc += prior[2] - norm
        norms += norm
        total = A
        for k in range(K):
            if N[k] != 0.0:
                total += N[k]
                S[k] += digamma(N[k] + a[k]) - psi_a[k]
        psi_theta += digamma(total)
        for p in range(n_pairs):
            j, k = pair_j[p], pair_k[p]
            if N[j] != 0.0 or N[k] != 0.0:
                tj, tk = N[j] + a[j], N[k] + a[k]
                pair_S[p] += digamma(tj + tk) - pair_psi[p]
                pair_C[p] += math.lgamma(tj) + math.lgamma(tk) - math.lgamma(tj + tk) - pair_lg[p]
        iters += its
        tried += t
        accepted += acc
        doc_topic[d] = N
    W = 0.0
    for k in range(K):
        S[k] += n_docs * psi_a[k] - psi_theta
        W -= a[k] * S[k]
    for p in range(n_pairs):
        pair_S[p] += n_docs * pair_psi[p] - psi_theta
        pair_C[p] += n_docs * pair_lg[p]
    S[K] = 0.0
    if a_rest > 0.0:
        S[K] = n_docs * digamma(a_rest) - psi_theta
        W -= a_rest * S[K]
    return entropy, alloc, W, norms, iters, tried, accepted
