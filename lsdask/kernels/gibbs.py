"""One sweep of collapsed Gibbs sampling for LDA, with sparse per-token work.

Every token ``i`` of document ``d`` with word ``w`` and topic ``z_i`` is
taken out of the counts and drawn again from (Griffiths & Steyvers 2004)

    p(z_i = k | rest) ∝ (n_dk + a_k) (n_wk + eta) / (n_k + V eta),

then put back; ``a_k`` is topic k's document-topic prior (alpha / K for
LDA's symmetric prior, or any positive vector). Each draw is exact, with no
rejection: only the way the topic is found differs from summing the formula
over all K topics. The weight splits in SparseLDA's buckets (Yao, Mimno &
McCallum 2009):

    word       (a_k + n_dk) n_wk / (n_k + V eta)   over the word's topics (n_wk > 0)
    document   n_dk eta / (n_k + V eta)            over the document's topics (n_dk > 0)
    smoothing  a_k eta / (n_k + V eta)             over all K topics

and a draw is found in one of two orders, for each token the one expected to
cost less (``order="auto"``):

- **word first** (SparseLDA): the word bucket is summed over the word's
  topics, listed per word (:class:`WordTopics`); the document bucket's total
  is kept current in O(1) and walked only when the draw falls in it; the
  smoothing bucket's total is the root of a binary sum tree over the K
  weights ``a_k / (n_k + V eta)``, descended (O(log K)) only when the draw
  falls in it.
- **document first**: ``n_dk (n_wk + eta) / (n_k + V eta)`` is summed over the
  document's topics; the rest, the prior's part ``a_k (n_wk + eta) / (n_k + V
  eta)``, is bounded by ``n_w max_k a_k / (n_k + V eta) + S`` and summed (over
  the word's topics, and the smoothing total) only when the draw falls past
  the document's part; the rest of the uniform then splits the two parts so
  that each topic is drawn with exactly its weight.

Word first costs the word's topics, document first the document's: with a
small prior (LDA's alpha / K) a document holds few topics and draws rarely
fall past them; with a large one documents hold many topics, and the word's
are fewer. Nothing runs over all K topics per draw.

Without the word lists (``lists=None``) every draw is document first and a
draw past the document's part sums the prior's part over all K topics: the
two-bucket draw, which costs least while such draws are rare (a small prior),
since the lists cost their upkeep; :mod:`lsdask.learn.gibbs_start` switches to
the lists when the draws that summed over all K topics cost more than that.

The counts are integers: ``ndk`` (documents x K), ``nwk`` (V x K, one word's
topics contiguous), ``nk`` (K,); ``word_total`` (V,) holds each word's number
of tokens (constant while sampling). The draws use the caller's uniforms, one
per token, so a sweep is a pure function of its inputs (the word lists, kept
in increasing order of topic, are a function of ``nwk``).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np

#: the entries of the draw counts a sweep returns: draws whose topic was found
#: in the word's part (the word bucket, or the prior's part summed over all K
#: topics), in the document's, in the smoothing tree, and (a cost, overlapping
#: the others) the draws that summed the prior's part over all K topics
WORD_BUCKET, DOCUMENT_BUCKET, SMOOTHING_BUCKET, FULL_SUMS = 0, 1, 2, 3
#: how a draw is found (``order``): each token the cheaper, always the word's
#: topics first (SparseLDA's three buckets), or always the document's first
_ORDERS = {"auto": 0, "word": 1, "document": 2}
_AUTO, _DOCUMENT_FIRST = 0, 2
# the bound of a document-first draw is widened by this relative margin so that rounding
# in the exact sums can never put them above it
_BOUND_MARGIN = 1e-9
# the kept totals of the smoothing weights are summed again at least once in this many
# tokens, so that their rounding stays far below the margin
_FLUSH_TOKENS = 4096


class WordTopics(NamedTuple):
    """Each word's topics with ``n_wk > 0``: word w's are
    ``topics[head[w, 0] : head[w, 0] + head[w, 1]]``, in increasing order (so
    that a draw depends on the counts alone, not on the lists' history), with
    room for ``min(word_total[w], K)`` of them."""

    head: np.ndarray  # int64 (V, 2): first place, topics listed
    topics: np.ndarray  # int32 (sum over words of min(word_total, K),)


def word_topic_lists(nwk: np.ndarray, word_total: np.ndarray) -> WordTopics:
    """The :class:`WordTopics` of the counts ``nwk`` (V, K), whose rows sum to
    ``word_total`` (V,)."""
    room = np.minimum(np.asarray(word_total, dtype=np.int64), nwk.shape[1])
    head = np.zeros((nwk.shape[0], 2), dtype=np.int64)
    head[1:, 0] = np.cumsum(room[:-1])
    topics = np.empty(int(room.sum()), dtype=np.int32)
    _fill_word_topics(nwk, np.asarray(word_total, dtype=np.int64), head, topics)
    return WordTopics(head, topics)


@numba.njit(nogil=True, cache=True)
def _fill_word_topics(nwk, word_total, head, topics):
    K = nwk.shape[1]
    for w in range(nwk.shape[0]):
        n = 0
        total = 0
        for k in range(K):
            if nwk[w, k] > 0:
                if n < min(word_total[w], K):
                    topics[head[w, 0] + n] = k
                n += 1
                total += nwk[w, k]
        if total != word_total[w]:
            raise ValueError("word_topic_lists: the rows of nwk must sum to word_total")
        head[w, 1] = n


def _prior_vector(a: float | np.ndarray, K: int) -> np.ndarray:
    """``a`` as a positive float64 (K,) vector (a scalar: the same for every topic)."""
    vector = np.ascontiguousarray(np.broadcast_to(np.asarray(a, dtype=np.float64), (K,)))
    if not (np.all(np.isfinite(vector)) and np.all(vector > 0)):
        raise ValueError("the document-topic prior a must be positive and finite")
    return vector


def sparse_gibbs_sweep(
    doc_ptr: np.ndarray,
    words: np.ndarray,
    z: np.ndarray,
    ndk: np.ndarray,
    nwk: np.ndarray,
    nk: np.ndarray,
    word_total: np.ndarray,
    a: float | np.ndarray,
    eta: float,
    uniforms: np.ndarray,
    lists: WordTopics | None = None,
    order: str = "auto",
) -> np.ndarray:
    """Resample every token's topic once, in document order, in place.

    Parameters
    ----------
    doc_ptr : int64 (n_docs + 1,); tokens of document d are ``doc_ptr[d]:doc_ptr[d + 1]``
    words : int32 (n_tokens,) word ids; z : int32 (n_tokens,) topics
    ndk : int32 (n_docs, K); nwk : int32 (V, K); nk : int64 (K,)
    word_total : int64 (V,), ``nwk.sum(axis=1)``
    a : float (the same for every topic: alpha / K) or float64 (K,), the
        document-topic prior
    eta : float
    uniforms : float64 (n_tokens,) in [0, 1), token i's at ``uniforms[i]``
    lists : the word topic lists of ``nwk`` (:func:`word_topic_lists`), kept
        current; None: every draw document first, and a draw past the
        document's part sums the prior's part over all K topics
    order : with ``lists``, how each draw is found (all exact): ``"word"``,
        the word's topics first; ``"document"``, the document's first;
        ``"auto"``, for each token the one expected to cost less

    Returns
    -------
    int64 (4,): the draw counts ``WORD_BUCKET``, ``DOCUMENT_BUCKET``,
    ``SMOOTHING_BUCKET`` and ``FULL_SUMS``.
    """
    no_moves = np.empty((3, 0), dtype=np.int32)
    counts = (ndk, nwk, nk, word_total)
    return _run(doc_ptr, words, z, *counts, a, eta, uniforms, 0, no_moves, lists, order)[0]


def gibbs_sweep_moves(
    doc_ptr: np.ndarray,
    words: np.ndarray,
    z: np.ndarray,
    ndk: np.ndarray,
    nwk: np.ndarray,
    nk: np.ndarray,
    word_total: np.ndarray,
    a: float | np.ndarray,
    eta: float,
    uniforms: np.ndarray,
    moves: np.ndarray,
    lists: WordTopics | None = None,
    order: str = "auto",
) -> tuple[np.ndarray, int]:
    """:func:`sparse_gibbs_sweep` over the tokens ``doc_ptr[0]:doc_ptr[-1]``
    (a run of documents; token i's uniform at ``uniforms[i - doc_ptr[0]]``),
    recording every token that changed topic: ``moves[:, j]`` = (word, old
    topic, new topic), j < the number returned. ``moves`` (3, at least the
    run's tokens) int32, or (3, 0) to record nothing. Returns ``(draw counts,
    tokens moved)``."""
    n_tokens = doc_ptr[-1] - doc_ptr[0]
    if uniforms.shape[0] < n_tokens:
        raise ValueError("gibbs_sweep_moves: fewer uniforms than the run's tokens")
    if moves.shape[0] != 3 or 0 < moves.shape[1] < n_tokens:
        raise ValueError("gibbs_sweep_moves: moves must be (3, >= the run's tokens) or (3, 0)")
    counts = (ndk, nwk, nk, word_total)
    return _run(doc_ptr, words, z, *counts, a, eta, uniforms, doc_ptr[0], moves, lists, order)


def _run(
    doc_ptr: np.ndarray,
    words: np.ndarray,
    z: np.ndarray,
    ndk: np.ndarray,
    nwk: np.ndarray,
    nk: np.ndarray,
    word_total: np.ndarray,
    a: float | np.ndarray,
    eta: float,
    uniforms: np.ndarray,
    first: int,
    moves: np.ndarray,
    lists: WordTopics | None,
    order: str,
) -> tuple[np.ndarray, int]:
    """The sweep with its arguments checked; token i's uniform at ``uniforms[i - first]``."""
    if order not in _ORDERS:
        raise ValueError(f"order must be one of {', '.join(map(repr, _ORDERS))}; got {order!r}")
    if lists is not None and lists.head.shape != (nwk.shape[0], 2):
        raise ValueError("lists: not the word topic lists of these counts (word_topic_lists)")
    a_k = _prior_vector(a, nk.shape[0])
    counts = (ndk, nwk, nk, word_total)
    if lists is None:
        draws, moved = _sweep_two_buckets(
            doc_ptr, words, z, *counts, a_k, eta, uniforms, first, moves
        )
    else:
        draws, moved = _sweep(
            doc_ptr, words, z, *counts, a_k, eta, uniforms, first, moves, _ORDERS[order], *lists
        )
    return draws, int(moved)


@numba.njit(nogil=True, cache=True, inline="always")
def _invert(cumulative, n, target):
    """First index whose cumulative weight exceeds ``target`` (the last when
    rounding leaves none)."""
    j = 0
    while j < n - 1 and cumulative[j] <= target:
        j += 1
    return j


@numba.njit(nogil=True, cache=True, inline="always")
def _tree_set(tree, leaves, k, value):
    """Set leaf ``k`` of the sum tree (``leaves`` leaves at ``leaves + k``,
    node i the sum of nodes 2i and 2i + 1, root 1) and recompute the sums on
    its path to the root: each node is exactly the sum of its children."""
    i = leaves + k
    if tree[i] == value:
        return
    tree[i] = value
    i >>= 1
    while i >= 1:
        tree[i] = tree[2 * i] + tree[2 * i + 1]
        i >>= 1


@numba.njit(nogil=True, cache=True, inline="always")
def _tree_find(tree, leaves, target):
    """The leaf where the cumulative sum passes ``target`` (in [0, tree[1]])."""
    i = 1
    while i < leaves:
        left = tree[2 * i]
        if target < left or tree[2 * i + 1] <= 0.0:  # rounding never enters an empty side
            i = 2 * i
        else:
            target -= left
            i = 2 * i + 1
    return i - leaves


@numba.njit(nogil=True, cache=True, inline="always")
def _flush(tree, leaves, a, inverse, dirty, dirty_list, n_dirty):
    """Bring the tree's dirty leaves up to date: each one and its path once
    or, with many, every node once."""
    depth = 0
    while (1 << depth) < leaves:
        depth += 1
    if n_dirty * depth <= leaves:
        for j in range(n_dirty):
            t = dirty_list[j]
            _tree_set(tree, leaves, t, a[t] * inverse[t])
            dirty[t] = False
    else:
        for j in range(n_dirty):
            t = dirty_list[j]
            tree[leaves + t] = a[t] * inverse[t]
            dirty[t] = False
        for i in range(leaves - 1, 0, -1):
            tree[i] = tree[2 * i] + tree[2 * i + 1]


@numba.njit(nogil=True, cache=True, inline="always")
def _drop_word_topic(head, topics, w, k):
    """Remove topic ``k`` from word ``w``'s list (kept in increasing order)."""
    start = head[w, 0]
    end = start + head[w, 1]
    j = start
    while topics[j] != k:
        j += 1
    while j < end - 1:
        topics[j] = topics[j + 1]
        j += 1
    head[w, 1] -= 1


@numba.njit(nogil=True, cache=True, inline="always")
def _add_word_topic(head, topics, w, k):
    """Put topic ``k`` into word ``w``'s list (kept in increasing order)."""
    start = head[w, 0]
    j = start + head[w, 1]
    while j > start and topics[j - 1] > k:
        topics[j] = topics[j - 1]
        j -= 1
    topics[j] = k
    head[w, 1] += 1


@numba.njit(nogil=True, cache=True)
def _sweep_two_buckets(doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, uniforms, first, moves):
    """The sweep without word lists: every draw document first, and a draw
    past the document's part sums the prior's part over all K topics."""
    record = moves.shape[1] > 0
    n_moved = 0
    K = nk.shape[0]
    V_eta = nwk.shape[0] * eta
    inverse = np.empty(K)  # 1 / (n_k + V eta), kept current
    smooth_sum = 0.0  # sum_k a_k / (n_k + V eta), kept current (exact after each full sum)
    leaf_max = 0.0  # at least max_k a_k / (n_k + V eta): exact here, raised as counts drop
    for k in range(K):
        inverse[k] = 1.0 / (nk[k] + V_eta)
        smooth_sum += a[k] * inverse[k]
        leaf_max = max(leaf_max, a[k] * inverse[k])
    active = np.empty(K, dtype=np.int32)  # the document's topics with n_dk > 0, in any order
    slot = np.zeros(K, dtype=np.int32)  # position of a topic in ``active`` (read only for those)
    doc_cumulative = np.empty(K)
    prior_cumulative = np.empty(K)
    draws = np.zeros(4, dtype=np.int64)
    since_exact = 0  # tokens since smooth_sum was last summed
    for d in range(doc_ptr.shape[0] - 1):
        if since_exact >= _FLUSH_TOKENS:  # its rounding kept far below the bound's margin
            smooth_sum = 0.0
            for k in range(K):
                smooth_sum += a[k] * inverse[k]
            since_exact = 0
        since_exact += doc_ptr[d + 1] - doc_ptr[d]
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
            smooth_sum -= a[k] * inverse[k]
            inverse[k] = 1.0 / (nk[k] + V_eta)
            smooth_sum += a[k] * inverse[k]
            leaf_max = max(leaf_max, a[k] * inverse[k])
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
            # the prior's part, sum_k a_k (n_wk + eta) / (n_k + V eta), bounded
            bound = ((word_total[w] - 1) * leaf_max + eta * smooth_sum) * (1.0 + _BOUND_MARGIN)
            u = uniforms[i - first] * (D + bound)
            if u < D:
                draws[DOCUMENT_BUCKET] += 1
                k = active[_invert(doc_cumulative, n_active, u)]
            else:
                draws[FULL_SUMS] += 1
                B = 0.0
                smooth_sum = 0.0
                for t in range(K):
                    B += a[t] * (nwk[w, t] + eta) * inverse[t]
                    prior_cumulative[t] = B
                    smooth_sum += a[t] * inverse[t]
                v = (u - D) / bound  # uniform in [0, 1), given u >= D
                # P(prior | u >= D) that makes P(prior) = B / (D + B) overall; 1 with no
                # document part (D = 0); written so that no product can overflow
                p_prior = 1.0 if n_active == 0 else (B / bound) * ((bound + D) / (D + B))
                if v < p_prior or n_active == 0:
                    draws[WORD_BUCKET] += 1
                    k = _invert(prior_cumulative, K, v / p_prior * B)
                else:
                    draws[DOCUMENT_BUCKET] += 1
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
            smooth_sum -= a[k] * inverse[k]
            inverse[k] = 1.0 / (nk[k] + V_eta)
            smooth_sum += a[k] * inverse[k]
            if ndk[d, k] == 1:
                active[n_active] = k
                slot[k] = n_active
                n_active += 1
    return draws, n_moved


@numba.njit(nogil=True, cache=True)
def _sweep(
    doc_ptr, words, z, ndk, nwk, nk, word_total, a, eta, uniforms, first, moves, order, head,
    topics,
):  # fmt: skip
    """The sweep with the word lists; token i's uniform is ``uniforms[i -
    first]``; moves are recorded when ``moves`` has room for them (not with a
    (3, 0) array).

    A token is taken out of the counts for its draw, but the upkeep of that
    (the document's and the word's topic lists, the kept totals, the tree) is
    done only if it moves to another topic: a token drawn back to its topic
    leaves everything as it was. Meanwhile its topic stays in the lists, with
    a weight that may be 0."""
    record = moves.shape[1] > 0
    n_moved = 0
    K = nk.shape[0]
    V_eta = nwk.shape[0] * eta
    inverse = np.empty(K)  # 1 / (n_k + V eta), kept current
    coef = np.empty(K)  # (a_k + n_dk) / (n_k + V eta) for the current document, kept current
    leaves = 1
    while leaves < K:
        leaves *= 2
    # leaf k: a_k / (n_k + V eta) when last flushed; the smoothing total is
    # eta (tree[1] + stale), stale the dirty leaves' change since then
    tree = np.zeros(2 * leaves)
    leaf_max = 0.0  # at least max_k a_k / (n_k + V eta): exact here, raised as counts drop
    for k in range(K):
        inverse[k] = 1.0 / (nk[k] + V_eta)
        coef[k] = a[k] * inverse[k]
        tree[leaves + k] = coef[k]
        leaf_max = max(leaf_max, coef[k])
    for i in range(leaves - 1, 0, -1):
        tree[i] = tree[2 * i] + tree[2 * i + 1]
    stale = 0.0
    since_flush = 0  # tokens
    dirty = np.zeros(K, dtype=np.bool_)
    dirty_list = np.empty(K, dtype=np.int32)
    n_dirty = 0
    active = np.empty(K, dtype=np.int32)  # the document's topics with n_dk > 0, in any order
    slot = np.zeros(K, dtype=np.int32)  # position of a topic in ``active`` (read only for those)
    word_cumulative = np.empty(K)
    doc_cumulative = np.empty(K)
    draws = np.zeros(4, dtype=np.int64)
    # document-first draws, and those of them past the document's part: what a
    # document-first draw costs is estimated from them
    n_document_first = 0
    n_past = 0
    for d in range(doc_ptr.shape[0] - 1):
        n_active = 0
        r_sum = 0.0  # sum over the document's topics of n_dk / (n_k + V eta), kept current
        for t in range(K):  # from the counts: O(K) once per document, not per draw
            if ndk[d, t] > 0:
                active[n_active] = t
                slot[t] = n_active
                n_active += 1
                coef[t] = (a[t] + ndk[d, t]) * inverse[t]
                r_sum += ndk[d, t] * inverse[t]
        past = (n_past + 1.0) / (n_document_first + 2.0)
        for i in range(doc_ptr[d], doc_ptr[d + 1]):
            w = words[i]
            old = z[i]
            # the token out of the counts, its upkeep pending
            ndk[d, old] -= 1
            nwk[w, old] -= 1
            nk[old] -= 1
            kept_inverse = inverse[old]
            kept_coef = coef[old]
            inverse[old] = 1.0 / (nk[old] + V_eta)
            coef[old] = (a[old] + ndk[d, old]) * inverse[old]
            old_leaf = a[old] * inverse[old]
            leaf_max = max(leaf_max, old_leaf)
            r_change = ndk[d, old] * inverse[old] - (ndk[d, old] + 1) * kept_inverse
            stale_change = old_leaf - a[old] * kept_inverse
            S = eta * (tree[1] + stale + stale_change)  # the smoothing total
            start = head[w, 0]
            n_word = head[w, 1]
            if order == _AUTO:
                # the expected work: the word's topics, or the document's and, for the
                # draws past them, the word's
                document_first = n_active + past * n_word < n_word
            else:
                document_first = order == _DOCUMENT_FIRST
            in_tree = False  # the draw is in the smoothing tree, at ``target``
            target = 0.0
            if not document_first:
                Q = 0.0
                for j in range(n_word):
                    t = topics[start + j]
                    Q += coef[t] * nwk[w, t]
                    word_cumulative[j] = Q
                R = eta * (r_sum + r_change)
                u = uniforms[i - first] * (Q + R + S)
                if u < Q:
                    draws[WORD_BUCKET] += 1
                    k = topics[start + _invert(word_cumulative, n_word, u)]
                elif u < Q + R:
                    draws[DOCUMENT_BUCKET] += 1
                    target = (u - Q) / eta
                    k = old  # where rounding leaves the walk short
                    total = 0.0
                    for j in range(n_active):
                        t = active[j]
                        total += ndk[d, t] * inverse[t]
                        if total > target:
                            k = t
                            break
                    if ndk[d, k] == 0:  # rounding only: the document's largest topic
                        for j in range(n_active):
                            if ndk[d, active[j]] > ndk[d, k]:
                                k = active[j]
                else:
                    in_tree = True
                    target = max(u - Q - R, 0.0) / eta
            else:
                n_document_first += 1
                D = 0.0
                for j in range(n_active):
                    t = active[j]
                    D += ndk[d, t] * (nwk[w, t] + eta) * inverse[t]
                    doc_cumulative[j] = D
                # the prior's part, Y + S, Y = sum_k a_k n_wk / (n_k + V eta) <= n_w leaf_max
                bound = ((word_total[w] - 1) * leaf_max + S) * (1.0 + _BOUND_MARGIN)
                u = uniforms[i - first] * (D + bound)
                if u < D:
                    draws[DOCUMENT_BUCKET] += 1
                    k = active[_invert(doc_cumulative, n_active, u)]
                else:
                    n_past += 1
                    Y = 0.0
                    for j in range(n_word):
                        t = topics[start + j]
                        Y += a[t] * nwk[w, t] * inverse[t]
                        word_cumulative[j] = Y
                    B = Y + S
                    v = (u - D) / bound  # uniform in [0, 1), given u >= D
                    # P(prior | u >= D) that makes P(prior) = B / (D + B) overall; 1 with no
                    # document part (D = 0); written so that no product can overflow
                    p_prior = 1.0 if D == 0.0 else (B / bound) * ((bound + D) / (D + B))
                    if v < p_prior or D == 0.0:
                        target = v / p_prior * B
                        if target < Y:
                            draws[WORD_BUCKET] += 1
                            k = topics[start + _invert(word_cumulative, n_word, target)]
                        else:
                            in_tree = True
                            target = (target - Y) / eta
                    else:
                        draws[DOCUMENT_BUCKET] += 1
                        target = (v - p_prior) / (1.0 - p_prior) * D
                        k = active[_invert(doc_cumulative, n_active, target)]
            committed = False  # the upkeep of the token's removal done
            if in_tree:
                draws[SMOOTHING_BUCKET] += 1
                committed = True  # the tree must hold the removal
                r_sum += r_change
                stale = 0.0
                if not dirty[old]:
                    dirty[old] = True
                    dirty_list[n_dirty] = old
                    n_dirty += 1
                _flush(tree, leaves, a, inverse, dirty, dirty_list, n_dirty)
                n_dirty = 0
                since_flush = 0
                k = _tree_find(tree, leaves, min(target, tree[1]))
            if k == old and not committed:  # back where it was: the removal undone, no upkeep
                ndk[d, old] += 1
                nwk[w, old] += 1
                nk[old] += 1
                inverse[old] = kept_inverse
                coef[old] = kept_coef
                continue
            if not committed:
                r_sum += r_change
                stale += stale_change
                if not dirty[old]:
                    dirty[old] = True
                    dirty_list[n_dirty] = old
                    n_dirty += 1
            if ndk[d, old] == 0:  # old leaves the document's topics: the last one takes its place
                last = active[n_active - 1]
                active[slot[old]] = last
                slot[last] = slot[old]
                n_active -= 1
                if n_active == 0:
                    r_sum = 0.0  # no document bucket: no rounding left over
            if nwk[w, old] == 0:
                _drop_word_topic(head, topics, w, old)
            if record and k != old:
                moves[0, n_moved] = w
                moves[1, n_moved] = old
                moves[2, n_moved] = k
                n_moved += 1
            z[i] = k
            ndk[d, k] += 1
            nwk[w, k] += 1
            nk[k] += 1
            r_sum -= ndk[d, k] * inverse[k] - inverse[k]  # the old inverse, with one less
            new_inverse = 1.0 / (nk[k] + V_eta)
            stale += a[k] * new_inverse - a[k] * inverse[k]
            inverse[k] = new_inverse
            r_sum += ndk[d, k] * new_inverse
            coef[k] = (a[k] + ndk[d, k]) * new_inverse
            if not dirty[k]:
                dirty[k] = True
                dirty_list[n_dirty] = k
                n_dirty += 1
            if ndk[d, k] == 1:
                active[n_active] = k
                slot[k] = n_active
                n_active += 1
            if nwk[w, k] == 1:
                _add_word_topic(head, topics, w, k)
        for j in range(n_active):  # the next document starts from the prior's coefficients
            t = active[j]
            coef[t] = a[t] * inverse[t]
        since_flush += doc_ptr[d + 1] - doc_ptr[d]
        if since_flush >= _FLUSH_TOKENS:
            _flush(tree, leaves, a, inverse, dirty, dirty_list, n_dirty)
            n_dirty = 0
            stale = 0.0
            since_flush = 0
    return draws, n_moved


def apply_moves(
    nwk: np.ndarray,
    nk: np.ndarray,
    words: np.ndarray,
    old: np.ndarray,
    new: np.ndarray,
    lists: WordTopics | None = None,
) -> None:
    """Move tokens between topics in the counts: token ``i`` (word
    ``words[i]``) leaves topic ``old[i]`` for ``new[i]``; ``lists``, the word
    topic lists of ``nwk`` where given, are kept current."""
    if lists is None:
        _apply_moves(nwk, nk, words, old, new)
    else:
        _apply_moves_listed(nwk, nk, words, old, new, *lists)


@numba.njit(nogil=True, cache=True)
def _apply_moves(nwk, nk, words, old, new):
    for i in range(words.shape[0]):
        nwk[words[i], old[i]] -= 1
        nwk[words[i], new[i]] += 1
        nk[old[i]] -= 1
        nk[new[i]] += 1


@numba.njit(nogil=True, cache=True)
def _apply_moves_listed(nwk, nk, words, old, new, head, topics):
    for i in range(words.shape[0]):
        w, k_old, k_new = words[i], old[i], new[i]
        nwk[w, k_old] -= 1
        if nwk[w, k_old] == 0:
            _drop_word_topic(head, topics, w, k_old)
        nwk[w, k_new] += 1
        if nwk[w, k_new] == 1:
            _add_word_topic(head, topics, w, k_new)
        nk[k_old] -= 1
        nk[k_new] += 1
