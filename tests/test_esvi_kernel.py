"""The ESVI block step (lsdask.kernels.esvi) against a plain numpy reference:
C = K, the L-sparse and the paper's TOPK rule, one pass and several (a fixed
number, or until a document's counts settle), ties; and the top-C selection
beyond the insertion buffer (a quickselect, then a sort of the kept only)
against a plain sort."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import digamma

from lsdask.config import TOPL_INSERTION_MAX
from lsdask.kernels.esvi import block_word_exps, esvi_block_update
from lsdask.kernels.topl import select_top_l
from tests.naive import top_l


def reference(indptr, cols, counts, resp, idx, rest, n_d, alpha, lam, pi, C, paper, iters, tol):
    """Per document: ``iters`` passes over its entries, each against the counts at
    the pass's start, fewer once a pass moves none of the counts by ``tol`` (> 0);
    lambda and pi fixed; the block changes by the entries' first-to-last
    difference. Also returns the passes made in all."""
    K = alpha.size
    R = np.zeros((cols.size, K))
    for j in range(cols.size):
        R[j, idx[j]] = resp[j]
        if rest[j] > 0:
            others = np.setdiff1d(np.arange(K), idx[j])
            R[j, others] += rest[j] / (K - C)
    first = R.copy()
    n_d = n_d.copy()
    lam_out = lam.copy()
    new_resp = np.zeros((cols.size, C))
    new_idx = np.zeros((cols.size, C), dtype=np.int64)
    new_rest = np.zeros(cols.size)
    passes = 0
    for d in range(indptr.size - 1):
        js = range(indptr[d], indptr[d + 1])
        for _ in range(iters if len(js) else 0):
            passes += 1
            before = n_d[d].copy()
            et = digamma(alpha + n_d[d]) - digamma(pi)
            for j in js:
                u = et + digamma(lam[cols[j]])
                top = top_l(u, C)
                if paper or C == K:
                    phi = np.exp(u - u.max())
                    phi /= phi.sum()
                    kept = phi[top]
                    r = max(1.0 - kept.sum(), 0.0) if C < K else 0.0
                else:
                    kept = np.exp(u[top] - u[top].max())
                    kept /= kept.sum()
                    r = 0.0
                row = np.zeros(K)
                row[top] = kept
                if r > 0:
                    row[np.setdiff1d(np.arange(K), top)] = r / (K - C)
                n_d[d] += counts[j] * (row - R[j])
                R[j] = row
                new_resp[j], new_idx[j], new_rest[j] = kept, top, r
            if tol > 0 and np.abs(n_d[d] - before).max() < tol:
                break
        for j in js:
            lam_out[cols[j]] += counts[j] * (R[j] - first[j])
    H = -sum(counts[j] * (R[j][R[j] > 0] * np.log(R[j][R[j] > 0])).sum() for j in range(cols.size))
    return new_resp, new_idx, new_rest, n_d, lam_out, H, passes


def random_entries(rng, nnz: int, Vb: int, K: int, C: int, paper: bool):
    """``nnz`` entries of a block of ``Vb`` words with random counts and kept
    responsibilities over C of K topics (their left-over mass ``rest`` under
    the paper's rule): (cols, counts, idx, resp, rest)."""
    cols = rng.integers(0, Vb, nnz).astype(np.int32)
    counts = rng.integers(1, 4, nnz).astype(np.float64)
    w = rng.random((nnz, K))
    idx = np.argsort(-w, axis=1)[:, :C].astype(np.int32)
    resp = np.take_along_axis(w, idx, 1)
    resp /= resp.sum(1, keepdims=True) * (1.25 if paper and C < K else 1.0)
    rest = 1.0 - resp.sum(1) if paper and C < K else np.zeros(nnz)
    return cols, counts, idx, resp, rest


def document_counts(indptr, counts, idx, resp, rest, K: int) -> np.ndarray:
    """Every document's expected topic counts from its entries' kept
    responsibilities, the left-over mass spread evenly over the other topics."""
    n_docs, C = indptr.size - 1, idx.shape[1]
    n_d = np.zeros((n_docs, K))
    for d in range(n_docs):
        for j in range(indptr[d], indptr[d + 1]):
            n_d[d, idx[j]] += counts[j] * resp[j]
            if rest[j] > 0:
                n_d[d, np.setdiff1d(np.arange(K), idx[j])] += counts[j] * rest[j] / (K - C)
    return n_d


def kernel_and_reference(
    indptr, cols, counts, resp, idx, rest, n_d, alpha, lam, pi, C, paper, iters, tol
):  # fmt: skip
    """The numpy reference's outputs, and the kernel's on copies of the same inputs:
    (resp, idx, rest, document counts, block, entropy, passes); the two made the
    same number of passes."""
    K = lam.shape[1]
    want = reference(
        indptr, cols, counts, resp, idx, rest, n_d, alpha, lam, pi, C, paper, iters, tol
    )
    got_resp, got_idx = np.empty_like(resp), np.empty_like(idx)
    got_rest, dt, lo = np.empty_like(rest), n_d.copy(), lam.copy()
    used, compact = np.unique(cols, return_inverse=True)
    word_exps = np.empty((used.size, K))
    block_word_exps(lam, used, word_exps)
    H, passes = esvi_block_update(
        indptr, cols, counts, resp, idx, rest, compact.astype(np.int64), word_exps, dt, alpha,
        lo, digamma(pi), paper, iters, tol, got_resp, got_idx, got_rest,
    )  # fmt: skip
    assert passes == want[6]
    return want, (got_resp, got_idx, got_rest, dt, lo, H, passes)


@pytest.mark.parametrize(("C", "paper"), [(6, False), (2, False), (2, True), (1, True)])
@pytest.mark.parametrize(("iters", "tol"), [(1, 0.0), (3, 0.0), (30, 0.01)])
@pytest.mark.parametrize("ties", [False, True])
def test_block_step_equals_numpy(C, paper, iters, tol, ties):
    rng = np.random.default_rng(C * 10 + iters + 100 * ties)
    K, Vb, n_docs = 6, 7, 5
    lengths = rng.integers(0, 4, n_docs)  # empty documents too
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    nnz = int(indptr[-1])
    cols, counts, idx, resp, rest = random_entries(rng, nnz, Vb, K, C, paper)
    alpha = np.full(K, 0.1)
    lam = 0.5 + rng.random((Vb, K)) * 3
    if ties:  # equal weights: the lower topic ranks first
        lam[:, 1] = lam[:, 0]
        lam[:, 4] = lam[:, 0]
    pi = lam.sum(0) + 2.0
    n_d = document_counts(indptr, counts, idx, resp, rest, K)
    if ties:
        n_d[:, 1] = n_d[:, 0]
        n_d[:, 4] = n_d[:, 0]
    want, (got_resp, got_idx, got_rest, dt, lo, H, passes) = kernel_and_reference(
        indptr, cols, counts, resp, idx, rest, n_d, alpha, lam, pi, C, paper, iters, tol
    )
    if tol > 0:  # the documents stopped on their own
        assert np.count_nonzero(lengths) < passes < iters * np.count_nonzero(lengths)
    # the kernel's weights are products of exponentials, the reference's exponentials
    # of sums, and its digamma is its own: rounding of 1e-16, which a document's
    # iteration (psi is steep near 0: a small count's change moves its weight
    # several times as much) carries through 30 passes to at most 1.7e-10 in these cases
    atol = 1e-13 if iters <= 3 else 1e-9
    if C < K:  # the kept topics in descending weight, ties to the lower topic
        np.testing.assert_array_equal(got_idx, want[1])
        np.testing.assert_allclose(got_resp, want[0], rtol=1e-9, atol=atol)
    else:  # every topic, in topic order
        dense = np.zeros((idx.shape[0], K))
        np.put_along_axis(dense, want[1], want[0], axis=1)
        np.testing.assert_array_equal(got_idx, np.broadcast_to(np.arange(K), got_idx.shape))
        np.testing.assert_allclose(got_resp, dense, rtol=1e-9, atol=atol)
    np.testing.assert_allclose(got_rest, want[2], rtol=1e-9, atol=atol)
    np.testing.assert_allclose(dt, want[3], rtol=1e-10, atol=max(atol, 1e-12))
    np.testing.assert_allclose(lo, want[4], rtol=1e-10, atol=max(atol, 1e-12))
    np.testing.assert_allclose(H, want[5], rtol=1e-10)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize(("C", "paper", "iters", "tol"), [(6, False, 30, 0.01), (2, True, 3, 0.0)])
def test_word_factors_per_document_equal_the_table(dtype, C, paper, iters, tol):
    """Without a table (a piece whose words would not fit the memory allowed) each
    document takes its own entries' word factors: the very same numbers."""
    rng = np.random.default_rng(7)
    K, Vb, n_docs = 6, 9, 8
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 5, n_docs))]).astype(np.int64)
    nnz = int(indptr[-1])
    cols = rng.integers(0, Vb, nnz).astype(np.int32)
    counts = rng.integers(1, 4, nnz).astype(np.float64)
    idx = np.argsort(-rng.random((nnz, K)), axis=1)[:, :C].astype(np.int32)
    resp = np.full((nnz, C), 1.0 / C)
    rest = np.zeros(nnz)
    alpha = np.full(K, 0.1)
    lam = (0.5 + rng.random((Vb, K)) * 3).astype(dtype)
    n_d = np.zeros((n_docs, K))
    for d in range(n_docs):
        for j in range(indptr[d], indptr[d + 1]):
            n_d[d, idx[j]] += counts[j] * resp[j]
    psi_pi = digamma(lam.sum(0, dtype=np.float64) + 2.0)
    used, compact = np.unique(cols, return_inverse=True)
    outs = []
    for table in (True, False):
        words = used if table else used[:0]
        word_exps = np.empty((words.size, K), dtype=dtype)
        block_word_exps(lam, words, word_exps)
        got = [np.empty_like(resp), np.empty_like(idx), np.empty_like(rest)]
        dt, lo = n_d.copy(), lam.copy()
        H, passes = esvi_block_update(
            indptr, cols, counts, resp, idx, rest, compact.astype(np.int64), word_exps, dt,
            alpha, lo, psi_pi, paper, iters, tol, *got,
        )  # fmt: skip
        outs.append((*got, dt, lo, H, passes))
    for a, b in zip(*outs, strict=True):
        np.testing.assert_array_equal(a, b)


