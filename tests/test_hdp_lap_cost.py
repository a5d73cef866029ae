"""What an HDP lap saves without changing its numbers.

A judgement that accepts nothing keeps the lap's last global step's topics
(:meth:`~lsdask.models.hdp_moves.MoveOutcome.kept_globals`) instead of
recomputing them from the same statistics, and the objective it computed
(:attr:`~lsdask.models.hdp_moves.MoveOutcome.kept_objective`) instead of
computing it again: both must be what
:meth:`~lsdask.models.hdp.HDPModel.restore_globals` and the ELBO give, to the
bit; a run with moves accepted and rejected gives the same traces either way; a
judgement's E[log phi] without a candidate
(:func:`~lsdask.models.hdp_move_stats.kept_logs`, one compiled pass) is
:meth:`~lsdask.models.dirichlet_logs.SparseDirichletLogs.subset`'s; and the
sticks search's one-BLAS-thread context, made once, must give the numbers the
search gives under ``threadpoolctl.threadpool_limits``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import lsdask
from lsdask.learn.base import carried_of, resumed_globals
from lsdask.learn.memo import MemoizedVI
from lsdask.models.dirichlet_logs import DirichletPosterior
from lsdask.models.hdp_move_stats import MovePlan, kept_logs
from lsdask.models.hdp_moves import MoveOutcome, MoveSettings
from lsdask.models.hdp_rests import Rest
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
    assert kept.resting == restored.resting == (Rest(-1, 3, 1), Rest(3, 4, 1), Rest(7, 4, 1))
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
    # the lap's objective, which the judgement computed, is the kept globals' own
    assert outcome.kept_objective == model.elbo(total, restored)

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


def test_a_run_gives_the_numbers_of_globals_and_objective_recomputed_after_each_judgement(
    monkeypatch,
):
    X, _ = make_bars_corpus(600, doc_topic_prior=0.3, random_state=5)
    kw = dict(sparsity=3, random_state=2, batch_size=150, tol=0.0, n_laps=6, client="sync",
              init="kmeans++")  # fmt: skip
    kept = MoveOutcome.kept_globals
    calls = []

    def counted(self, glob):
        calls.append(1)
        return kept(self, glob)

    monkeypatch.setattr(MoveOutcome, "kept_globals", counted)
    fast = lsdask.HDP(20, **kw).fit(X)
    monkeypatch.undo()
    assert calls  # some laps accepted nothing

    judge = MemoizedVI._judge_moves

    def recomputed(self, run):  # what a lap's end did before: restore, then the ELBO again
        judge(self, run)
        run.glob = resumed_globals(run.model, run.total, carried_of(run.model, run.glob))
        return None

    monkeypatch.setattr(MemoizedVI, "_judge_moves", recomputed)
    slow = lsdask.HDP(20, **kw).fit(X)
    assert fast.n_components_trace_[-1] < 20  # moves were accepted, and others rejected
    np.testing.assert_array_equal(fast.n_components_trace_, slow.n_components_trace_)
    np.testing.assert_array_equal(fast.elbo_trace_, slow.elbo_trace_)
    np.testing.assert_array_equal(fast.components_, slow.components_)
    np.testing.assert_array_equal(fast.topic_weights_, slow.topic_weights_)


@pytest.mark.parametrize("kept", [[0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11], [11, 3, 0, 7], [5], []])
def test_kept_logs_are_the_subset_of_the_logs(kept):
    rng = np.random.default_rng(len(kept))
    counts = rng.gamma(0.2, 5.0, size=(12, 300)) * (rng.random((12, 300)) < 0.3)
    logs = DirichletPosterior.from_counts(counts, 0.1).logs
    ours, reference = kept_logs(logs, kept), logs.subset(kept)
    for name in ("base", "indptr", "topics", "values"):
        a, b = getattr(ours, name), getattr(reference, name)
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b)
    assert ours.prior == reference.prior
    words = rng.integers(0, 300, 50)
    np.testing.assert_array_equal(ours.rows(words), reference.rows(words))
