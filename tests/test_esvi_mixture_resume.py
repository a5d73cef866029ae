"""ESVI mixtures' checkpoints, written block by block as ESVI LDA's are
(:func:`lsdask.learn.esvi.checkpoint`): resume after a killed driver and after
a lost worker ends equal to an uninterrupted run (exact mode), and a damaged
checkpoint is a clear DataError; the estimators' bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from lsdask.engine.partitions import DaskPartitions, SerialPartitions
from lsdask.learn.esvi_mixture import checkpoint_mixture, resume_mixture, rotate_mixture
from lsdask.persist.esvi_store import ESVIStore
from tests.test_esvi_mixture import D, K, gaussian_rows, gmm, seeded_stats, started


def gathered_stats(parts, run) -> dict[str, np.ndarray]:
    """Every component's statistics, from the blocks wherever they are."""
    blocks = parts.gather(run.blocks)
    out = {n: np.zeros((K, *a.shape[1:])) for n, a in blocks[0].stats.items()}
    for b in blocks:
        for n in out:
            out[n][b.comps] = b.stats[n]
    return out


def counts(seed: int = 3, n: int = 160) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    return sp.csr_matrix(rng.poisson(rng.gamma(0.3, 2.0, size=(4, 25))[rng.integers(0, 4, n)]))


def test_resume_after_a_killed_driver_equals_uninterrupted(tmp_path, dask_client):
    """Each part writes its shard and block after every rotation; a new driver
    resuming from the last complete rotation ends equal to an uninterrupted
    run, in-process and on a 2-process LocalCluster (each against an
    uninterrupted run on the same parts); a rotation without its manifest is
    ignored; other settings are refused."""
    X = gaussian_rows(5)
    m = gmm(X, 6)
    settings = {"K": K, "P": 2}
    for parts in (SerialPartitions(2), DaskPartitions(dask_client, 2)):
        start = (lambda: seeded_stats(m, X)[0]) if isinstance(parts, DaskPartitions) else None
        _, want = started(X, m, parts, start=start)
        rotate_mixture(m, parts, want, 4)
        want_stats = gathered_stats(parts, want)
        want_z = [s.z for s in parts.gather(want.shards)]
        parts.release(want.blocks + want.shards)

        store = ESVIStore(str(tmp_path / type(parts).__name__))
        _, run = started(X, m, parts, start=start)
        for _ in range(2):
            rotate_mixture(m, parts, run, 1)
            checkpoint_mixture(m, parts, run, store, settings)
        rotate_mixture(m, parts, run, 1)  # the driver dies before this rotation's manifest
        (Path(store.folder) / "rotation-000003").mkdir()  # half-written files of it
        parts.release(run.blocks + run.shards)

        again = resume_mixture(m, parts, store, settings)
        assert again is not None and len(again.elbo_trace) == 2 and len(again.deals) == 2
        for _ in range(2):
            rotate_mixture(m, parts, again, 1)
            checkpoint_mixture(m, parts, again, store, settings)
        np.testing.assert_array_equal(again.substep_elbo, want.substep_elbo)
        np.testing.assert_array_equal(again.elbo_trace, want.elbo_trace)
        got_stats = gathered_stats(parts, again)
        for n in want_stats:
            np.testing.assert_array_equal(got_stats[n], want_stats[n])
        for g, w in zip(parts.gather(again.shards), want_z, strict=True):
            np.testing.assert_array_equal(g.z, w)
        written = store.latest()
        assert written is not None and written["rotation"] == 4
        total = sum(e["block_bytes"] for e in written["parts"])
        for e in written["parts"]:  # each worker wrote only its own block
            assert e["block_bytes"] < 0.7 * total
        parts.release(again.blocks + again.shards)
        with pytest.raises(ValueError, match="was written with"):
            resume_mixture(m, parts, store, {"K": K, "P": 3})


