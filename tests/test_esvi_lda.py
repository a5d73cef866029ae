"""ESVI for LDA (esvi paper, Alg. 5) in exact mode: the schedule against a plain
numpy implementation, the ELBO's monotonicity, Dask against in-process, and
what each worker holds after every sub-step."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import digamma, gammaln

from lsdask.engine.partitions import DaskPartitions, SerialPartitions
from lsdask.io.sources import as_batch_source
from lsdask.learn import esvi
from lsdask.models.esvi_lda import (
    ESVILDA,
    ESVIShard,
    ParamBlock,
    VocabPartition,
    gather_topics,
)

K, V = 5, 30


def corpus(seed: int = 0, n_docs: int = 48) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(V, 0.3), size=K)
    rows = []
    for _ in range(n_docs):
        theta = rng.dirichlet(np.full(K, 0.5))
        rows.append(rng.multinomial(int(rng.integers(5, 40)), theta @ topics))
    X = sp.csr_matrix(np.array(rows, dtype=float))
    return X


def model(C: int = K, rule: str = "lsparse", seed: int = 3) -> ESVILDA:
    return ESVILDA(K, V, np.full(K, 0.1), 0.05, C, rule, seed)


def started(X, m: ESVILDA, parts, batch_size: int = 8, seed: int = 7):
    source = as_batch_source(X, batch_size)
    rng = np.random.default_rng(seed)
    run = esvi.start(m, parts, source.batches, VocabPartition.balanced, rng)
    return source, run


# ---- the plain numpy implementation of Alg. 5 in exact mode, for any P


def shard_docs(X, source, P, seed=7):
    dealt = esvi.deal_batches([b.cost for b in source.batches], P, np.random.default_rng(seed))
    return [sp.vstack([source.batches[i].rows for i in d], format="csr") for d in dealt]


def dense_phi(shard: ESVIShard, part: VocabPartition, docs: sp.csr_matrix) -> dict:
    """{(doc, word): phi (K,)} of every entry of a shard, from its pieces."""
    phi = {}
    for b, piece in enumerate(shard.pieces):
        for d in range(docs.shape[0]):
            for j in range(piece.indptr[d], piece.indptr[d + 1]):
                row = np.zeros(K)
                row[piece.idx[j]] = piece.resp[j]
                phi[d, int(part.words[b][piece.cols[j]])] = row
    return phi


def numpy_alg5(docs, phis, block_of, P, alpha, eta, n_rotations, iters=1, tol=0.0):
    """Alg. 5 with the deterministic schedule: every token of shard p in block
    (p + s) mod P updated against the sub-step's snapshot; the counts, lambda
    and pi summed afresh from all phi after each sub-step. With ``iters`` > 1,
    the block's tokens are updated that many times against the snapshot of
    lambda and pi, the counts summed afresh after each pass; with ``tol`` > 0, a
    document makes no more passes in the sub-step once one changed none of its
    counts by ``tol`` or more. Returns the ELBO after every sub-step and the
    final lambda (K, V)."""

    def sums():
        lam = np.full((K, V), eta)
        n = []
        for p in range(P):
            n_p = np.zeros((docs[p].shape[0], K))
            for (d, v), f in phis[p].items():
                c = docs[p][d, v]
                n_p[d] += c * f
                lam[:, v] += c * f
            n.append(n_p)
        return n, lam

    def elbo(n, lam):
        logB = lambda a: gammaln(a).sum(-1) - gammaln(a.sum(-1))  # noqa: E731
        total = 0.0
        for p in range(P):
            total += (logB(alpha + n[p]) - logB(alpha)).sum()
            for (d, v), f in phis[p].items():
                nz = f[f > 0]
                total -= docs[p][d, v] * (nz * np.log(nz)).sum()
        total += (logB(lam) - logB(np.full(V, eta))).sum()
        return total

    trace = []
    for _ in range(n_rotations):
        for s in range(P):
            n, lam = sums()
            pi = lam.sum(axis=1)
            done = set()
            for _ in range(iters):
                n = sums()[0]
                new = [dict(ph) for ph in phis]
                for p in range(P):
                    for d, v in phis[p]:
                        if block_of[v] != (p + s) % P or (p, d) in done:
                            continue
                        u = digamma(alpha + n[p][d]) + digamma(lam[:, v]) - digamma(pi)
                        e = np.exp(u - u.max())
                        new[p][d, v] = e / e.sum()
                phis = new
                if tol > 0:
                    after = sums()[0]
                    for p in range(P):
                        moved = np.abs(after[p] - n[p]).max(axis=1)
                        done |= {(p, d) for d in np.flatnonzero(moved < tol)}
            n, lam = sums()
            trace.append(elbo(n, lam))
    return np.array(trace), sums()[1]


@pytest.mark.parametrize(
    ("P", "iters", "tol"), [(1, 1, 0.0), (3, 1, 0.0), (2, 3, 0.0), (1, 30, 0.05), (2, 30, 0.05)]
)
def test_schedule_equals_numpy_alg5(P, iters, tol):
    """C = K, exact mode: the ELBO after every sub-step and the final topics equal
    the plain numpy Alg. 5 from the same first responsibilities (P = 1: the
    paper's serial algorithm; iters > 1: passes per sub-step; tol > 0: each
    document stops its passes on its own, after between 1 and ``iters``)."""
    X = corpus()
    m = replace(model(), local_iters=iters, local_tol=tol)
    parts = SerialPartitions(P)
    source, run = started(X, m, parts)
    docs = shard_docs(X, source, P)
    phis = [dense_phi(run.shards[p], run.partition, docs[p]) for p in range(P)]
    passes = []
    esvi.rotate(m, parts, run, 3, on_substep=lambda r, s: passes.append(
        sum(rep.passes for rep in r.reports)))  # fmt: skip
    want, lam = numpy_alg5(docs, phis, run.partition.block_of, P, m.alpha, m.eta, 3, iters, tol)
    np.testing.assert_allclose(run.substep_elbo, want, rtol=1e-10)
    np.testing.assert_allclose(gather_topics(run.blocks, V), lam, rtol=1e-10)
    # each (document, block) with entries makes iters passes a rotation; with tol,
    # between 1 and iters, fewer as the topics settle
    coo = X.tocoo()
    met = 3 * np.unique(coo.row * P + run.partition.block_of[coo.col]).size
    if tol == 0:
        assert sum(passes) == iters * met
    else:
        assert met < sum(passes) < iters * met
        per_rotation = np.reshape(passes, (3, P)).sum(axis=1)
        assert per_rotation[-1] < per_rotation[0], per_rotation


@pytest.mark.parametrize(
    ("C", "iters", "tol"),
    [(K, 1, 0.0), (2, 1, 0.0), (1, 1, 0.0), (K, 4, 0.0), (2, 4, 0.0), (K, 50, 0.01), (2, 50, 0.01)],
)
def test_elbo_never_decreases(C, iters, tol):
    """Exact mode with C = K or the L-sparse rule, one pass or several, or passes
    until each document settles (tol)."""
    X = corpus(1, 60)
    m = replace(model(C, "lsparse"), local_iters=iters, local_tol=tol)
    parts = SerialPartitions(3)
    _, run = started(X, m, parts)
    esvi.rotate(m, parts, run, 5)
    trace = np.array(run.substep_elbo)
    assert len(trace) == 15
    steps = np.diff(trace)
    assert (steps >= -1e-9 * np.abs(trace[1:])).all(), steps
    assert trace[-1] > trace[0]


def test_paper_rule_keeps_mass_and_runs():
    """The paper's TOPK rule spreads the left-over mass: every entry's kept
    responsibilities plus its rest sum to one, and the totals keep every token."""
    X = corpus(2)
    m = model(2, "paper")
    parts = SerialPartitions(2)
    _, run = started(X, m, parts)
    esvi.rotate(m, parts, run, 2)
    for shard in run.shards:
        for piece in shard.pieces:
            np.testing.assert_allclose(piece.resp.sum(1) + piece.rest, 1.0, rtol=1e-12)
            assert (piece.rest > 0).all()
    np.testing.assert_allclose(run.pi.sum(), X.sum() + K * V * m.eta, rtol=1e-12)
    assert np.isfinite(run.substep_elbo).all()


def test_partition_balances_mass_and_words():
    mass = 1000.0 / np.arange(1, 1001) ** 1.1  # Zipfian
    part = VocabPartition.balanced(mass, 4)
    sizes = [w.size for w in part.words]
    assert max(sizes) - min(sizes) <= 1
    # no block heavier than the heaviest word or an even share, but for the tail
    assert part.mass.max() <= 1.01 * max(mass.max(), mass.sum() / 4)
    np.testing.assert_allclose(part.mass.sum(), mass.sum())
    even = VocabPartition.balanced(np.ones(10), 3)
    assert [w.size for w in even.words] == [4, 3, 3]
    assert sorted(np.concatenate(part.words).tolist()) == list(range(1000))
    for b, w in enumerate(part.words):
        assert (part.block_of[w] == b).all()
        assert (part.local[w] == np.arange(w.size)).all()


def _what(value):
    if isinstance(value, ParamBlock):
        return ("block", value.index, value.nbytes)
    if isinstance(value, ESVIShard):
        return ("shard", value.part)
    return None


@pytest.mark.parametrize("tol", [0.0, 0.02])
def test_dask_equals_in_process_and_each_worker_holds_its_block(dask_client, tol):
    """2-process LocalCluster == in-process (1e-10); after every sub-step each worker
    holds exactly its own shard and the one block the schedule gave it. With tol,
    each document's passes end on its own (up to 20)."""
    X = corpus(4, 64)
    m = replace(model(3), local_iters=1 if tol == 0 else 20, local_tol=tol)
    serial = SerialPartitions(2)
    _, want = started(X, m, serial)
    esvi.rotate(m, serial, want, 3)

    parts = DaskPartitions(dask_client, 2)
    seen = []

    def inspect(run, s):
        held = parts.holdings(_what)
        for p, worker in enumerate(parts.workers):
            blocks = [h for h in held[worker] if h[0] == "block"]
            shards = [h for h in held[worker] if h[0] == "shard"]
            assert [b[1] for b in blocks] == [esvi.block_at(p, s, 2)], held
            assert [sh[1] for sh in shards] == [p], held
        seen.append(s)

    _, run = started(X, m, parts)
    esvi.rotate(m, parts, run, 3, on_substep=inspect)
    assert seen == [0, 1] * 3
    np.testing.assert_allclose(run.substep_elbo, want.substep_elbo, rtol=1e-10)
    got = gather_topics(parts.gather(run.blocks), V)
    np.testing.assert_allclose(got, gather_topics(want.blocks, V), rtol=1e-10)
    parts.release(run.blocks + run.shards)


