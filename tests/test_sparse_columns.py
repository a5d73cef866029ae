"""Sparse storage of Dirichlet expected logs: kernels and class vs plain numpy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import digamma

from lsdask.kernels.sparse_columns import add_entries, columns_unequal_to
from lsdask.models.dirichlet_logs import SparseDirichletLogs
from lsdask.models.special import dirichlet_expected_log, dirichlet_kl

ETA = 0.1


def sparse_lam(rng, K, V, density):
    """ETA plus counts on a random fraction of the entries (some columns empty, one full)."""
    words = rng.gamma(0.7, 2.0, size=(K, V)) * (rng.random((K, V)) < density)
    words[:, 0] = 0.0  # a word no topic has
    words[:, -1] = rng.random(K) + 0.5  # a word every topic has
    return ETA + words, words


def test_columns_unequal_to_is_the_csr_of_the_transpose():
    rng = np.random.default_rng(0)
    A = np.where(rng.random((7, 11)) < 0.3, rng.normal(size=(7, 11)), 2.5)
    A[3, 4] = np.nan
    indptr, rows, values = columns_unequal_to(A, 2.5)
    for v in range(A.shape[1]):
        expect = np.flatnonzero(~(A[:, v] == 2.5))  # NaN counts as different
        got = rows[indptr[v] : indptr[v + 1]]
        np.testing.assert_array_equal(got, expect)
        np.testing.assert_array_equal(values[indptr[v] : indptr[v + 1]], A[expect, v])
    assert indptr[-1] == np.count_nonzero(~(A == 2.5))


def test_columns_unequal_to_all_equal_and_empty():
    indptr, rows, values = columns_unequal_to(np.full((3, 4), 1.0), 1.0)
    np.testing.assert_array_equal(indptr, np.zeros(5))
    assert rows.size == values.size == 0
    indptr, rows, _ = columns_unequal_to(np.zeros((3, 0)), 1.0)
    np.testing.assert_array_equal(indptr, [0])


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
    logs = SparseDirichletLogs.from_concentrations(lam, ETA)
    E = dirichlet_expected_log(lam)
    for w in (words, other):
        data, kl = logs.data_and_kl(w, lam)
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
