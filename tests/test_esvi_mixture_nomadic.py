"""ESVI for mixtures on the nomadic schedule (:mod:`lsdask.learn.esvi_mixture`,
``schedule="nomadic"``): the routing of ESVI LDA's nomadic schedule over
component blocks dealt afresh every rotation. A mixture shares no totals, so
every meeting is an exact coordinate step, whatever order meetings end in."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from lsdask.engine.partitions import DaskPartitions, SerialPartitions
from lsdask.learn.esvi_mixture import rotate_mixture
from tests.test_esvi_mixture import (
    K,
    _what,
    data_and_model,
    gaussian_rows,
    gmm,
    in_first_block,
    memo_elbo,
    shard_rows,
    started,
)
from tests.test_esvi_nomadic import ShuffledParts


def pairs_counter(P: int, met: list[Counter]):
    """An ``on_event`` that counts the (part, block) meetings of every rotation."""

    def count(_, event):
        if event.kind == "meet":
            if not met or sum(met[-1].values()) == P * P:
                met.append(Counter())
            met[-1][event.parts[0], event.blocks[0]] += 1

    return count


def nondecreasing(trace) -> bool:
    trace = np.asarray(trace)
    return bool((np.diff(trace) >= -1e-9 * np.abs(trace[1:])).all())


@pytest.mark.parametrize("kind", ["gaussian", "multinomial"])
def test_any_order_meets_every_pair_once_and_never_lowers_the_elbo(kind):
    """P = 3, meetings ending in random orders (as on a cluster): every (part,
    block) pair meets once per rotation, first each part with the block made or
    re-dealt on it; the ELBO at every rotation's end never
    decreases, and it is the ELBO recomputed from the rows' responsibilities
    (so the rotation's per-part and per-block reports add up to the state)."""
    X, m = data_and_model(kind)
    P = 3
    pairs = Counter({(p, b): 1 for p in range(P) for b in range(P)})
    traces = []
    for seed in range(3):
        parts = ShuffledParts(P, seed)
        source, run = started(X, m, parts)
        met: list[Counter] = []
        count = pairs_counter(P, met)
        order: list[tuple[int, int]] = []

        def record(run, event, count=count, order=order):
            count(run, event)
            if event.kind == "meet":
                order.append((event.parts[0], event.blocks[0]))

        rotate_mixture(m, parts, run, 4, schedule="nomadic", on_event=record)
        assert met == [pairs] * 4
        # block b is made (and re-dealt) on part b: each rotation starts by meeting in place
        for r in range(4):
            meetings = order[r * P * P : (r + 1) * P * P]
            firsts = [next(b for q, b in meetings if q == p) for p in range(P)]
            assert firsts == list(range(P)), meetings
        assert nondecreasing(run.elbo_trace), np.diff(run.elbo_trace)
        assert run.elbo_trace[-1] > run.elbo_trace[0]
        rows = shard_rows(source, P)
        want = memo_elbo(m.observation, rows, [sh.z for sh in run.shards], 1.0)
        np.testing.assert_allclose(run.elbo_trace[-1], want, rtol=1e-10)
        traces.append(run.elbo_trace)
    assert any(not np.array_equal(t, traces[0]) for t in traces[1:])  # the order mattered


def test_mass_moves_across_component_blocks():
    """Mass starting in one block's components reaches the other blocks'
    components on the nomadic schedule too (the components are dealt afresh)."""
    X = gaussian_rows()
    m = gmm(X, first_resp=in_first_block)
    parts = SerialPartitions(3)
    _, run = started(X, m, parts)
    first = run.deals[0][0]
    rotate_mixture(m, parts, run, 6, schedule="nomadic")
    Z = np.concatenate([sh.z for sh in run.shards])
    assert np.delete(Z, first, axis=1).sum() > 1.0


@pytest.mark.parametrize("P", [1, 2])
def test_one_or_two_parts_nomadic_is_the_rotation_schedule(P):
    """With one part, or two (each meets its block in place, then they swap),
    the nomadic schedule makes the rotation schedule's meetings in its order."""
    X = gaussian_rows(5)
    m = gmm(X, 2)
    runs = []
    for schedule in ("rotation", "nomadic"):
        parts = SerialPartitions(P)
        _, run = started(X, m, parts)
        rotate_mixture(m, parts, run, 3, schedule=schedule)
        runs.append(run)
    np.testing.assert_array_equal(runs[0].elbo_trace, runs[1].elbo_trace)
    for a, b in zip(runs[0].shards, runs[1].shards, strict=True):
        np.testing.assert_array_equal(a.z, b.z)


def test_dask_equals_in_process_and_each_worker_holds_its_block(dask_client):
    """2-process LocalCluster, P = 2: with two parts the routing does not depend
    on which meeting ends first (each part meets its block in place, then the
    two swap), so the cluster's run equals the in-process one to 1e-10. After
    every meeting and swap, each worker holds its own shard and the block the
    driver says it holds (during a swap: its old block, its partner's, or both)."""
    X = gaussian_rows(4)
    m = gmm(X, 2)
    serial = SerialPartitions(2)
    _, want = started(X, m, serial)
    rotate_mixture(m, serial, want, 3, schedule="nomadic")
    parts = DaskPartitions(dask_client, 2)
    met: list[Counter] = []
    count = pairs_counter(2, met)

    def inspect(run, event):
        count(run, event)
        held = parts.holdings(_what)
        for p, worker in enumerate(parts.workers):
            blocks = {h[1] for h in held[worker] if h[0] == "block"}
            assert [h[1] for h in held[worker] if h[0] == "shard"] == [p], held
            if p in event.crossing:
                q = event.crossing[p]
                assert blocks and blocks <= {event.held[p], event.held[q]}, held
            else:
                assert blocks == {event.held[p]}, held

    _, run = started(X, m, parts)
    rotate_mixture(m, parts, run, 3, schedule="nomadic", on_event=inspect)
    assert met == [Counter({(p, b): 1 for p in range(2) for b in range(2)})] * 3
    np.testing.assert_allclose(run.elbo_trace, want.elbo_trace, rtol=1e-10)
    assert nondecreasing(run.elbo_trace)
    got = parts.gather(run.shards)
    for g, w in zip(got, want.shards, strict=True):
        np.testing.assert_allclose(g.z, w.z, rtol=1e-10, atol=1e-14)
    parts.release(run.blocks + run.shards)


def test_estimator_nomadic_resume_equals_uninterrupted(tmp_path):
    """``GaussianMixture(algorithm="esvi", schedule="nomadic")``: 2 rotations with
    checkpoints, then resumed to 4, equals 4 in one fit (in this process the
    meetings end in the order they start, so the run is deterministic); a
    checkpoint of the rotation schedule is not resumed as nomadic."""
    from lsdask import GaussianMixture

    kw = {"algorithm": "esvi", "n_blocks": 3, "client": "sync", "tol": 0, "batch_size": 40,
          "random_state": 3, "schedule": "nomadic"}  # fmt: skip
    X = gaussian_rows(7)
    want = GaussianMixture(K, n_laps=4, **kw).fit(X)
    assert nondecreasing(want.elbo_trace_)
    GaussianMixture(K, n_laps=2, checkpoint_dir=str(tmp_path / "a"), **kw).fit(X)
    got = GaussianMixture(K, n_laps=4, checkpoint_dir=str(tmp_path / "a"), resume=True, **kw)
    got.fit(X)
    np.testing.assert_array_equal(got.elbo_trace_, want.elbo_trace_)
    np.testing.assert_array_equal(got.predict_proba(X), want.predict_proba(X))
    rotation = {**kw, "schedule": "rotation"}
    GaussianMixture(K, n_laps=2, checkpoint_dir=str(tmp_path / "b"), **rotation).fit(X)
    with pytest.raises(ValueError, match="was written with"):
        GaussianMixture(K, n_laps=4, checkpoint_dir=str(tmp_path / "b"), resume=True, **kw).fit(X)


def test_bad_schedule_is_a_clear_error():
    from lsdask import GaussianMixture

    with pytest.raises(ValueError, match="schedule"):
        GaussianMixture(K, algorithm="esvi", schedule="random", client="sync").fit(gaussian_rows())
