"""What an HDP lap saves without changing its numbers.

A judgement that accepts nothing keeps the lap's last global step's topics
(:meth:`~lsdask.models.hdp_moves.MoveOutcome.kept_globals`) instead of
recomputing them from the same statistics: the globals must be those that
:meth:`~lsdask.models.hdp.HDPModel.restore_globals` gives, to the bit; and the
sticks search's one-BLAS-thread context, made once, must give the numbers the
search gives under ``threadpoolctl.threadpool_limits``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import lsdask
from lsdask.models.hdp_move_stats import MovePlan
from lsdask.models.hdp_moves import MoveSettings
from lsdask.models.hdp_sticks import init_sticks, one_blas_thread, optimize_sticks
from lsdask.models.stats import sum_stats
from lsdask.synthetic import make_bars_corpus

MOVES = MoveSettings(delete=True, merge=True, delete_max_docs=1000, max_pairs=20)


@pytest.fixture(scope="module")
def settled():
    """An HDP on the bars corpus (10 true topics) after its moves settled at K=10."""
    X, _ = make_bars_corpus(800, doc_topic_prior=0.3, random_state=3)
    est = lsdask.HDP(24, n_laps=6, sparsity=3, client="sync", random_state=1, batch_size=200,
                     tol=0.0, init="kmeans++").fit(X)  # fmt: skip
    return X, dataclasses.replace(est.model_, moves=MOVES), est.posterior_


def test_a_judgement_that_accepts_nothing_keeps_the_globals_restore_would_give(settled):
    X, model, glob = settled
    parts = np.array_split(np.arange(X.shape[0]), 4)
    # two true bars as delete candidates and the plan's merge pairs: all rejected
    planned = model.plan_moves(sum_stats(model.local_step(X[i], glob, 3) for i in parts), glob, 2)
    assert planned.plan is not None
    planned = dataclasses.replace(  # a budget that lets both deletes be judged
        planned, plan=MovePlan(2, (3, 7), planned.plan.pairs), delete_budget=1.0
    )
    entries = [model.local_step(X[i], planned, 3) for i in parts]
    total = sum_stats(entries)
    stepped = model.global_step_from(total, model.carry(planned))
    outcome = model.judge_moves(total, stepped, iter(entries), 3)
    assert [r.kind for r in outcome.records if r.kind == "delete"] == ["delete", "delete"]
    assert outcome.n_accepted == 0, outcome.summary()

    kept = outcome.kept_globals(stepped)
    restored = model.restore_globals(total, outcome.carried)
    assert kept.plan is None and restored.plan is None
    assert kept.resting == restored.resting == (3, 7)
    assert kept.delete_budget == restored.delete_budget
    assert kept.alpha_rest == restored.alpha_rest
    for name in ("alpha", "rho", "omega"):
        np.testing.assert_array_equal(getattr(kept, name), getattr(restored, name))
    for name in ("base", "indptr", "topics", "values"):
        np.testing.assert_array_equal(getattr(kept.logs, name), getattr(restored.logs, name))
    assert kept.stored is not None and restored.stored is not None
    for name in ("row_ptr", "cols", "conc"):
        np.testing.assert_array_equal(getattr(kept.stored, name), getattr(restored.stored, name))
    assert model.elbo(total, kept) == model.elbo(total, restored)

    with pytest.raises(ValueError, match="sticks differ"):
        outcome.kept_globals(glob)


def test_the_kept_blas_limit_gives_the_sticks_threadpool_limits_gives():
    rng = np.random.default_rng(4)
    K = 40
    S = np.append(-rng.gamma(2.0, 50.0, K), -400.0)
    rho, omega = init_sticks(K, 5.0, mode="uniform")
    ours = optimize_sticks(S, 300.0, 0.5, 5.0, rho, omega)
    with threadpool_limits(1, user_api="blas"):
        again = optimize_sticks(S, 300.0, 0.5, 5.0, rho, omega)
    for a, b in zip(ours[:2], again[:2], strict=True):
        np.testing.assert_array_equal(a, b)
    with one_blas_thread():
        from threadpoolctl import threadpool_info

        assert all(p["num_threads"] == 1 for p in threadpool_info() if p["user_api"] == "blas")