def _weights(rng, K, kind):
    """Weights of one kind: distinct, few values (ties), -inf among them, mostly
    exact zeros (an ESVI entry's products whose document factor underflowed)."""
    if kind == "distinct":
        return rng.normal(size=K)
    if kind == "ties":
        return rng.integers(0, 4, K).astype(np.float64)
    if kind == "-inf":
        return np.where(rng.random(K) < 0.3, -np.inf, rng.normal(size=K))
    return np.where(rng.random(K) < 0.9, 0.0, rng.random(K))


@pytest.mark.parametrize("kind", ["distinct", "ties", "-inf", "zeros"])
def test_top_c_selection_equals_a_plain_sort(kind):
    """Every C, above the insertion buffer's limit too: the same ids in the same
    order as a plain sort, descending weight, the lower id first among ties."""
    rng = np.random.default_rng(["distinct", "ties", "-inf", "zeros"].index(kind))
    for K in (5, 33, 40, 97, 400):
        for _ in range(3):
            w = _weights(rng, K, kind)
            for C in range(1, K + 1):
                np.testing.assert_array_equal(select_top_l(w, C), top_l(w, C))


def test_top_c_selection_ranks_nan_last():
    """Above the insertion buffer's limit NaN weights rank last, lowest id first
    among them (a stable sort's order)."""
    rng = np.random.default_rng(3)
    K = 120
    w = rng.integers(0, 3, K).astype(np.float64)
    w[rng.random(K) < 0.3] = np.nan
    for C in range(TOPL_INSERTION_MAX + 1, K + 1):
        np.testing.assert_array_equal(select_top_l(w, C), np.argsort(-w, kind="stable")[:C])


