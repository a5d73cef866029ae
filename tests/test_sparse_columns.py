"""Sparse storage of Dirichlet expected logs: kernels and class vs plain numpy."""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest
from scipy.special import digamma

from lsdask.kernels.sparse_columns import add_entries, entries_unequal_to, rows_to_columns
from lsdask.models.dirichlet_logs import DirichletPosterior, SparseDirichletLogs
from lsdask.models.special import dirichlet_expected_log, dirichlet_kl

ETA = 0.1


def sparse_lam(rng, K, V, density):
    """ETA plus counts on a random fraction of the entries (some columns empty, one full)."""
    words = rng.gamma(0.7, 2.0, size=(K, V)) * (rng.random((K, V)) < density)
    words[:, 0] = 0.0  # a word no topic has
    words[:, -1] = rng.random(K) + 0.5  # a word every topic has
    return ETA + words, words


def test_entries_unequal_to_is_the_csr_of_the_shifted_matrix():
    rng = np.random.default_rng(0)
    A = np.where(rng.random((7, 11)) < 0.3, rng.normal(size=(7, 11)), 2.0)
    A[3, 4] = np.nan
    for shift, b in ((0.0, 2.0), (0.5, 2.5)):
        row_ptr, cols, values = entries_unequal_to(A, shift, b)
        X = shift + A
        for k in range(A.shape[0]):
            expect = np.flatnonzero(~(X[k] == b))  # NaN counts as different
            np.testing.assert_array_equal(cols[row_ptr[k] : row_ptr[k + 1]], expect)
            np.testing.assert_array_equal(values[row_ptr[k] : row_ptr[k + 1]], X[k, expect])
        assert row_ptr[-1] == np.count_nonzero(~(X == b))


def test_entries_unequal_to_all_equal_and_empty():
    row_ptr, cols, values = entries_unequal_to(np.full((3, 4), 1.0), 0.0, 1.0)
    np.testing.assert_array_equal(row_ptr, np.zeros(4))
    assert cols.size == values.size == 0
    row_ptr, cols, _ = entries_unequal_to(np.zeros((3, 0)), 1.0, 1.0)
    np.testing.assert_array_equal(row_ptr, [0, 0, 0, 0])


def test_rows_to_columns_groups_the_same_entries_by_column():
    rng = np.random.default_rng(5)
    A = np.where(rng.random((6, 9)) < 0.4, rng.random((6, 9)) + 1.0, 0.0)
    row_ptr, cols, values = entries_unequal_to(A, 0.0, 0.0)
    indptr, rows, position = rows_to_columns(row_ptr, cols, A.shape[1])
    by_column = np.empty_like(values)
    by_column[position] = values
    for v in range(A.shape[1]):
        expect = np.flatnonzero(A[:, v])
        np.testing.assert_array_equal(rows[indptr[v] : indptr[v + 1]], expect)
        np.testing.assert_array_equal(by_column[indptr[v] : indptr[v + 1]], A[expect, v])
    assert sorted(position) == list(range(values.size))


@pytest.mark.parametrize("density", [0.0, 0.05, 0.5, 1.0])
def test_posterior_from_counts_equals_posterior_from_lambda(density):
    rng = np.random.default_rng(6)
    lam, words = sparse_lam(rng, 6, 40, density)
    by_counts = DirichletPosterior.from_counts(words, ETA)
    by_lam = DirichletPosterior.from_lam(lam, ETA)
    np.testing.assert_array_equal(by_counts.lam, lam)  # lambda = ETA + words, as numpy rounds it
    # the row sums differ in rounding only (sum_v words + V * ETA against sum_v lambda)
    np.testing.assert_allclose(by_counts.logs.dense(), by_lam.logs.dense(), rtol=1e-14)
    np.testing.assert_allclose(by_counts.topics, by_lam.topics, rtol=1e-14)
    np.testing.assert_allclose(by_counts.topics, lam / lam.sum(axis=1, keepdims=True), rtol=1e-14)
    assert by_counts.elbo_terms(words) == pytest.approx(by_lam.elbo_terms(words), rel=1e-14)


@pytest.mark.parametrize("threads", [2, 3, 8])
def test_posterior_built_in_threads_equals_the_serial_build_bit_for_bit(monkeypatch, threads):
    from lsdask.models import row_threads

    rng = np.random.default_rng(9)
    lam, words = sparse_lam(rng, 7, 50, 0.2)
    words[2] = 0.0  # a topic with no entries: an empty row inside a block
    lam[2] = ETA
    serial = (DirichletPosterior.from_counts(words, ETA), DirichletPosterior.from_lam(lam, ETA))
    monkeypatch.setattr(row_threads, "MIN_PARALLEL_SIZE", 0)  # split even this small matrix
    assert len(row_threads.row_blocks(7, words.size, threads)) == min(threads, 7)
    split = (
        DirichletPosterior.from_counts(words, ETA, threads=threads),
        DirichletPosterior.from_lam(lam, ETA, threads=threads),
    )
    for one, other in zip(serial, split, strict=True):
        for part in ("row_ptr", "cols", "conc", "elog", "row_sums"):
            got, expect = getattr(other.stored, part), getattr(one.stored, part)
            assert got.dtype == expect.dtype
            np.testing.assert_array_equal(got, expect)
        for part in ("base", "indptr", "topics", "values"):
            np.testing.assert_array_equal(getattr(other.logs, part), getattr(one.logs, part))
        assert other.elbo_terms(words) == one.elbo_terms(words)


