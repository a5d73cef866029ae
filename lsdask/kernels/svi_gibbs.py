"""Gibbs sampling of documents' topics against fixed topics (SVI-Gibbs's local step).

Mimno, Hoffman & Blei (2012) sample each token's topic from (their Eq. 9)

    q(z_i = k | z_-i) ∝ (a_k + n_dk) exp E[log phi_kw],

where ``n_dk`` counts the document's other tokens on topic k and ``a_k`` is
topic k's document-topic prior. The topics are fixed while a minibatch is
sampled, so unlike collapsed Gibbs sampling nothing but the document's counts
changes. With ``lambda_kw = eta + Ñ_kw``, ``f = exp o psi`` and ``Z_k =
exp psi(V eta + Ñ_k.)`` the weight splits in three buckets (their Eq. 15):

    word       (a_k + n_dk) (f(eta + Ñ_kw) - f(eta)) / Z_k
                                    over the word's stored entries (Ñ_kw > 0)
    document   n_dk f(eta) / Z_k      over the document's topics (n_dk > 0)
    smoothing  a_k f(eta) / Z_k       over all K topics

The kernels only see the buckets' terms, so the same code samples against
the posterior mean ``E[phi_kw]`` instead (``f`` the identity, ``Z_k = V eta +
Ñ_k.``; :class:`lsdask.models.sparse_topics.SamplerView`).

A draw takes one uniform ``u`` in [0, 1), scales it by the three totals and
looks in the word bucket first, then the document bucket, then the smoothing
bucket, each walked in a fixed order: the word's entries as stored, the
document's topics in the order of its active list, and the smoothing bucket
by a binary search (O(log K)) of its cumulative table, which is built once per
minibatch (the topics are fixed). The document bucket's total is kept current
in O(1) as tokens move. A draw therefore costs the word's entries and the
document's topics, never K.

Random numbers come from a splitmix64 stream per document, keyed by
``(seed, step, document id)``, so a document's draws do not depend on which
task or worker samples it.

The Rao-Blackwellised counts
----------------------------
:func:`sample_documents_rb` moves the chain exactly as :func:`sample_documents`
does (the same draws from the same stream) but counts, in each kept sweep,
an unbiased estimate of each token's whole conditional instead of the one-hot
of its draw. The conditional splits in an *exact* part, the word bucket (and,
with ``spread_document``, the document bucket too), and the *rest*. With the
rest's probability the token counts whole on one topic drawn from the rest,
as a draw would; otherwise it is shared over the exact part's topics in
proportion to their weights. Its expectation given the other tokens is Eq.
9's conditional, so the estimate is unbiased, and (Rao-Blackwell, within the
exact part) it varies less than the draw. The word bucket's pairs are stored
entries of Ñ already, so sharing over them adds no entry, and a token adds a
pair not yet stored no more often than a draw does; the document bucket's
pairs are mostly new ones. The shares are kept in whole *quanta* of ``1 / Q``
of a token by systematic rounding: with one uniform ``v`` a piece whose
cumulative share runs from ``c0`` to ``c1`` (in quanta) gets
``floor(c1 + v) - floor(c0 + v)`` quanta, i.e. ``floor(w Q)`` or one more,
with the probability that makes its mean ``w Q``. A token thus adds exactly
``Q`` quanta, to at most ``Q`` entries, and a piece below ``1 / Q`` mostly
adds nothing. The rounding and the drawn topic use a second stream of
the document's key, so the chain is the same under every estimator.

Inputs shared by the kernels (the minibatch's *view* of the topics):

- ``w_indptr`` (W + 1,), ``w_topics`` (nnz,) int32, ``w_excess`` (nnz,): word
  ``j``'s stored entries ``w_topics[w_indptr[j]:w_indptr[j+1]]`` and their
  ``(f(eta + Ñ_kw) - f(eta)) / Z_k``;
- ``smooth`` (K,): ``f(eta) / Z_k``; ``alpha`` (K,): ``a_k``;
- ``cum_smooth`` (K,): the cumulative sums of ``alpha * smooth``.
"""

from __future__ import annotations

import numba
import numpy as np

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, nogil=True)
def _mix(z: np.uint64) -> np.uint64:
    """splitmix64's output function: a bijective scramble of 64 bits."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def document_key(seed: np.uint64, step: np.uint64, doc_id: np.uint64) -> np.uint64:
    """The start of a document's random stream, from ``(seed, step, document id)``."""
    key = _mix(seed + _GOLDEN)
    key = _mix(key ^ (step + _GOLDEN))
    return _mix(key ^ (doc_id + _GOLDEN))


