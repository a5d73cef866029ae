"""The models' math: exact ELBO terms, global steps, dense/sparse agreement."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lsdask.models import (
    DiagGaussian,
    FullGaussian,
    MixtureModel,
    Multinomial,
    SuffStats,
    ZeroMeanGaussian,
)
from lsdask.models.stats import as_dense
from tests import naive


def _data(kind, rng, n=40, d=3):
    if kind == "multinomial":
        return rng.poisson(2.0, size=(n, 6)).astype(float)
    X = rng.normal(size=(n, d)) @ np.array([[1.0, 0.3, 0.0], [0.0, 0.7, 0.2], [0.0, 0.0, 0.5]])
    return X + (0.0 if kind == "zero-mean" else np.array([1.0, -2.0, 0.5]))


OBS = {
    "zero-mean": lambda: ZeroMeanGaussian(nu=5.5, prior_scale=0.7),
    "full": lambda: FullGaussian(nu=6.0, prior_scale=0.5, kappa=0.3, prior_mean=np.ones(3)),
    "diag": lambda: DiagGaussian(a=2.5, prior_scale=0.8, kappa=0.4, prior_mean=np.zeros(3)),
    "multinomial": lambda: Multinomial(lam=0.7),
}


def _log_joint_and_posterior(kind, obs, X, post, theta_index):
    """log p(x | theta) + log p(theta) - log q(theta) at one parameter draw.

    With K = 1, q is the exact posterior, so this equals log p(x) for every
    theta (Chib's identity): an ELBO check independent of the model's own
    formulas, with densities from scipy.stats.
    """
    rng = np.random.default_rng(theta_index)
    if kind == "multinomial":
        lam = post.lam[0]
        phi = rng.dirichlet(lam)
        loglik = float(X.sum(0) @ np.log(phi))
        prior = stats.dirichlet(np.full(lam.size, obs.lam)).logpdf(phi)
        return loglik + prior - stats.dirichlet(lam).logpdf(phi)
    if kind == "zero-mean":
        q = stats.wishart(df=post.nu[0], scale=np.linalg.inv(post.B[0]))
        Phi = q.rvs(random_state=rng)
        loglik = stats.multivariate_normal(np.zeros(3), np.linalg.inv(Phi)).logpdf(X).sum()
        prior = stats.wishart(df=obs.nu, scale=np.linalg.inv(obs.B0)).logpdf(Phi)
        return loglik + prior - q.logpdf(Phi)
    if kind == "full":
        qW = stats.wishart(df=post.nu[0], scale=np.linalg.inv(post.B[0]))
        Phi = qW.rvs(random_state=rng)
        mu = rng.multivariate_normal(post.m[0], np.linalg.inv(post.kappa[0] * Phi))
        loglik = stats.multivariate_normal(mu, np.linalg.inv(Phi)).logpdf(X).sum()
        prior = stats.wishart(df=obs.nu, scale=np.linalg.inv(obs.B0)).logpdf(Phi)
        prior += stats.multivariate_normal(obs.prior_mean, np.linalg.inv(obs.kappa * Phi)).logpdf(
            mu
        )
        logq = qW.logpdf(Phi)
        logq += stats.multivariate_normal(post.m[0], np.linalg.inv(post.kappa[0] * Phi)).logpdf(mu)
        return loglik + prior - logq
    # diag: independent Normal-Gamma per dimension
    lam = rng.gamma(post.a[0], 1.0 / post.b[0])
    mu = rng.normal(post.m[0], 1.0 / np.sqrt(post.kappa[0] * lam))
    loglik = stats.norm(mu, 1.0 / np.sqrt(lam)).logpdf(X).sum()
    prior = stats.gamma(obs.a, scale=1.0 / obs.b0).logpdf(lam).sum()
    prior += stats.norm(obs.prior_mean, 1.0 / np.sqrt(obs.kappa * lam)).logpdf(mu).sum()
    logq = stats.gamma(post.a[0], scale=1.0 / post.b[0]).logpdf(lam).sum()
    logq += stats.norm(post.m[0], 1.0 / np.sqrt(post.kappa[0] * lam)).logpdf(mu).sum()
    return loglik + prior - logq


@pytest.mark.parametrize("kind", list(OBS))
def test_one_cluster_elbo_equals_log_marginal_likelihood(kind, rng):
    X = _data(kind, rng)
    obs = OBS[kind]().with_data_defaults(X)
    model = MixtureModel(obs, n_components=1, alpha=1.0)
    stats_ = model.local_step(X, model.global_step(model.empty_stats()), sparsity=None)
    glob = model.global_step(stats_)
    elbo = model.elbo(stats_, glob)
    for draw in range(3):
        chib = _log_joint_and_posterior(kind, obs, X, glob.obs, draw)
        assert elbo == pytest.approx(chib, rel=1e-9, abs=1e-8)


@pytest.mark.parametrize("kind", list(OBS))
def test_expected_log_lik_matches_monte_carlo(kind, rng):
    """E_q[log F(x | phi_k)] of the local step against sampling from q."""
    X = _data(kind, rng, n=60)
    obs = OBS[kind]().with_data_defaults(X)
    model = MixtureModel(obs, n_components=1, alpha=1.0)
    glob = model.global_step(model.local_step(X, model.global_step(model.empty_stats()), None))
    exact = obs.expected_log_lik(obs.prepare(X[:3]), glob.obs)[:, 0]
    samples = []
    for i in range(4000):
        r = np.random.default_rng(1000 + i)
        if kind == "multinomial":
            phi = r.dirichlet(glob.obs.lam[0])
            samples.append(X[:3] @ np.log(phi))
        elif kind == "zero-mean":
            Phi = stats.wishart(df=glob.obs.nu[0], scale=np.linalg.inv(glob.obs.B[0])).rvs(
                random_state=r
            )
            samples.append(stats.multivariate_normal(np.zeros(3), np.linalg.inv(Phi)).logpdf(X[:3]))
        elif kind == "full":
            Phi = stats.wishart(df=glob.obs.nu[0], scale=np.linalg.inv(glob.obs.B[0])).rvs(
                random_state=r
            )
            mu = r.multivariate_normal(glob.obs.m[0], np.linalg.inv(glob.obs.kappa[0] * Phi))
            samples.append(stats.multivariate_normal(mu, np.linalg.inv(Phi)).logpdf(X[:3]))
        else:
            lam = r.gamma(glob.obs.a[0], 1.0 / glob.obs.b[0])
            mu = r.normal(glob.obs.m[0], 1.0 / np.sqrt(glob.obs.kappa[0] * lam))
            samples.append(stats.norm(mu, 1.0 / np.sqrt(lam)).logpdf(X[:3]).sum(1))
    samples = np.asarray(samples)
    stderr = samples.std(0) / np.sqrt(len(samples))
    assert np.all(np.abs(samples.mean(0) - exact) < 5 * stderr + 1e-9)


@pytest.mark.parametrize("kind", list(OBS))
def test_sparsity_K_equals_dense(kind, rng):
    X = _data(kind, rng, n=300)
    obs = OBS[kind]().with_data_defaults(X)
    K = 5
    model = MixtureModel(obs, n_components=K, alpha=2.0, block_rows=64)
    # globals from a random soft assignment, so that every cluster differs
    R = rng.dirichlet(np.ones(K), size=X.shape[0])
    parts = {"N": R.sum(0), "H": naive.entropy(R), **obs.empty_stats(K)}
    obs.summarize_dense(obs.prepare(X), R, parts)
    glob = model.global_step(SuffStats(**parts))
    dense = model.local_step(X, glob, sparsity=None)
    full_sparse = model.local_step(X, glob, sparsity=K)
    assert dense.allclose(full_sparse, rtol=1e-8, atol=1e-10)
    assert model.elbo(dense, glob) == pytest.approx(model.elbo(full_sparse, glob), rel=1e-10)


@pytest.mark.parametrize("kind", list(OBS))
@pytest.mark.parametrize("sparsity", [None, 2, 4])
def test_what_the_workers_receive_gives_the_same_local_step(kind, sparsity, rng):
    """``for_local_step`` leaves out what the local step does not read: the
    statistics from it are bit-identical to those from the full globals."""
    X = _data(kind, rng, n=200)
    obs = OBS[kind]().with_data_defaults(X)
    K = 4
    model = MixtureModel(obs, n_components=K, alpha=2.0, block_rows=64, preselect=True)
    R = rng.dirichlet(np.ones(K), size=X.shape[0])
    parts = {"N": R.sum(0), "H": naive.entropy(R), **obs.empty_stats(K)}
    obs.summarize_dense(obs.prepare(X), R, parts)
    glob = model.global_step(SuffStats(**parts))
    full = model.local_step(X, glob, sparsity)
    slim = model.local_step(X, model.for_local_step(glob), sparsity)
    for name in full.keys():
        np.testing.assert_array_equal(as_dense(slim[name]), as_dense(full[name]), err_msg=name)


@pytest.mark.parametrize("kind", ["zero-mean", "full"])
@pytest.mark.parametrize("L", [1, 2, 4])
def test_top_l_from_float32_weights_equals_top_l_of_exact_weights(kind, L, rng):
    """The Gaussians' L-sparse step takes candidates from float32 log weights
    and weighs them exactly: its responsibilities are those of the exact
    float64 weights, exact ties (two identical clusters) included; for the
    full Gaussian also with data far from the origin."""
    X = _data(kind, rng, n=500) * np.exp(rng.normal(size=(500, 1)) * 2)
    if kind == "full":
        X = X + 1e3
    obs = (
        ZeroMeanGaussian(nu=5.5, prior_scale=0.7) if kind == "zero-mean" else FullGaussian()
    ).with_data_defaults(X)
    K = 6
    model = MixtureModel(obs, n_components=K, alpha=2.0, block_rows=64, preselect=True)
    R = rng.dirichlet(np.ones(K) * 0.3, size=X.shape[0])
    R[:, 5] = R[:, 4]  # clusters 4 and 5 identical: exact ties in every row
    parts = {"N": R.sum(0), "H": naive.entropy(R), **obs.empty_stats(K)}
    obs.summarize_dense(obs.prepare(X), R, parts)
    glob = model.global_step(SuffStats(**parts))
    assert model._preselects(L)
    resp, idx = model.responsibilities(X, glob, L)
    W = model.log_weights(obs.prepare(X), glob)
    ref_resp, ref_idx = naive.topl_resp(W, L)
    np.testing.assert_array_equal(idx, ref_idx)
    np.testing.assert_allclose(resp, ref_resp, rtol=1e-9, atol=1e-12)
    # the statistics equal those of the same responsibilities summarized the old way
    stats = model.local_step(X, glob, L)
    ref = {"N": np.zeros(K), "H": np.zeros(K), **obs.empty_stats(K)}
    ref["N"] += naive.densify(ref_resp, ref_idx, K).sum(0)
    ref["H"] += naive.entropy(naive.densify(ref_resp, ref_idx, K))
    obs.summarize_dense(obs.prepare(X), naive.densify(ref_resp, ref_idx, K), ref)
    assert stats.allclose(SuffStats(**ref), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", list(OBS))
@pytest.mark.parametrize("sparsity", [None, 2])
def test_block_size_does_not_change_the_local_step(kind, sparsity, rng):
    """Blocks reuse one workspace (the last block is shorter than the others):
    the statistics equal those of a single block holding the whole batch."""
    X = _data(kind, rng, n=301)
    obs = OBS[kind]().with_data_defaults(X)
    K = 4
    R = rng.dirichlet(np.ones(K), size=X.shape[0])
    parts = {"N": R.sum(0), "H": naive.entropy(R), **obs.empty_stats(K)}
    obs.summarize_dense(obs.prepare(X), R, parts)
    one = MixtureModel(obs, n_components=K, alpha=2.0, block_rows=1000)
    glob = one.global_step(SuffStats(**parts))
    many = MixtureModel(obs, n_components=K, alpha=2.0, block_rows=64)
    assert many.local_step(X, glob, sparsity).allclose(
        one.local_step(X, glob, sparsity), rtol=1e-10, atol=1e-10
    )


@pytest.mark.parametrize("kind", ["zero-mean", "full", "diag"])
def test_gaussian_stats_match_reference(kind, rng):
    X = _data(kind, rng, n=50)
    obs = OBS[kind]().with_data_defaults(X)
    K = 4
    W = rng.normal(size=(X.shape[0], K))
    from lsdask.kernels import topl_resp_from_log_weights

    resp, idx = topl_resp_from_log_weights(W, 2)
    R = naive.densify(resp, idx, K)
    out = obs.empty_stats(K)
    obs.summarize_sparse(obs.prepare(X), resp, idx, out)
    if "x" in out:
        np.testing.assert_allclose(out["x"], R.T @ X, atol=1e-12)
    if "x2" in out:
        np.testing.assert_allclose(out["x2"], R.T @ X**2, atol=1e-12)
    if "xx" in out:
        from lsdask.kernels import unpack_symmetric

        np.testing.assert_allclose(
            unpack_symmetric(out["xx"], 3), naive.weighted_outer(X, R), atol=1e-12
        )


def test_allocation_term_matches_paper_eq22(rng):
    """Eq. 22 written out literally against the implementation."""
    from scipy.special import digamma, gammaln

    from lsdask.models import FiniteMixtureAllocation

    K, alpha = 6, 3.0
    alloc = FiniteMixtureAllocation(K, alpha)
    N = rng.gamma(2.0, size=K)
    theta = rng.gamma(3.0, size=K) + 0.1

    def c_dir(a):
        return gammaln(a.sum()) - gammaln(a).sum()

    prior = np.full(K, alpha / K)
    eq22 = (
        c_dir(prior)
        - c_dir(theta)
        + ((N + prior - theta) * (digamma(theta) - digamma(theta.sum()))).sum()
    )
    assert alloc.elbo(N, theta) == pytest.approx(eq22, rel=1e-12)


def test_suffstats_algebra_and_field_check():
    a = SuffStats(N=np.ones(2), x=np.ones((2, 3)))
    b = SuffStats(N=np.full(2, 2.0), x=np.zeros((2, 3)))
    c = a + b - a * 2.0
    np.testing.assert_allclose(c["N"], [1.0, 1.0])
    with pytest.raises(ValueError, match="cannot combine statistics"):
        a + SuffStats(N=np.ones(2))


def test_in_place_replace_equals_the_out_of_place_update(rng):
    """``total.replace_(old, new)`` gives bit for bit ``total - old + new``,
    sparse blocks included, and leaves ``old`` and ``new`` untouched."""
    from lsdask.models.stats import SparseBlock

    K, V = 3, 10

    def stats(cols):
        block = rng.random((K, len(cols))) * (rng.random((K, len(cols))) < 0.6)
        return SuffStats(N=rng.random(K), words=SparseBlock.from_columns(cols, block, V))

    total = SuffStats(N=rng.random(K), words=rng.random((K, V)))
    old, new = stats([1, 4, 7]), stats([0, 4, 9])
    expected = total - old + new
    kept = (old["words"].values.copy(), new["words"].values.copy())
    work = total.dense_copy()
    assert work.replace_(old, new) is work
    for name in ("N", "words"):
        np.testing.assert_array_equal(work[name], expected[name])
    np.testing.assert_array_equal(old["words"].values, kept[0])
    np.testing.assert_array_equal(new["words"].values, kept[1])
    np.testing.assert_array_equal(
        total.dense_copy().replace_(None, new)["words"], total["words"] + new["words"]
    )
    with pytest.raises(TypeError, match="dense_copy"):
        new.replace_(None, new)


def test_preselection_is_chosen_by_its_cost_unless_forced():
    obs = ZeroMeanGaussian(nu=6.0, prior_scale=1.0, dim=3)
    assert MixtureModel(obs, 200, 1.0)._preselects(4)  # 200 >= 8 (4 + 3)
    assert not MixtureModel(obs, 50, 1.0)._preselects(4)
    assert MixtureModel(obs, 50, 1.0, preselect=True)._preselects(4)
    assert not MixtureModel(obs, 200, 1.0, preselect=False)._preselects(4)
    assert not MixtureModel(obs, 200, 1.0)._preselects(None)  # dense
    assert not MixtureModel(obs, 200, 1.0, preselect=True)._preselects(200)  # L = K: dense path
    assert not MixtureModel(DiagGaussian(), 200, 1.0, preselect=True)._preselects(4)


def test_multigammaln_stack_equals_scipy_elementwise():
    from scipy.special import multigammaln

    from lsdask.models.special import multigammaln_stack

    for D in (1, 3, 64):
        a = np.array([D / 2.0 + 0.01, D / 2.0 + 1.7, 40.0, 1e5])
        ref = np.array([multigammaln(v, D) for v in a])
        np.testing.assert_allclose(multigammaln_stack(a, D), ref, rtol=1e-13)


def test_multinomial_divergence_equals_the_dense_kl():
    """The sparse cross term equals KL(x_hat || phi_j) computed densely, empty rows included."""
    import scipy.sparse as sp

    from lsdask.models.multinomial import Multinomial

    rng = np.random.default_rng(5)
    X = rng.poisson(0.4, size=(9, 30)).astype(np.float64)
    X[4] = 0.0  # an empty document
    seeds = rng.poisson(0.6, size=(3, 30)).astype(np.float64)
    model = Multinomial(lam=0.1, vocab_size=30)
    got = model.divergence(sp.csr_matrix(X), sp.csr_matrix(seeds))
    phi = (seeds + 0.1) / (seeds + 0.1).sum(axis=1, keepdims=True)
    expect = np.zeros((9, 3))
    for i in range(9):
        if X[i].sum() == 0:
            continue
        p = X[i] / X[i].sum()
        nz = p > 0
        expect[i] = [np.sum(p[nz] * (np.log(p[nz]) - np.log(phi[j, nz]))) for j in range(3)]
    np.testing.assert_allclose(got, expect, rtol=1e-10, atol=1e-12)
    # a CSR with a duplicate entry counts it twice, like the dense matrix
    dup = sp.csr_matrix((np.array([1.0, 2.0]), np.array([3, 3]), np.array([0, 2])), shape=(1, 30))
    dense = np.zeros((1, 30))
    dense[0, 3] = 3.0
    np.testing.assert_allclose(
        model.divergence(sp.csr_matrix(X), dup), model.divergence(sp.csr_matrix(X), dense)
    )
    # ... and leaves the caller's matrix as it was
    np.testing.assert_array_equal(dup.indices, [3, 3])
    np.testing.assert_array_equal(dup.data, [1.0, 2.0])
    # duplicates among the rows' words too
    np.testing.assert_allclose(model.divergence(dup, seeds), model.divergence(dense, seeds))


def test_sparse_block_keeps_the_nonzero_entries_and_adds_like_the_dense_array(rng):
    from lsdask.models.stats import SparseBlock

    cols = np.array([1, 4, 7])
    values = np.array([[0.0, 2.0, 0.5], [1.5, 0.0, 0.0]])
    block = SparseBlock.from_columns(cols, values, 9)
    dense = np.zeros((2, 9))
    dense[:, cols] = values
    assert block.values.size == 3 and block.shape == (2, 9)
    np.testing.assert_array_equal(block.toarray(), dense)
    other = rng.random((2, 9))
    np.testing.assert_array_equal(block + other, dense + other)
    np.testing.assert_array_equal(other + block, other + dense)
    np.testing.assert_array_equal(other - block, other - dense)
    np.testing.assert_array_equal(block - other, dense - other)
    np.testing.assert_array_equal(block + block, dense + dense)
    np.testing.assert_array_equal(block - block, np.zeros((2, 9)))
    np.testing.assert_array_equal((block * 2.5).toarray(), dense * 2.5)
    empty = SparseBlock.from_columns(np.array([], dtype=np.int64), np.zeros((2, 0)), 9)
    np.testing.assert_array_equal(empty + other, other)


def test_sparse_block_from_columns_keeps_what_np_nonzero_finds_in_its_order(rng):
    from lsdask.models.stats import SparseBlock

    cols = np.sort(rng.choice(1000, 60, replace=False))
    block = rng.random((7, 60)) * (rng.random((7, 60)) < 0.2)
    block[0, 3] = np.nan  # kept, as np.nonzero keeps it
    block[2, 5] = -0.0  # a zero: dropped
    block[4, :] = 0.0  # an empty row
    got = SparseBlock.from_columns(cols, block, 1000)
    rows, j = np.nonzero(block)
    np.testing.assert_array_equal(got.rows, rows)
    np.testing.assert_array_equal(got.cols, cols[j])
    np.testing.assert_array_equal(got.values, block[rows, j])
    assert got.rows.dtype == np.int32 and got.cols.dtype == np.int32
    # a non-contiguous view reads the same entries
    view = SparseBlock.from_columns(cols[::2], block[:, ::2], 1000)
    rows, j = np.nonzero(block[:, ::2])
    np.testing.assert_array_equal(view.values, block[:, ::2][rows, j])
    np.testing.assert_array_equal(view.cols, cols[::2][j])


def test_sparse_block_rejects_entries_outside_its_shape_and_mismatched_arrays():
    from lsdask.models.stats import SparseBlock

    with pytest.raises(ValueError, match="outside its shape"):
        SparseBlock(np.array([0, 2]), np.array([1, 1]), np.ones(2), (2, 4))
    with pytest.raises(ValueError, match="outside its shape"):
        SparseBlock(np.array([0]), np.array([-1]), np.ones(1), (2, 4))
    with pytest.raises(ValueError, match="as many rows and cols as values"):
        SparseBlock(np.array([0, 1]), np.array([1]), np.ones(2), (2, 4))
    block = SparseBlock(np.array([1]), np.array([3]), np.ones(1), (2, 4))
    total = SuffStats(words=np.zeros((2, 5)))
    with pytest.raises(ValueError, match=r"shape \(2, 4\) with an array of shape \(2, 5\)"):
        total.replace_(None, SuffStats(words=block))
    with pytest.raises(ValueError, match="cannot combine a sparse block"):
        block + np.zeros((3, 4))


def test_multinomial_batch_statistics_are_the_nonzero_entries_of_the_dense_summary(rng):
    """A multinomial mixture's batch statistics travel as a sparse block: the
    nonzero entries of the dense K x V summary, nothing else."""
    from lsdask.kernels import topl_resp_from_log_weights
    from lsdask.models.stats import SparseBlock

    X = _data("multinomial", rng, n=150)
    obs = Multinomial().with_data_defaults(X)
    model = MixtureModel(obs, n_components=5, alpha=2.0, block_rows=64)
    R = rng.dirichlet(np.ones(5), size=X.shape[0])
    parts = {"N": R.sum(0), "H": naive.entropy(R), **obs.empty_stats(5)}
    obs.summarize_dense(obs.prepare(X), R, parts)
    glob = model.global_step(SuffStats(**parts))
    stats = model.local_step(X, glob, 2)
    assert isinstance(stats["words"], SparseBlock)
    resp, idx = topl_resp_from_log_weights(model.log_weights(obs.prepare(X), glob), 2)
    dense = obs.empty_stats(5)
    obs.summarize_sparse(obs.prepare(X), resp, idx, dense)
    np.testing.assert_allclose(stats["words"].toarray(), dense["words"], rtol=1e-12)
    assert stats["words"].values.size == np.count_nonzero(dense["words"])
