"""Early stopping: validation batches held out, the best lap kept, patience, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.engine import SerialExecutor
from lsdask.estimators.validation_split import hold_out, validation_positions
from lsdask.evaluate import document_completion, split_documents
from lsdask.io.corpus import Corpus
from lsdask.io.sources import as_batch_source
from lsdask.learn import MemoizedVI
from lsdask.learn.early_stopping import EarlyStopping
from lsdask.models.lda import LDAModel
from lsdask.models.stats import SuffStats
from lsdask.persist import load_model
from lsdask.persist.checkpoint import CheckpointDir
from lsdask.persist.memo_files import DiskMemo


def _docs(rng, n_docs, V=40, K=4, length=30):
    topics = rng.dirichlet(np.full(V, 0.2), size=K)
    theta = rng.dirichlet(np.full(K, 0.3), size=n_docs)
    rows = [rng.multinomial(length, theta[d] @ topics) for d in range(n_docs)]
    return sp.csr_matrix(np.asarray(rows, dtype=float))


class Scripted:
    """Scores in the order given, whatever the globals: lap i gets scores[i]
    (lap 0: the start)."""

    def __init__(self, scores, start=0):
        self.scores, self.calls = list(scores), start

    def __call__(self, model, glob):
        self.calls += 1
        return self.scores[self.calls - 1]


def _start(rng):
    X = _docs(rng, 400)
    source = as_batch_source(X, 50)
    model = LDAModel(3, X.shape[1])
    counts = np.random.default_rng(3).gamma(1.0, 5.0, size=(3, X.shape[1]))
    init = SuffStats(words=counts, H=np.zeros(1), alloc=np.zeros(1), N=counts.sum(axis=1),
                     n_docs=np.array([10.0]))  # fmt: skip
    return source, model, init


def _run(source, model, init, n_laps, early=None, **kw):
    learner = MemoizedVI(n_laps=n_laps, tol=0.0, batches_per_update=2, early_stopping=early)
    return learner.run(model, SerialExecutor(), source.batches, model.global_step(init),
                       np.random.default_rng(2), 2, **kw)  # fmt: skip


SCORES = [0.5, 1.0, 3.0, 2.0, 2.5, 2.9, 2.8, 9.0, 9.0]


def test_the_best_lap_is_kept_and_the_run_ends_after_patience(rng):
    source, model, init = _start(rng)
    early = EarlyStopping(Scripted(SCORES), patience=3)
    run = _run(source, model, init, 8, early)
    assert run.n_laps == 5 and run.converged  # laps 3, 4, 5 did not beat lap 2
    assert run.validation_trace == SCORES[:6] and run.best_lap == 2
    two = _run(source, model, init, 2)
    np.testing.assert_array_equal(run.globals.lam, two.globals.lam)
    np.testing.assert_array_equal(run.globals.alpha, two.globals.alpha)
    assert run.stats.allclose(two.stats, rtol=0, atol=0)
    # without early stopping the same run makes every lap and ends at the last
    full = _run(source, model, init, 5)
    assert not np.array_equal(full.globals.lam, two.globals.lam)


def test_a_resumed_run_keeps_the_best_lap_of_before_the_stop(tmp_path, rng):
    source, model, init = _start(rng)
    whole = _run(source, model, init, 8, EarlyStopping(Scripted(SCORES), patience=3))
    folder = CheckpointDir(tmp_path / "ckpt")
    keys = [b.key for b in source.batches]

    def write(state, memo, init_stats, best_stats=None):
        return folder.write(state, memo, keys, {"model": {}, "params": {}}, init_stats, best_stats)

    memo = DiskMemo(folder.memo_folder, len(keys))
    _run(source, model, init, 4, EarlyStopping(Scripted(SCORES), patience=3), memo=memo,
         init_stats=init, checkpoint=write)  # fmt: skip
    saved = folder.read()
    assert saved["state"].best["lap"] == 2 and saved["has_best"]
    limits = {k: v.shape for k, v in model.empty_stats().items()}
    best_stats = folder.read_best(saved["path"], limits)
    memo = DiskMemo(folder.memo_folder, len(keys), [saved["memo"].get(k) for k in keys])
    resumed = MemoizedVI(
        n_laps=8,
        tol=0.0,
        batches_per_update=2,
        early_stopping=EarlyStopping(Scripted(SCORES, start=5), patience=3),
    )
    rest = resumed.run(model, SerialExecutor(), source.batches, None, np.random.default_rng(99),
                       2, memo=memo, state=saved["state"], checkpoint=write,
                       best_stats=best_stats)  # fmt: skip
    assert rest.n_laps == whole.n_laps == 5 and rest.best_lap == 2
    assert rest.validation_trace == whole.validation_trace
    np.testing.assert_allclose(rest.globals.lam, whole.globals.lam, rtol=1e-12)
    # a checkpoint that names an earlier best lap but lost its statistics is refused
    latest = folder.read()
    assert latest["state"].best["lap"] == 2 and latest["has_best"]
    document = json.loads((latest["path"] / "state.json").read_text())
    document["has_best"] = False
    (latest["path"] / "state.json").write_text(json.dumps(document))
    again = folder.read()
    memo = DiskMemo(folder.memo_folder, len(keys), [again["memo"].get(k) for k in keys])
    with pytest.raises(ValueError, match=r"best\.npz"):
        MemoizedVI(n_laps=8, tol=0.0, early_stopping=EarlyStopping(Scripted(SCORES), 3)).run(
            model, SerialExecutor(), source.batches, None, np.random.default_rng(9), 2,
            memo=memo, state=again["state"],
        )  # fmt: skip


def test_validation_batches_are_evenly_spaced_and_left_out_of_training(rng):
    assert validation_positions(100, 0.02) == [25, 75]
    assert validation_positions(20, 0.02) == [10]
    assert validation_positions(7, 0.5) == [0, 2, 4, 6]
    # at most about 5,000 documents: 5 of 2,000 batches of 1,000
    assert validation_positions(2000, 0.02, rows_per_batch=1000.0) == [200, 600, 1000, 1400, 1800]
    source = as_batch_source(_docs(rng, 200), 10)
    training, held = hold_out(source, [5, 15])
    assert training.n_batches == 18 and training.n_rows == 180 and len(held) == 2
    assert held[0] is source.batches[5]


def test_lda_scores_its_own_prior_on_held_out_batches(tmp_path, rng):
    X = _docs(rng, 1200)
    Corpus.write(tmp_path / "c", X, [f"w{i}" for i in range(X.shape[1])], docs_per_row_group=50)
    est = lsdask.LDA(4, alpha="auto", n_laps=4, tol=0.0, random_state=0, client="sync",
                     progress=False, n_iter_no_change=10)  # fmt: skip
    est.fit(str(tmp_path / "c"))
    # 24 batches: "auto" holds out round(0.02 * 24) = 1, the 13th (rows 600-649)
    assert est.stats_.array("n_docs")[0] == 1150
    assert est.validation_trace_.shape == (5,)  # the start, then 4 laps
    assert est.best_lap_ == int(np.argmax(est.validation_trace_))
    A, B = split_documents(X[600:650], 0.8, 0)
    kept = document_completion(A, B, est.topic_word_, est.alpha_)
    assert kept == pytest.approx(est.validation_trace_[est.best_lap_], rel=1e-9)
    off = lsdask.LDA(4, n_laps=2, random_state=0, client="sync", progress=False,
                     early_stopping=False).fit(str(tmp_path / "c"))  # fmt: skip
    assert off.validation_trace_.size == 0 and off.best_lap_ is None
    assert off.stats_.array("n_docs")[0] == 1200


def test_auto_is_off_on_few_batches_and_true_needs_two(rng):
    X = _docs(rng, 300)
    est = lsdask.LDA(3, n_laps=2, batch_size=100, client="sync", random_state=0, progress=False)
    est.fit(X)
    assert est.best_lap_ is None and est.stats_.array("n_docs")[0] == 300
    forced = lsdask.LDA(3, n_laps=2, batch_size=100, client="sync", random_state=0,
                        progress=False, early_stopping=True).fit(X)  # fmt: skip
    assert forced.stats_.array("n_docs")[0] == 200 and forced.best_lap_ is not None
    with pytest.raises(ValueError, match="early_stopping=True holds out whole batches"):
        lsdask.LDA(3, n_laps=1, early_stopping=True, client="sync", progress=False).fit(X)
    with pytest.raises(ValueError, match='early_stopping must be True, False or "auto"'):
        lsdask.LDA(3, early_stopping="yes").fit(X)


def test_hdp_early_stopping_on_a_local_cluster_equals_in_process(rng, dask_client):
    X = _docs(rng, 1000)
    kw = dict(n_laps=3, tol=0.0, batch_size=40, random_state=0, progress=False,
              batches_per_update=2, n_iter_no_change=10)  # fmt: skip
    here = lsdask.HDP(6, client="sync", **kw).fit(X)
    there = lsdask.HDP(6, client=dask_client, **kw).fit(X)
    assert here.validation_trace_.shape == (here.n_laps_ + 1,)
    np.testing.assert_allclose(there.validation_trace_, here.validation_trace_, rtol=1e-9)
    np.testing.assert_allclose(there.topic_word_, here.topic_word_, rtol=1e-9, atol=1e-12)


def test_a_resumed_fit_holds_out_the_batches_its_checkpoint_held_out():
    keys = [f"b{i}" for i in range(30)]
    assert validation_positions(30, 0.02, keys) == [15]
    # batches added since: the recorded one stays held out, wherever it now is
    assert validation_positions(40, 0.02, ["new0", *keys, *"abcdefghi"], ["b15"]) == [16]
    # none of them left: a fresh choice
    assert validation_positions(40, 0.02, [f"c{i}" for i in range(40)], ["b15"]) == [20]


@pytest.mark.parametrize("estimator", ["LDA", "HDP"])
def test_a_checkpointed_fit_resumed_equals_one_never_stopped(tmp_path, rng, estimator):
    X = _docs(rng, 1200)
    Corpus.write(tmp_path / "c", X, [f"w{i}" for i in range(X.shape[1])], docs_per_row_group=50)
    cls = getattr(lsdask, estimator)
    prior = {"alpha": "auto"} if estimator == "LDA" else {}
    kw = dict(tol=0.0, random_state=0, client="sync", progress=False, n_iter_no_change=2,
              validation_fraction=0.1, **prior)  # fmt: skip
    whole = cls(4, n_laps=6, **kw).fit(str(tmp_path / "c"))
    ckpt = str(tmp_path / "ckpt")
    cls(4, n_laps=2, checkpoint_dir=ckpt, **kw).fit(str(tmp_path / "c"))
    state = CheckpointDir(ckpt).read_state()
    assert len(state.validation_keys) == 2 and len(state.validation_trace) == 3
    rest = cls(4, n_laps=whole.n_laps_ - 2, checkpoint_dir=ckpt, resume=True, **kw)
    rest.fit(str(tmp_path / "c"))
    assert rest.n_laps_ == whole.n_laps_ and rest.best_lap_ == whole.best_lap_
    np.testing.assert_allclose(rest.validation_trace_, whole.validation_trace_, rtol=1e-9)
    np.testing.assert_allclose(rest.components_, whole.components_, rtol=1e-9)
    np.testing.assert_allclose(rest.alpha_, whole.alpha_, rtol=1e-9)


def test_early_stopping_is_refused_where_it_cannot_run(rng):
    X = _docs(rng, 300)
    with pytest.raises(ValueError, match="early_stopping=True needs algorithm='memo'"):
        lsdask.LDA(3, algorithm="vb", early_stopping=True, batch_size=50, client="sync").fit(X)


def test_lsdask_fit_says_which_lap_it_kept(tmp_path, rng):
    from tests.lsdask_processes import run_lsdask

    X = _docs(rng, 1200)
    Corpus.write(tmp_path / "c", X, [f"w{i}" for i in range(X.shape[1])], docs_per_row_group=50)
    args = ["fit", tmp_path / "c", "--topics", "3", "--laps", "2", "--sync"]
    done = run_lsdask(*args, "--out", tmp_path / "m")
    assert done.returncode == 0, done.stderr
    assert "early stopping: kept " in done.stdout
    saved = load_model(tmp_path / "m")
    kept = "the start (lap 0)" if saved.best_lap_ == 0 else f"lap {saved.best_lap_}"
    assert f"early stopping: kept {kept}, validation score" in done.stdout
    assert saved.best_lap_ in (0, 1, 2) and saved.stats_.array("n_docs")[0] == 1150
    off = run_lsdask(*args, "--no-early-stopping", "--out", tmp_path / "m2")
    assert off.returncode == 0, off.stderr
    assert "early stopping" not in off.stdout


def test_a_start_that_scores_best_is_what_the_fit_keeps(rng):
    X = _docs(rng, 600)
    counts = np.random.default_rng(4).gamma(1.0, 5.0, size=(3, X.shape[1]))
    kw = dict(n_laps=5, tol=0.0, batch_size=30, random_state=0, client="sync", progress=False,
              early_stopping=True, n_iter_no_change=2)  # fmt: skip
    est = lsdask.LDA(3, init=counts, **kw)
    est._early_stopping = lambda: EarlyStopping(Scripted([5.0, 1.0, 2.0, 3.0]), patience=2)
    est.fit(X)
    assert est.n_laps_ == 2 and est.converged_ and est.best_lap_ == 0
    np.testing.assert_array_equal(est.validation_trace_, [5.0, 1.0, 2.0])
    np.testing.assert_allclose(est.components_, counts + est.eta_, rtol=1e-12)
    assert est.stats_.allclose(SuffStats(words=counts, H=np.zeros(1), alloc=np.zeros(1),
                                         N=counts.sum(axis=1), n_docs=np.array([570.0])),
                               rtol=1e-12)  # fmt: skip


def test_the_gibbs_start_reports_its_scored_topics_while_it_runs(rng, monkeypatch):
    from lsdask import config

    X = _docs(rng, 600)
    monkeypatch.setattr(config, "GIBBS_SNAPSHOT_SECONDS", 0.0)  # after every sweep
    seen = []
    kw = dict(n_laps=2, tol=0.0, batch_size=30, random_state=0, client="sync", progress=False,
              early_stopping=True, init="gibbs", gibbs_sweeps=4, gibbs_tol=0.0)  # fmt: skip

    def record(result):  # the result is the run's own, updated lap after lap
        seen.append((result.n_laps, list(result.validation_trace), result.globals))

    est = lsdask.LDA(3, alpha="auto", **kw).fit(X, callback=record)
    assert [lap for lap, _, _ in seen] == [0, 0, 0, 0, 1, 2]
    _, trace, start = seen[3]
    # the last snapshot is the start the laps go on from, scored as lap 0
    assert trace == [est.validation_trace_[0]]
    held = X[300:330]  # 20 batches: the one held out is the 11th
    A, B = split_documents(held, 0.8, 0)
    own = document_completion(A, B, start.topics, start.alpha)
    assert own == pytest.approx(est.validation_trace_[0], rel=1e-9)
    earlier = [t[0] for _, t, _ in seen[:3]]
    assert len(set(earlier + trace)) == 4  # each sweep's topics, scored
    # without a callback and without validation documents the sampler keeps no snapshot
    import lsdask.estimators.lda as lda_estimator

    sample, asked = lda_estimator.gibbs_sample, []

    def recording(*args, **kw):
        asked.append(kw.get("on_snapshot"))
        return sample(*args, **kw)

    monkeypatch.setattr(lda_estimator, "gibbs_sample", recording)
    lsdask.LDA(3, **{**kw, "early_stopping": False}).fit(X)
    assert asked == [None]


@pytest.mark.parametrize("estimator", ["HDP", "LDA"])
def test_a_kept_start_saves_and_loads(tmp_path, rng, estimator):
    from lsdask.persist import save_model

    X = _docs(rng, 600)
    prior = {"alpha": "auto", "init": "kmeans++"} if estimator == "LDA" else {}
    est = getattr(lsdask, estimator)(3, n_laps=4, tol=0.0, batch_size=30, random_state=0,
                                     client="sync", progress=False, early_stopping=True,
                                     n_iter_no_change=2, **prior)  # fmt: skip
    est._early_stopping = lambda: EarlyStopping(Scripted([5.0, 1.0, 2.0]), patience=2)
    est.fit(X)
    assert est.best_lap_ == 0 and est.n_laps_ == 2
    save_model(est, tmp_path / "m")
    back = load_model(tmp_path / "m")
    assert back.best_lap_ == 0
    np.testing.assert_allclose(back.components_, est.components_, rtol=1e-12)
    np.testing.assert_allclose(back.alpha_, est.alpha_, rtol=1e-12)