@pytest.mark.parametrize("kind", ["zero-mean", "multinomial"])
def test_estimator_resume_equals_uninterrupted(kind, tmp_path):
    """``fit`` with ``checkpoint_dir`` for 2 rotations, then with ``resume`` to 4,
    equals 4 rotations in one fit; a resume with nothing left to do gives the
    same model; one with other settings is refused."""
    from lsdask import GaussianMixture, MultinomialMixture

    kw = {"algorithm": "esvi", "n_blocks": 2, "client": "sync", "tol": 0, "batch_size": 40,
          "random_state": 3}  # fmt: skip
    if kind == "multinomial":
        X, make = counts(), lambda **k: MultinomialMixture(K, **kw, **k)
    else:
        X, make = gaussian_rows(7), lambda **k: GaussianMixture(K, **kw, **k)
    want = make(n_laps=4).fit(X)
    make(n_laps=2, checkpoint_dir=str(tmp_path)).fit(X)
    got = make(n_laps=4, checkpoint_dir=str(tmp_path), resume=True).fit(X)
    np.testing.assert_array_equal(got.substep_elbo_trace_, want.substep_elbo_trace_)
    np.testing.assert_array_equal(got.weights_, want.weights_)
    np.testing.assert_array_equal(got.predict_proba(X), want.predict_proba(X))
    assert got.n_laps_ == 4
    done = make(n_laps=4, checkpoint_dir=str(tmp_path), resume=True).fit(X)  # no rotation
    np.testing.assert_array_equal(done.predict_proba(X), want.predict_proba(X))
    with pytest.raises(ValueError, match="was written with"):
        make(n_laps=5, checkpoint_dir=str(tmp_path), resume=True, alpha=2.0).fit(X)


def test_fit_without_resume_refuses_a_checkpoint_folder(tmp_path):
    """A fit without resume leaves a folder holding an ESVI checkpoint as it was."""
    from lsdask import GaussianMixture

    X = gaussian_rows(8)
    kw = {"algorithm": "esvi", "n_blocks": 2, "client": "sync", "tol": 0, "batch_size": 40,
          "random_state": 3, "checkpoint_dir": str(tmp_path)}  # fmt: skip
    GaussianMixture(K, n_laps=1, **kw).fit(X)
    folder = tmp_path / "esvi"
    before = {f.relative_to(folder): f.read_bytes() for f in folder.rglob("*") if f.is_file()}
    with pytest.raises(ValueError, match=f"{folder} holds an ESVI checkpoint; pass resume=True"):
        GaussianMixture(K, n_laps=2, **kw).fit(X)
    after = {f.relative_to(folder): f.read_bytes() for f in folder.rglob("*") if f.is_file()}
    assert after == before
    assert GaussianMixture(K, n_laps=2, resume=True, **kw).fit(X).n_laps_ == 2