# ---- the estimator


def test_estimator_fit_and_elbo_equals_lda_model_elbo():
    """LDA(algorithm="esvi") in this process: the ELBO by rotation rises, and the
    last one, from partial sums, equals LDAModel's ELBO (App. C) of the gathered
    topics and the same responsibilities' entropy and allocation terms."""
    from lsdask import LDA

    X = corpus(5, 80)
    lda = LDA(K, algorithm="esvi", n_blocks=3, client="sync", n_laps=4, tol=0, random_state=0)
    lda.fit(X)
    assert lda.components_.shape == (K, V)
    assert lda.n_laps_ == 4 and lda.substep_elbo_trace_.shape == (12,)
    assert (np.diff(lda.elbo_trace_) > 0).all()
    direct = lda.model_.elbo(lda.stats_, lda.posterior_)
    np.testing.assert_allclose(direct, lda.elbo_trace_[-1], rtol=1e-10)
    np.testing.assert_allclose(lda.components_.sum(), X.sum() + K * V * lda.eta_, rtol=1e-12)
    assert np.isfinite(lda.score(X))
    assert lda.transform(X[:5]).shape == (5, K)


def test_estimator_bad_input():
    from lsdask import LDA

    X = corpus(6, 20)
    with pytest.raises(ValueError, match=r"n_blocks=31 is larger than the vocabulary \(30"):
        LDA(K, algorithm="esvi", n_blocks=31, client="sync").fit(X)
    for bad in (0, K + 1):
        with pytest.raises(ValueError, match=r"topk must be an integer in \[1, 5\]"):
            LDA(K, algorithm="esvi", topk=bad, client="sync").fit(X)
    with pytest.raises(ValueError, match="pi_sync must be one of"):
        LDA(K, algorithm="esvi", pi_sync="nomadic", client="sync").fit(X)
    with pytest.raises(ValueError, match="alpha='auto' is not supported with algorithm='esvi'"):
        LDA(K, algorithm="esvi", alpha="auto", client="sync").fit(X)
    with pytest.raises(ValueError, match="topk_rule must be one of"):
        LDA(K, algorithm="esvi", topk_rule="heap", client="sync").fit(X)
    for bad in (-0.1, float("nan")):
        with pytest.raises(ValueError, match="esvi_tol must be a finite number >= 0"):
            LDA(K, algorithm="esvi", esvi_tol=bad, client="sync").fit(X)


