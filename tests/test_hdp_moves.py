"""The HDP's delete and merge moves (lsdask.models.hdp_moves).

The closed forms are checked against per-document computations from each
document's ``q(pi_d)``; a judged lap against the objective recomputed from the
edited memo; the learning loop against its invariants (the memo sums to the
whole-data statistics after every lap, no global step lowers the objective);
and a resumed run, stopped mid-lap with a plan pending, against an
uninterrupted one.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma, gammaln

import lsdask
from lsdask.engine import SerialExecutor
from lsdask.io.sources import as_batch_source
from lsdask.learn import MemoizedVI
from lsdask.learn.memo_store import MemoryMemo
from lsdask.models.hdp import HDPModel
from lsdask.models.hdp_move_stats import (
    MovePlan,
    delete_untouched,
    merge_stats,
    sticks_of_weights,
)
from lsdask.models.hdp_moves import MoveSettings
from lsdask.models.hdp_sticks import expected_beta
from lsdask.models.stats import SuffStats, sum_stats
from lsdask.synthetic import make_bars_corpus
from tests.resume_mid_lap import stopped_and_resumed

MOVES = MoveSettings(delete=True, merge=True, delete_max_docs=1000, max_pairs=20)


@pytest.fixture(scope="module")
def bars():
    return make_bars_corpus(800, doc_topic_prior=0.3, random_state=3)


@pytest.fixture(scope="module")
def warm(bars):
    """An HDP with 24 topics after 3 laps without moves: many redundant topics."""
    X, _ = bars
    est = lsdask.HDP(24, moves=(), n_laps=3, sparsity=3, client="sync", random_state=1,
                     batch_size=200, tol=0.0, init="kmeans++").fit(X)  # fmt: skip
    model = dataclasses.replace(est.model_, moves=MOVES)
    return X, model, est.posterior_


def _doc_terms(theta: np.ndarray, N: np.ndarray) -> tuple[np.ndarray, float, float]:
    """``(S (K+1,), W, Cdir)`` summed over documents, from their ``theta`` (D, K+1)
    and counts ``N`` (D, K+1) directly."""
    total = theta.sum(axis=1, keepdims=True)
    E = digamma(theta) - digamma(total)
    S = E.sum(axis=0)
    W = float(((N - theta) * E).sum())
    C = float((gammaln(total[:, 0]) - gammaln(theta).sum(axis=1)).sum())
    return S, W, C


def test_delete_of_an_unused_topic_is_the_leftover_merge_of_each_document():
    rng = np.random.default_rng(0)
    K, D, j = 6, 40, 2
    prior = np.append(rng.uniform(0.05, 0.6, K), 0.3)
    N = rng.gamma(1.0, 5.0, size=(D, K + 1)) * (rng.random((D, K + 1)) < 0.5)
    N[:, j] = 0.0  # the documents hold none of topic j
    N[:, K] = 0.0  # nor of the leftover
    S, W, C = _doc_terms(N + prior, N)
    got_S, got_W, got_C, got_prior = delete_untouched(S, W, C, D, prior, j)
    merged_prior = np.delete(prior, j)
    merged_prior[-1] += prior[j]
    ref_S, ref_W, ref_C = _doc_terms(
        np.delete(N, j, axis=1) + merged_prior, np.delete(N, j, axis=1)
    )
    np.testing.assert_allclose(got_S, ref_S, rtol=1e-12)
    assert got_W == pytest.approx(ref_W, rel=1e-12)
    assert got_C == pytest.approx(ref_C, rel=1e-12)
    np.testing.assert_allclose(got_prior, merged_prior, rtol=1e-15)
    # batches on a leading axis give the same, batch by batch
    SB, _, _, PB = delete_untouched(
        np.stack([S, 2 * S]), np.array([W, 2 * W]), np.array([C, 2 * C]), np.array([D, D]),
        np.stack([prior, prior]), j,
    )  # fmt: skip
    np.testing.assert_allclose(SB[0], got_S, rtol=1e-15)
    np.testing.assert_allclose(PB[1], got_prior, rtol=1e-15)


def test_merge_terms_give_the_statistics_of_the_merged_documents(warm):
    """The merge of a pair, applied to a batch's statistics, equals the terms of
    each document's q(pi_d) with the two entries added (the responsibilities'
    entropy change is checked against a reference in test_merge_terms_kernel)."""
    X, model, glob = warm
    K = model.n_components
    pairs = ((0, 5), (3, 7), (10, 20))
    g = glob.with_plan(MovePlan(1, (), pairs))
    pieces, doc_topic, _ = model.doc_topic_step(X[:300], g, 3)
    stats = SuffStats(**pieces)
    a = np.append(g.alpha, g.alpha_rest)
    N = np.hstack([doc_topic, np.zeros((300, 1))])
    for p, (j, k) in enumerate(pairs):
        merged = merge_stats(stats, j, k, p)
        Nm = N.copy()
        Nm[:, j] += Nm[:, k]
        am = a.copy()
        am[j] += am[k]
        ref_S, ref_W, ref_C = _doc_terms(
            np.delete(Nm, k, 1) + np.delete(am, k), np.delete(Nm, k, 1)
        )
        np.testing.assert_allclose(merged.array("S"), ref_S, rtol=1e-9)
        assert merged.array("W")[0] == pytest.approx(ref_W, rel=1e-9)
        assert merged.array("Cdir")[0] == pytest.approx(ref_C, rel=1e-9)
        words = stats.array("words")
        np.testing.assert_allclose(merged.array("words")[j], words[j] + words[k], rtol=1e-14)
        assert merged.array("words").shape == (K - 1, X.shape[1])
        assert merged.array("H")[0] <= stats.array("H")[0]


def test_sticks_of_weights_inverts_expected_beta():
    rho = np.random.default_rng(1).uniform(0.05, 0.6, 9)
    np.testing.assert_allclose(sticks_of_weights(expected_beta(rho)), rho, rtol=1e-12)


def _judged_lap(model, glob, X, n_batches=4, sparsity=3):
    """One lap by hand: plan from a first visit, every batch visited with the plan,
    the global step, and the judgement."""
    parts = np.array_split(np.arange(X.shape[0]), n_batches)
    first = sum_stats(model.local_step(X[i], glob, sparsity) for i in parts)
    planned = model.plan_moves(first, glob, lap=2)
    entries = [model.local_step(X[i], planned, sparsity) for i in parts]
    total = sum_stats(entries)
    stepped = model.global_step_from(total, model.carry(planned))
    return entries, total, stepped, model.judge_moves(total, stepped, iter(entries), sparsity)


def test_a_judged_lap_raises_the_objective_that_the_edited_memo_gives(warm):
    X, model, glob = warm
    entries, total, stepped, outcome = _judged_lap(model, glob, X)
    assert stepped.plan is not None and stepped.plan.deletes and stepped.plan.pairs
    kinds = {r.kind for r in outcome.accepted}
    assert kinds == {"delete", "merge"}, outcome.summary()
    assert all(r.gain > 0 for r in outcome.accepted)
    before, after = outcome.objective
    assert before == pytest.approx(model.elbo(total, stepped), rel=1e-14)
    assert after > before
    edited = [outcome.edit(b, e) for b, e in enumerate(entries)]
    new_total = sum_stats(edited)
    K2 = outcome.model.n_components
    assert K2 == model.n_components - len(outcome.accepted)
    assert new_total.array("words").shape == (K2, X.shape[1])
    assert new_total.array("S").shape == (K2 + 1,)
    restored = outcome.model.restore_globals(new_total, outcome.carried)
    assert restored.plan is None
    assert outcome.model.elbo(new_total, restored) == pytest.approx(after, rel=1e-10)
    # tokens and documents are kept
    assert new_total.array("N").sum() == pytest.approx(total.array("N").sum(), rel=1e-12)
    assert new_total.array("n_docs")[0] == total.array("n_docs")[0]


def test_entries_without_this_laps_targets_skip_the_deletes(warm):
    X, model, glob = warm
    entries, total, stepped, _ = _judged_lap(model, glob, X)
    stale = [SuffStats(**dict(e.items())) for e in entries]  # notes lost
    outcome = model.judge_moves(total, stepped, iter(stale), 3)
    assert "no targets" in outcome.skipped
    assert all(r.kind == "merge" for r in outcome.records)


def _start(K, V, seed):
    """Random initial statistics and an HDP with both moves, K topics over V words."""
    start = np.random.default_rng(seed).gamma(0.3, 10.0, size=(K, V))
    init = SuffStats(words=start, H=np.zeros(1), alloc=np.zeros(1), N=start.sum(1),
                     n_docs=np.zeros(1))  # fmt: skip
    return init, HDPModel(K, V, 0.5, 0.1, gamma=5.0, moves=MOVES)


def _run_with_memo(model, X, init, n_laps=5, batch_size=200):
    source = as_batch_source(X, batch_size)
    memo = MemoryMemo(len(source.batches))
    checks = []

    def check(result):  # after every lap: the memo, as read, sums to the statistics
        read = sum_stats(result.memo_store.values())
        checks.append(read.allclose(result.stats, rtol=1e-9, atol=1e-9))

    result = MemoizedVI(n_laps=n_laps, tol=0.0, batches_per_update=1).run(
        model, SerialExecutor(), source.batches, model.global_step(init),
        np.random.default_rng(0), 3, check, memo=memo,
    )  # fmt: skip
    return result, checks


def test_the_loop_keeps_the_memo_summing_to_the_statistics_and_k_falls(bars):
    X, _ = bars
    K, V = 30, X.shape[1]
    init, model = _start(K, V, seed=4)
    result, checks = _run_with_memo(model, X, init)
    assert all(checks) and len(checks) == 5
    trace = result.components_trace
    assert trace[0] == 30 and trace[-1] < 25 and np.all(np.diff(trace) <= 0)
    assert result.model.n_components == trace[-1] == result.globals.alpha.shape[0]
    # within a lap the global steps never lower the objective of the current memo:
    # from one wave to the next the objective changes only by the visit itself,
    # which is checked in test_learn; here the lap ends, where moves only raise it
    laps = np.array(result.lap_trace)
    elbo = np.array(result.elbo_trace)
    assert np.isfinite(elbo).all() and (laps > 0).all()


def test_moves_are_applied_to_an_entry_when_it_is_next_read(bars):
    """With 16 batches most entries are edited only when next read: the memo owes
    the lap's map to them; the next lap's visits pay the debt."""
    X, _ = bars
    K, V = 30, X.shape[1]
    init, model = _start(K, V, seed=4)
    owed = []
    source = as_batch_source(X, 50)
    memo = MemoryMemo(len(source.batches))

    def check(result):
        store = result.memo_store
        owed.append(sum(len(p["batches"]) for p in getattr(store, "pending", list)()))
        read = sum_stats(store.values())
        assert read.allclose(result.stats, rtol=1e-9, atol=1e-9)
        raw = [memo.get(b).array("N").shape[0] for b in range(len(memo))]
        assert len(set(raw)) > 1 or owed[-1] == 0  # entries of two sizes while owed

    result = MemoizedVI(n_laps=4, tol=0.0, batches_per_update=2).run(
        model, SerialExecutor(), source.batches, model.global_step(init),
        np.random.default_rng(0), 3, check, memo=memo,
    )  # fmt: skip
    assert result.components_trace[-1] < K
    assert max(owed) > 0  # some entries were edited only when next read
    listed = result.memo  # as_list at the end applies what is still owed
    assert sum_stats(e for e in listed if e is not None).allclose(result.stats, rtol=1e-9)


def test_resumed_mid_lap_with_a_plan_pending_equals_uninterrupted(bars, tmp_path):
    X, _ = bars
    K, V = 16, X.shape[1]
    init, model = _start(K, V, seed=5)
    whole, rest, saved = stopped_and_resumed(
        model, X[:600], init, tmp_path / "mid", stop_after=6, stop_lap=3
    )
    assert "plan" in saved["state"].carried  # stopped with lap 3's plan pending
    assert rest.components_trace == whole.components_trace
    assert whole.components_trace[-1] < K  # moves were accepted on the way
    np.testing.assert_allclose(rest.elbo_trace, whole.elbo_trace, rtol=1e-9)
    assert rest.stats.allclose(whole.stats, rtol=1e-8, atol=1e-9)


def test_dask_run_equals_in_process_run(bars, dask_client):
    X, _ = bars
    kw = dict(sparsity=3, random_state=2, batch_size=200, tol=0.0, n_laps=4, batches_per_update=2)
    local = lsdask.HDP(20, client="sync", **kw).fit(X[:600])
    remote = lsdask.HDP(20, client=dask_client, **kw).fit(X[:600])
    np.testing.assert_array_equal(remote.n_components_trace_, local.n_components_trace_)
    assert local.n_components_trace_[-1] < 20  # moves were accepted
    np.testing.assert_allclose(remote.elbo_trace_, local.elbo_trace_, rtol=1e-10)
    np.testing.assert_allclose(remote.components_, local.components_, rtol=1e-9)


def test_bad_move_settings_are_refused():
    with pytest.raises(ValueError, match=r"expected a tuple of distinct move names"):
        lsdask.HDP(10, moves=("split",)).check_params()
    plan = MovePlan(4, (1, 3), ((0, 2), (5, 6)))
    assert MovePlan.from_list(plan.to_list()) == plan
    assert sp.issparse(sp.csr_matrix((1, 1)))


def test_a_checkpoint_keeps_the_moves_owed_and_the_resume_applies_them(bars, tmp_path):
    from lsdask.persist.checkpoint import CheckpointDir

    X, _ = bars
    kw = dict(sparsity=3, random_state=3, batch_size=50, tol=0.0, client="sync",
              batches_per_update=2, alpha=1.0)  # fmt: skip
    whole = lsdask.HDP(24, n_laps=4, checkpoint_dir=str(tmp_path / "whole"), **kw).fit(X)
    ckpt = tmp_path / "ckpt"
    first = lsdask.HDP(24, n_laps=2, checkpoint_dir=str(ckpt), **kw).fit(X)
    state = CheckpointDir(ckpt).read()["state"]
    assert first.n_components_trace_[-1] < first.n_components_trace_[0]
    assert state.pending and state.pending[0]["batches"]  # owed to unvisited entries
    rest = lsdask.HDP(24, n_laps=2, checkpoint_dir=str(ckpt), resume=True, **kw).fit(X)
    np.testing.assert_array_equal(rest.n_components_trace_, whole.n_components_trace_)
    np.testing.assert_allclose(rest.elbo_trace_, whole.elbo_trace_, rtol=1e-12)
    np.testing.assert_allclose(rest.components_, whole.components_, rtol=1e-10)
