"""Checkpoints, resume, retraining on changed corpora, and failures."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import zarr

import lsdask
from lsdask.engine import SerialExecutor
from lsdask.errors import DataError, FitInterrupted
from lsdask.io.corpus import Corpus
from lsdask.io.sources import as_batch_source
from lsdask.learn import MemoizedVI, initial_stats
from lsdask.models import FullGaussian, MixtureModel, sum_stats
from lsdask.persist.checkpoint import CheckpointDir
from lsdask.persist.memo_files import DiskMemo


def _heavy_tailed(rng, n=1200, d=4):
    return rng.standard_t(3, size=(n, d))


def _docs(rng, n_docs, V=60, K=4):
    topics = rng.dirichlet(np.full(V, 0.1), size=K)
    rows = []
    for _ in range(n_docs):
        z = rng.choice(K, size=40, p=rng.dirichlet(np.full(K, 0.3)))
        rows.append(np.bincount([rng.choice(V, p=topics[k]) for k in z], minlength=V))
    return sp.csr_matrix(np.asarray(rows, dtype=float))


def test_resumed_run_equals_uninterrupted_on_local_cluster(tmp_path, rng, dask_client):
    X = _heavy_tailed(rng).astype(np.float32)
    z = zarr.create_array(str(tmp_path / "x.zarr"), shape=X.shape, chunks=(200, 4), dtype="f4")
    z[:] = X
    kw = dict(
        covariance_type="full", sparsity=2, random_state=0, tol=1e-15, client=dask_client,
        batches_per_update=2,
    )  # fmt: skip
    whole = lsdask.GaussianMixture(6, n_laps=6, **kw).fit(str(tmp_path / "x.zarr"))
    ckpt = str(tmp_path / "ckpt")
    first = lsdask.GaussianMixture(6, n_laps=2, checkpoint_dir=ckpt, **kw)
    first.fit(str(tmp_path / "x.zarr"))
    # the first run finished its 2 laps: a resume makes n_laps more
    resumed = lsdask.GaussianMixture(6, n_laps=4, checkpoint_dir=ckpt, resume=True, **kw)
    resumed.fit(str(tmp_path / "x.zarr"))
    assert resumed.n_laps_ == whole.n_laps_ == 6
    np.testing.assert_allclose(resumed.elbo_trace_, whole.elbo_trace_, rtol=1e-10)
    np.testing.assert_allclose(resumed.covariances_, whole.covariances_, rtol=1e-10, atol=1e-12)


def test_stop_mid_lap_then_resume_equals_uninterrupted(tmp_path, rng):
    X = _heavy_tailed(rng)
    source = as_batch_source(X, 100)
    model = MixtureModel(FullGaussian().with_data_defaults(X), 5, 1.0)
    init = initial_stats(model, X, "kmeans++", np.random.default_rng(1))
    learner = MemoizedVI(n_laps=4, tol=1e-15, batches_per_update=2)
    whole = learner.run(model, SerialExecutor(), source.batches, model.global_step(init),
                        np.random.default_rng(2), 3)  # fmt: skip
    folder = CheckpointDir(tmp_path / "ckpt")
    keys = [b.key for b in source.batches]

    def write(state, memo, init_stats):
        return folder.write(state, memo, keys, {"model": {}, "params": {}}, init_stats)

    for stop_after in (3, 9):  # inside the first (filling) lap, and in lap 2
        calls = iter(range(10_000))

        def stop(calls=calls, stop_after=stop_after):
            return next(calls) >= stop_after - 1

        memo = DiskMemo(folder.memo_folder, len(keys))
        with pytest.raises(FitInterrupted) as info:
            learner.run(
                model, SerialExecutor(), source.batches, model.global_step(init),
                np.random.default_rng(2), 3, memo=memo, init_stats=init, checkpoint=write,
                stop_requested=stop,
            )  # fmt: skip
        assert Path(info.value.checkpoint).exists()
        saved = folder.read()
        assert 0 < saved["state"].position < len(keys)
        memo = DiskMemo(folder.memo_folder, len(keys), [saved["memo"].get(k) for k in keys])
        rest = learner.run(
            model, SerialExecutor(), source.batches, None, np.random.default_rng(99), 3,
            memo=memo, state=saved["state"], init_stats=saved["init_stats"], checkpoint=write,
        )  # fmt: skip
        np.testing.assert_allclose(rest.elbo_trace, whole.elbo_trace, rtol=1e-10)
        assert rest.stats.allclose(whole.stats, rtol=1e-10, atol=1e-10)
        # a writer killed mid-write (SIGKILL) left its temporary folder: the next write clears it
        (folder.root / ".tmp-ckpt-00001-000002-abcdef").mkdir(exist_ok=True)
        write(saved["state"], memo, None)
        assert not list(folder.root.glob(".tmp-*"))
        for path in folder.root.glob("ckpt-*"):
            shutil.rmtree(path)
        (folder.root / "LATEST").unlink()


def test_a_lap_stopped_midway_goes_on_over_a_changed_batch_list(tmp_path, rng):
    """Stopped in lap 2, then a batch removed and two added before the resume (a
    rescanned corpus): the lap goes on by batch key, visits the new batches and
    not the removed one. (The order used to index the old list: an IndexError
    after a removal, new batches skipped after an addition.)"""
    import dataclasses

    X = _heavy_tailed(rng, n=1400)
    batches = as_batch_source(X, 100).batches  # 14 batches
    old, extra = batches[:12], batches[12:]
    model = MixtureModel(FullGaussian().with_data_defaults(X), 5, 1.0)
    init = initial_stats(model, X[:1200], "kmeans++", np.random.default_rng(1))
    learner = MemoizedVI(n_laps=2, tol=1e-15, batches_per_update=2)
    folder = CheckpointDir(tmp_path / "ckpt")

    def writer(keys):
        return lambda state, memo, init_stats: folder.write(
            state, memo, keys, {"model": {}, "params": {}}, init_stats
        )

    old_keys = [b.key for b in old]
    calls = iter(range(10_000))
    with pytest.raises(FitInterrupted):
        learner.run(
            model, SerialExecutor(), old, model.global_step(init), np.random.default_rng(2), 3,
            memo=DiskMemo(folder.memo_folder, len(old)), init_stats=init,
            checkpoint=writer(old_keys), stop_requested=lambda: next(calls) >= 8,
        )  # fmt: skip
    saved = folder.read()
    assert saved["state"].lap == 1 and saved["keys"] == old_keys
    stopped_at = saved["state"].position
    new = [b for b in old if b.key != old_keys[saved["state"].order[0]]]  # a visited one goes
    new += [dataclasses.replace(b, key=f"new {i}") for i, b in enumerate(extra)]
    new_keys = [b.key for b in new]
    state = saved["state"]
    state.rekey(saved["keys"], new_keys)
    assert state.position == stopped_at - 1 and sorted(state.order) == list(range(len(new)))
    assert state.order[-2:] == [new_keys.index("new 0"), new_keys.index("new 1")]
    memo = DiskMemo(folder.memo_folder, len(new), [saved["memo"].get(k) for k in new_keys])
    rest = learner.run(
        model, SerialExecutor(), new, None, np.random.default_rng(99), 3, memo=memo,
        state=state, init_stats=saved["init_stats"], checkpoint=writer(new_keys),
    )  # fmt: skip
    assert rest.n_laps == 2
    assert model.row_count(rest.stats) == pytest.approx(len(new) * 100, rel=1e-12)
    assert all(memo.has(b) for b in range(len(new)))
    # an older checkpoint, without the batch list: as many batches are taken as the
    # same ones (as before keys were kept), another number starts the lap over
    state = folder.read()["state"]
    state.order, state.position = [2, 0, 1], 2
    state.rekey(None, ["a", "b", "c"])
    assert (state.order, state.position) == ([2, 0, 1], 2)
    state.rekey(None, new_keys)
    assert (state.order, state.position) == (None, 0)


def test_a_finished_run_resumed_makes_n_laps_more_whatever_their_number(tmp_path, rng):
    """After a run of 2 laps, resuming with n_laps=3 makes 3 more (5 in all): the
    checkpoint says the run had made the laps it was to make. (It used to
    compare with the new n_laps: 3 meant 3 in all, 1 meant 1 more.)"""
    path = tmp_path / "corpus"
    Corpus.write(path, _docs(rng, 200), [f"w{i}" for i in range(60)], docs_per_row_group=100)
    kw = dict(sparsity=3, random_state=0, client="sync", checkpoint_dir=str(tmp_path / "ck"),
              resume=True, tol=0, init="kmeans++")  # fmt: skip
    assert lsdask.LDA(4, n_laps=2, **kw).fit(str(path)).n_laps_ == 2
    assert CheckpointDir(tmp_path / "ck").read()["state"].target_laps == 2
    assert lsdask.LDA(4, n_laps=3, **kw).fit(str(path)).n_laps_ == 5
    assert lsdask.LDA(4, n_laps=1, **kw).fit(str(path)).n_laps_ == 6
    # a checkpoint written before target_laps was kept: compared with n_laps, as before
    state = CheckpointDir(tmp_path / "ck").read()["state"]
    state.target_laps = None
    assert state.finished(6) and not state.finished(7)


def test_retraining_takes_in_added_and_removed_files(tmp_path, rng):
    path = tmp_path / "corpus"
    X = _docs(rng, 600)
    Corpus.write(path, X, [f"w{i}" for i in range(60)], docs_per_row_group=100,
                 docs_per_file=200)  # fmt: skip
    ckpt = str(tmp_path / "ckpt")
    kw = dict(sparsity=3, random_state=0, client="sync", checkpoint_dir=ckpt, resume=True)
    n_first = len(lsdask.LDA(4, n_laps=2, **kw).fit(str(path)).elbo_trace_)
    # nightly: one file removed, one added
    parts = sorted((path / "parts").glob("*.parquet"))
    os.remove(parts[0])
    corpus = Corpus.open(path, rescan=True)
    new = _docs(rng, 150)
    corpus.append(new)
    first_tokens = float(X.sum())
    model = lsdask.LDA(4, n_laps=1, **kw).fit(str(path))
    corpus = Corpus.open(path)
    assert model.n_laps_ == 3
    # the data each ELBO was over: the first corpus; from the resume on, the memo
    # without the removed file, growing as the new file's batches are visited
    sizes = model.size_trace_
    assert len(sizes) == len(model.elbo_trace_) > n_first
    np.testing.assert_allclose(sizes[:n_first], first_tokens, rtol=1e-9)
    kept = first_tokens - float(X[:200].sum())
    # its first update visited an old batch or one of the new file's two
    options = (kept, kept + float(new[:100].sum()), kept + float(new[100:].sum()))
    assert any(sizes[n_first] == pytest.approx(v, rel=1e-12) for v in options)  # sums: rounding
    assert sizes[-1] == pytest.approx(corpus.n_tokens, rel=1e-9)
    assert model.stats_["n_docs"][0] == corpus.n_docs == 600 - 200 + 150
    # after one full lap the statistics are exactly the memo of the new file set
    saved = CheckpointDir(ckpt).read()
    keys = {f"{b.file}#{b.row_group}" for b in corpus.batches}
    assert set(saved["memo"]) == keys
    from lsdask.persist.memo_files import load_stats

    memo_sum = sum_stats([load_stats(Path(ckpt) / "memo" / f) for f in saved["memo"].values()])
    assert model.stats_.allclose(memo_sum, rtol=1e-12, atol=1e-9)


def test_corrupt_row_group_names_file_and_keeps_last_checkpoint(tmp_path, rng):
    path = tmp_path / "corpus"
    Corpus.write(path, _docs(rng, 300), [f"w{i}" for i in range(60)], docs_per_row_group=100,
                 docs_per_file=100)  # fmt: skip
    ckpt = tmp_path / "ckpt"
    kw = dict(sparsity=3, random_state=0, client="sync", checkpoint_dir=str(ckpt), resume=True)
    lsdask.LDA(4, n_laps=2, **kw).fit(str(path))
    before = (ckpt / "LATEST").read_text()
    state_before = (ckpt / before.strip() / "state.json").read_bytes()
    victim = sorted((path / "parts").glob("*.parquet"))[1]
    victim.write_bytes(victim.read_bytes()[:200])  # truncated by a crash
    with pytest.raises(DataError, match=rf"{victim.name}.*(row group|truncated|read)"):
        lsdask.LDA(4, n_laps=2, **kw).fit(str(path))
    assert (ckpt / "LATEST").read_text() == before
    assert (ckpt / before.strip() / "state.json").read_bytes() == state_before
    saved = CheckpointDir(ckpt).read()  # every memo file it names is still there
    assert saved["state"].lap == 2


def test_checkpoint_folder_errors(tmp_path, rng):
    X = _heavy_tailed(rng, n=300)
    kw = dict(n_laps=1, client="sync", random_state=0, batch_size=100)
    lsdask.GaussianMixture(3, checkpoint_dir=str(tmp_path / "c"), **kw).fit(X)
    with pytest.raises(
        ValueError, match=r"already holds a checkpoint; pass resume=True \(--resume DIR in place"
    ):
        lsdask.GaussianMixture(3, checkpoint_dir=str(tmp_path / "c"), **kw).fit(X)
    with pytest.raises(ValueError, match="has n_components=3; got n_components=4"):
        lsdask.GaussianMixture(4, checkpoint_dir=str(tmp_path / "c"), resume=True, **kw).fit(X)
    with pytest.raises(ValueError, match="checkpoint_dir needs algorithm='memo'"):
        lsdask.GaussianMixture(3, algorithm="svi", checkpoint_dir=str(tmp_path / "d"), **kw).fit(X)
    with pytest.raises(ValueError, match="resume=True needs checkpoint_dir"):
        lsdask.GaussianMixture(3, resume=True, **kw).fit(X)
    (tmp_path / "c" / "LATEST").write_text("ckpt-00001-000000-abcdef\n")
    with pytest.raises(DataError, match=r"LATEST names ckpt-00001-000000-abcdef, which has no"):
        lsdask.GaussianMixture(3, checkpoint_dir=str(tmp_path / "c"), resume=True, **kw).fit(X)


def test_memo_file_round_trip_is_exact_and_reads_the_older_column_format(tmp_path):
    """Sparse blocks are written and read back bit for bit; a memo file of
    lsdask 0.1 (dense values at a few columns) still loads, as the same entries."""
    from lsdask.models.stats import SparseBlock, SuffStats
    from lsdask.persist.memo_files import load_stats, save_stats

    rng = np.random.default_rng(0)
    cols = np.array([2, 5, 11])
    values = rng.random((4, 3)) * (rng.random((4, 3)) < 0.5)
    stats = SuffStats(N=rng.random(4), words=SparseBlock.from_columns(cols, values, 12))
    save_stats(tmp_path / "new.npz", stats)
    back = load_stats(tmp_path / "new.npz")
    np.testing.assert_array_equal(back["N"], stats["N"])
    for part in ("rows", "cols", "values"):
        np.testing.assert_array_equal(getattr(back["words"], part), getattr(stats["words"], part))
    assert back["words"].shape == (4, 12)
    np.savez(
        tmp_path / "old.npz",
        N=stats["N"], words__cols=cols, words__values=values, words__width=np.array([12]),
    )  # fmt: skip
    old = load_stats(tmp_path / "old.npz")
    np.testing.assert_array_equal(old["words"].toarray(), stats["words"].toarray())


def test_memo_file_keeps_statistics_whose_names_contain_double_underscores(tmp_path):
    from lsdask.models.stats import SuffStats
    from lsdask.persist.memo_files import load_stats, save_stats

    stats = SuffStats(a__b=np.arange(3.0), __c=np.ones(2), words__values=np.zeros(1))
    save_stats(tmp_path / "m.npz", stats)
    back = load_stats(tmp_path / "m.npz")
    assert sorted(back.keys()) == sorted(stats.keys())
    for name in stats.keys():
        np.testing.assert_array_equal(back[name], stats[name])


def test_a_memo_file_with_entries_outside_its_shape_is_reported(tmp_path):
    from lsdask.persist.memo_files import load_stats

    np.savez(
        tmp_path / "bad.npz", words__rows=np.array([0, 5], dtype=np.int32),
        words__cols=np.array([1, 2]), words__values=np.ones(2), words__shape=np.array([2, 4]),
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"memo file .*bad\.npz: not a valid statistics file"):
        load_stats(tmp_path / "bad.npz")


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def test_resume_refuses_another_model_or_data_and_leaves_the_checkpoint(tmp_path, rng):
    """A resume that cannot continue the checkpoint's model is refused before
    anything is written (it used to run on with the checkpoint's model while
    recording the new settings, or fail half-way through and damage it)."""
    X = _heavy_tailed(rng, n=300)
    kw = dict(n_laps=1, client="sync", random_state=0, batch_size=100)
    ckpt = tmp_path / "g"
    lsdask.GaussianMixture(3, checkpoint_dir=str(ckpt), **kw).fit(X)
    before = _snapshot(ckpt)
    resume = dict(checkpoint_dir=str(ckpt), resume=True, **{**kw, "n_laps": 3})
    with pytest.raises(
        ValueError, match=r"holds a model with class 'ZeroMeanGaussian' \(asked 'Diag"
    ):
        lsdask.GaussianMixture(3, covariance_type="diag", **resume).fit(X)
    with pytest.raises(ValueError, match=r"alpha 1\.0 \(asked 2\.0\)"):
        lsdask.GaussianMixture(3, alpha=2.0, **resume).fit(X)
    with pytest.raises(ValueError, match=r"dim 4 \(asked 3\)"):
        lsdask.GaussianMixture(3, **resume).fit(X[:, :3])
    with pytest.raises(ValueError, match=r"statistics for none of the 1 batches given"):
        lsdask.GaussianMixture(3, **{**resume, "batch_size": 300}).fit(X)
    assert _snapshot(ckpt) == before

    docs = _docs(rng, 200)
    ckpt = tmp_path / "l"
    lda = dict(n_laps=1, client="sync", random_state=0, batch_size=100, gibbs_sweeps=10)
    lsdask.LDA(4, checkpoint_dir=str(ckpt), **lda).fit(docs)
    before = _snapshot(ckpt)
    resume = dict(checkpoint_dir=str(ckpt), resume=True, **{**lda, "n_laps": 2})  # 2 more
    with pytest.raises(
        ValueError, match=r"vocab_size 60 \(asked 50\).*--vocab of the first corpus"
    ):
        lsdask.LDA(4, **resume).fit(docs[:, :50])
    with pytest.raises(ValueError, match=r"eta 0\.1 \(asked 0\.5\)"):
        lsdask.LDA(4, eta=0.5, **resume).fit(docs)
    assert _snapshot(ckpt) == before
    assert lsdask.LDA(4, **resume).fit(docs).n_laps_ == 3  # the same settings resume


def test_resume_refuses_a_corpus_over_other_words_of_the_same_number(tmp_path, rng):
    docs = _docs(rng, 200)
    words = [f"w{i}" for i in range(60)]
    Corpus.write(tmp_path / "a", docs, words, docs_per_row_group=100)
    Corpus.write(tmp_path / "b", docs, words[::-1], docs_per_row_group=100)
    ckpt = tmp_path / "ck"
    kw = dict(client="sync", random_state=0, gibbs_sweeps=10, checkpoint_dir=str(ckpt))
    lsdask.LDA(4, n_laps=1, **kw).fit(str(tmp_path / "a"))
    before = _snapshot(ckpt)
    with pytest.raises(ValueError, match=r"over another vocabulary than that of Parquet corpus"):
        lsdask.LDA(4, n_laps=2, resume=True, **kw).fit(str(tmp_path / "b"))
    assert _snapshot(ckpt) == before
    assert lsdask.LDA(4, n_laps=2, resume=True, **kw).fit(str(tmp_path / "a")).n_laps_ == 3


def test_checkpoints_are_not_written_into_other_folders(tmp_path, rng):
    X = _heavy_tailed(rng, n=300)
    kw = dict(n_laps=1, client="sync", random_state=0, batch_size=100)
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "a.png").write_bytes(b"x")
    for resume in (False, True):
        with pytest.raises(ValueError, match=r"holds no checkpoint but other things.*'a\.png'"):
            lsdask.GaussianMixture(3, checkpoint_dir=str(tmp_path / "images"), resume=resume,
                                   **kw).fit(X)  # fmt: skip
    assert sorted(os.listdir(tmp_path / "images")) == ["a.png"]
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match=r"checkpoint_dir '.*afile' is a file"):
        lsdask.GaussianMixture(3, checkpoint_dir=str(tmp_path / "afile"), **kw).fit(X)
    # a new or empty folder is fine, with resume=True too (a scheduled job's first night)
    lsdask.GaussianMixture(3, checkpoint_dir=str(tmp_path / "new"), resume=True, **kw).fit(X)
    assert (tmp_path / "new" / "LATEST").exists()


def test_a_resumed_run_removes_memo_temporaries_left_by_a_crash(tmp_path, rng, caplog):
    """Issue 25, finding 10: the temporaries of memo files that a crash (or a full
    disk) left mid-write stayed in the memo folder after a successful resume.
    The folder's next writer removes them, and nothing else."""
    import logging

    X = _heavy_tailed(rng, n=300)
    kw = dict(client="sync", random_state=0, batch_size=100, checkpoint_dir=str(tmp_path / "c"))
    lsdask.GaussianMixture(3, n_laps=1, **kw).fit(X)
    folder = CheckpointDir(tmp_path / "c")
    memo_dir = folder.memo_folder
    saved = folder.read()
    real = {p.name: p.read_bytes() for p in memo_dir.glob("b*.npz")}
    assert real and set(saved["memo"].values()) == set(real)

    def plant() -> list[Path]:
        stale = [memo_dir / f".{name}.{i:032x}.tmp" for i, name in enumerate(real)]
        stale.append(memo_dir / ".b000002-0123abcd-00000007.npz.ffff.tmp")  # never renamed
        for path in stale:
            path.write_bytes(b"PK\x03\x04 half a file")
        return stale

    others = [
        memo_dir / "notes.tmp",
        memo_dir / ".other.npz.1.tmp",
        tmp_path / "c" / ".b1.npz.2.tmp",
    ]
    for path in others:
        path.write_text("not the memo's")
    # the memo a resumed fit opens: the checkpoint's files, temporaries gone
    stale = plant()
    keys = sorted(saved["memo"])
    with caplog.at_level(logging.INFO, logger="lsdask"):
        memo = DiskMemo(memo_dir, len(keys), [saved["memo"][k] for k in keys])
    assert not any(p.exists() for p in stale)
    assert f"removed {len(stale)} unfinished memo file(s) left in {memo_dir}" in caplog.text
    assert {p.name: p.read_bytes() for p in memo_dir.glob("b*.npz")} == real  # untouched
    assert all(p.exists() for p in others)
    assert all(memo.has(b) and memo.get(b) is not None for b in range(len(keys)))
    # and a whole resumed fit
    stale = plant()
    model = lsdask.GaussianMixture(3, n_laps=1, resume=True, **kw).fit(X)
    assert model.n_laps_ == 2
    assert not any(p.exists() for p in stale)
    assert all(p.exists() for p in others)
    assert sorted(p.name for p in memo_dir.glob(".*.tmp")) == [".other.npz.1.tmp"]
    assert set(folder.read()["memo"].values()) == {p.name for p in memo_dir.glob("b*.npz")}