def test_too_few_workers_is_refused(dask_client):
    with pytest.raises(ValueError, match="n_blocks=3 needs 3 Dask workers, one per block"):
        DaskPartitions(dask_client, 3)


# ---- checkpoints block by block


def test_resume_after_a_killed_driver_equals_uninterrupted(tmp_path, dask_client):
    """Checkpoints written by each worker after every rotation; a new driver
    resuming from the last complete rotation ends equal to an uninterrupted run
    (in-process and on a 2-process LocalCluster); a rotation without its
    manifest is ignored."""
    from lsdask.persist.esvi_store import ESVIStore

    X = corpus(7, 64)
    m = model(3)
    settings = {"K": K, "C": 3}
    serial = SerialPartitions(2)
    _, want = started(X, m, serial)
    esvi.rotate(m, serial, want, 4)

    for parts in (SerialPartitions(2), DaskPartitions(dask_client, 2)):
        store = ESVIStore(str(tmp_path / type(parts).__name__))
        _, run = started(X, m, parts)
        for _ in range(2):
            esvi.rotate(m, parts, run, 1)
            esvi.checkpoint(m, parts, run, store, settings)
        esvi.rotate(m, parts, run, 1)  # the driver dies before this rotation's manifest
        (Path(store.folder) / "rotation-000003").mkdir()  # half-written files of it
        parts.release(run.blocks + run.shards)

        again = esvi.resume(m, parts, store, settings)
        assert again is not None and len(again.elbo_trace) == 2
        esvi.rotate(m, parts, again, 2)
        np.testing.assert_array_equal(again.substep_elbo, want.substep_elbo)
        got = gather_topics(parts.gather(again.blocks), V)
        np.testing.assert_array_equal(got, gather_topics(want.blocks, V))
        written = store.latest()
        assert written is not None
        total = sum(e["block_bytes"] for e in written["parts"])
        for e in written["parts"]:  # each worker wrote only its own block
            assert e["block_bytes"] < 0.6 * total
        parts.release(again.blocks + again.shards)
        with pytest.raises(ValueError, match="was written with"):
            esvi.resume(m, parts, store, {"K": K, "C": 2})