def test_row_blocks_keep_small_arrays_in_one_block_and_cover_every_row():
    from lsdask.models.row_threads import MIN_PARALLEL_SIZE, row_blocks

    assert row_blocks(400, MIN_PARALLEL_SIZE - 1, 4) == [(0, 400)]
    blocks = row_blocks(10, MIN_PARALLEL_SIZE, 4)
    assert blocks[0][0] == 0 and blocks[-1][1] == 10 and len(blocks) == 4
    assert all(a[1] == b[0] for a, b in itertools.pairwise(blocks))
    assert row_blocks(3, MIN_PARALLEL_SIZE, 8) == [(0, 1), (1, 2), (2, 3)]  # no empty block


def test_posterior_pickles_and_survives_changes_to_its_statistics():
    rng = np.random.default_rng(8)
    lam, words = sparse_lam(rng, 5, 30, 0.2)
    post = DirichletPosterior.from_counts(words, ETA)
    before = words.copy()
    elbo = post.elbo_terms(words)
    words[:] = 7.0  # memoized VI updates its running total in place
    np.testing.assert_array_equal(post.lam, lam)
    for copy in (pickle.loads(pickle.dumps(post)), pickle.loads(pickle.dumps(post.for_workers()))):
        np.testing.assert_array_equal(copy.logs.dense(), post.logs.dense())
    assert pickle.loads(pickle.dumps(post)).elbo_terms(before) == elbo
    with pytest.raises(TypeError, match="from_counts or from_lam"):
        DirichletPosterior(lam, post.logs)  # the fields of older versions


def test_workers_copy_holds_expected_logs_only():
    rng = np.random.default_rng(7)
    _, words = sparse_lam(rng, 4, 20, 0.3)
    post = DirichletPosterior.from_counts(words, ETA)
    sent = post.for_workers()
    np.testing.assert_array_equal(sent.logs.rows(np.arange(20)), post.logs.dense())
    for attribute in ("lam", "topics"):
        with pytest.raises(ValueError, match="E\\[log phi\\] only"):
            getattr(sent, attribute)
    with pytest.raises(ValueError, match="driver's posterior"):
        sent.elbo_terms(words)


@pytest.mark.parametrize("density", [0.0, 0.05, 0.5, 1.0])
def test_rows_equal_dense_expected_log_bit_for_bit(density):
    rng = np.random.default_rng(1)
    lam, _ = sparse_lam(rng, 6, 40, density)
    logs = SparseDirichletLogs.from_concentrations(lam, ETA)
    dense = dirichlet_expected_log(lam).T
    np.testing.assert_array_equal(logs.dense(), dense)
    words = np.array([39, 0, 7, 7, 21])
    np.testing.assert_array_equal(logs.rows(words), dense[words])
    assert logs.rows(np.array([], dtype=np.int64)).shape == (0, 6)
    assert logs.nnz == np.count_nonzero(lam != ETA)
    assert logs.shape == (40, 6)


def test_stored_entries_are_few_for_a_sparse_posterior():
    rng = np.random.default_rng(2)
    lam, _ = sparse_lam(rng, 50, 2000, 0.05)
    logs = SparseDirichletLogs.from_concentrations(lam, ETA)
    assert logs.nbytes < lam.nbytes / 4


@pytest.mark.parametrize("density", [0.0, 0.1, 1.0])
def test_data_and_kl_equal_the_dense_formulas(density):
    rng = np.random.default_rng(3)
    lam, words = sparse_lam(rng, 5, 30, density)
    other = words + rng.random(words.shape) * (rng.random(words.shape) < 0.2)  # not lam - eta
    post = DirichletPosterior.from_lam(lam, ETA)
    E = dirichlet_expected_log(lam)
    for w in (words, other):
        data, kl = post.data_and_kl(w)
        assert data == pytest.approx(float(np.sum(w * E)), rel=1e-12, abs=1e-10)
        expect_kl = float(dirichlet_kl(lam, np.full(lam.shape[1], ETA), E).sum())
        assert kl == pytest.approx(expect_kl, rel=1e-12, abs=1e-10)


def test_base_value_is_digamma_of_the_prior_minus_the_row_term():
    lam = np.array([[ETA, 2.0, ETA], [ETA, ETA, ETA]])
    logs = SparseDirichletLogs.from_concentrations(lam, ETA)
    np.testing.assert_array_equal(logs.base, digamma(ETA) - digamma(lam.sum(axis=1)))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_add_entries_equals_fancy_indexing(sign):
    rng = np.random.default_rng(4)
    dest = rng.normal(size=(4, 15))
    rows = np.array([0, 3, 1, 3], dtype=np.int32)
    cols = np.array([0, 3, 4, 14])
    values = rng.normal(size=4)
    expect = dest.copy()
    if sign > 0:
        expect[rows, cols] += values
    else:
        expect[rows, cols] -= values
    add_entries(dest, rows, cols, values, sign)
    np.testing.assert_array_equal(dest, expect)
