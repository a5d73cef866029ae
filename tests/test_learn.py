"""Invariants of the learning algorithms, run in-process."""

from __future__ import annotations

import numpy as np
import pytest

from lsdask.engine import SerialExecutor
from lsdask.io.sources import as_batch_source
from lsdask.learn import FullBatchVB, MemoizedVI, StochasticVI, initial_stats
from lsdask.models import (
    DiagGaussian,
    FullGaussian,
    MixtureModel,
    Multinomial,
    ZeroMeanGaussian,
    sum_stats,
)

K = 6


def _synthetic(kind, rng, n=1200):
    if kind == "multinomial":
        topics = rng.dirichlet(np.full(40, 0.2), size=K)
        z = rng.integers(K, size=n)
        return np.stack([rng.multinomial(30, topics[k]) for k in z]).astype(float)
    D = 4
    covs = [np.diag(rng.uniform(0.2, 2.0, D)) for _ in range(K)]
    z = rng.integers(K, size=n)
    means = rng.normal(scale=4.0, size=(K, D)) if kind != "zero-mean" else np.zeros((K, D))
    return np.stack([rng.multivariate_normal(means[k], covs[k]) for k in z])


OBS = {
    "zero-mean": ZeroMeanGaussian,
    "full": FullGaussian,
    "diag": DiagGaussian,
    "multinomial": Multinomial,
}


def _setup(kind, rng, batch_size=150):
    X = _synthetic(kind, rng)
    source = as_batch_source(X, batch_size)
    obs = OBS[kind]().with_data_defaults(X)
    # preselect=True: the zero-mean Gaussian's L-sparse steps take the float32 path
    # even at this small K (the cost model would not)
    model = MixtureModel(obs, K, alpha=1.0, block_rows=64, preselect=True)
    glob = model.global_step(initial_stats(model, X, "random", rng))
    return X, source, model, glob


def _assert_monotone(trace, rtol=1e-9):
    trace = np.asarray(trace)
    drops = np.diff(trace) / np.abs(trace[1:])
    assert np.all(drops >= -rtol), f"ELBO decreased: min relative change {drops.min():.3g}"


@pytest.mark.parametrize("kind", list(OBS))
@pytest.mark.parametrize("L", [1, 2, 4, K])
def test_memoized_elbo_never_decreases(kind, L, rng):
    _, source, model, glob = _setup(kind, rng)
    learner = MemoizedVI(n_laps=4, tol=1e-12, batches_per_update=1)
    result = learner.run(model, SerialExecutor(), source.batches, glob, rng, L)
    assert len(result.elbo_trace) == 1 + 3 * source.n_batches  # lap 1 fills the memo
    _assert_monotone(result.elbo_trace)


@pytest.mark.parametrize("kind", ["zero-mean", "multinomial"])
def test_memoized_waves_of_batches_never_decrease(kind, rng):
    _, source, model, glob = _setup(kind, rng)
    result = MemoizedVI(n_laps=3, tol=1e-12, batches_per_update=3).run(
        model, SerialExecutor(), source.batches, glob, rng, 2
    )
    _assert_monotone(result.elbo_trace)


@pytest.mark.parametrize("kind", list(OBS))
def test_whole_data_stats_equal_sum_of_memo_and_elbo_is_recomputable(kind, rng):
    _, source, model, glob = _setup(kind, rng)
    result = MemoizedVI(n_laps=3, tol=1e-12, batches_per_update=1).run(
        model, SerialExecutor(), source.batches, glob, rng, 3
    )
    memo_sum = sum_stats(result.memo)
    assert result.stats.allclose(memo_sum, rtol=1e-12, atol=1e-12)
    # the memo of each batch is the local step against the globals it last saw;
    # one more lap-free check: recomputing the ELBO from the statistics agrees
    assert model.elbo(memo_sum, model.global_step(memo_sum)) == pytest.approx(
        result.elbo_trace[-1], rel=1e-12
    )