def test_estimator_resume_equals_uninterrupted(tmp_path):
    from lsdask import LDA

    X = corpus(8, 40)
    kw = {"algorithm": "esvi", "n_blocks": 2, "client": "sync", "tol": 0, "random_state": 3}
    want = LDA(K, n_laps=4, **kw).fit(X)
    LDA(K, n_laps=2, checkpoint_dir=str(tmp_path), **kw).fit(X)
    got = LDA(K, n_laps=4, checkpoint_dir=str(tmp_path), resume=True, **kw).fit(X)
    np.testing.assert_array_equal(got.substep_elbo_trace_, want.substep_elbo_trace_)
    np.testing.assert_array_equal(got.components_, want.components_)
    done = LDA(K, n_laps=4, checkpoint_dir=str(tmp_path), resume=True, **kw).fit(X)  # no rotation
    np.testing.assert_allclose(
        done.model_.elbo(done.stats_, done.posterior_), want.elbo_trace_[-1], rtol=1e-10
    )
    with pytest.raises(ValueError, match="was written with"):
        LDA(K, n_laps=5, checkpoint_dir=str(tmp_path), resume=True, topk=2, **kw).fit(X)


def test_checkpoint_without_a_tolerance_resumes_with_every_pass(tmp_path):
    """A checkpoint from before ``esvi_tol`` (every sub-step made all its passes:
    a tolerance of 0, which is not recorded) resumes with ``esvi_tol=0`` and
    equals an uninterrupted run; with another tolerance the error names the
    setting, what the checkpoint has and what the fit has."""
    from lsdask import LDA

    X = corpus(8, 40)
    kw = {"algorithm": "esvi", "n_blocks": 2, "client": "sync", "tol": 0, "random_state": 3,
          "esvi_iters": 2, "esvi_tol": 0}  # fmt: skip
    want = LDA(K, n_laps=3, **kw).fit(X)
    LDA(K, n_laps=2, checkpoint_dir=str(tmp_path), **kw).fit(X)
    got = LDA(K, n_laps=3, checkpoint_dir=str(tmp_path), resume=True, **kw).fit(X)
    np.testing.assert_array_equal(got.substep_elbo_trace_, want.substep_elbo_trace_)
    with pytest.raises(
        ValueError,
        match=r"other settings: esvi_tol: checkpoint not recorded \(written before lsdask had "
        r"it\), this fit 0\.05\. Use the checkpoint's settings",
    ):
        LDA(K, n_laps=4, checkpoint_dir=str(tmp_path), resume=True, **{**kw, "esvi_tol": 0.05}).fit(
            X
        )


