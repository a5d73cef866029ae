"""ESVI's nomadic schedule (``schedule="nomadic"``): the pure routing meets every
(shard, block) pair exactly once per rotation under any order of completions and
never gives a part two blocks; in this process the run is deterministic and
equals a plain numpy replay of its meetings against round-robin totals; on a
2-process LocalCluster every pair meets once per rotation and every worker holds
one block (two only while a swap's blocks cross); checkpoints and resume."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
from scipy.special import digamma, gammaln

from lsdask import LDA
from lsdask.engine.partitions import DaskPartitions, SerialPartitions
from lsdask.learn import esvi, esvi_nomadic
from lsdask.models.esvi_lda import gather_topics
from lsdask.persist import load_model, save_model
from lsdask.persist.esvi_store import ESVIStore
from tests.test_esvi_lda import K, V, _what, corpus, dense_phi, model, shard_docs, started

KW = {"algorithm": "esvi", "tol": 0, "random_state": 3, "client": "sync", "batch_size": 10,
      "pi_sync": "stale", "schedule": "nomadic"}  # fmt: skip


# ---- the routing, without Dask


def simulate(P: int, seed: int) -> tuple[Counter, int]:
    """One rotation driven by :func:`route` with tasks ending in a random order
    (a swap's two moves separately): the meetings counted per pair, and the
    number of routing rounds. Asserts after every step that every block is held
    by exactly one part, and that a part is given a block only while idle."""
    rng, order = np.random.default_rng((seed, 0)), np.random.default_rng((seed, 1))
    held = list(order.permutation(P))
    met = np.zeros((P, P), dtype=bool)
    idle = set(range(P))
    pending: list[tuple] = []
    counts: Counter = Counter()
    rounds = 0
    just_met = list(range(P)) if seed % 2 else []  # a later rotation: blocks just met
    while True:
        routing = esvi_nomadic.route(held, sorted(idle), met, rng, just_met)
        if just_met:  # every block passed on, but for a part left without a partner
            assert len(routing.meets) == P % 2 and len(routing.swaps) == P // 2
        just_met = []
        rounds += 1
        busy = set(routing.meets) | {p for s in routing.swaps for p in s}
        assert busy <= idle and len(busy) == len(routing.meets) + 2 * len(routing.swaps)
        for p in routing.meets:
            assert not met[p, held[p]]
            met[p, held[p]] = True
            counts[p, held[p]] += 1
            pending.append(("meet", p))
        for p, q in routing.swaps:
            assert not met[p, held[q]] or not met[q, held[p]]  # someone gains
            pending += [("move", p, q), ("move", q, p)]
        idle -= busy
        if not pending:
            break
        task = pending.pop(int(order.integers(len(pending))))
        if task[0] == "meet":
            idle.add(task[1])
        elif not any(t[0] == "move" and t[1] == task[2] for t in pending):
            p, q = task[1], task[2]
            held[p], held[q] = held[q], held[p]
            idle |= {p, q}
        assert sorted(held) == list(range(P))
    assert met.all() and not pending
    return counts, rounds


@pytest.mark.parametrize("P", [1, 2, 3, 4, 6])
def test_route_meets_every_pair_exactly_once(P):
    """Under 30 random orders of completion, one rotation meets every (part,
    block) pair exactly once and ends (no stall); routing is a pure function of
    its seeded draw."""
    for seed in range(30):
        counts, _ = simulate(P, seed)
        assert counts == Counter({(p, b): 1 for p in range(P) for b in range(P)})
    held, met = [2, 0, 1, 3], np.eye(4, dtype=bool)[[2, 0, 1, 3]]
    a = esvi_nomadic.route(held, [0, 1, 2, 3], met, np.random.default_rng(5))
    b = esvi_nomadic.route(held, [0, 1, 2, 3], met, np.random.default_rng(5))
    assert a == b and not a.meets and len(a.swaps) == 2


def test_route_meets_in_place_then_prefers_swaps_where_both_gain():
    held = [0, 1, 2]
    met = np.zeros((3, 3), dtype=bool)
    assert esvi_nomadic.route(held, [0, 2], met, np.random.default_rng(0)).meets == [0, 2]
    # 0 has met blocks 0 and 1; 1 has met 1; 2 has met 2: only 1 and 2 both gain
    met[0, [0, 1]] = met[1, 1] = met[2, 2] = True
    # (0, 1): only 1 gains; (0, 2) and (1, 2): both gain. Whoever is drawn first
    # takes a partner with whom both gain; the third is left
    seen = set()
    for seed in range(20):
        r = esvi_nomadic.route(held, [0, 1, 2], met, np.random.default_rng(seed))
        assert not r.meets and len(r.swaps) == 1
        seen.add(frozenset(r.swaps[0]))
    assert seen == {frozenset({0, 2}), frozenset({1, 2})}
    # 1 is busy: 0 and 2 both gain
    assert esvi_nomadic.route(held, [0, 2], met, np.random.default_rng(0)).swaps in (
        [(0, 2)],
        [(2, 0)],
    )
    # only one side gains: still a swap (0 takes nothing new, 1 takes block 0)
    assert esvi_nomadic.route(held, [0, 1], met, np.random.default_rng(0)).swaps in (
        [(0, 1)],
        [(1, 0)],
    )
    # a rotation's start, every part holding the block it met last: pass them on
    start = np.zeros((3, 3), dtype=bool)
    r = esvi_nomadic.route(held, [0, 1, 2], start, np.random.default_rng(1), just_met=[0, 1, 2])
    assert len(r.swaps) == 1 and r.meets == sorted({0, 1, 2} - set(r.swaps[0]))
    # nobody gains: no swap
    met[:] = True
    assert esvi_nomadic.route(held, [0, 1, 2], met, np.random.default_rng(0)).swaps == []


# ---- in this process: deterministic, equal to a numpy replay


class LoggedParts(SerialPartitions):
    """In-process parts that log every meeting as it starts, with its view of pi,
    into ``events`` (where the test logs the meetings' ends too)."""

    def __init__(self, n_parts: int, events: list) -> None:
        super().__init__(n_parts)
        self.events = events

    def submit(self, part, fn, args, shared, n_out):
        if n_out == 3:
            self.events.append(("start", part, args[1].index, np.array(args[2])))
        return super().submit(part, fn, args, shared, n_out)


def numpy_replay(docs, phis, block_of, P, alpha, eta, events):
    """The nomadic run replayed with plain numpy from its log of meetings'
    starts and ends: at its start, a meeting (p, b) updates shard p's entries in
    block b's words against part p's view of the totals; at its end, its change
    of the totals goes into p's view and the token visits the next part (the
    round-robin protocol). Returns the views read, the final lambda and ELBO."""

    def topics():
        lam = np.full((K, V), eta)
        for p in range(P):
            for (d, v), f in phis[p].items():
                lam[:, v] += docs[p][d, v] * f
        return lam

    def counts(p):
        n = np.zeros((docs[p].shape[0], K))
        for (d, v), f in phis[p].items():
            n[d] += docs[p][d, v] * f
        return n

    pi0 = topics().sum(axis=1)
    views, unsent, token, holder = [pi0.copy() for _ in range(P)], [np.zeros(K)] * P, pi0, 0
    read: list[np.ndarray] = []
    running: dict[tuple[int, int], np.ndarray] = {}
    for kind, p, b, *_ in events:
        if kind == "start":
            read.append(views[p].copy())
            lam, n = topics(), counts(p)
            change = np.zeros(K)
            for d, v in list(phis[p]):
                if block_of[v] != b:
                    continue
                u = digamma(alpha + n[d]) + digamma(lam[:, v]) - digamma(read[-1])
                e = np.exp(u - u.max())
                change += docs[p][d, v] * (e / e.sum() - phis[p][d, v])
                phis[p][d, v] = e / e.sum()
            running[p, b] = change
        else:
            change = running.pop((p, b))
            views[p] = views[p] + change
            unsent[p] = unsent[p] + change
            token = token + unsent[holder]
            unsent[holder] = np.zeros(K)
            views[holder] = token.copy()
            holder = (holder + 1) % P
    lam = topics()
    logB = lambda a: gammaln(a).sum(-1) - gammaln(a.sum(-1))  # noqa: E731
    elbo = (logB(lam) - logB(np.full(V, eta))).sum()
    for p in range(P):
        elbo += (logB(alpha + counts(p)) - logB(alpha)).sum()
        for (d, v), f in phis[p].items():
            nz = f[f > 0]
            elbo -= docs[p][d, v] * (nz * np.log(nz)).sum()
    return read, lam, elbo


def test_in_process_run_equals_numpy_replay_and_is_deterministic():
    """P = 3, C = K, two rotations: every pair met once per rotation; every
    meeting read the view the round-robin protocol gives (replayed in numpy on
    the run's log of starts and ends), and the final topics and the last
    rotation's ELBO equal the numpy replay of the same meetings (1e-10); a
    second run is identical."""
    P = 3
    X = corpus(3, 60)
    m = model()

    def one_run():
        events: list = []
        parts = LoggedParts(P, events)
        source, run = started(X, m, parts)
        run.stale = esvi.StaleTotals.start(run.pi, P)
        docs = shard_docs(X, source, P)
        phis = [dense_phi(run.shards[p], run.partition, docs[p]) for p in range(P)]

        def ended(_, e):
            if e.kind == "meet":
                events.append(("end", e.parts[0], e.blocks[0]))

        esvi_nomadic.rotate(m, parts, run, 2, seed=11, on_event=ended)
        return events, run, docs, phis

    events, run, docs, phis = one_run()
    starts = [(p, b) for kind, p, b, *_ in events if kind == "start"]
    assert len(starts) == 2 * P * P
    for r in range(2):
        assert Counter(starts[r * P * P : (r + 1) * P * P]) == Counter(
            {(p, b): 1 for p in range(P) for b in range(P)}
        )
    assert [e[:3] for e in events if e[0] == "end"] == [("end", p, b) for p, b in starts]
    assert any(e[0] == "start" for e in events[events.index(("end", *starts[0])) :][:4])
    read, lam, elbo = numpy_replay(docs, phis, run.partition.block_of, P, m.alpha, m.eta, events)
    views = [e[3] for e in events if e[0] == "start"]
    for view, want in zip(views, read, strict=True):
        np.testing.assert_allclose(view, want, rtol=1e-10)
    np.testing.assert_allclose(gather_topics(run.blocks, V), lam, rtol=1e-10)
    np.testing.assert_allclose(run.elbo_trace[-1], elbo, rtol=1e-10)
    assert any(not np.allclose(v, views[0]) for v in views[P:])  # the views do move
    again = one_run()[1]
    np.testing.assert_array_equal(again.elbo_trace, run.elbo_trace)
    np.testing.assert_array_equal(gather_topics(again.blocks, V), gather_topics(run.blocks, V))


class ShuffledParts(SerialPartitions):
    """In-process parts whose tasks end in a seeded random order, as on a cluster."""

    def __init__(self, n_parts: int, seed: int) -> None:
        super().__init__(n_parts)
        self.rng = np.random.default_rng(seed)

    def first_done(self, handles):
        return [int(self.rng.integers(len(handles)))]


def in_process_reference(P: int, n_rotations: int) -> tuple[Any, Any, esvi.ESVIRun]:
    """The corpus, the model and an in-process nomadic run of ``n_rotations`` (seed 5)
    that the runs in other orders or on a cluster are held against."""
    X = corpus(4, 96)
    m = model(3)
    serial = SerialPartitions(P)
    _, want = started(X, m, serial)
    want.stale = esvi.StaleTotals.start(want.pi, P)
    esvi_nomadic.rotate(m, serial, want, n_rotations, seed=5)
    return X, m, want


def test_any_order_of_completion_meets_every_pair_once_and_ends_close():
    """P = 3, tasks ending in random orders: every pair meets once per rotation,
    the totals are the blocks' column sums, and the ELBO per rotation stays
    within 5e-3 of the in-process order's (which changes of the totals a view
    has seen depends on the order)."""
    P = 3
    X, m, want = in_process_reference(P, 3)
    pairs = Counter({(p, b): 1 for p in range(P) for b in range(P)})
    differs = False
    for seed in range(4):
        met: list[Counter] = []

        def count(_, e, met=met):
            if e.kind == "meet":
                if not met or sum(met[-1].values()) == P * P:
                    met.append(Counter())
                met[-1][e.parts[0], e.blocks[0]] += 1

        parts = ShuffledParts(P, seed)
        _, run = started(X, m, parts)
        run.stale = esvi.StaleTotals.start(run.pi, P)
        esvi_nomadic.rotate(m, parts, run, 3, seed=5, on_event=count)
        assert met == [pairs] * 3
        np.testing.assert_allclose(run.pi, gather_topics(run.blocks, V).sum(axis=1), rtol=1e-12)
        np.testing.assert_allclose(run.elbo_trace, want.elbo_trace, rtol=5e-3)
        differs |= not np.array_equal(run.elbo_trace, want.elbo_trace)
    assert differs


def test_one_part_nomadic_is_the_rotation_schedule():
    """P = 1: one meeting per rotation against the true totals, as exact rotation."""
    X = corpus(5, 40)
    kw = {**KW, "n_blocks": 1, "n_laps": 3}
    nomadic = LDA(K, **kw).fit(X)
    rotation = LDA(K, **{**kw, "pi_sync": "exact", "schedule": "rotation"}).fit(X)
    np.testing.assert_array_equal(nomadic.elbo_trace_, rotation.elbo_trace_)
    np.testing.assert_array_equal(nomadic.components_, rotation.components_)


def test_estimator_nomadic_fit_and_bad_input():
    """A nomadic fit: one ELBO per rotation, equal to LDAModel's ELBO of the gathered
    topics; nomadic with exact totals and an unknown schedule are clear errors."""
    X = corpus(6, 60)
    lda = LDA(K, n_blocks=3, n_laps=3, **KW).fit(X)
    assert lda.elbo_trace_.shape == (3,) and lda.substep_elbo_trace_.shape == (3,)
    np.testing.assert_allclose(
        lda.model_.elbo(lda.stats_, lda.posterior_), lda.elbo_trace_[-1], rtol=1e-10
    )
    assert lda.elbo_trace_[-1] > lda.elbo_trace_[0]
    with pytest.raises(ValueError, match=r"schedule='nomadic' with pi_sync='exact' is refused"):
        LDA(K, n_blocks=2, **{**KW, "pi_sync": "exact"}).fit(X)
    with pytest.raises(ValueError, match="schedule must be one of"):
        LDA(K, n_blocks=2, **{**KW, "schedule": "async"}).fit(X)


def test_warm_start_nomadic():
    """From topics: the start's counts leave the blocks after the first rotation."""
    X = corpus(11, 60)
    start = np.random.default_rng(0).random((K, V)) * 5
    lda = LDA(K, n_blocks=3, n_laps=3, init=start, **KW).fit(X)
    assert np.isfinite(lda.elbo_trace_).all()
    np.testing.assert_allclose(lda.components_.sum(), X.sum() + K * V * lda.eta_, rtol=1e-12)
    np.testing.assert_allclose(
        lda.model_.elbo(lda.stats_, lda.posterior_), lda.elbo_trace_[-1], rtol=1e-10
    )


def test_in_process_resume_equals_uninterrupted(tmp_path):
    """In this process a nomadic run is deterministic and rotation r routes with
    the draw of (seed, r): a resumed run equals an uninterrupted one bit for bit,
    and a rotation-schedule checkpoint is not resumed as nomadic."""
    X = corpus(7, 60)
    kw = {**KW, "n_blocks": 3}
    want = LDA(K, n_laps=4, **kw).fit(X)
    ck = str(tmp_path / "ck")
    LDA(K, n_laps=2, checkpoint_dir=ck, **kw).fit(X)
    got = LDA(K, n_laps=4, checkpoint_dir=ck, resume=True, **kw).fit(X)
    np.testing.assert_array_equal(got.elbo_trace_, want.elbo_trace_)
    np.testing.assert_array_equal(got.components_, want.components_)
    other = str(tmp_path / "rot")
    LDA(K, n_laps=1, checkpoint_dir=other, **{**kw, "schedule": "rotation"}).fit(X)
    with pytest.raises(ValueError, match="was written with"):
        LDA(K, n_laps=2, checkpoint_dir=other, resume=True, **kw).fit(X)


# ---- on a 2-process LocalCluster


@pytest.fixture(scope="module")
def three_workers():
    """A 3-process LocalCluster: with P = 3, swaps happen while a part computes."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=3, threads_per_worker=1, processes=True, dashboard_address=":0"
    )
    client = Client(cluster)
    yield client
    client.close()
    cluster.close()


def test_dask_nomadic_pairs_blocks_and_resume(three_workers, tmp_path):
    """3-process LocalCluster, P = 3: every pair meets once per rotation; after
    every meeting and swap each worker holds its own shard and the one block
    the driver says it holds (a worker whose swap is under way: its old and its
    new block, no other); the ELBO per rotation is close to the in-process
    run's (the order in which meetings end differs, so not equal). A checkpoint
    after rotation 1, the driver gone, a resumed run: it completes rotation 2,
    meets every pair once in it, and ends close to the uninterrupted in-process
    run."""
    P = 3
    X, m, want = in_process_reference(P, 2)

    parts = DaskPartitions(three_workers, P)
    met: list[Counter] = []

    def inspect(run, event):
        if event.kind == "meet":
            if not met or sum(met[-1].values()) == P * P:
                met.append(Counter())
            met[-1][event.parts[0], event.blocks[0]] += 1
        held = parts.holdings(_what)
        for p, worker in enumerate(parts.workers):
            blocks = {h[1] for h in held[worker] if h[0] == "block"}
            shards = [h[1] for h in held[worker] if h[0] == "shard"]
            assert shards == [p], held
            if p in event.crossing:  # its old block, or its partner's, or both
                q = event.crossing[p]
                assert blocks and blocks <= {event.held[p], event.held[q]}, held
            else:
                assert blocks == {event.held[p]}, held

    store = ESVIStore(str(tmp_path / "ck"))
    _, run = started(X, m, parts)
    run.stale = esvi.StaleTotals.start(run.pi, P)
    esvi_nomadic.rotate(m, parts, run, 1, seed=5, on_event=inspect)
    esvi.checkpoint(m, parts, run, store, {"schedule": "nomadic"})
    esvi_nomadic.rotate(m, parts, run, 1, seed=5, on_event=inspect)
    pairs = Counter({(p, b): 1 for p in range(P) for b in range(P)})
    assert met == [pairs] * 2
    # the order of completion moves the ELBO (see the test of random orders above)
    np.testing.assert_allclose(run.elbo_trace, want.elbo_trace, rtol=5e-3)
    parts.release(run.blocks + run.shards)

    met.clear()
    again = esvi.resume(m, parts, store, {"schedule": "nomadic"})
    assert again is not None and len(again.elbo_trace) == 1 and again.stale is not None
    esvi_nomadic.rotate(m, parts, again, 1, seed=5, on_event=inspect)
    assert met == [pairs] and len(again.elbo_trace) == 2
    np.testing.assert_allclose(again.elbo_trace, want.elbo_trace, rtol=5e-3)
    got = gather_topics(parts.gather(again.blocks), V)
    np.testing.assert_allclose(got.sum(), X.sum() + K * V * m.eta, rtol=1e-12)
    parts.release(again.blocks + again.shards)


def test_dask_estimator_nomadic_reads_blocks_where_they_lie(dask_client, tmp_path):
    """A nomadic fit on the cluster leaves its blocks where the routing put them:
    the topic columns and E[log phi] rows that scoring and transform read from
    the blocks equal the gathered model's, and the model saved block by block
    loads back exactly."""
    X = corpus(8, 64)
    lda = LDA(K, n_blocks=2, n_laps=2, **{**KW, "client": dask_client}).fit(X)
    fitted = lda._esvi_fitted
    words = np.arange(V, dtype=np.int64)
    columns, rows = fitted.columns(words), fitted.log_rows(words)
    save_model(lda, tmp_path / "m")
    lam = lda.components_  # gathered now
    pi = lam.sum(axis=1)
    np.testing.assert_allclose(columns, lam / pi[:, None], rtol=1e-10)
    np.testing.assert_allclose(rows, (digamma(lam) - digamma(pi)[:, None]).T, rtol=1e-10)
    np.testing.assert_array_equal(load_model(tmp_path / "m").components_, lam)


def test_cli_fit_nomadic(tmp_path, capsys):
    """``lsdask fit --algorithm esvi --schedule nomadic --pi-sync stale`` fits and
    saves; without ``--pi-sync stale`` the command stops with the reason."""
    from lsdask.cli import main
    from lsdask.io.corpus import Corpus

    X = corpus(13, 40)
    Corpus.write(tmp_path / "c", X, [f"w{i}" for i in range(V)], docs_per_row_group=10)
    argv = ["fit", str(tmp_path / "c"), "--topics", str(K), "--algorithm", "esvi", "--blocks",
            "2", "--sync", "--seed", "1", "--laps", "2", "--schedule", "nomadic"]  # fmt: skip
    assert main([*argv, "--pi-sync", "stale", "--out", str(tmp_path / "m")]) == 0
    assert load_model(tmp_path / "m").elbo_trace_.shape == (2,)
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "m2")]) != 0
    assert "schedule='nomadic' with pi_sync='exact' is refused" in capsys.readouterr().err