@pytest.mark.parametrize(("C", "paper"), [(48, False), (40, False), (40, True)])
def test_block_step_equals_numpy_beyond_the_insertion_buffer(C, paper):
    """K = 48: C = K (every topic, in topic order, the entries' old topics in any
    order) and C above the insertion buffer's limit, where the kernel selects
    by a quickselect; some weights tie."""
    assert C > TOPL_INSERTION_MAX
    rng = np.random.default_rng(C + paper)
    K, Vb, n_docs, iters, tol = 48, 9, 6, 30, 0.01
    indptr = np.concatenate([[0], np.cumsum(rng.integers(0, 6, n_docs))]).astype(np.int64)
    nnz = int(indptr[-1])
    cols, counts, idx, resp, rest = random_entries(rng, nnz, Vb, K, C, paper)
    alpha = np.full(K, 0.05)
    lam = 0.5 + rng.random((Vb, K)) * 3
    lam[:, 7] = lam[:, 3]  # equal weights: the lower topic ranks first
    pi = lam.sum(0) + 2.0
    n_d = document_counts(indptr, counts, idx, resp, rest, K)
    n_d[:, 7] = n_d[:, 3]
    want, (got_resp, got_idx, got_rest, dt, lo, H, _passes) = kernel_and_reference(
        indptr, cols, counts, resp, idx, rest, n_d, alpha, lam, pi, C, paper, iters, tol
    )
    if C < K:
        np.testing.assert_array_equal(got_idx, want[1])
        np.testing.assert_allclose(got_resp, want[0], rtol=1e-9, atol=1e-9)
    else:
        dense = np.zeros((nnz, K))
        np.put_along_axis(dense, want[1], want[0], axis=1)
        np.testing.assert_array_equal(got_idx, np.broadcast_to(np.arange(K), got_idx.shape))
        np.testing.assert_allclose(got_resp, dense, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got_rest, want[2], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dt, want[3], rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(lo, want[4], rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(H, want[5], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("C", "paper"), [(40, False), (40, True), (8, False), (8, True)])
def test_block_step_where_document_factors_underflow(C, paper):
    """A tiny alpha and documents that use few topics: the other topics' document
    factors ``exp(psi(alpha + 0) - max)`` underflow to 0, and the kernel ranks
    only the topics of nonzero factor, filling the kept C with the lowest topics
    of weight 0. Against the reference: the same kept topics of positive weight
    in the same order, the same responsibilities, counts, block and entropy;
    the kept zeros are the lowest topics not kept with a positive weight."""
    rng = np.random.default_rng(C + 2 * paper)
    K, Vb, n_docs, iters, tol = 60, 8, 6, 30, 0.01
    indptr = np.concatenate([[0], np.cumsum(rng.integers(1, 6, n_docs))]).astype(np.int64)
    nnz = int(indptr[-1])
    cols = rng.integers(0, Vb, nnz).astype(np.int32)
    counts = rng.integers(1, 4, nnz).astype(np.float64)
    idx = np.zeros((nnz, C), dtype=np.int32)
    resp = np.zeros((nnz, C))
    for d in range(n_docs):  # each document's entries share a few topics
        mine = rng.choice(K, 5, replace=False)
        for j in range(indptr[d], indptr[d + 1]):
            rest_of = np.setdiff1d(np.arange(K), mine)
            idx[j] = np.concatenate([rng.permutation(mine), rest_of[: C - 5]])[:C]
            resp[j, :5] = rng.dirichlet(np.ones(5))
    rest = np.zeros(nnz)
    alpha = np.full(K, 1e-4)
    lam = 0.5 + rng.random((Vb, K)) * 3
    pi = lam.sum(0) + 2.0
    n_d = np.zeros((n_docs, K))
    for d in range(n_docs):
        for j in range(indptr[d], indptr[d + 1]):
            n_d[d, idx[j]] += counts[j] * resp[j]
    want, (got_resp, got_idx, got_rest, dt, lo, H, _passes) = kernel_and_reference(
        indptr, cols, counts, resp, idx, rest, n_d, alpha, lam, pi, C, paper, iters, tol
    )
    positive = want[0] > 0
    assert (~positive).any()  # some kept weights are 0: the case under test
    for j in range(nnz):
        n = int(positive[j].sum())
        assert positive[j, :n].all()  # the positive ones come first
        np.testing.assert_array_equal(got_idx[j, :n], want[1][j, :n])
        zeros = np.setdiff1d(np.arange(K), got_idx[j, :n])[: C - n]
        np.testing.assert_array_equal(got_idx[j, n:], zeros)
        assert (got_resp[j, n:] == 0).all()
    np.testing.assert_allclose(got_resp, want[0], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(got_rest, want[2], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(dt, want[3], rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(lo, want[4], rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(H, want[5], rtol=1e-10, atol=1e-12)