def test_fit_without_resume_refuses_a_checkpoint_folder(tmp_path):
    """A fit without resume does not overwrite a folder holding an ESVI checkpoint:
    the error names the folder and the fix, and the checkpoint is left as it was."""
    from lsdask import LDA

    X = corpus(8, 40)
    kw = {"algorithm": "esvi", "n_blocks": 2, "client": "sync", "tol": 0, "random_state": 3,
          "checkpoint_dir": str(tmp_path)}  # fmt: skip
    LDA(K, n_laps=1, **kw).fit(X)
    folder = tmp_path / "esvi"
    before = {f.relative_to(folder): f.read_bytes() for f in folder.rglob("*") if f.is_file()}
    with pytest.raises(ValueError, match=f"{folder} holds an ESVI checkpoint; pass resume=True"):
        LDA(K, n_laps=2, **{**kw, "random_state": 5}).fit(X)
    after = {f.relative_to(folder): f.read_bytes() for f in folder.rglob("*") if f.is_file()}
    assert after == before
    assert LDA(K, n_laps=2, resume=True, **kw).fit(X).n_laps_ == 2


def _damage(folder: Path, how: str) -> None:
    """Damage an ESVI checkpoint folder (``checkpoint_dir/esvi``) in one way."""
    manifest = folder / "MANIFEST.json"
    rotation = folder / json.loads(manifest.read_text())["folder"]
    if how == "cut manifest":
        text = manifest.read_text()
        manifest.write_text(text[: len(text) // 2])
    elif how == "manifest without pi":
        doc = json.loads(manifest.read_text())
        del doc["pi"]
        manifest.write_text(json.dumps(doc))
    elif how == "manifest naming another folder":
        doc = json.loads(manifest.read_text())
        doc["folder"] = "../elsewhere"
        manifest.write_text(json.dumps(doc))
    elif how == "no partition":
        (folder / "partition.npz").unlink()
    elif how == "no shard":
        (rotation / "shard-1.npz").unlink()
    elif how == "cut block":
        data = (rotation / "block-0.npz").read_bytes()
        (rotation / "block-0.npz").write_bytes(data[: len(data) // 2])
    elif how == "shard without an array":
        with np.load(rotation / "shard-0.npz") as z:
            kept = {k: z[k] for k in z.files if k != "doc_topic"}
        np.savez(rotation / "shard-0.npz", **kept)
    else:
        raise AssertionError(how)


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("cut manifest", r"manifest .*MANIFEST\.json is unreadable \(JSONDecodeError"),
        ("manifest without pi", r"manifest in .*esvi lacks \['pi'\]"),
        ("manifest naming another folder", r"names rotation 2 in folder '\.\./elsewhere'"),
        ("no partition", r"file .*esvi/partition\.npz is missing"),
        ("no shard", r"file .*rotation-000002/shard-1\.npz is missing"),
        ("cut block", r"file .*rotation-000002/block-0\.npz is damaged \(BadZipFile"),
        ("shard without an array", r"file .*shard-0\.npz has no array 'doc_topic'"),
    ],
)
def test_damaged_checkpoint_is_a_clear_error(tmp_path, how, message):
    """Resuming from a damaged ESVI checkpoint raises a DataError naming the file,
    what is wrong and how to go on; never a bare traceback."""
    from lsdask import LDA
    from lsdask.errors import DataError

    X = corpus(8, 40)
    kw = {"algorithm": "esvi", "n_blocks": 2, "client": "sync", "tol": 0, "random_state": 3,
          "checkpoint_dir": str(tmp_path)}  # fmt: skip
    LDA(K, n_laps=2, **kw).fit(X)
    _damage(tmp_path / "esvi", how)
    with pytest.raises(DataError, match=message) as caught:
        LDA(K, n_laps=3, resume=True, **kw).fit(X)
    assert "start afresh" in str(caught.value) and "without resume" in str(caught.value)


@pytest.mark.parametrize("where", ["serial", "dask"])
def test_heldout_score_without_gathering(where, request):
    """Document completion from the heldout words' columns only (each block sends
    its own) equals the score of the gathered topics."""
    from lsdask.evaluate import document_completion, split_documents

    X = corpus(9, 60)
    m = model()
    if where == "dask":
        parts = DaskPartitions(request.getfixturevalue("dask_client"), 2)
    else:
        parts = SerialPartitions(2)
    _, run = started(X, m, parts)
    esvi.rotate(m, parts, run, 2)
    A, B = split_documents(corpus(10, 20), 0.8, 0)
    words = np.union1d(A.indices, B.indices)
    cols = esvi.topic_columns(m, parts, run, words)
    lam = gather_topics(parts.gather(run.blocks), V)
    topics = lam / lam.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(cols, topics[:, words], rtol=1e-13)
    remap = np.zeros(V, dtype=np.int64)
    remap[words] = np.arange(words.size)
    small = [sp.csr_matrix((h.data, remap[h.indices], h.indptr), (h.shape[0], words.size))
             for h in (A, B)]  # fmt: skip
    got = document_completion(*small, cols, m.alpha)
    np.testing.assert_allclose(got, document_completion(A, B, topics, m.alpha), rtol=1e-12)
    parts.release(run.blocks + run.shards)


@pytest.mark.parametrize("init", ["gibbs", "counts"])
def test_warm_start_from_topics(init):
    """Starting from topics: the first rotation's ELBO is that of the data's own
    statistics only (the start's counts gone: the topics total the tokens plus
    the prior), and the ELBO rises over the sub-steps after it."""
    from lsdask import LDA

    X = corpus(11, 60)
    start = "gibbs" if init == "gibbs" else np.random.default_rng(0).random((K, V)) * 5
    lda = LDA(K, algorithm="esvi", n_blocks=2, client="sync", n_laps=4, tol=0, init=start,
              gibbs_sweeps=20, random_state=0).fit(X)  # fmt: skip
    trace = lda.substep_elbo_trace_
    assert np.isnan(trace[:1]).all() and np.isfinite(trace[1:]).all()
    np.testing.assert_allclose(lda.components_.sum(), X.sum() + K * V * lda.eta_, rtol=1e-12)
    assert (np.diff(trace[1:]) >= -1e-9 * np.abs(trace[2:])).all()
    np.testing.assert_allclose(
        lda.model_.elbo(lda.stats_, lda.posterior_), lda.elbo_trace_[-1], rtol=1e-10
    )


@pytest.mark.parametrize(
    ("where", "resumed_from"), [("substep", 2), ("checkpoint", 1), ("gather", 4)]
)
def test_lost_worker_resumes_equal(where, resumed_from, tmp_path, monkeypatch, caplog):
    """A worker lost at a known point: inside a sub-step of the third rotation
    (its process exits in the task), while it writes the second rotation's
    checkpoint, or after the last rotation before fit returns. The fit
    goes on from the last complete rotation's checkpoint on the cluster's
    workers (the warning says from which) and ends equal to an uninterrupted
    run."""
    import logging
    import os
    import time

    from distributed import Client, LocalCluster

    from lsdask import LDA
    from lsdask.estimators import lda_esvi

    X = corpus(12, 300)
    kw = {"algorithm": "esvi", "n_blocks": 2, "tol": 0, "random_state": 4, "batch_size": 20}
    want = LDA(K, n_laps=4, client="sync", **kw).fit(X)
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

    class Dying(ESVILDA):
        def substep(self, shard, *args):
            if where == "substep":
                exit_at(shard.part, 2 * 2 + 2)  # rotation 3, sub-step 1
            return super().substep(shard, *args)

        def shard_state(self, shard):
            if where == "checkpoint":
                exit_at(shard.part, 2)  # the checkpoint of rotation 2
            return super().shard_state(shard)

    monkeypatch.setattr(lda_esvi, "ESVILDA", Dying)
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
        with caplog.at_level(logging.WARNING, logger="lsdask.estimators.lda_esvi"):
            got = LDA(K, n_laps=4, client=client, checkpoint_dir=str(tmp_path / "ck"), **kw)
            got.fit(X, callback=kill_before_gather)
            lam = got.components_  # the blocks stay on the workers: read before closing
    finally:
        client.close()
        cluster.close()
    assert marker.exists()
    resumed = [r.getMessage() for r in caplog.records if "resuming from rotation" in r.message]
    assert len(resumed) == 1 and resumed[0].endswith(f"resuming from rotation {resumed_from}")
    np.testing.assert_array_equal(got.substep_elbo_trace_, want.substep_elbo_trace_)
    np.testing.assert_array_equal(got.elbo_trace_, want.elbo_trace_)
    np.testing.assert_array_equal(lam, want.components_)


def test_cli_fit_esvi(tmp_path):
    """``lsdask fit --algorithm esvi --blocks 2`` with a checkpoint, then resumed."""
    from lsdask.cli import main
    from lsdask.io.corpus import Corpus

    X = corpus(13, 40)
    Corpus.write(tmp_path / "c", X, [f"w{i}" for i in range(V)], docs_per_row_group=10)
    argv = [str(tmp_path / "c"), "--topics", str(K), "--algorithm", "esvi", "--blocks", "2",
            "--topk", "3", "--sync", "--seed", "1"]  # fmt: skip
    ck = tmp_path / "ck"
    assert main(["fit", *argv, "--laps", "2", "--checkpoint", str(ck),
                 "--out", str(tmp_path / "m1")]) == 0  # fmt: skip
    assert (ck / "esvi" / "MANIFEST.json").exists()
    assert main(["fit", *argv, "--laps", "3", "--resume", str(ck),
                 "--out", str(tmp_path / "m2")]) == 0  # fmt: skip
    manifest = json.loads((ck / "esvi" / "MANIFEST.json").read_text())
    assert manifest["rotation"] == 3  # rotations in all: one more after the first two


@pytest.mark.parametrize(("C", "paper"), [(4, False), (2, False), (2, True)])
def test_kernel_underflowing_weights_are_redone_in_log_space(C, paper):
    """Priors of 1e-3: the document's factor of topic 0 (no counts) and the word's
    factor of topic 1 (no counts) underflow to 0, so every product does; the
    entry's new responsibilities still equal the softmax of
    u_k = psi(alpha + n_dk) + psi(lambda_vk) - psi(pi_k), split between 0 and 1."""
    from lsdask.kernels.esvi import block_word_exps, esvi_block_update

    Kk, c = 4, 1e-6
    alpha = np.full(Kk, 1e-3)
    lam = np.array([[50.0, 1e-3, 1e-3 + c, 1e-3]])  # the entry's old mass on topic 2
    pi = np.full(Kk, 100.0)
    others = np.array([0.0, 20.0, 0.0, 0.0])  # the document's counts from other entries
    resp = np.zeros((1, C))
    resp[0, 0] = 1.0
    idx = np.array([[2, 0, 1, 3][:C]], dtype=np.int32)
    doc_topic = (others + np.array([0.0, 0.0, c, 0.0]))[None, :]
    u = digamma(alpha + doc_topic[0]) + digamma(lam[0]) - digamma(pi)
    word_exps = np.empty((1, Kk))
    block_word_exps(lam, np.array([0], dtype=np.int32), word_exps)
    assert word_exps[0, 1] == 0.0
    new_resp, new_idx, new_rest = np.empty_like(resp), np.empty_like(idx), np.zeros(1)
    esvi_block_update(
        np.array([0, 1]), np.array([0], dtype=np.int32), np.array([c]), resp, idx, np.zeros(1),
        np.array([0]), word_exps, doc_topic, alpha, lam, digamma(pi), paper, 1, 0.0,
        new_resp, new_idx, new_rest,
    )  # fmt: skip
    soft = np.exp(u - u.max()) / np.exp(u - u.max()).sum()
    assert 0.6 < soft[0] < 0.8 and 0.2 < soft[1] < 0.4  # a real split
    got = np.zeros(Kk)
    got[new_idx[0]] = new_resp[0]
    want = soft.copy()
    if C < Kk:
        want[2:] = 0.0
        want = want if paper else want / want.sum()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)
    spread = np.where(got == 0, new_rest[0] / (Kk - C), 0.0) if C < Kk else 0.0
    np.testing.assert_allclose(doc_topic[0], others + c * (got + spread), rtol=1e-12)
    np.testing.assert_allclose(lam[0], [50.0, 1e-3, 1e-3, 1e-3] + c * (got + spread), rtol=1e-12)


def test_parts_without_documents_are_named_in_a_warning(caplog):
    """One batch of documents on two parts: the fit runs, and a warning says one
    part holds no documents and how to give it some."""
    import logging

    from lsdask import LDA

    X = corpus(8, 40)
    with caplog.at_level(logging.WARNING, logger="lsdask.learn.esvi"):
        LDA(K, algorithm="esvi", n_blocks=2, client="sync", n_laps=1, random_state=3).fit(X)
    assert "1 of the 2 parts got no batch of documents (the data has 1 batches)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lsdask.learn.esvi"):
        LDA(K, algorithm="esvi", n_blocks=2, client="sync", n_laps=1, random_state=3,
            batch_size=20).fit(X)  # fmt: skip
    assert "got no batch" not in caplog.text


