"""ESVI's stale totals (``pi_sync="stale"``, the paper's round-robin totals):
the token conserves the true totals, every view misses only other parts'
changes of the last 2P - 1 sub-steps (checked against a reference replay of
the protocol on sets of changes), P = 1 is exact mode, and a 2-process
LocalCluster equals the in-process run."""

from __future__ import annotations

import numpy as np
import pytest

from lsdask import LDA
from lsdask.engine.partitions import DaskPartitions, SerialPartitions
from lsdask.learn import esvi
from tests.test_esvi_lda import corpus, model, started

K = 5


def stale_run(parts, X, P_rotations: int, record=None):
    m = model(3)
    _, run = started(X, m, parts)
    run.stale = esvi.StaleTotals.start(run.pi, parts.n_parts)
    esvi.rotate(m, parts, run, P_rotations, on_substep=record)
    return run


def reference_missing(P: int, n_steps: int) -> list[list[set]]:
    """The round-robin protocol replayed on sets: after sub-step t, the changes
    ``(q, t')`` part p's view lacks (its own are always in)."""
    made: set = set()
    token: set = set()
    unsent: list[set] = [set() for _ in range(P)]
    views: list[set] = [set() for _ in range(P)]
    out = []
    for t in range(n_steps):
        for p in range(P):
            made.add((p, t))
            unsent[p].add((p, t))
            views[p].add((p, t))
        h = t % P
        token |= unsent[h]
        unsent[h] = set()
        views[h] = set(token)
        out.append([made - views[p] for p in range(P)])
    return out


@pytest.mark.parametrize("P", [2, 3])
def test_stale_views_miss_only_recent_changes_of_others(P):
    """After every sub-step: token + unsent == the true totals (the blocks' column
    sums); each view == the true totals minus exactly the changes the protocol
    says it lacks, which are other parts' changes of the last 2P - 1 sub-steps."""
    X = corpus(4, 72)
    deltas: list[list[np.ndarray]] = []
    seen: list[tuple[list[np.ndarray], np.ndarray]] = []
    last = {}

    def record(run, s):
        by_part = sorted(run.reports, key=lambda r: r.part)
        cols = {r.block: r.colsum for r in run.reports}
        deltas.append([cols[r.block] - last.get(r.block, cols[r.block]) for r in by_part])
        last.update(cols)
        np.testing.assert_allclose(run.stale.token + np.sum(run.stale.unsent, axis=0), run.pi,
                                   rtol=1e-12)  # fmt: skip
        seen.append(([v.copy() for v in run.stale.views], run.pi.copy()))

    # the first sub-step's changes are measured against the blocks as made
    parts = SerialPartitions(P)
    m = model(3)
    _, run = started(X, m, parts)
    run.stale = esvi.StaleTotals.start(run.pi, P)
    last.update({b: c for b, c in enumerate(run.colsums)})
    esvi.rotate(m, parts, run, 3, on_substep=record)
    missing = reference_missing(P, len(seen))
    for t, (views, true_pi) in enumerate(seen):
        for p in range(P):
            lacks = missing[t][p]
            assert all(q != p and t - tt <= 2 * P - 2 for q, tt in lacks), (t, p, lacks)
            want = true_pi - sum((deltas[tt][q] for q, tt in lacks), np.zeros(K))
            np.testing.assert_allclose(views[p], want, rtol=1e-10, atol=1e-9)
    assert any(missing[t][p] for t in range(len(seen)) for p in range(P))  # views do lag


def test_one_part_stale_is_exact():
    """P = 1: the token visits the only part after every sub-step, so its view is
    the true totals and the run is exact mode's."""
    X = corpus(5, 40)
    kw = {"algorithm": "esvi", "n_blocks": 1, "n_laps": 3, "tol": 0, "random_state": 2,
          "client": "sync", "batch_size": 10}  # fmt: skip
    exact = LDA(K, **kw).fit(X)
    stale = LDA(K, pi_sync="stale", **kw).fit(X)
    np.testing.assert_array_equal(stale.substep_elbo_trace_, exact.substep_elbo_trace_)


def test_stale_dask_equals_in_process_and_differs_from_exact(dask_client):
    """2-process LocalCluster == in-process (1e-10) in stale mode; and with P = 2
    the stale run is not the exact one (the views do lag)."""
    X = corpus(6, 64)
    want = stale_run(SerialPartitions(2), X, 3)
    parts = DaskPartitions(dask_client, 2)
    got = stale_run(parts, X, 3)
    np.testing.assert_allclose(got.substep_elbo, want.substep_elbo, rtol=1e-10)
    np.testing.assert_allclose(got.pi, want.pi, rtol=1e-10)
    parts.release(got.blocks + got.shards)
    m = model(3)
    _, exact = started(X, m, SerialPartitions(2))
    esvi.rotate(m, SerialPartitions(2), exact, 3)
    assert not np.allclose(exact.substep_elbo, want.substep_elbo, rtol=1e-12)


def test_stale_checkpoint_resume_equals_uninterrupted(tmp_path):
    """The views, the token and the unsent changes are checkpointed: a resumed
    stale run equals an uninterrupted one."""
    X = corpus(7, 60)
    kw = {"algorithm": "esvi", "n_blocks": 2, "tol": 0, "random_state": 3, "client": "sync",
          "batch_size": 10, "pi_sync": "stale"}  # fmt: skip
    want = LDA(K, n_laps=3, **kw).fit(X)
    ck = str(tmp_path / "ck")
    LDA(K, n_laps=2, checkpoint_dir=ck, **kw).fit(X)
    got = LDA(K, n_laps=3, checkpoint_dir=ck, resume=True, **kw).fit(X)
    np.testing.assert_array_equal(got.substep_elbo_trace_, want.substep_elbo_trace_)
    np.testing.assert_array_equal(got.components_, want.components_)