def _damage(folder: Path, how: str) -> None:
    """Damage a mixture's ESVI checkpoint folder (``checkpoint_dir/esvi``) in one way."""
    manifest = folder / "MANIFEST.json"
    rotation = folder / json.loads(manifest.read_text())["folder"]

    def rewrite(path: Path, change) -> None:
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        change(arrays)
        np.savez(path, **arrays)

    if how == "cut manifest":
        text = manifest.read_text()
        manifest.write_text(text[: len(text) // 2])
    elif how == "no shard":
        (rotation / "shard-1.npz").unlink()
    elif how == "cut block":
        data = (rotation / "block-0.npz").read_bytes()
        (rotation / "block-0.npz").write_bytes(data[: len(data) // 2])
    elif how == "shard without z":
        rewrite(rotation / "shard-0.npz", lambda a: a.pop("z"))
    elif how == "shard of other rows":
        rewrite(rotation / "shard-0.npz", lambda a: a.update(z=a["z"][:-3]))
    elif how == "block without a statistic":
        rewrite(rotation / "block-1.npz", lambda a: a.pop("stat_N"))
    elif how == "other component blocks":
        rewrite(folder / "partition.npz", lambda a: a.update(comps_0=a["comps_0"][::-1].copy()))
    else:
        raise AssertionError(how)


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("cut manifest", r"manifest .*MANIFEST\.json is unreadable \(JSONDecodeError"),
        ("no shard", r"file .*rotation-000002/shard-1\.npz is missing"),
        ("cut block", r"file .*rotation-000002/block-0\.npz is damaged \(BadZipFile"),
        ("shard without z", r"file .*shard-0\.npz has no array 'z'"),
        ("shard of other rows", r"responsibilities in .*shard-0\.npz are \(\d+, 6\), not"),
        ("block without a statistic", r"block in .*block-1\.npz lacks or mis-sizes .*\['N'\]"),
        ("other component blocks", r"component blocks in .*partition\.npz are not those"),
    ],
)
def test_damaged_checkpoint_is_a_clear_error(tmp_path, how, message):
    """Resuming from a damaged checkpoint raises a DataError naming the file, what
    is wrong and how to go on; never a bare traceback."""
    from lsdask import GaussianMixture
    from lsdask.errors import DataError

    X = gaussian_rows(9)
    kw = {"algorithm": "esvi", "n_blocks": 2, "client": "sync", "tol": 0, "batch_size": 40,
          "random_state": 3, "checkpoint_dir": str(tmp_path)}  # fmt: skip
    GaussianMixture(K, n_laps=2, **kw).fit(X)
    _damage(tmp_path / "esvi", how)
    with pytest.raises(DataError, match=message) as caught:
        GaussianMixture(K, n_laps=3, resume=True, **kw).fit(X)
    assert "without resume" in str(caught.value)


@pytest.mark.parametrize(
    ("where", "resumed_from"), [("substep", 2), ("checkpoint", 1), ("gather", 4)]
)
def test_lost_worker_resumes_equal(where, resumed_from, tmp_path, monkeypatch, caplog):
    """A worker lost at a known point: inside a sub-step of the third rotation
    (its process exits in the task), while it writes the second rotation's
    checkpoint, or after the last rotation before the model is gathered. The
    fit goes on from the last complete rotation's checkpoint on the cluster's
    workers (the warning says from which) and ends equal to an uninterrupted
    in-process run, to the last bit."""
    import logging
    import os
    import time

    from distributed import Client, LocalCluster

    from lsdask import GaussianMixture
    from lsdask.estimators import mixture_esvi
    from lsdask.models.esvi_mixture import ESVIMixture

    X = gaussian_rows(10, 600)
    kw = {"algorithm": "esvi", "n_blocks": 2, "tol": 0, "random_state": 4, "batch_size": 50}
    want = GaussianMixture(K, n_laps=4, client="sync", **kw).fit(X)
    marker, calls = tmp_path / "killed", tmp_path / "calls"

    def exit_at(part: int, nth: int) -> None:
        """On part 1's worker: its process exits at the ``nth`` call, once."""
        if part != 1 or marker.exists():
            return
        with open(calls, "a") as f:
            f.write("x")
        if calls.stat().st_size == nth:
            marker.touch()
            os._exit(1)

    class Dying(ESVIMixture):
        def substep(self, shard, *args):
            if where == "substep":
                exit_at(shard.part, 2 * 2 + 2)  # rotation 3, sub-step 1
            return super().substep(shard, *args)

        def shard_state(self, shard):
            if where == "checkpoint":
                exit_at(shard.part, 2)  # the checkpoint of rotation 2
            return super().shard_state(shard)

    monkeypatch.setattr(mixture_esvi, "ESVIMixture", Dying)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0")  # fmt: skip
    client = Client(cluster)

    def kill_before_gather(run):
        if where != "gather" or len(run.elbo_trace) < 4 or marker.exists():
            return
        marker.touch()
        victim = sorted(client.scheduler_info()["workers"])[1]
        client.run(os._exit, 1, workers=[victim], on_error="ignore")
        deadline = time.monotonic() + 30
        while victim in client.scheduler_info()["workers"] and time.monotonic() < deadline:
            time.sleep(0.05)

    try:
        with caplog.at_level(logging.WARNING, logger="lsdask.estimators.mixture_esvi"):
            got = GaussianMixture(K, n_laps=4, client=client,
                                  checkpoint_dir=str(tmp_path / "ck"), **kw)  # fmt: skip
            got.fit(X, callback=kill_before_gather)
    finally:
        client.close()
        cluster.close()
    assert marker.exists()
    resumed = [r.getMessage() for r in caplog.records if "resuming from rotation" in r.message]
    assert len(resumed) == 1 and resumed[0].endswith(f"resuming from rotation {resumed_from}")
    np.testing.assert_array_equal(got.substep_elbo_trace_, want.substep_elbo_trace_)
    np.testing.assert_array_equal(got.elbo_trace_, want.elbo_trace_)
    np.testing.assert_array_equal(got.weights_, want.weights_)
    np.testing.assert_array_equal(got.predict_proba(X), want.predict_proba(X))


@pytest.mark.parametrize(
    ("X", "params", "message"),
    [
        (gaussian_rows(11), {"n_blocks": 7},
         r"n_blocks=7 is larger than the number of components \(6\).*Use n_blocks <= 6"),
        (gaussian_rows(11)[:50], {"n_blocks": 3, "batch_size": 40},
         r"too few rows per shard: the data has 2 non-empty batches of rows \(50 rows\), "
         r"fewer than n_blocks=3.*Use a smaller batch_size"),
    ],
)  # fmt: skip
def test_estimator_bad_input_before_a_cluster_starts(X, params, message, monkeypatch):
    """More blocks than components, or than non-empty batches of rows: a clear
    ValueError naming the parameter and the fix, before any cluster is started."""
    from lsdask import GaussianMixture
    from lsdask.estimators import mixture_esvi

    def no_cluster(*args, **kw):
        raise AssertionError("a cluster was started before the input was checked")

    monkeypatch.setattr(mixture_esvi, "open_partitions", no_cluster)
    with pytest.raises(ValueError, match=message):
        GaussianMixture(K, algorithm="esvi", client=None, n_laps=1, **params).fit(X)


def test_cli_fit_gmm_esvi_checkpoint_then_resume(tmp_path, capsys):
    """``lsdask fit-gmm --algorithm esvi --blocks 2`` with a checkpoint, then
    resumed to 3 rotations in all: the model of a straight 3-rotation run."""
    import zarr

    from lsdask.cli import main
    from lsdask.persist.gmm import load_gmm

    X = gaussian_rows(12, 300)
    z = zarr.open_array(str(tmp_path / "x.zarr"), mode="w", shape=X.shape, chunks=(50, D),
                        dtype="f8")  # fmt: skip
    z[:] = X
    argv = ["fit-gmm", str(tmp_path / "x.zarr"), "--components", str(K), "--covariance",
            "zero-mean", "--algorithm", "esvi", "--blocks", "2", "--sync",
            "--seed", "1"]  # fmt: skip
    assert main([*argv, "--laps", "3", "--save", str(tmp_path / "straight")]) == 0
    ck = tmp_path / "ck"
    assert main([*argv, "--laps", "2", "--checkpoint", str(ck)]) == 0
    assert json.loads((ck / "esvi" / "MANIFEST.json").read_text())["rotation"] == 2
    assert main([*argv, "--laps", "3", "--resume", str(ck), "--save", str(tmp_path / "res")]) == 0
    assert json.loads((ck / "esvi" / "MANIFEST.json").read_text())["rotation"] == 3
    capsys.readouterr()
    straight, resumed = load_gmm(tmp_path / "straight"), load_gmm(tmp_path / "res")
    assert resumed.n_laps_ == straight.n_laps_ == 3
    np.testing.assert_array_equal(resumed.weights_, straight.weights_)
    np.testing.assert_array_equal(resumed.elbo_trace_, straight.elbo_trace_)
