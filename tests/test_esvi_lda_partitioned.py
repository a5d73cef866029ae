"""A model fitted by ESVI stays partitioned: its blocks stay on the workers after
``fit``; transform, score and saving work without the driver holding K x V;
``components_`` gathers only when read; a save/load round trip is exact; a
sub-step holds its block once (in place)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from lsdask import LDA
from lsdask.engine.partitions import SerialPartitions
from lsdask.errors import ClusterError
from lsdask.estimators.lda_esvi import GATHERED
from lsdask.learn import esvi
from lsdask.models.esvi_lda import ESVILDA, VocabPartition
from lsdask.persist import load_model, save_model
from tests.test_esvi_lda import corpus

K, V = 5, 30
KW = {"algorithm": "esvi", "n_blocks": 2, "tol": 0, "random_state": 4, "batch_size": 20}


def big_arrays(obj, limit: int, seen=None) -> list[str]:
    """Paths of numpy arrays of ``limit`` elements or more reachable from ``obj``'s
    attributes, lists, tuples and dicts (what a process holds through it)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return []
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return ["array"] if obj.size >= limit else []
    if isinstance(obj, dict):
        items = list(obj.items())
    elif isinstance(obj, list | tuple):
        items = list(enumerate(obj))
    elif hasattr(obj, "__dict__") and type(obj).__module__.startswith("lsdask"):
        items = list(vars(obj).items())
    else:
        return []
    return [f"{k}.{p}" for k, v in items for p in big_arrays(v, limit, seen)]


def test_partitioned_fit_transform_score_save_load(dask_client, tmp_path):
    """A 2-process LocalCluster fit: the estimator holds no K x V array through
    fit, transform, score and save; transform and score equal the gathered
    model's (1e-10); a saved model loads back exactly, onto the workers or into
    this process."""
    X = corpus(3, 160)
    est = LDA(K, n_laps=3, client=dask_client, **KW).fit(X)
    assert not [n for n in GATHERED if n in vars(est)]
    assert big_arrays(est, K * V) == []
    weights = est.transform(X)
    score = est.score(X, random_state=2)
    save_model(est, tmp_path / "m")
    assert big_arrays(est, K * V) == []  # nothing gathered by transform, score or save
    assert sorted(p.name for p in (tmp_path / "m" / "blocks").iterdir()) == [
        "MANIFEST.json", "partition.npz", "rotation-000003",
    ]  # fmt: skip
    loaded = load_model(tmp_path / "m", client=dask_client)
    assert big_arrays(loaded, K * V) == []
    np.testing.assert_array_equal(loaded.transform(X).toarray(), weights.toarray())
    assert loaded.score(X, random_state=2) == score
    # the user asks for the whole model: gathered, then the usual paths
    lam = est.components_
    assert lam.shape == (K, V)
    np.testing.assert_allclose(lam.sum(), X.sum() + K * V * est.eta_, rtol=1e-12)
    assert "posterior_" in vars(est)
    np.testing.assert_allclose(est.transform(X).toarray(), weights.toarray(), rtol=1e-10,
                               atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(est.score(X, random_state=2), score, rtol=1e-10)
    np.testing.assert_array_equal(loaded.components_, lam)
    here = load_model(tmp_path / "m")  # every block read into this process
    np.testing.assert_array_equal(here.components_, lam)
    np.testing.assert_array_equal(here.elbo_trace_, est.elbo_trace_)
    assert here.n_laps_ == est.n_laps_ == 3


def test_closed_client_is_a_clear_error():
    """The blocks live with the fit's client: once it is closed, reading the
    model says so and how to keep it."""
    from distributed import Client, LocalCluster

    X = corpus(5, 80)
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0")  # fmt: skip
    client = Client(cluster)
    try:
        est = LDA(K, n_laps=1, client=client, **KW).fit(X)
    finally:
        client.close()
        cluster.close()
    for read in (lambda: est.components_, lambda: est.score(X), lambda: est.transform(X)):
        with pytest.raises(ClusterError, match=r"save_model.*components_ before closing"):
            read()


def test_sync_fit_is_partitioned_and_equals_gathered():
    """In this process (client="sync") too the model stays in blocks until read."""
    X = corpus(6, 60)
    est = LDA(K, n_laps=2, client="sync", **KW).fit(X)
    assert "components_" not in vars(est)
    score = est.score(X)
    np.testing.assert_allclose(est.components_.sum(), X.sum() + K * V * est.eta_, rtol=1e-12)
    np.testing.assert_allclose(est.score(X), score, rtol=1e-10)


def test_substep_holds_its_block_once(monkeypatch):
    """A sub-step updates its block and the documents' counts in place: the new
    block is the given one, and the sub-step allocates far less than a block
    (no copy, no psi of it; the block's sums taken a chunk of rows at a time)."""
    from lsdask.models import esvi_lda

    monkeypatch.setattr(esvi_lda, "_CHUNK_BYTES", 1 << 18)
    import scipy.sparse as sp

    from lsdask.io.sources import as_batch_source

    Vb = 200_000
    X = corpus(7, 20)
    m = ESVILDA(K, Vb, np.full(K, 0.1), 0.05, K, "lsparse", 1)
    parts = SerialPartitions(1)
    wide = sp.hstack([X, sp.csr_matrix((X.shape[0], Vb - V))], format="csr")
    source = as_batch_source(wide, 10)
    run = esvi.start(m, parts, source.batches, VocabPartition.balanced, np.random.default_rng(0))
    shard, block = run.shards[0], run.blocks[0]
    lam_before = block.lam.copy()
    tracemalloc.start()
    new_shard, new_block, _ = m.substep(shard, block, run.pi)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert new_block.lam is block.lam and new_shard.doc_topic is shard.doc_topic
    assert not np.array_equal(new_block.lam, lam_before)
    assert peak < 0.1 * block.lam.nbytes, (peak, block.lam.nbytes)


def test_float32_blocks_follow_float64():
    """esvi_dtype="float32" stores and moves the blocks in float32; the fit follows
    the float64 one closely (the updates and sums stay in float64)."""
    X = corpus(8, 80)
    f64 = LDA(K, n_laps=3, client="sync", **KW).fit(X)
    f32 = LDA(K, n_laps=3, client="sync", esvi_dtype="float32", **KW).fit(X)
    assert f32.__dict__["_esvi_fitted"].run.blocks[0].lam.dtype == np.float32
    np.testing.assert_allclose(f32.elbo_trace_, f64.elbo_trace_, rtol=1e-5)
    np.testing.assert_allclose(f32.components_, f64.components_, rtol=1e-4, atol=1e-4)


def test_cli_fit_with_a_partitioned_save_keeps_its_pictures(tmp_path):
    """A partitioned model saved inside ``extra_files`` (what ``lsdask fit`` uses
    for its pictures) gets them, as any model folder."""
    from lsdask.persist.model_dir import extra_files

    X = corpus(9, 40)
    est = LDA(K, n_laps=1, client="sync", **KW).fit(X)
    picture = tmp_path / "elbo.png"
    picture.write_bytes(b"png")
    with extra_files({"elbo.png": picture}):
        save_model(est, tmp_path / "m")
    assert (tmp_path / "m" / "blocks" / "MANIFEST.json").exists()
    assert (tmp_path / "m" / "elbo.png").read_bytes() == b"png"