def test_a_stopped_run_resumed_with_no_laps_left_says_so(tmp_path, rng, caplog):
    """A run stopped after 3 of its 10 laps, resumed with n_laps=2 (laps in all for
    a stopped run): nothing is left to make, and a warning says so."""
    import json
    import logging

    X = _heavy_tailed(rng, n=300)
    kw = dict(client="sync", random_state=0, batch_size=100, checkpoint_dir=str(tmp_path / "c"))
    lsdask.GaussianMixture(3, n_laps=3, **kw).fit(X)
    latest = CheckpointDir(tmp_path / "c").latest() / "state.json"
    document = json.loads(latest.read_text())
    document["state"]["target_laps"] = 10  # as if stopped by a signal after lap 3
    latest.write_text(json.dumps(document))
    with caplog.at_level(logging.WARNING, logger="lsdask"):
        model = lsdask.GaussianMixture(3, n_laps=2, resume=True, **kw).fit(X)
    assert model.n_laps_ == 3
    assert "resuming a run stopped after 3 laps with n_laps=2" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lsdask"):
        assert lsdask.GaussianMixture(3, n_laps=5, resume=True, **kw).fit(X).n_laps_ == 5
    assert "no lap is left" not in caplog.text


def test_resume_takes_plain_settings_not_an_estimator(tmp_path, rng):
    """open_resume reads the checkpoint folder, the resume flag and the fit's
    settings from plain values, and refuses what the checkpoint cannot continue."""
    from lsdask.persist.resume import CheckpointSettings, open_resume

    X = _heavy_tailed(rng, n=300)
    ckpt = str(tmp_path / "c")
    kw = dict(client="sync", random_state=0, batch_size=100)
    lsdask.GaussianMixture(3, n_laps=1, checkpoint_dir=ckpt, **kw).fit(X)
    params = {
        "estimator": "GaussianMixture", "n_components": 3, "sparsity": None,
        "batches_per_update": None, "alpha": 1.0, "vocabulary_sha256": None,
    }  # fmt: skip
    asked = {"class": "ZeroMeanGaussian", "dim": X.shape[1]}
    resumed = open_resume(CheckpointSettings(ckpt, True, params), asked)
    assert resumed["model"].n_components == 3 and resumed["state"].lap == 1
    with pytest.raises(ValueError, match="was written by GaussianMixture, not LDA"):
        open_resume(CheckpointSettings(ckpt, True, {**params, "estimator": "LDA"}), asked)
    with pytest.raises(ValueError, match=r"has n_components=3; got n_components=4"):
        open_resume(CheckpointSettings(ckpt, True, {**params, "n_components": 4}), asked)
    with pytest.raises(ValueError, match=r"holds a model with dim 4 \(asked 5\)"):
        open_resume(CheckpointSettings(ckpt, True, params), {**asked, "dim": 5})
    with pytest.raises(ValueError, match=r"checkpoint_dir needs algorithm='memo'.*got 'svi'"):
        open_resume(CheckpointSettings(ckpt, True, params, algorithm="svi"), asked)
    with pytest.raises(ValueError, match=r"checkpoint_dir needs n_init=1; got 2"):
        open_resume(CheckpointSettings(ckpt, True, params, n_init=2), asked)
    assert open_resume(CheckpointSettings(None, False, params), asked) is None


def test_the_old_module_path_still_works_and_warns():
    import importlib
    import sys

    from lsdask.persist import checkpoint

    with pytest.warns(DeprecationWarning, match=r"lsdask.checkpoint is deprecated"):
        if "lsdask.checkpoint" in sys.modules:
            old = importlib.reload(sys.modules["lsdask.checkpoint"])
        else:
            old = importlib.import_module("lsdask.checkpoint")
    # the names the module had before it moved
    old_names = ("CheckpointDir", "FORMAT", "VERSION", "DiskMemo", "load_stats", "save_stats",
                 "DataError", "LearnState", "SuffStats")  # fmt: skip
    for name in old_names:
        assert getattr(old, name) is getattr(checkpoint, name), name
    assert old.FORMAT == "lsdask-checkpoint"