def test_incremental_updates_equal_recomputation_within_a_lap(rng):
    """S - S_b(old) + S_b(new) after every visit equals the memo's sum."""
    _, source, model, glob = _setup("full", rng)
    seen = []

    class Recorder(SerialExecutor):
        def map(self, fn, handles, shared):
            out = super().map(fn, handles, shared)
            seen.append(out)
            return out

    result = MemoizedVI(n_laps=2, tol=1e-12, batches_per_update=1, shuffle=False).run(
        model, Recorder(), source.batches, glob, rng, 2
    )
    lap2 = [s[0] for s in seen[source.n_batches :]]
    assert sum_stats(lap2).allclose(result.stats, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kind", ["full", "multinomial"])
def test_full_batch_vb_never_decreases_and_converges(kind, rng):
    _, source, model, glob = _setup(kind, rng)
    result = FullBatchVB(n_laps=200, tol=1e-7).run(
        model, SerialExecutor(), source.batches, glob, rng, 3
    )
    _assert_monotone(result.elbo_trace)
    assert result.converged and result.n_laps < 200


def test_svi_moves_towards_the_memoized_optimum(rng):
    X, source, model, glob = _setup("diag", rng)
    svi = StochasticVI(n_laps=8, batches_per_update=1, n_total_rows=X.shape[0]).run(
        model, SerialExecutor(), source.batches, glob, rng, 2
    )
    memo = MemoizedVI(n_laps=8, batches_per_update=1).run(
        model, SerialExecutor(), source.batches, glob, rng, 2
    )
    stats_svi = model.local_step(X, svi.globals, 2)
    elbo_svi = model.elbo(stats_svi, svi.globals)
    start = model.elbo(model.local_step(X, glob, 2), glob)
    assert elbo_svi > start
    assert abs(elbo_svi - memo.elbo_trace[-1]) / abs(memo.elbo_trace[-1]) < 0.02


def test_memo_converges_by_relative_change(rng):
    _, source, model, glob = _setup("full", rng)
    result = MemoizedVI(n_laps=100, tol=1e-6).run(
        model, SerialExecutor(), source.batches, glob, rng, 2
    )
    assert result.converged and result.n_laps < 100


def test_lap_order_groups_batches_of_similar_cost_into_waves():
    from lsdask.learn.base import lap_order, waves

    costs = [5.0, 90.0, 10.0, 70.0, 40.0, 60.0, 20.0]
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(20):
        order = lap_order(rng, len(costs), 2, costs)
        assert sorted(order.tolist()) == list(range(len(costs)))
        groups = {tuple(sorted(w)) for w in waves(order, 2)}
        # pairs of neighbours in decreasing cost: (90, 70), (60, 40), (20, 10), (5,)
        assert groups == {(1, 3), (4, 5), (2, 6), (0,)}
        seen.add(tuple(order.tolist()))
    assert len(seen) > 5  # the waves come in a fresh random order every lap
    # equal costs (chunks of one size): the pairs themselves change from lap to lap
    pairs = set()
    for _ in range(20):
        order = lap_order(rng, 6, 2, [100.0] * 6)
        pairs |= {tuple(sorted(w)) for w in waves(order, 2)}
    assert len(pairs) > 3
    # one batch per wave, or no costs: a plain permutation of the same generator
    for size, c in ((1, costs), (2, None)):
        a, b = np.random.default_rng(3), np.random.default_rng(3)
        np.testing.assert_array_equal(lap_order(a, 7, size, c), b.permutation(7))


def test_batch_costs_need_a_finite_cost_for_every_batch():
    from types import SimpleNamespace

    from lsdask.learn.base import batch_costs

    assert batch_costs([SimpleNamespace(cost=3), SimpleNamespace(cost=1.5)]) == [3.0, 1.5]
    assert batch_costs([SimpleNamespace(cost=3), SimpleNamespace()]) is None
    assert batch_costs([SimpleNamespace(cost=3), SimpleNamespace(cost=float("nan"))]) is None
