"""The LDA local-step kernels against plain numpy references of Alg. 2."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lsdask.kernels.lda import dense_doc_step, lda_batch_step, sparse_doc_step
from tests import naive


def _topics(rng, K, V, conc=0.05):
    """C[v, k] = E[log phi_kv] under a Dirichlet posterior, as the model makes it."""
    from scipy.special import digamma

    lam = 0.1 + rng.gamma(conc, 20.0, size=(K, V))
    return (digamma(lam) - digamma(lam.sum(1, keepdims=True))).T.copy()


def _doc(rng, V, U, ties=False):
    words = np.sort(rng.choice(V, size=U, replace=False)).astype(np.int32)
    counts = rng.integers(1, 6, size=U).astype(np.float64)
    return words, counts


def _uniform(K, a):
    """LDA's symmetric prior as the kernels take it: ``a`` for each of K topics."""
    return np.full(K, a)


def _batch(docs):
    """CSR arrays ``(indptr, words, counts)`` of a list of (words, counts) documents."""
    indptr = np.concatenate([[0], np.cumsum([len(w) for w, _ in docs])]).astype(np.int64)
    return (
        indptr,
        np.concatenate([w for w, _ in docs]).astype(np.int32),
        np.concatenate([c for _, c in docs]),
    )


DOCS = [(0, "empty"), (1, "one word"), (7, "short"), (40, "long")]