def test_warm_start_is_memoized_vis_start(monkeypatch):
    """For the same ``random_state`` ESVI starts from exactly memoized VI's start
    (the Gibbs sample and its sweeps draw from a generator of their own), so the
    two algorithms are compared from one start, not from two of a seed's luck."""
    from lsdask import LDA

    starts = []
    real = LDA._initial_stats

    def spy(self, *args, **kwargs):
        stats = real(self, *args, **kwargs)
        starts.append(np.array(stats.array("words"), dtype=np.float64))
        return stats

    monkeypatch.setattr(LDA, "_initial_stats", spy)
    X = corpus(11, 60)
    common = {"client": "sync", "init": "gibbs", "gibbs_sweeps": 10, "random_state": 5}
    LDA(K, algorithm="esvi", n_blocks=2, n_laps=1, tol=0, **common).fit(X)
    LDA(K, algorithm="memo", n_laps=1, **common).fit(X)
    LDA(K, algorithm="esvi", n_blocks=2, n_laps=1, tol=0, **{**common, "random_state": 6}).fit(X)
    assert len(starts) == 3
    np.testing.assert_array_equal(starts[0], starts[1])
    assert not np.array_equal(starts[0], starts[2])


def test_topk_defaults_to_the_sparsity():
    """Without ``topk`` an entry keeps the local step's sparsity L topics, as memoized
    VI does (all K with ``sparsity=None``): the fit equals one given ``topk=L``."""
    from lsdask import LDA
    from lsdask.estimators.lda_esvi import check_esvi_settings

    assert check_esvi_settings(LDA(20, algorithm="esvi", sparsity=4), V)[1] == 4
    assert check_esvi_settings(LDA(20, algorithm="esvi", sparsity=None), V)[1] == 20
    assert check_esvi_settings(LDA(3, algorithm="esvi", sparsity=8), V)[1] == 3
    assert check_esvi_settings(LDA(20, algorithm="esvi", sparsity=4, topk=20), V)[1] == 20
    X = corpus(11, 60)
    common = {"algorithm": "esvi", "n_blocks": 2, "client": "sync", "n_laps": 3, "tol": 0,
              "random_state": 0}  # fmt: skip
    by_default = LDA(12, sparsity=3, **common).fit(X)
    given = LDA(12, sparsity=3, topk=3, **common).fit(X)
    dense = LDA(12, sparsity=3, topk=12, **common).fit(X)
    np.testing.assert_array_equal(by_default.components_, given.components_)
    assert not np.allclose(by_default.components_, dense.components_)