@numba.njit(cache=True, nogil=True)
def _uniform(state: np.ndarray) -> float:
    """The next uniform in [0, 1) of the stream ``state`` (one uint64, advanced)."""
    state[0] += _GOLDEN
    return float(_mix(state[0]) >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True, nogil=True)
def _smooth_topic(x: float, cum_smooth: np.ndarray) -> int:
    """The first topic whose cumulative smoothing weight exceeds ``x``."""
    lo, hi = 0, cum_smooth.size - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum_smooth[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    return lo


@numba.njit(cache=True, nogil=True)
def draw_topic(
    u: float,
    j: int,
    ndk: np.ndarray,
    active: np.ndarray,
    n_active: int,
    doc_total: float,
    w_indptr: np.ndarray,
    w_topics: np.ndarray,
    w_excess: np.ndarray,
    smooth: np.ndarray,
    alpha: np.ndarray,
    cum_smooth: np.ndarray,
) -> int:
    """The topic that ``u`` in [0, 1) picks for a token of local word ``j``.

    ``ndk`` (K,) holds the document's counts without the token; ``active[:n_active]``
    the topics with ``ndk > 0`` and ``doc_total`` their bucket's total
    ``sum_k ndk[k] * smooth[k]``. Buckets are walked word, document, smoothing.
    """
    start, stop = w_indptr[j], w_indptr[j + 1]
    word_total = 0.0
    for e in range(start, stop):
        k = w_topics[e]
        word_total += (alpha[k] + ndk[k]) * w_excess[e]
    smooth_total = cum_smooth[cum_smooth.size - 1]
    x = u * (word_total + doc_total + smooth_total)
    if x < word_total:
        last = -1
        for e in range(start, stop):
            k = w_topics[e]
            weight = (alpha[k] + ndk[k]) * w_excess[e]
            if weight > 0.0:
                last = k
            x -= weight
            if x < 0.0:
                return k
        return last  # rounding left x a hair past the bucket's sum
    x -= word_total
    if x < doc_total and n_active > 0:
        last = active[0]
        for a in range(n_active):
            k = active[a]
            last = k
            x -= ndk[k] * smooth[k]
            if x < 0.0:
                return k
        return last
    x -= doc_total
    # smoothing: the first k whose cumulative sum exceeds x (binary search, inline
    # as the rest of this per-token draw)
    lo, hi = 0, cum_smooth.size - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum_smooth[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    return lo


@numba.njit(cache=True, nogil=True)
def _add(k: int, ndk, active, where, n_active: int) -> int:
    """Count one token on topic k; returns the new number of active topics."""
    if ndk[k] == 0:
        active[n_active] = k
        where[k] = n_active
        n_active += 1
    ndk[k] += 1
    return n_active


@numba.njit(cache=True, nogil=True)
def _remove(k: int, ndk, active, where, n_active: int) -> int:
    """Take one token off topic k (swap-removal from the active list)."""
    ndk[k] -= 1
    if ndk[k] == 0:
        n_active -= 1
        last = active[n_active]
        active[where[k]] = last
        where[last] = where[k]
    return n_active


@numba.njit(cache=True, nogil=True)
def _document_tokens(words, counts, lo: int, hi: int) -> np.ndarray:
    """A document's tokens: local word ``words[e]`` ``counts[e]`` times, in order."""
    n_tokens = 0
    for e in range(lo, hi):
        n_tokens += counts[e]
    tok = np.empty(n_tokens, np.int64)
    t = 0
    for e in range(lo, hi):
        for _ in range(counts[e]):
            tok[t] = words[e]
            t += 1
    return tok


@numba.njit(cache=True, nogil=True)
def sample_documents(
    indptr: np.ndarray,
    words: np.ndarray,
    counts: np.ndarray,
    doc_ids: np.ndarray,
    seed: np.uint64,
    step: np.uint64,
    burnin: int,
    samples: int,
    w_indptr: np.ndarray,
    w_topics: np.ndarray,
    w_excess: np.ndarray,
    smooth: np.ndarray,
    alpha: np.ndarray,
    cum_smooth: np.ndarray,
    out_words: np.ndarray,
    out_topics: np.ndarray,
) -> None:
    """Sample every document's topics: the sequential start (footnote 3), ``burnin``
    sweeps, then ``samples`` kept sweeps (Alg. 1).

    Document ``d`` has local words ``words[indptr[d]:indptr[d+1]]`` occurring
    ``counts`` (integer) times, taken as tokens in that order. The kept
    sweeps' assignments are written token by token: sweep ``s``'s token ``i``
    (counting over all documents) to ``out_words[s * T + i]`` and
    ``out_topics[s * T + i]``, ``T`` the number of tokens.
    """
    K = smooth.size
    T = 0
    for e in range(counts.size):
        T += counts[e]
    ndk = np.zeros(K, np.int64)
    where = np.zeros(K, np.int64)
    active = np.zeros(K, np.int64)
    state = np.zeros(1, np.uint64)
    offset = 0
    for d in range(indptr.size - 1):
        tok = _document_tokens(words, counts, indptr[d], indptr[d + 1])
        n_tokens = tok.size
        z = np.empty(n_tokens, np.int64)
        state[0] = document_key(seed, step, np.uint64(doc_ids[d]))
        n_active = _start(
            tok, z, state, ndk, active, where, w_indptr, w_topics, w_excess, smooth, alpha,
            cum_smooth,
        )  # fmt: skip
        for sweep in range(burnin + samples):
            doc_total = 0.0  # summed again each sweep, so rounding cannot build up
            for a in range(n_active):
                doc_total += ndk[active[a]] * smooth[active[a]]
            for i in range(n_tokens):
                # take token i out and draw it again, written out here and in the
                # Rao-Blackwellised sampler: as a helper returning a tuple, called
                # per token, the whole step took 1.5-1.8x as long
                k = z[i]
                n_active = _remove(k, ndk, active, where, n_active)
                doc_total -= smooth[k]
                if doc_total < 0.0:
                    doc_total = 0.0
                k = draw_topic(
                    _uniform(state), tok[i], ndk, active, n_active, doc_total, w_indptr,
                    w_topics, w_excess, smooth, alpha, cum_smooth,
                )  # fmt: skip
                z[i] = k
                n_active = _add(k, ndk, active, where, n_active)
                doc_total += smooth[k]
            if sweep >= burnin:
                at = (sweep - burnin) * T + offset
                for i in range(n_tokens):
                    out_words[at + i] = tok[i]
                    out_topics[at + i] = z[i]
        for a in range(n_active):  # clear the document's counts
            ndk[active[a]] = 0
        offset += n_tokens


@numba.njit(cache=True, nogil=True)
def sequential_start(
    tokens: np.ndarray,
    key: np.uint64,
    w_indptr: np.ndarray,
    w_topics: np.ndarray,
    w_excess: np.ndarray,
    smooth: np.ndarray,
    alpha: np.ndarray,
    cum_smooth: np.ndarray,
) -> np.ndarray:
    """The sequential start of one document (footnote 3) on its own: token ``i``
    (local word ``tokens[i]``) drawn given the topics of tokens ``0..i-1`` only."""
    K = smooth.size
    state = np.zeros(1, np.uint64)
    state[0] = key
    z = np.empty(tokens.size, np.int64)
    _start(
        tokens, z, state, np.zeros(K, np.int64), np.zeros(K, np.int64), np.zeros(K, np.int64),
        w_indptr, w_topics, w_excess, smooth, alpha, cum_smooth,
    )  # fmt: skip
    return z


@numba.njit(cache=True, nogil=True)
def _start(tok, z, state, ndk, active, where, w_indptr, w_topics, w_excess, smooth, alpha, cum):
    """The sequential start (footnote 3): each token ``tok[i]`` drawn into ``z[i]``
    given the topics of the tokens before it, counted in ``ndk`` (empty at the
    start) and its active list; returns the number of active topics."""
    n_active = 0
    doc_total = 0.0
    for i in range(tok.size):
        k = draw_topic(
            _uniform(state), tok[i], ndk, active, n_active, doc_total, w_indptr, w_topics,
            w_excess, smooth, alpha, cum,
        )  # fmt: skip
        z[i] = k
        n_active = _add(k, ndk, active, where, n_active)
        doc_total += smooth[k]
    return n_active


@numba.njit(cache=True, nogil=True)
def draw_many(
    us: np.ndarray,
    j: int,
    ndk: np.ndarray,
    active: np.ndarray,
    w_indptr: np.ndarray,
    w_topics: np.ndarray,
    w_excess: np.ndarray,
    smooth: np.ndarray,
    alpha: np.ndarray,
    cum_smooth: np.ndarray,
) -> np.ndarray:
    """:func:`draw_topic` for each uniform of ``us``, one document state (tests)."""
    n_active = active.size
    doc_total = 0.0
    for a in range(n_active):
        doc_total += ndk[active[a]] * smooth[active[a]]
    out = np.empty(us.size, np.int64)
    for i in range(us.size):
        out[i] = draw_topic(
            us[i], j, ndk, active, n_active, doc_total, w_indptr, w_topics, w_excess, smooth,
            alpha, cum_smooth,
        )  # fmt: skip
    return out


@numba.njit(cache=True, nogil=True)
def uniforms(key: np.uint64, n: int) -> np.ndarray:
    """The first ``n`` uniforms of the stream started at ``key`` (tests)."""
    state = np.zeros(1, np.uint64)
    state[0] = key
    out = np.empty(n)
    for i in range(n):
        out[i] = _uniform(state)
    return out


#: mixed into a document's key to start its second stream (the estimator's)
_RB_SALT = np.uint64(0x5DEECE66DA3C2B1F)


@numba.njit(cache=True, nogil=True)
def conditional_pieces(
    j: int,
    ndk: np.ndarray,
    active: np.ndarray,
    n_active: int,
    w_indptr: np.ndarray,
    w_topics: np.ndarray,
    w_excess: np.ndarray,
    smooth: np.ndarray,
    alpha: np.ndarray,
    out_topics: np.ndarray,
    out_weights: np.ndarray,
) -> int:
    """Eq. 9's word- and document-bucket weights of a token of local word ``j``
    (``ndk`` without the token), unnormalised, written as (topic, weight) pieces
    in the buckets' order into ``out_*``; returns how many. The smoothing
    bucket's total is ``cum_smooth[-1]``."""
    n = 0
    for e in range(w_indptr[j], w_indptr[j + 1]):
        k = w_topics[e]
        out_topics[n] = k
        out_weights[n] = (alpha[k] + ndk[k]) * w_excess[e]
        n += 1
    for a in range(n_active):
        k = active[a]
        out_topics[n] = k
        out_weights[n] = ndk[k] * smooth[k]
        n += 1
    return n


@numba.njit(cache=True, nogil=True)
def token_quanta(
    v: float,
    u_rest: float,
    quanta: int,
    n_exact: int,
    n_pieces: int,
    piece_topics: np.ndarray,
    piece_weights: np.ndarray,
    cum_smooth: np.ndarray,
    out_topics: np.ndarray,
    out_quanta: np.ndarray,
) -> int:
    """A token's conditional in whole quanta. The first ``n_exact`` pieces are
    the *exact* part, the other pieces and the smoothing bucket the *rest*;
    ``u_rest`` in [0, 1) picks the rest with its probability, and then all
    ``quanta`` go to one topic drawn from the rest's weights (a draw, as
    sparse as one); otherwise the quanta are shared over the exact pieces in
    proportion to their weights, rounded systematically with the offset ``v``
    in [0, 1). Either way topic ``k`` gets ``quanta * p_k`` on average. Writes
    (topic, quanta > 0) pairs into ``out_*`` and returns how many; the quanta
    add up to exactly ``quanta``."""
    exact = 0.0
    for p in range(n_exact):
        exact += piece_weights[p]
    rest = cum_smooth[cum_smooth.size - 1]
    for p in range(n_exact, n_pieces):
        rest += piece_weights[p]
    x = u_rest * (exact + rest)
    if x < rest or exact <= 0.0:  # the rest: one topic drawn from it takes the token
        for p in range(n_exact, n_pieces):
            x -= piece_weights[p]
            if x < 0.0:
                out_topics[0] = piece_topics[p]
                out_quanta[0] = quanta
                return 1
        out_topics[0] = _smooth_topic(min(max(x, 0.0), cum_smooth[cum_smooth.size - 1]), cum_smooth)
        out_quanta[0] = quanta
        return 1
    scale = quanta / exact
    c = 0.0
    given = 0
    n = 0
    for p in range(n_exact):
        c += piece_weights[p] * scale
        upto = min(int(np.floor(c + v)), quanta)
        if p == n_exact - 1:
            upto = quanta  # the last piece ends at the whole (c is quanta up to rounding)
        if upto > given:
            out_topics[n] = piece_topics[p]
            out_quanta[n] = upto - given
            n += 1
            given = upto
    return n


@numba.njit(cache=True, nogil=True)
def _grow(keys: np.ndarray, vals: np.ndarray, need: int):
    """``keys`` and ``vals`` with room for at least ``need`` entries."""
    if need <= keys.size:
        return keys, vals
    size = max(need, 2 * keys.size)
    k2 = np.empty(size, np.int64)
    v2 = np.empty(size, np.int64)
    k2[: keys.size] = keys
    v2[: vals.size] = vals
    return k2, v2


@numba.njit(cache=True, nogil=True)
def _merge_from(start: int, n: int, keys: np.ndarray, vals: np.ndarray) -> int:
    """Sort ``keys[start:n]`` and add the values of equal keys; returns the new end."""
    if n - start < 2:
        return n
    order = np.argsort(keys[start:n], kind="mergesort")
    k_seg = keys[start:n][order]
    v_seg = vals[start:n][order]
    m = start
    keys[m] = k_seg[0]
    vals[m] = v_seg[0]
    for i in range(1, k_seg.size):
        if k_seg[i] == keys[m]:
            vals[m] += v_seg[i]
        else:
            m += 1
            keys[m] = k_seg[i]
            vals[m] = v_seg[i]
    return m + 1


@numba.njit(cache=True, nogil=True)
def sample_documents_rb(
    indptr: np.ndarray,
    words: np.ndarray,
    counts: np.ndarray,
    doc_ids: np.ndarray,
    seed: np.uint64,
    step: np.uint64,
    burnin: int,
    samples: int,
    quanta: int,
    spread_document: bool,
    w_indptr: np.ndarray,
    w_topics: np.ndarray,
    w_excess: np.ndarray,
    smooth: np.ndarray,
    alpha: np.ndarray,
    cum_smooth: np.ndarray,
    with_doc_topics: bool = False,
):
    """:func:`sample_documents`' chains, counted by the Rao-Blackwellised
    estimator (the word bucket's pieces rounded each, and the document
    bucket's too where ``spread_document``; the rest on one drawn topic):
    returns keys ``local word * K + topic`` (sorted within each
    document) and their quanta summed over the kept sweeps (each token adds
    ``quanta`` per kept sweep), merged per document; and, where
    ``with_doc_topics`` (else empty), each kept sweep's document-topic counts
    at its end, as the topics and counts of every document's active topics
    (what a learned prior is fitted to)."""
    K = smooth.size
    T = 0
    if with_doc_topics:
        for e in range(counts.size):
            T += counts[e]
    doc_topics = np.empty(T * samples, np.int64)
    doc_counts = np.empty(T * samples, np.int64)
    n_doc = 0
    ndk = np.zeros(K, np.int64)
    where = np.zeros(K, np.int64)
    active = np.zeros(K, np.int64)
    state = np.zeros(1, np.uint64)
    rb_state = np.zeros(1, np.uint64)
    max_w = 0
    for j in range(w_indptr.size - 1):
        max_w = max(max_w, w_indptr[j + 1] - w_indptr[j])
    piece_topics = np.empty(max_w + K, np.int64)
    piece_weights = np.empty(max_w + K)
    tok_topics = np.empty(quanta + 1, np.int64)
    tok_quanta = np.empty(quanta + 1, np.int64)
    keys = np.empty(1024, np.int64)
    vals = np.empty(1024, np.int64)
    n_out = 0
    for d in range(indptr.size - 1):
        tok = _document_tokens(words, counts, indptr[d], indptr[d + 1])
        n_tokens = tok.size
        z = np.empty(n_tokens, np.int64)
        key = document_key(seed, step, np.uint64(doc_ids[d]))
        state[0] = key
        rb_state[0] = _mix(key ^ _RB_SALT)
        keys, vals = _grow(keys, vals, n_out + n_tokens * samples * quanta)
        doc_start = n_out
        n_active = _start(
            tok, z, state, ndk, active, where, w_indptr, w_topics, w_excess, smooth, alpha,
            cum_smooth,
        )  # fmt: skip
        for sweep in range(burnin + samples):
            kept = sweep >= burnin
            doc_total = 0.0
            for a in range(n_active):
                doc_total += ndk[active[a]] * smooth[active[a]]
            for i in range(n_tokens):
                k = z[i]
                n_active = _remove(k, ndk, active, where, n_active)
                doc_total -= smooth[k]
                if doc_total < 0.0:
                    doc_total = 0.0
                if kept:
                    n_pieces = conditional_pieces(
                        tok[i], ndk, active, n_active, w_indptr, w_topics, w_excess, smooth,
                        alpha, piece_topics, piece_weights,
                    )  # fmt: skip
                    n_exact = n_pieces
                    if not spread_document:
                        n_exact = w_indptr[tok[i] + 1] - w_indptr[tok[i]]
                    n_tok = token_quanta(
                        _uniform(rb_state), _uniform(rb_state), quanta, n_exact, n_pieces,
                        piece_topics, piece_weights, cum_smooth, tok_topics, tok_quanta,
                    )  # fmt: skip
                    for q in range(n_tok):
                        keys[n_out] = tok[i] * K + tok_topics[q]
                        vals[n_out] = tok_quanta[q]
                        n_out += 1
                k = draw_topic(
                    _uniform(state), tok[i], ndk, active, n_active, doc_total, w_indptr,
                    w_topics, w_excess, smooth, alpha, cum_smooth,
                )  # fmt: skip
                z[i] = k
                n_active = _add(k, ndk, active, where, n_active)
                doc_total += smooth[k]
            if kept and with_doc_topics:
                for a in range(n_active):
                    doc_topics[n_doc] = active[a]
                    doc_counts[n_doc] = ndk[active[a]]
                    n_doc += 1
        n_out = _merge_from(doc_start, n_out, keys, vals)
        for a in range(n_active):
            ndk[active[a]] = 0
    return keys[:n_out].copy(), vals[:n_out].copy(), doc_topics[:n_doc], doc_counts[:n_doc]


@numba.njit(cache=True, nogil=True)
def token_quanta_many(
    key: np.uint64,
    n: int,
    quanta: int,
    spread_document: bool,
    j: int,
    ndk: np.ndarray,
    active: np.ndarray,
    w_indptr: np.ndarray,
    w_topics: np.ndarray,
    w_excess: np.ndarray,
    smooth: np.ndarray,
    alpha: np.ndarray,
    cum_smooth: np.ndarray,
) -> np.ndarray:
    """``n`` independent rounded estimates (:func:`token_quanta`) of one token's
    conditional, as an (n, K) array of quanta, from the stream at ``key`` (tests)."""
    K = smooth.size
    state = np.zeros(1, np.uint64)
    state[0] = key
    pt = np.empty(w_indptr[j + 1] - w_indptr[j] + active.size, np.int64)
    pw = np.empty(pt.size)
    n_pieces = conditional_pieces(
        j, ndk, active, active.size, w_indptr, w_topics, w_excess, smooth, alpha, pt, pw
    )
    n_exact = n_pieces if spread_document else w_indptr[j + 1] - w_indptr[j]
    tt = np.empty(quanta + 1, np.int64)
    tq = np.empty(quanta + 1, np.int64)
    out = np.zeros((n, K), np.int64)
    for r in range(n):
        m = token_quanta(
            _uniform(state), _uniform(state), quanta, n_exact, n_pieces, pt, pw, cum_smooth,
            tt, tq,
        )  # fmt: skip
        for q in range(m):
            out[r, tt[q]] += tq[q]
    return out


@numba.njit(cache=True, nogil=True)
def merge_counts(
    keys_a: np.ndarray, counts_a: np.ndarray, keys_b: np.ndarray, counts_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The sum of two sparse count vectors given as sorted, distinct keys and
    their whole counts: the merged sorted, distinct keys and the summed counts
    (one pass, no sort)."""
    na, nb = keys_a.size, keys_b.size
    keys = np.empty(na + nb, np.int64)
    counts = np.empty(na + nb, np.int64)
    i = j = n = 0
    while i < na and j < nb:
        if keys_a[i] < keys_b[j]:
            keys[n], counts[n] = keys_a[i], counts_a[i]
            i += 1
        elif keys_b[j] < keys_a[i]:
            keys[n], counts[n] = keys_b[j], counts_b[j]
            j += 1
        else:
            keys[n], counts[n] = keys_a[i], counts_a[i] + counts_b[j]
            i += 1
            j += 1
        n += 1
    while i < na:
        keys[n], counts[n] = keys_a[i], counts_a[i]
        i += 1
        n += 1
    while j < nb:
        keys[n], counts[n] = keys_b[j], counts_b[j]
        j += 1
        n += 1
    return keys[:n], counts[:n]
