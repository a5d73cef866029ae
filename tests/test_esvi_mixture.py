"""ESVI for finite mixtures (esvi paper, Alg. 4) in exact mode: the schedule against
plain numpy, the ELBO against the memoized mixture's, monotonicity, mass moving
across component blocks, Dask against in-process, and bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma

from lsdask.engine.partitions import DaskPartitions, SerialPartitions
from lsdask.io.sources import as_batch_source
from lsdask.learn.esvi import deal_batches
from lsdask.learn.esvi_mixture import rotate_mixture, start_mixture
from lsdask.models import MixtureModel, Multinomial, SuffStats
from lsdask.models.esvi_mixture import ComponentBlock, ESVIMixture, MixtureShard
from lsdask.models.zero_mean_gaussian import ZeroMeanGaussian

K, D = 6, 3


def gaussian_rows(seed: int = 0, n: int = 240) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scales = [np.diag([4.0, 0.2, 0.2]), np.diag([0.2, 4.0, 0.2]), np.diag([0.2, 0.2, 4.0])]
    return np.concatenate([rng.standard_normal((n // 3, D)) @ s for s in scales])


def gmm(X, seed: int = 1, **kw) -> ESVIMixture:
    return ESVIMixture(ZeroMeanGaussian().with_data_defaults(X), K, 1.0, seed, **kw)


def started(X, m, parts, batch_size=20, seed=5, start=None):
    source = as_batch_source(X, batch_size)
    rng = np.random.default_rng(seed)
    run = start_mixture(m, parts, source.batches, source.batch_rows, rng, start)
    return source, run


def stack(rows):
    return sp.vstack(rows, format="csr") if sp.issparse(rows[0]) else np.concatenate(rows)


def shard_rows(source, P, seed=5):
    dealt = deal_batches(source.batch_rows, P, np.random.default_rng(seed))
    return [stack([source.batches[i].rows for i in d]) for d in dealt]


def numpy_log_weight(X, nu, B, theta):
    """``psi(theta_k) + E[log N(x | 0, Lambda_k^-1)]`` under ``Lambda_k ~ W(nu, B^-1)``."""
    e_logdet = digamma((nu - np.arange(D)) / 2).sum() + D * np.log(2) - np.linalg.slogdet(B)[1]
    quad = nu * np.einsum("nd,de,ne->n", X, np.linalg.inv(B), X)
    return digamma(theta) - D / 2 * np.log(2 * np.pi) + e_logdet / 2 - quad / 2


def numpy_alg4(rows, zs, deals, nu0, B0, alpha, n_rotations):
    """Alg. 4 in exact mode with the deterministic schedule: the rows of part p
    updated over the components of block (p + s) mod P against the sub-step's
    snapshot, each row's mass in the block kept (Eq. 17). The responsibilities
    after every sub-step."""
    P = len(rows)
    out = []
    for r in range(n_rotations):
        for s in range(P):
            Z = np.concatenate(zs)
            X = np.concatenate(rows)
            N = Z.sum(0)
            theta = alpha / K + N
            new = [z.copy() for z in zs]
            for p in range(P):
                comps = deals[min(r, len(deals) - 1)][(p + s) % P]  # P = 1: one deal
                u = np.empty((rows[p].shape[0], comps.size))
                for j, k in enumerate(comps):
                    B = B0 + (Z[:, k, None] * X).T @ X
                    u[:, j] = numpy_log_weight(rows[p], nu0 + N[k], B, theta[k])
                e = np.exp(u - u.max(1, keepdims=True))
                mass = zs[p][:, comps].sum(1, keepdims=True)
                new[p][:, comps] = mass * e / e.sum(1, keepdims=True)
            zs = new
            out.append([z.copy() for z in zs])
    return out


def memo_elbo(obs, rows, zs, alpha):
    """The memoized mixture's ELBO (lsparse Eq. 18) of the responsibilities."""
    model = MixtureModel(obs, K, alpha)
    X = stack(rows)
    Z = np.concatenate(zs)
    parts = {"N": Z.sum(0), "H": -(Z * np.log(Z, where=Z > 0, out=np.zeros_like(Z))).sum(0),
             **obs.empty_stats(K)}  # fmt: skip
    obs.summarize_dense(obs.prepare(X), Z, parts)
    stats = SuffStats(**parts)
    return model.elbo(stats, model.global_step(stats))