@pytest.mark.parametrize("U,label", DOCS)
@pytest.mark.parametrize("K", [1, 5, 30])
def test_dense_step_matches_reference(rng, U, label, K):
    V = 60
    C = _topics(rng, K, V)
    words, counts = _doc(rng, V, U)
    a = 0.5 / K
    R = np.empty((U, K))
    trace = np.full(101, np.nan)
    N, elbo, its, tried, _ = dense_doc_step(
        words, counts, C, _uniform(K, a), 0.0, 100, 0.05, 1e-8, False, 5, R, trace
    )
    R_ref, N_ref, trace_ref = naive.lda_dense_doc(words, counts, C, a)
    # the kernels' digamma and scipy's differ by ~1e-11, hence rtol 1e-8
    np.testing.assert_allclose(R, R_ref, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(N, N_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(trace[: its + 1], trace_ref, rtol=1e-9, atol=1e-9)
    assert elbo == pytest.approx(trace_ref[-1], rel=1e-9, abs=1e-9)
    assert tried == 0


@pytest.mark.parametrize("U,label", DOCS)
@pytest.mark.parametrize("K,L", [(1, 1), (5, 1), (5, 2), (30, 4), (30, 8), (30, 30)])
def test_sparse_step_matches_reference(rng, U, label, K, L):
    V = 60
    C = _topics(rng, K, V)
    words, counts = _doc(rng, V, U)
    a = 0.5 / K
    resp, idx = np.empty((U, L)), np.empty((U, L), dtype=np.int32)
    N, *_ = sparse_doc_step(
        words, counts, C, _uniform(K, a), 0.0, L, 100, 0.05, 1e-8, False, 5, resp, idx
    )
    r_ref, i_ref, N_ref = naive.lda_sparse_doc(words, counts, C, a, L)
    np.testing.assert_allclose(N, N_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(
        naive.densify(resp, idx, K), naive.densify(r_ref, i_ref, K), rtol=1e-8, atol=1e-12
    )


@pytest.mark.parametrize("seed", range(4))
def test_sparse_step_matches_reference_as_topics_leave_between_selections(seed):
    """A document of two topics' top words among 60 topics: the active set
    shrinks in iterations that only reweight (those tokens keep their other
    topics; a topic that left weighs 0), then falls to at most L topics (all
    tokens then hold every active topic). Both regimes must occur, and the
    kernel equals the reference."""
    rng = np.random.default_rng(seed)
    V, K, L = 200, 60, 4
    C = _topics(rng, K, V)
    two = rng.choice(K, size=2, replace=False)
    words = np.unique(np.argsort(-C[:, two], axis=0)[:10]).astype(np.int32)
    U = words.size
    counts = rng.integers(1, 6, size=U).astype(np.float64)
    a = 0.5 / K
    resp, idx = np.empty((U, L)), np.empty((U, L), dtype=np.int32)
    N, *_ = sparse_doc_step(
        words, counts, C, _uniform(K, a), 0.0, L, 100, 0.05, 1e-8, False, 5, resp, idx
    )
    seen = {}
    r_ref, i_ref, N_ref = naive.lda_sparse_doc(words, counts, C, a, L, seen=seen)
    assert seen.get("gone", 0) > 0 and seen.get("few", 0) > 0, seen
    np.testing.assert_allclose(N, N_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(
        naive.densify(resp, idx, K), naive.densify(r_ref, i_ref, K), rtol=1e-8, atol=1e-12
    )


@pytest.mark.parametrize("L", [3, 30])
def test_sparse_step_matches_reference_where_weights_spread_beyond_the_product_form(rng, L):
    """Tokens whose topics' E[log phi] spreads over more than 600 nats take the
    exact log-space path (their exp(C - max C) would underflow): in the
    per-token regime (L=3 of 30 topics) and when every token holds every
    active topic (L=30)."""
    V, K, U = 60, 30, 40
    C = _topics(rng, K, V)
    far = rng.choice(V, size=V // 2, replace=False)
    for w in far:  # all but two topics 700 nats down: any 3 topics spread that far
        C[w, np.setdiff1d(np.arange(K), rng.choice(K, size=2, replace=False))] -= 700.0
    words, counts = _doc(rng, V, U)
    a = 0.5 / K
    resp, idx = np.empty((U, L)), np.empty((U, L), dtype=np.int32)
    N, *_ = sparse_doc_step(
        words, counts, C, _uniform(K, a), 0.0, L, 100, 0.05, 1e-8, False, 5, resp, idx
    )
    r_ref, i_ref, N_ref = naive.lda_sparse_doc(words, counts, C, a, L)
    assert np.isin(words, far).any()
    np.testing.assert_allclose(N, N_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(
        naive.densify(resp, idx, K), naive.densify(r_ref, i_ref, K), rtol=1e-8, atol=1e-12
    )


@pytest.mark.parametrize("counts", [[0.0, 0.0, 0.0], [4e-10, 3e-10, 2e-10], [1e-8, 1e-8, 1e-9]])
@pytest.mark.parametrize("L", [1, 2, 40])
def test_sparse_step_where_no_topic_holds_more_than_eps(rng, counts, L):
    """Counts too small for any topic to pass eps (at the start, or after the
    first iteration): no responsibilities and no mass, never stale topic ids
    (the kernel once read an uninitialized id here and could crash)."""
    K, V = 5, 8
    C = _topics(rng, K, V)
    words, counts = np.array([0, 3, 6], dtype=np.int32), np.array(counts)
    for _ in range(20):
        resp, idx = np.empty((3, L)), np.empty((3, L), dtype=np.int32)
        N, *_ = sparse_doc_step(
            words, counts, C, _uniform(K, 0.1), 0.0, L, 100, 0.05, 1e-8, 5, 3, resp, idx
        )
        r_ref, i_ref, N_ref = naive.lda_sparse_doc(words, counts, C, 0.1, L)
        if counts.sum() <= 1e-8:  # no topic can pass eps
            np.testing.assert_array_equal(N_ref, np.zeros(K))
        np.testing.assert_allclose(N, N_ref, rtol=1e-8, atol=0)
        assert ((0 <= idx) & (idx < K)).all()
        np.testing.assert_allclose(
            naive.densify(resp, idx, K), naive.densify(r_ref, i_ref, K), rtol=1e-8, atol=1e-12
        )
        out, doc_topic = np.zeros((K, V)), np.zeros((1, K))
        lda_batch_step(
            np.array([0, 3]), words, counts, C, _uniform(K, 0.1), 0.0, L, 100, 0.05, 1e-8, 5, 3,
            out, doc_topic, np.zeros(K + 1),
        )  # fmt: skip
        np.testing.assert_allclose(doc_topic[0], N_ref, rtol=1e-8, atol=0)


def test_sparse_step_zeroes_the_mass_of_topics_inactive_from_the_start():
    """A topic whose starting mass is at most eps weighs nothing: its N is 0
    after the iterations, as in the reference (it kept its starting 5e-9)."""
    C = np.log(np.array([[0.7, 0.2, 0.1], [0.1, 0.8, 0.1]]))
    words, counts = np.array([0, 1], dtype=np.int32), np.array([3.0, 5e-9])
    resp, idx = np.empty((2, 1)), np.empty((2, 1), dtype=np.int32)
    N, *_ = sparse_doc_step(
        words, counts, C, _uniform(3, 0.1), 0.0, 1, 100, 0.05, 1e-8, 0, 3, resp, idx
    )
    _, _, N_ref = naive.lda_sparse_doc(words, counts, C, 0.1, 1)
    np.testing.assert_array_equal(N_ref[1:], [0.0, 0.0])  # both tokens end on topic 0
    np.testing.assert_allclose(N, N_ref, rtol=1e-12, atol=0)


def test_sparse_step_with_tied_topic_weights(rng):
    """Identical topics tie in every weight: the lower topic index wins."""
    V, K = 20, 6
    base = np.log(rng.dirichlet(np.full(V, 0.3)))
    C = np.repeat(base[:, None], K, axis=1)
    words, counts = _doc(rng, V, 8)
    resp, idx = np.empty((8, 2)), np.empty((8, 2), dtype=np.int32)
    N, *_ = sparse_doc_step(
        words, counts, C, _uniform(K, 0.1), 0.0, 2, 100, 0.05, 1e-8, False, 5, resp, idx
    )
    _, i_ref, N_ref = naive.lda_sparse_doc(words, counts, C, 0.1, 2)
    np.testing.assert_array_equal(idx, i_ref)
    np.testing.assert_allclose(N, N_ref, rtol=1e-8)
    assert set(np.flatnonzero(N > 1e-8)) <= {0, 1}


@pytest.mark.parametrize("seed", range(5))
def test_dense_iterations_never_decrease_the_document_elbo(seed):
    rng = np.random.default_rng(seed)
    K, V, U = 25, 200, 50
    C = _topics(rng, K, V)
    words, counts = _doc(rng, V, U)
    R = np.empty((U, K))
    trace = np.full(301, np.nan)
    _, _, its, _, _ = dense_doc_step(
        words, counts, C, _uniform(K, 0.02), 0.0, 300, 1e-6, 1e-8, False, 5, R, trace
    )
    steps = np.diff(trace[: its + 1])
    assert its > 3 and np.all(steps >= -1e-9 * np.abs(trace[1 : its + 1]))


@pytest.mark.parametrize("sparse", [False, True])
def test_restarts_are_accepted_only_when_they_improve_the_document_elbo(rng, sparse):
    K, V = 20, 150
    C = _topics(rng, K, V, conc=0.2)
    improved = accepted_total = 0
    for _ in range(30):
        words, counts = _doc(rng, V, 30)
        runs = {}
        for restarts in (False, True):
            if sparse:
                resp, idx = np.empty((30, 4)), np.empty((30, 4), dtype=np.int32)
                N, elbo, _, tried, acc = sparse_doc_step(
                    words, counts, C, _uniform(K, 0.025), 0.0, 4, 100, 0.05, 1e-8, restarts, 5,
                    resp, idx,
                )  # fmt: skip
                R = naive.densify(resp, idx, K)
            else:
                R = np.empty((30, K))
                N, elbo, _, tried, acc = dense_doc_step(
                    words, counts, C, _uniform(K, 0.025), 0.0, 100, 0.05, 1e-8, restarts, 5, R,
                    np.empty(101),
                )  # fmt: skip
            # the returned ELBO is the ELBO of the returned solution
            assert elbo == pytest.approx(
                naive.lda_doc_elbo(words, counts, C, R, N, 0.025), rel=1e-10
            )
            runs[restarts] = (elbo, tried, acc)
        (e0, t0, _), (e1, t1, a1) = runs[False], runs[True]
        assert t0 == 0 and t1 >= 1 and 0 <= a1 <= t1
        assert e1 >= e0  # never worse than without restarts
        assert (e1 > e0) == (a1 > 0)  # better exactly when a proposal was accepted
        improved += e1 > e0
        accepted_total += a1
    assert improved > 0  # proposals do get accepted on real fixed points


def test_batch_kernel_sums_documents_and_matches_single_document_steps(rng):
    K, V, D = 12, 80, 25
    C = _topics(rng, K, V)
    docs = [_doc(rng, V, int(u)) for u in rng.integers(0, 15, size=D)]
    indptr, words, counts = _batch(docs)
    for L in (0, 3):
        out = np.zeros((K, V))
        doc_topic = np.zeros((D, K))
        H, alloc, *_ = lda_batch_step(
            indptr, words, counts, C, _uniform(K, 0.04), 0.0, L, 100, 0.05, 1e-8, True, 5, out,
            doc_topic, np.zeros(K + 1),
        )  # fmt: skip
        ref_words = np.zeros((K, V))
        ref_H = ref_alloc = 0.0
        for d, (w, c) in enumerate(docs):
            if L == 0:
                R = np.empty((len(w), K))
                N, elbo, *_ = dense_doc_step(
                    w, c, C, _uniform(K, 0.04), 0.0, 100, 0.05, 1e-8, True, 5, R, np.empty(101)
                )
            else:
                resp, idx = np.empty((len(w), L)), np.empty((len(w), L), dtype=np.int32)
                N, elbo, *_ = sparse_doc_step(
                    w, c, C, _uniform(K, 0.04), 0.0, L, 100, 0.05, 1e-8, True, 5, resp, idx
                )
                R = naive.densify(resp, idx, K)
            np.testing.assert_allclose(doc_topic[d], N, rtol=1e-12, atol=1e-14)
            ref_words[:, w] += (c[:, None] * R).T
            rlogr = np.where(R > 0, R * np.log(np.where(R > 0, R, 1.0)), 0.0)
            doc_entropy = -float((c[:, None] * rlogr).sum())
            ref_H += doc_entropy
            # the document ELBO is data + entropy + allocation term
            ref_alloc += elbo - float((c[:, None] * R * C[w]).sum()) - doc_entropy
        np.testing.assert_allclose(out, ref_words, rtol=1e-12, atol=1e-12)
        assert H == pytest.approx(ref_H, rel=1e-10)
        assert alloc == pytest.approx(ref_alloc, rel=1e-10)


# --- a document-topic prior vector (learned alpha, the HDP) -------------------------


def _asymmetric(rng, K):
    """A prior of per-topic values over three orders of magnitude, two of them tied."""
    a = np.exp(rng.uniform(np.log(1e-3), np.log(2.0), size=K))
    if K > 2:
        a[K // 2] = a[0]
    return a


PRIORS = [(0.0, "no leftover"), (0.3, "a leftover topic")]


@pytest.mark.parametrize("a_rest,label", PRIORS)
@pytest.mark.parametrize("U,doc", DOCS)
@pytest.mark.parametrize("K", [1, 5, 30])
def test_dense_step_matches_reference_with_a_prior_vector(rng, U, doc, K, a_rest, label):
    V = 60
    C = _topics(rng, K, V)
    words, counts = _doc(rng, V, U)
    a = _asymmetric(rng, K)
    R = np.empty((U, K))
    trace = np.full(101, np.nan)
    N, elbo, its, *_ = dense_doc_step(
        words, counts, C, a, a_rest, 100, 0.05, 1e-8, False, 5, R, trace
    )
    R_ref, N_ref, trace_ref = naive.lda_dense_doc(words, counts, C, a, a_rest=a_rest)
    np.testing.assert_allclose(R, R_ref, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(N, N_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(trace[: its + 1], trace_ref, rtol=1e-9, atol=1e-9)
    assert elbo == pytest.approx(trace_ref[-1], rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("a_rest,label", PRIORS)
@pytest.mark.parametrize("U,doc", DOCS)
@pytest.mark.parametrize("K,L", [(1, 1), (5, 1), (30, 1), (30, 3), (30, 30)])
def test_sparse_step_matches_reference_with_a_prior_vector(rng, U, doc, K, L, a_rest, label):
    V = 60
    C = _topics(rng, K, V)
    words, counts = _doc(rng, V, U)
    a = _asymmetric(rng, K)
    resp, idx = np.empty((U, L)), np.empty((U, L), dtype=np.int32)
    N, elbo, *_ = sparse_doc_step(
        words, counts, C, a, a_rest, L, 100, 0.05, 1e-8, False, 5, resp, idx
    )
    r_ref, i_ref, N_ref = naive.lda_sparse_doc(words, counts, C, a, L)
    R = naive.densify(resp, idx, K)
    np.testing.assert_allclose(N, N_ref, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(R, naive.densify(r_ref, i_ref, K), rtol=1e-8, atol=1e-12)
    assert elbo == pytest.approx(
        naive.lda_doc_elbo(words, counts, C, R, N, a, a_rest), rel=1e-10, abs=1e-10
    )


def test_the_start_follows_the_prior_and_breaks_its_ties_by_topic_index(rng):
    """Identical topics: only the prior tells them apart, so every token starts on
    the topics of the largest a_k (the prior's mean E[pi]), the lower index first
    among equal a_k, as in the reference."""
    V, K, L = 20, 6, 2
    C = np.repeat(np.log(rng.dirichlet(np.full(V, 0.3)))[:, None], K, axis=1)
    a = np.array([0.1, 0.3, 0.3, 0.1, 0.3, 0.05])
    words, counts = _doc(rng, V, 8)
    resp, idx = np.empty((8, L)), np.empty((8, L), dtype=np.int32)
    N, *_ = sparse_doc_step(words, counts, C, a, 0.0, L, 0, 0.05, 1e-8, False, 5, resp, idx)
    r_ref, i_ref, _ = naive.lda_sparse_doc(words, counts, C, a, L, max_iters=0)
    np.testing.assert_array_equal(idx, i_ref)
    np.testing.assert_array_equal(idx, np.tile([1, 2], (8, 1)))
    np.testing.assert_allclose(resp, r_ref, rtol=1e-12)
    np.testing.assert_allclose(N[[1, 2]], counts.sum() / 2, rtol=1e-12)


@pytest.mark.parametrize("K", [1, 7])
def test_a_uniform_prior_starts_from_the_topics_alone(K):
    """The start's offsets ``log a_k - max log a`` are exactly 0.0 for a uniform
    prior, and its c_Dir terms use the scalar arithmetic ``K lnGamma(a)``."""
    from lsdask.kernels.lda import prior_terms, start_offsets

    a = np.full(K, 0.5 / 7)
    assert np.array_equal(start_offsets(a), np.zeros(K))
    A, lg_total, c_prior, lg_rest, uniform = prior_terms(a, 0.0)
    assert uniform and A == a[0] * K and lg_rest == 0.0
    assert lg_total == pytest.approx(K * math.lgamma(a[0]), rel=1e-15)
    assert c_prior == pytest.approx(naive.c_dir(a), rel=1e-14)
    for a_rest in (0.0, 0.2) if K > 1 else (0.2,):  # one topic alone is always uniform
        other = a.copy()
        other[-1] *= 1.5 if a_rest == 0.0 else 1.0
        A, lg_total, c_prior, lg_rest, uniform = prior_terms(other, a_rest)
        assert not uniform
        full = np.append(other, a_rest) if a_rest else other
        assert A == pytest.approx(full.sum(), rel=1e-14)
        assert c_prior == pytest.approx(naive.c_dir(full), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_restarts_with_a_prior_vector_keep_the_elbo_of_their_solution(rng, sparse):
    K, V, L = 20, 150, 4
    C = _topics(rng, K, V, conc=0.2)
    a, a_rest = np.exp(rng.uniform(np.log(0.01), np.log(0.05), size=K)), 0.1
    accepted = 0
    for _ in range(20):
        words, counts = _doc(rng, V, 30)
        if sparse:
            resp, idx = np.empty((30, L)), np.empty((30, L), dtype=np.int32)
            N, elbo, _, _, acc = sparse_doc_step(
                words, counts, C, a, a_rest, L, 100, 0.05, 1e-8, 5, 5, resp, idx
            )
            R = naive.densify(resp, idx, K)
        else:
            R = np.empty((30, K))
            N, elbo, _, _, acc = dense_doc_step(
                words, counts, C, a, a_rest, 100, 0.05, 1e-8, 5, 5, R, np.empty(0)
            )
        assert elbo == pytest.approx(
            naive.lda_doc_elbo(words, counts, C, R, N, a, a_rest), rel=1e-10
        )
        accepted += acc
    assert accepted > 0


def _run_batch(docs, C, a, a_rest, L, restarts=5):
    K = C.shape[1]
    indptr, words, counts = _batch(docs)
    out, doc_topic, S = np.zeros((K, C.shape[0])), np.zeros((len(docs), K)), np.full(K + 1, 7.0)
    H, alloc, W, Cdir, *_ = lda_batch_step(
        indptr, words, counts, C, a, a_rest, L, 100, 0.05, 1e-8, restarts, 3, out, doc_topic, S
    )
    return out, doc_topic, H, alloc, S, W, Cdir


@pytest.mark.parametrize("a_rest,label", PRIORS)
@pytest.mark.parametrize("L", [0, 1, 3, 12])
def test_batch_prior_statistics_match_reference(rng, L, a_rest, label):
    """S, W and Cdir (the HDP supplement's Sec. B-D terms of the allocation
    objective) over documents of every length, empty and one-word ones included,
    computed in O(active topics) per document, equal the reference over all K
    (+ 1) topics; so does the allocation term, and ``W = -(a . S)``."""
    K, V, D = 12, 80, 30
    C = _topics(rng, K, V)
    docs = [_doc(rng, V, int(u)) for u in rng.integers(0, 15, size=D)]
    docs[:2] = [_doc(rng, V, 0), _doc(rng, V, 1)]
    a = _asymmetric(rng, K)
    _, doc_topic, _, alloc, S, W, Cdir = _run_batch(docs, C, a, a_rest, L)
    S_ref, W_ref, Cdir_ref, alloc_ref = naive.lda_prior_stats(doc_topic, a, a_rest)
    np.testing.assert_allclose(S, S_ref, rtol=1e-10, atol=1e-8)
    assert W == pytest.approx(W_ref, rel=1e-10)
    assert Cdir == pytest.approx(Cdir_ref, rel=1e-10)
    assert alloc == pytest.approx(alloc_ref, rel=1e-10, abs=1e-8)
    assert W == pytest.approx(-(a @ S[:K] + a_rest * S[K]), rel=1e-13)
    if a_rest == 0.0:
        assert S[K] == 0.0


@pytest.mark.parametrize("a_rest,label", PRIORS)
@pytest.mark.parametrize("L", [0, 3])
def test_allocation_term_at_a_new_prior_from_the_batch_statistics(rng, L, a_rest, label):
    """With every q(pi_d) fixed, the allocation term at any prior a' is
    ``D c_Dir(a') + a' . S + W - Cdir``: ``alloc`` itself at a' = a, and the
    reference's value of lsparse Eq. 45 at other priors."""
    K, V, D = 10, 70, 40
    C = _topics(rng, K, V)
    docs = [_doc(rng, V, int(u)) for u in rng.integers(0, 20, size=D)]
    a = _asymmetric(rng, K)
    _, doc_topic, _, alloc, S, W, Cdir = _run_batch(docs, C, a, a_rest, L)

    def at(a_new, rest_new):
        prior = np.append(a_new, rest_new) if a_rest > 0 else a_new
        return D * naive.c_dir(prior) + prior @ S[: prior.size] + W - Cdir

    assert at(a, a_rest) == pytest.approx(alloc, rel=1e-12, abs=1e-9)
    for _ in range(3):
        a_new, rest_new = _asymmetric(rng, K), a_rest * rng.uniform(0.5, 2.0)
        expected = naive.lda_alloc_at(doc_topic, a, a_rest, a_new, rest_new)
        assert at(a_new, rest_new) == pytest.approx(expected, rel=1e-10, abs=1e-8)


@pytest.mark.parametrize("a_rest", [0.0, 0.2])
def test_batch_kernel_with_a_prior_vector_matches_single_document_steps(rng, a_rest):
    K, V, D = 12, 80, 25
    C = _topics(rng, K, V)
    docs = [_doc(rng, V, int(u)) for u in rng.integers(0, 15, size=D)]
    a = _asymmetric(rng, K)
    for L in (0, 3):
        out, doc_topic, *_ = _run_batch(docs, C, a, a_rest, L)
        ref_words = np.zeros((K, V))
        for d, (w, c) in enumerate(docs):
            if L == 0:
                R = np.empty((len(w), K))
                N, *_ = dense_doc_step(w, c, C, a, a_rest, 100, 0.05, 1e-8, 5, 3, R, np.empty(0))
            else:
                resp, idx = np.empty((len(w), L)), np.empty((len(w), L), dtype=np.int32)
                N, *_ = sparse_doc_step(w, c, C, a, a_rest, L, 100, 0.05, 1e-8, 5, 3, resp, idx)
                R = naive.densify(resp, idx, K)
            np.testing.assert_allclose(doc_topic[d], N, rtol=1e-12, atol=1e-14)
            ref_words[:, w] += (c[:, None] * R).T
        np.testing.assert_allclose(out, ref_words, rtol=1e-12, atol=1e-12)
