"""Every kernel against its plain numpy reference (tests/naive.py)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from lsdask.kernels import (
    csr_matmul,
    dense_counts,
    dense_entropy,
    dense_resp_from_log_weights,
    dense_weighted_csr_rows,
    dense_weighted_rows,
    outer_features,
    pack_quadratic,
    select_top_l,
    sparse_counts,
    sparse_entropy,
    sparse_outer_sums,
    sparse_to_dense,
    sparse_weighted_csr_rows,
    sparse_weighted_rows,
    topl_resp_from_log_weights,
    unpack_quadratic,
    unpack_symmetric,
)
from lsdask.kernels.preselect import (
    bounded_candidates,
    float32_blocks,
    float32_dot_error_factor,
    float32_product,
    float32_underflow_error,
    pair_quadratic_forms,
    topl_resp_from_candidates,
)
from lsdask.kernels.topl import _select_pruned
from tests import naive

SHAPES = [(0, 5), (1, 1), (7, 3), (50, 12), (200, 40)]


def _weights(rng, N, K, ties=False):
    W = rng.normal(size=(N, K)) * 3
    if ties and K > 1:
        W = np.round(W)  # many exact ties
    return W


@pytest.mark.parametrize("N,K", SHAPES)
@pytest.mark.parametrize("ties", [False, True])
def test_topl_resp_matches_reference_for_every_L(rng, N, K, ties):
    W = _weights(rng, N, K, ties)
    for L in sorted({1, min(2, K), min(4, K), K}):
        resp, idx = topl_resp_from_log_weights(W, L)
        ref_resp, ref_idx = naive.topl_resp(W, L)
        np.testing.assert_array_equal(idx, ref_idx)
        np.testing.assert_allclose(resp, ref_resp, rtol=1e-13, atol=1e-15)
        assert resp.shape == (N, L) and idx.dtype == np.int32


def test_topl_all_equal_weights_takes_lowest_indices():
    W = np.zeros((3, 10))
    for L in (1, 3, 10):
        resp, idx = topl_resp_from_log_weights(W, L)
        np.testing.assert_array_equal(idx, np.tile(np.arange(L), (3, 1)))
        np.testing.assert_allclose(resp, 1.0 / L)


def test_topl_large_L_uses_sort_path_with_same_tie_rule(rng):
    W = np.round(rng.normal(size=(20, 100)))
    resp, idx = topl_resp_from_log_weights(W, 60)
    ref_resp, ref_idx = naive.topl_resp(W, 60)
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_allclose(resp, ref_resp, rtol=1e-13)


def test_topl_is_stable_for_huge_weights():
    W = np.array([[1000.0, 999.0, -1000.0], [-1e300, -1e300 + 1e285, 0.0]])
    resp, _ = topl_resp_from_log_weights(W, 2)
    assert np.all(np.isfinite(resp))
    np.testing.assert_allclose(resp.sum(1), 1.0)


@settings(max_examples=60, deadline=None)
@given(
    arrays(np.float64, st.integers(1, 40), elements=st.sampled_from([-2.0, -1.0, 0.0, 0.5, 3.0])),
    st.integers(1, 40),
)
def test_select_top_l_property_ties(w, L):
    L = min(L, w.shape[0])
    np.testing.assert_array_equal(select_top_l(w, L), naive.top_l(w, L))


@pytest.mark.parametrize("K,n,L", [(1, 1, 1), (12, 7, 3), (40, 40, 8), (60, 25, 25)])
@pytest.mark.parametrize("ties", [False, True])
def test_select_pruned_equals_top_l_of_gathered_weights_for_any_valid_floor_and_bound(
    rng, K, n, L, ties
):
    row, shift = (_weights(rng, 1, K, ties)[0] for _ in range(2))
    subset = np.sort(rng.choice(K, size=n, replace=False)).astype(np.int64)
    w = row[subset] + shift[subset]
    ref = subset[naive.top_l(w, L)]
    # the ids come by decreasing shift; equal shifts in a random order
    by_shift = subset[np.lexsort((rng.random(n), -shift[subset]))]
    # the row sits between two others of a table (larger: they must not be read)
    table = np.vstack([row + 50.0, row, row + 50.0])
    # any floor up to the L-th largest weight, any bound >= the row's maximum
    for floor in (-np.inf, np.sort(w)[-L], np.sort(w)[-L] - 1.0, float(np.min(w))):
        for row_max in (float(row.max()), float(row[subset].max()), float(row.max()) + 5.0):
            out = np.full(L, -1, dtype=np.int32)
            _select_pruned(table, 1, shift, by_shift, n, L, floor, row_max, np.empty(L), out)
            np.testing.assert_array_equal(out, ref, err_msg=f"floor={floor} max={row_max}")


@pytest.mark.parametrize(
    "row,shift,by_shift,L,want",
    [
        # a lower id of equal weight arriving later must pass the kept one ...
        ([1.0, 0.0], [0.0, 1.0], [1, 0], 1, [0]),
        # ... also when the buffer is full and the tie is at its last place
        ([2.0, 1.0, 0.0, 5.0], [0.0, 1.0, 2.0, -10.0], [2, 1, 0, 3], 2, [0, 1]),
        ([0.0, 3.0, 1.0, 2.0], [3.0, 0.0, 2.0, 1.0], [0, 2, 3, 1], 3, [0, 1, 2]),
    ],
)
def test_select_pruned_breaks_ties_by_the_lower_id_whatever_the_arrival_order(
    row, shift, by_shift, L, want
):
    row, shift = np.array(row), np.array(shift)
    out = np.full(L, -1, dtype=np.int32)
    args = (row[None, :], 0, shift, np.array(by_shift), len(by_shift), L, -np.inf, row.max())
    _select_pruned(*args, np.empty(L), out)
    np.testing.assert_array_equal(out, want)
    w = row + shift
    np.testing.assert_array_equal(out, naive.top_l(w, L))


def test_select_pruned_refuses_a_floor_above_the_l_th_weight():
    out = np.full(2, -1, dtype=np.int32)
    with pytest.raises(ValueError, match="fewer than L weights"):
        _select_pruned(
            np.zeros((1, 3)), 0, np.array([0.0, -1.0, -2.0]), np.arange(3), 3, 2, -0.5, 0.0,
            np.empty(2), out,
        )  # fmt: skip


def test_select_pruned_stops_at_the_bound():
    """Ids whose shift plus the row's bound cannot reach the L-th weight are not
    looked at: given a bound the row breaks, ids 2 and 3 would rank if read."""
    row = np.array([0.0, -1.0, 100.0, 100.0])
    shift = np.array([0.0, -0.5, -10.0, -20.0])
    out = np.full(2, -1, dtype=np.int32)
    _select_pruned(row[None, :], 0, shift, np.arange(4), 4, 2, -np.inf, 0.0, np.empty(2), out)
    np.testing.assert_array_equal(out, [0, 1])


@pytest.mark.parametrize("N,K", SHAPES)
def test_dense_resp_matches_softmax(rng, N, K):
    W = _weights(rng, N, K)
    np.testing.assert_allclose(dense_resp_from_log_weights(W), naive.softmax_rows(W), rtol=1e-13)


@pytest.mark.parametrize("N,K", SHAPES)
@pytest.mark.parametrize("M", [1, 6])
def test_summaries_match_reference(rng, N, K, M):
    W = _weights(rng, N, K, ties=True)
    rows = rng.normal(size=(N, M))
    for L in sorted({1, min(3, K), K}):
        resp, idx = topl_resp_from_log_weights(W, L)
        R = naive.densify(resp, idx, K)
        np.testing.assert_allclose(sparse_to_dense(resp, idx, K), R)
        np.testing.assert_allclose(sparse_counts(resp, idx, K), R.sum(0), atol=1e-12)
        out = sparse_weighted_rows(rows, resp, idx, np.zeros((K, M)))
        np.testing.assert_allclose(out, naive.weighted_rows(rows, R), atol=1e-12)
        np.testing.assert_allclose(sparse_entropy(resp, idx, K), naive.entropy(R), atol=1e-12)
    Rd = dense_resp_from_log_weights(W)
    np.testing.assert_allclose(dense_counts(Rd), Rd.sum(0))
    np.testing.assert_allclose(
        dense_weighted_rows(rows, Rd, np.zeros((K, M))), naive.weighted_rows(rows, Rd), atol=1e-12
    )
    np.testing.assert_allclose(dense_entropy(Rd), naive.entropy(Rd), atol=1e-12)


def test_summaries_accumulate_into_out(rng):
    rows = rng.normal(size=(10, 3))
    resp, idx = topl_resp_from_log_weights(rng.normal(size=(10, 4)), 2)
    out = np.ones((4, 3))
    sparse_weighted_rows(rows, resp, idx, out)
    np.testing.assert_allclose(out - 1.0, naive.weighted_rows(rows, naive.densify(resp, idx, 4)))


@pytest.mark.parametrize("layout", ["C", "F", "strided"])
def test_dense_summary_accumulates_in_place(rng, layout):
    """The in-place BLAS product adds into ``out`` whatever its memory layout."""
    rows = rng.normal(size=(10, 3)).astype(np.float32)
    R = dense_resp_from_log_weights(rng.normal(size=(10, 4)))
    base = np.ones((4, 6))
    out = {"C": base[:, :3].copy(), "F": np.asfortranarray(base[:, :3]), "strided": base[:, ::2]}[
        layout
    ]
    got = dense_weighted_rows(rows, R, out)
    assert got is out
    np.testing.assert_allclose(out - 1.0, naive.weighted_rows(rows, R), rtol=1e-6)


@pytest.mark.parametrize("N,D", [(0, 3), (1, 1), (9, 4), (30, 8)])
def test_second_moments_through_vech_features(rng, N, D):
    X = rng.normal(size=(N, D))
    F = outer_features(X)
    np.testing.assert_allclose(F, naive.vech_rows(X))
    K = 3
    resp, idx = topl_resp_from_log_weights(rng.normal(size=(N, K)), 2)
    R = naive.densify(resp, idx, K)
    S = unpack_symmetric(sparse_weighted_rows(F, resp, idx, np.zeros((K, F.shape[1]))), D)
    np.testing.assert_allclose(S, naive.weighted_outer(X, R), atol=1e-12)


@pytest.mark.parametrize("N,D", [(0, 3), (1, 1), (9, 4), (30, 8), (200, 64)])
@pytest.mark.parametrize("K,L", [(1, 1), (3, 2), (7, 7), (40, 4)])
def test_grouped_outer_sums_match_reference(rng, N, D, K, L):
    """Whole-batch second moments grouped by cluster (one BLAS product each)
    equal the plain sum, accumulate into ``out`` and skip zero weights."""
    X = rng.normal(size=(N, D))
    W = _weights(rng, N, K, ties=True)
    resp, idx = topl_resp_from_log_weights(W, L)
    if N:
        resp[0] = 0.0  # a row with no weight at all
    R = naive.densify(resp, idx, K)
    out = np.ones((K, D * (D + 1) // 2))
    sparse_outer_sums(X, resp, idx, out)
    np.testing.assert_allclose(
        unpack_symmetric(out - 1.0, D), naive.weighted_outer(X, R), rtol=1e-10, atol=1e-10
    )


def test_pack_quadratic_gives_quadratic_forms(rng):
    D, K = 5, 4
    A = rng.normal(size=(K, D, D))
    A = A + A.transpose(0, 2, 1)
    X = rng.normal(size=(6, D))
    got = outer_features(X) @ pack_quadratic(A).T
    np.testing.assert_allclose(got, np.einsum("nd,kde,ne->nk", X, A, X), rtol=1e-12)


@pytest.mark.parametrize("N,V,K", [(0, 5, 3), (1, 1, 1), (12, 30, 4), (40, 100, 7)])
def test_word_count_kernels_match_reference(rng, N, V, K):
    counts = rng.poisson(0.3, size=(N, V)).astype(np.float64)
    X = sp.csr_matrix(counts)
    indptr, indices, data = X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data
    B = rng.normal(size=(V, K))
    np.testing.assert_allclose(csr_matmul(indptr, indices, data, B), counts @ B, atol=1e-12)
    W = np.round(rng.normal(size=(N, K)))
    for L in sorted({1, min(2, K), K}):
        resp, idx = topl_resp_from_log_weights(W, L)
        R = naive.densify(resp, idx, K)
        got = sparse_weighted_csr_rows(indptr, indices, data, resp, idx, np.zeros((K, V)))
        np.testing.assert_allclose(got, naive.weighted_rows(counts, R), atol=1e-12)
    Rd = dense_resp_from_log_weights(W)
    got = dense_weighted_csr_rows(indptr, indices, data, Rd, np.zeros((K, V)))
    np.testing.assert_allclose(got, naive.weighted_rows(counts, Rd), atol=1e-12)


@pytest.mark.parametrize("N,K,L", [(0, 5, 2), (1, 1, 1), (60, 12, 3), (200, 40, 4), (50, 9, 9)])
@pytest.mark.parametrize("ties", [False, True])
def test_bounded_candidates_hold_the_exact_top_l(rng, N, K, L, ties):
    W = _weights(rng, N, K, ties)
    offset = rng.normal(size=K)
    row_err, col_err = rng.uniform(0, 0.3, size=N), rng.uniform(0, 2.0, size=K)
    abs_err = 0.05
    # an approximation anywhere within the bound, its extremes included
    err = row_err[:, None] * col_err + abs_err
    W_low = W - offset + rng.choice([-1.0, -0.3, 0.0, 1.0], size=(N, K)) * err
    indptr, cand = bounded_candidates(W_low, offset, row_err, col_err, abs_err, L)
    ref_resp, ref_idx = naive.topl_resp(W, L)
    for n in range(N):
        c = cand[indptr[n] : indptr[n + 1]]
        assert c.size >= L and np.all(np.diff(c) > 0)
        assert set(ref_idx[n]) <= set(c)
        # the candidates are exactly those whose upper bound reaches the L-th lower bound
        approx = W_low[n] + offset
        margin = err[n] + 8 * 2.0**-53 * (np.abs(approx) + np.abs(offset))
        lower, upper = approx - margin, approx + margin
        np.testing.assert_array_equal(c, np.flatnonzero(upper >= np.sort(lower)[::-1][L - 1]))
    exact = W[np.repeat(np.arange(N), np.diff(indptr)), cand]
    resp, idx = topl_resp_from_candidates(indptr, cand, exact, L)
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_allclose(resp, ref_resp, rtol=1e-12, atol=0)


def test_bounded_candidates_take_every_cluster_of_a_non_finite_row():
    W_low = np.array([[0.0, np.inf, 1.0], [0.0, 5.0, 1.0], [np.nan, 0.0, 0.0]])
    indptr, cand = bounded_candidates(W_low, np.zeros(3), np.array([0.1, np.inf, 0.1]),
                                      np.ones(3), 0.0, 1)  # fmt: skip
    assert [list(cand[indptr[n] : indptr[n + 1]]) for n in range(3)] == [[0, 1, 2]] * 3


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000), st.floats(-30, 30), st.floats(-30, 30), st.integers(0, 2**32 - 1))
@example(M=1, log_f=-23.5, log_a=-26.0, seed=0)  # a subnormal result (found by CI)
@example(M=300, log_f=-30.0, log_a=-30.0, seed=1)  # inputs and products subnormal
def test_float32_product_error_is_within_the_bound(M, log_f, log_a, seed):
    """Adversarial magnitudes, cancellation and underflow: the blocked float32
    product of rows of F and columns of A stays within g |f| |a| plus the
    underflow term of the exact one."""
    rng = np.random.default_rng(seed)
    F = rng.normal(size=(3, M)) * np.exp(log_f) * rng.choice([1.0, 1e-3, 1e3], size=M)
    A = rng.normal(size=(M, 2)) * np.exp(log_a)
    A[:, 0] -= (F[0] @ A[:, 0]) / (F[0] @ F[0]) * F[0]  # F[0] . A[:, 0] ~ 0: all error
    edges = float32_blocks(M)
    assert np.diff(edges).max() <= 256 and edges[0] == 0 and edges[-1] == M
    blocks = [A[a:b].astype(np.float32) for a, b in pairwise(edges)]
    low = float32_product(F.astype(np.float32), blocks, edges, np.empty((3, 2), np.float32),
                          np.empty((3, 2), np.float32))  # fmt: skip
    exact = F @ A  # float64 is exact enough at these bounds
    f_norm, a_norm = np.linalg.norm(F, axis=1), np.linalg.norm(A, axis=0)
    bound = float32_dot_error_factor(edges) * np.outer(f_norm, a_norm)
    bound += float32_underflow_error(M, f_norm.max(), a_norm.max())
    assert np.all(np.abs(low - exact) <= bound)


def test_unpack_quadratic_inverts_pack_quadratic_exactly(rng):
    A = rng.normal(size=(4, 6, 6))
    A = A + A.transpose(0, 2, 1)
    np.testing.assert_array_equal(unpack_quadratic(pack_quadratic(A)), A)
    with pytest.raises(ValueError, match="D\\(D\\+1\\)/2 coefficients per row; got 5"):
        unpack_quadratic(np.zeros((2, 5)))


@pytest.mark.parametrize("N,K,D", [(0, 3, 2), (1, 1, 1), (40, 6, 5)])
def test_pair_quadratic_forms_match_reference(rng, N, K, D):
    X = rng.normal(size=(N, D))
    A = rng.normal(size=(K, D, D))
    A = A + A.transpose(0, 2, 1)
    counts = rng.integers(1, K + 1, size=N)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    cand = np.concatenate(
        [np.sort(rng.choice(K, size=c, replace=False)) for c in counts] or [np.zeros(0)]
    ).astype(np.int32)
    rows = np.repeat(np.arange(N), counts)
    for centers in (np.zeros((K, D)), rng.normal(size=(K, D))):
        out = pair_quadratic_forms(X, A, centers, indptr, cand, np.empty(cand.size))
        Y = X[rows] - centers[cand]
        ref = np.einsum("pi,pij,pj->p", Y, A[cand], Y)
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