@pytest.mark.parametrize("P", [1, 3])
def test_gmm_schedule_equals_numpy_alg4(P):
    """After every sub-step, the responsibilities equal plain numpy Alg. 4 with the
    same component deals (P = 1: batch VI), and the ELBO from partial sums
    equals the memoized mixture's ELBO of them."""
    X = gaussian_rows()
    m = gmm(X)
    parts = SerialPartitions(P)
    source, run = started(X, m, parts)
    rows = shard_rows(source, P)
    zs0 = [sh.z.copy() for sh in run.shards]
    got = []
    rotate_mixture(m, parts, run, 3, on_substep=lambda r, s: got.append([sh.z for sh in r.shards]))
    obs = m.observation
    want = numpy_alg4(rows, zs0, run.deals, obs.nu, obs.B0, 1.0, 3)
    assert len(got) == len(want) == 3 * P
    for g, w in zip(got, want, strict=True):
        for gz, wz in zip(g, w, strict=True):
            np.testing.assert_allclose(gz, wz, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(run.substep_elbo[-1], memo_elbo(obs, rows, got[-1], 1.0),
                               rtol=1e-10)  # fmt: skip


def seeded_stats(m, X, seed=8):
    """Statistics of a sample of X hard-assigned to K components at random (as
    ``init``'s seeds give them), and the sample and its assignment."""
    rng = np.random.default_rng(seed)
    sample = X[rng.choice(X.shape[0], 60, replace=False)]
    a = np.arange(60) % K
    onehot = np.eye(K)[a]
    obs = m.observation
    stats = {"N": onehot.sum(0), **obs.empty_stats(K)}
    obs.summarize_dense(obs.prepare(sample), onehot, stats)
    return stats, sample, a


@pytest.mark.parametrize("P", [1, 2])
def test_start_from_statistics_is_a_softmax_over_all_components(P):
    """Started from given statistics of all K components, every row's first
    responsibilities are the softmax over all K of its log weights against them
    (plain numpy), whatever the component blocks; the blocks then hold the
    data's statistics of them, and the ELBO rises over the sub-steps."""
    X = gaussian_rows(3)
    m = gmm(X, 4)
    stats, sample, a = seeded_stats(m, X)
    parts = SerialPartitions(P)
    source = as_batch_source(X, 20)
    run = start_mixture(m, parts, source.batches, source.batch_rows, np.random.default_rng(5),
                        lambda: stats)  # fmt: skip
    obs = m.observation
    for rows, shard in zip(shard_rows(source, P), run.shards, strict=True):
        u = np.column_stack([
            numpy_log_weight(rows, obs.nu + (a == k).sum(),
                             obs.B0 + sample[a == k].T @ sample[a == k], 1.0 / K + (a == k).sum())
            for k in range(K)
        ])  # fmt: skip
        e = np.exp(u - u.max(1, keepdims=True))
        np.testing.assert_allclose(shard.z, e / e.sum(1, keepdims=True), rtol=1e-9, atol=1e-13)
    Z = np.concatenate([sh.z for sh in run.shards])
    N = np.zeros(K)
    for block in run.blocks:
        N[block.comps] = block.stats["N"]
    np.testing.assert_allclose(N, Z.sum(0), rtol=1e-12)
    rotate_mixture(m, parts, run, 2)
    trace = np.array(run.substep_elbo)
    assert (np.diff(trace) >= -1e-9 * np.abs(trace[1:])).all(), np.diff(trace)


def data_and_model(kind: str) -> tuple[Any, ESVIMixture]:
    """Rows of a known 3-cluster Gaussian mixture or counts of 4 word profiles,
    and the ESVI mixture model of K components for them."""
    if kind == "gaussian":
        X = gaussian_rows(2)
        return X, gmm(X, 3)
    rng = np.random.default_rng(3)
    X = sp.csr_matrix(rng.poisson(rng.gamma(0.3, 2.0, size=(4, 25))[rng.integers(0, 4, 160)]))
    return X, ESVIMixture(Multinomial(lam=0.1).with_data_defaults(X), K, 1.0, 4)


@pytest.mark.parametrize("kind", ["gaussian", "multinomial"])
def test_elbo_never_decreases(kind):
    X, m = data_and_model(kind)
    parts = SerialPartitions(3)
    source, run = started(X, m, parts)
    rotate_mixture(m, parts, run, 5)
    trace = np.array(run.substep_elbo)
    assert (np.diff(trace) >= -1e-9 * np.abs(trace[1:])).all(), np.diff(trace)
    assert trace[-1] > trace[0]
    rows = shard_rows(source, 3)
    np.testing.assert_allclose(
        trace[-1], memo_elbo(m.observation, rows, [sh.z for sh in run.shards], 1.0), rtol=1e-10
    )


def in_first_block(rng, n, K_):
    """All of every row's mass in the components of rotation 0's block 0 (seed 1, P=3)."""
    comps = gmm(gaussian_rows()).deal(0, 3)[0]
    z = np.zeros((n, K_))
    w = rng.random((n, comps.size))
    z[:, comps] = w / w.sum(1, keepdims=True)
    return z


@pytest.mark.parametrize("redeal", [True, False])
def test_mass_moves_across_component_blocks(redeal):
    """Mass starting in one block's components reaches the other components only
    when the components are dealt afresh every rotation."""
    X = gaussian_rows()
    m = gmm(X, first_resp=in_first_block)
    parts = SerialPartitions(3)
    _, run = started(X, m, parts)
    first = run.deals[0][0]
    rotate_mixture(m, parts, run, 6, redeal_blocks=redeal)
    Z = np.concatenate([sh.z for sh in run.shards])
    outside = np.delete(Z, first, axis=1).sum()
    if redeal:
        assert outside > 1.0, outside  # more than one row's whole mass has moved
    else:
        assert outside == 0.0


def test_bad_input():
    X = gaussian_rows()
    m = gmm(X)
    with pytest.raises(ValueError, match=r"n_blocks=7 is larger than the number of components"):
        started(X, m, SerialPartitions(7))
    with pytest.raises(ValueError, match="too few rows per shard: the data has 2 non-empty"):
        started(X[:30], m, SerialPartitions(3), batch_size=20)


def _what(value):
    if isinstance(value, ComponentBlock):
        return ("block", value.index)
    if isinstance(value, MixtureShard):
        return ("shard", value.part)
    return None


@pytest.mark.parametrize("seeded", [False, True])
def test_dask_equals_in_process_and_each_worker_holds_its_block(seeded, dask_client):
    """From random responsibilities or from statistics (the start rotation)."""
    X = gaussian_rows(4)
    m = gmm(X, 2)
    start = (lambda: seeded_stats(m, X)[0]) if seeded else None
    serial = SerialPartitions(2)
    _, want = started(X, m, serial, start=start)
    rotate_mixture(m, serial, want, 3)
    parts = DaskPartitions(dask_client, 2)

    def inspect(run, s):
        held = parts.holdings(_what)
        for p, worker in enumerate(parts.workers):
            assert sorted(held[worker]) == [("block", (p + s) % 2), ("shard", p)], held

    _, run = started(X, m, parts, start=start)
    rotate_mixture(m, parts, run, 3, on_substep=inspect)
    np.testing.assert_allclose(run.substep_elbo, want.substep_elbo, rtol=1e-10)
    got = parts.gather(run.shards)
    for g, w in zip(got, want.shards, strict=True):
        np.testing.assert_allclose(g.z, w.z, rtol=1e-10, atol=1e-14)
    parts.release(run.blocks + run.shards)


@pytest.mark.parametrize("kind", ["zero-mean", "full", "multinomial"])
def test_estimators(kind):
    """GaussianMixture / MultinomialMixture(algorithm="esvi"): the ELBO never
    decreases over the sub-steps and the fitted model scores and predicts."""
    from lsdask import GaussianMixture, MultinomialMixture

    kw = {"algorithm": "esvi", "n_blocks": 3, "client": "sync", "n_laps": 4, "tol": 0,
          "batch_size": 40, "random_state": 0}  # fmt: skip
    if kind == "multinomial":
        rng = np.random.default_rng(3)
        X = sp.csr_matrix(rng.poisson(rng.gamma(0.3, 2.0, size=(4, 25))[rng.integers(0, 4, 160)]))
        est = MultinomialMixture(K, **kw).fit(X)
    else:
        X = gaussian_rows(6)
        est = GaussianMixture(K, covariance_type=kind, **kw).fit(X)
    trace = est.substep_elbo_trace_
    assert trace.shape == (12,)
    assert (np.diff(trace) >= -1e-9 * np.abs(trace[1:])).all()
    assert np.isfinite(est.score(X))
    assert est.predict(X).shape == (X.shape[0],)
    np.testing.assert_allclose(est.weights_.sum(), 1.0)


def test_estimator_refuses_sparsity():
    from lsdask import GaussianMixture

    with pytest.raises(ValueError, match="sparsity=2 is not supported with algorithm='esvi'"):
        GaussianMixture(K, algorithm="esvi", sparsity=2, client="sync").fit(gaussian_rows())


def test_time_trace_is_cumulative(monkeypatch):
    """The estimator runs one rotation per call; its time trace still adds up the
    rotations (seconds since the first one began), as LDA's does. A clock that
    ticks one second per reading: each rotation takes one second."""
    from types import SimpleNamespace

    from lsdask import GaussianMixture
    from lsdask.learn import esvi_mixture

    ticks = iter(range(1000))
    monkeypatch.setattr(esvi_mixture, "time", SimpleNamespace(perf_counter=lambda: next(ticks)))
    est = GaussianMixture(K, algorithm="esvi", n_blocks=2, client="sync", n_laps=3, tol=0,
                          batch_size=40, random_state=0).fit(gaussian_rows(2))  # fmt: skip
    np.testing.assert_array_equal(est.time_trace_, [1.0, 2.0, 3.0])
