"""SVI-Gibbs's one round trip a step: the tasks' replicas of the topics equal the
driver's, a process without one starts from the base, and the minibatch started
early is sampled once (and again only when new documents changed it)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import scipy.sparse as sp

from lsdask.engine import SerialExecutor
from lsdask.io.corpus import Corpus
from lsdask.io.doc_stream import DocumentStream
from lsdask.learn import svi_gibbs
from lsdask.learn.svi_gibbs import (
    SviGibbs,
    TopicsSource,
    Update,
    apply_update,
    prunes_at,
    replica_view,
)
from lsdask.models.sparse_topics import SparseTopics, TopicWordCounts

V, K = 40, 4


def _docs(rng, n):
    X = sp.csr_matrix(rng.poisson(0.5, size=(n, V)).astype(float))
    X.data = np.maximum(X.data, 1.0)
    return X


def _learner(n_epochs=2, **kw):
    return SviGibbs(
        n_topics=K, alpha=np.full(K, 0.25), eta=0.3, burnin=1, samples=2, minibatch_size=17,
        delay=5.0, kappa=0.7, n_epochs=n_epochs, **kw,
    )  # fmt: skip


def _same_topics(a: SparseTopics, b: SparseTopics) -> None:
    """Bit for bit: the stored entries, the totals and the scale."""
    np.testing.assert_array_equal(a.scaled.indptr, b.scaled.indptr)
    np.testing.assert_array_equal(a.scaled.indices, b.scaled.indices)
    np.testing.assert_array_equal(a.scaled.data, b.scaled.data)
    np.testing.assert_array_equal(a.scaled_totals, b.scaled_totals)
    assert a.pi == b.pi and a.n_resets == b.n_resets
    assert (a.prior is None) == (b.prior is None)  # a learned prior, bit for bit too
    if a.prior is not None and b.prior is not None:
        for name in ("alpha", "keys", "mult", "lengths", "n_docs_of_length"):
            np.testing.assert_array_equal(getattr(a.prior, name), getattr(b.prior, name))


class CountingExecutor(SerialExecutor):
    """The in-process executor, counting the waves started."""

    def __init__(self) -> None:
        self.started = 0

    def start_parts(self, fn, handles, shared):
        self.started += 1
        return super().start_parts(fn, handles, shared)


@pytest.mark.parametrize("learn_alpha", [False, True])
def test_the_replica_equals_the_drivers_topics_at_every_step(learn_alpha):
    """Over 4 epochs with a broadcast of the topics every 3 steps, the running
    scale folded back every few steps and decayed entries pruned every 4 steps, the
    tasks' replica is the driver's topics (and learned prior)."""
    X = _docs(np.random.default_rng(0), 120)
    learner = _learner(
        n_epochs=4, rebase_every=3, reset_below=0.3, prune=20.0, prune_every_docs=4 * 17,
        learn_alpha=learn_alpha,
    )  # fmt: skip
    stream = DocumentStream(X)
    state = learner.start(stream, seed=3)
    svi_gibbs._REPLICAS.clear()
    checked = []

    def compare(s):
        # in this process the next minibatch (started early) already brought the
        # replica to this step; after an epoch's last step it is one step behind
        ((at, replica),) = svi_gibbs._REPLICAS.values()
        if at == s.step:
            _same_topics(replica, s.topics)
            checked.append(s.step)

    executor = CountingExecutor()
    state = learner.run(stream, executor, state, on_minibatch=compare)
    assert state.topics.n_resets >= 3  # resets were replayed too
    assert state.step == 4 * 8 and len(checked) == 4 * 7
    assert executor.started == state.step  # every minibatch started early was used
    unpruned = _learner(n_epochs=4, rebase_every=3, reset_below=0.3, prune=0.0)
    kept = unpruned.run(stream, SerialExecutor(), unpruned.start(stream, seed=3)).topics
    assert state.topics.n_stored < kept.n_stored  # pruning was replayed too
    if learn_alpha:  # the prior moved, and the replicas sampled against it
        assert state.topics.prior is not None
        assert np.abs(state.topics.prior.alpha - 0.25).max() > 0.01


def test_each_minibatch_is_sampled_once_unless_new_documents_change_it(tmp_path):
    rng = np.random.default_rng(5)
    path = tmp_path / "c"
    Corpus.write(path, _docs(rng, 100), [f"w{i}" for i in range(V)], docs_per_row_group=30)
    learner = _learner(n_epochs=2)
    stream = DocumentStream(str(path))
    executor = CountingExecutor()
    state = learner.run(stream, executor, learner.start(stream, seed=1))
    assert executor.started == state.step  # the early starts were all used

    def append_after_step_2(s):
        if s.step == 2:
            Corpus.open(path).append(_docs(rng, 25))

    stream = DocumentStream(str(path))
    executor = CountingExecutor()
    state = learner.run(
        stream, executor, learner.start(stream, seed=1), on_minibatch=append_after_step_2
    )
    # step 3, started early, was started again with the new documents shuffled in
    assert executor.started == state.step + 1


def test_a_process_without_a_replica_starts_from_the_base():
    rng = np.random.default_rng(1)
    base = SparseTopics.at_prior(K, V, 0.3)
    topics = copy.deepcopy(base)
    updates = []
    for t in range(1, 6):
        words = rng.integers(0, V, 50)
        counts = TopicWordCounts.from_draws(K, words, rng.integers(0, K, 50))
        # step 4 drops the entries that decayed below 0.5 (the first step's)
        update = Update(t, (5.0 + t) ** -0.7, 3.5, 0.5 if t == 4 else 0.0)
        stored = topics.n_stored
        apply_update(topics, counts, update, reset_below=1e-100)
        if t == 4:
            assert topics.n_stored < stored + 50
        updates.append((update, svi_gibbs.PartCounts(counts, np.zeros(0, np.int64))))
    alpha = np.full(K, 0.25)
    words = np.array([0, 3, 7, 21, 39])
    want = topics.view(words, alpha, 6, "mean")

    def same(view):
        for name in ("word_ids", "w_indptr", "w_topics", "w_excess", "smooth", "cum_smooth"):
            np.testing.assert_array_equal(getattr(view, name), getattr(want, name))

    svi_gibbs._REPLICAS.clear()
    source = TopicsSource("fresh", 0, 1e-100)
    same(replica_view(source, base, tuple(updates), words, alpha, 6, "mean"))  # from the base
    # the base itself is left as it was (a task's input is never changed)
    assert base.n_stored == 0 and base.pi == 1.0
    # a process whose replica is at step 2 applies steps 3-5 only
    svi_gibbs._REPLICAS.clear()
    replica_view(source, base, tuple(updates[:2]), words, alpha, 3, "mean")
    assert svi_gibbs._REPLICAS["fresh"][0] == 2
    same(replica_view(source, base, tuple(updates), words, alpha, 6, "mean"))
    # a replica older than a newer base is dropped for the base
    at3 = copy.deepcopy(base)
    for update, summed in updates[:3]:
        apply_update(at3, summed.counts, update, 1e-100)
    svi_gibbs._REPLICAS.clear()
    replica_view(source, base, tuple(updates[:1]), words, alpha, 2, "mean")
    newer = TopicsSource("fresh", 3, 1e-100)
    same(replica_view(newer, at3, tuple(updates[3:]), words, alpha, 6, "mean"))
    assert svi_gibbs._REPLICAS["fresh"][0] == 5


@pytest.mark.parametrize("learn_alpha", [False, True])
def test_workers_that_lose_their_replicas_give_the_same_topics(tmp_path, dask_client, learn_alpha):
    """On a 2-process LocalCluster, with every worker's replica dropped after some
    steps (as for a worker that joined late), the topics (and the learned prior)
    are the in-process run's."""
    from lsdask.engine import DaskExecutor

    path = tmp_path / "c"
    X = _docs(np.random.default_rng(4), 90)
    Corpus.write(path, X, [f"w{i}" for i in range(V)], docs_per_row_group=30)
    learner = _learner(n_epochs=2, rebase_every=4, learn_alpha=learn_alpha)

    def drop_replicas():
        from lsdask.learn import svi_gibbs as here

        here._REPLICAS.clear()

    def forget(s):
        if s.step in (3, 7):
            dask_client.run(drop_replicas)

    stream = DocumentStream(str(path))
    there = learner.run(
        stream, DaskExecutor(dask_client), learner.start(stream, seed=2), on_minibatch=forget
    )
    stream = DocumentStream(str(path))
    here = learner.run(stream, SerialExecutor(), learner.start(stream, seed=2))
    assert there.step == here.step == 2 * 6
    _same_topics(there.topics, here.topics)


def test_the_schedulers_task_count_stays_flat(dask_client):
    """A fetched sum's handle, passed on to later steps, no longer holds the inputs
    of the step that made it, so the scheduler keeps few tasks however many
    steps run (holding them kept 65 here)."""
    from lsdask.engine import DaskExecutor

    X = _docs(np.random.default_rng(6), 200)
    learner = _learner(n_epochs=3, rebase_every=4)
    learner.minibatch_size = 10
    stream = DocumentStream(X)
    held = {}

    def count(s):
        if s.step % 20 == 0:
            held[s.step] = dask_client.run_on_scheduler(
                lambda dask_scheduler: len(dask_scheduler.tasks)
            )

    learner.run(stream, DaskExecutor(dask_client), learner.start(stream, 0), on_minibatch=count)
    assert sorted(held) == [20, 40, 60]
    assert max(held.values()) <= 25, held  # 11 here


def _eager_matrix(counts: TopicWordCounts, vocab_size: int) -> sp.csr_matrix:
    """The summed counts' matrix as it was built before parts travelled unsummed."""
    k = counts.n_topics
    return sp.csr_matrix(
        (counts.counts.astype(np.float64), (counts.keys // k, counts.keys % k)),
        shape=(vocab_size, k),
    )


def test_the_parts_matrix_is_the_sums_bit_for_bit():
    """Built from overlapping parts (duplicated keys), the matrix is the one of their
    sum, added here by numpy's unique-and-add: same structure, same values
    (whole counts add exactly)."""
    from lsdask.models.sparse_topics import sum_as_matrix

    rng = np.random.default_rng(7)
    for n_parts in (1, 2, 3, 5):
        parts = [
            TopicWordCounts.from_draws(K, rng.integers(0, V, 200), rng.integers(0, K, 200))
            for _ in range(n_parts)
        ]
        parts[0] = TopicWordCounts(K, parts[0].keys, parts[0].counts * 3_000_000_001)
        keys, at = np.unique(np.concatenate([p.keys for p in parts]), return_inverse=True)
        counts = np.zeros(keys.size, np.int64)
        np.add.at(counts, at, np.concatenate([p.counts for p in parts]))
        summed = TopicWordCounts(K, keys, counts)
        got, want = sum_as_matrix(parts, V), _eager_matrix(summed, V)
        assert got.has_canonical_format
        np.testing.assert_array_equal(got.indptr, want.indptr)
        np.testing.assert_array_equal(got.indices, want.indices)
        np.testing.assert_array_equal(got.data, want.data)


def test_updates_by_parts_equal_updates_by_their_sum():
    """Many steps, resets included: topics updated by the parts' lists equal, bit
    for bit, topics updated by the summed counts' matrix (the earlier code)."""
    rng = np.random.default_rng(8)
    by_parts = SparseTopics.at_prior(K, V, 0.3)
    by_sum = SparseTopics.at_prior(K, V, 0.3)
    for t in range(1, 40):
        parts = [
            TopicWordCounts.from_draws(K, rng.integers(0, V, 60), rng.integers(0, K, 60))
            for _ in range(int(rng.integers(1, 4)))
        ]
        summed = parts[0]
        for p in parts[1:]:
            summed = summed + p
        update = Update(t, (2.0 + t) ** -0.7, 2.5)
        apply_update(by_parts, parts, update, reset_below=0.2)
        by_sum.step(update.rho, _eager_matrix(summed, V) * update.factor, 0.2)
        _same_topics(by_parts, by_sum)
    assert by_sum.n_resets >= 3


def test_parts_handles_reach_later_tasks_and_the_driver(dask_client):
    """``start_parts``: the driver fetches the tasks' results as a list, in order, and
    a later task given the handle gets the same list; in this process the list
    holds their one sum."""
    from lsdask.engine import DaskExecutor

    def square(batch, shared):
        return batch * batch + shared

    def total(batch, shared):
        (parts,) = shared
        return batch + sum(parts)

    executor = DaskExecutor(dask_client)
    handle = executor.start_parts(square, [1, 2, 3], 10)
    later = executor.start_parts(total, [100], (handle,))
    assert executor.fetch(handle) == [11, 14, 19]
    assert executor.fetch(later) == [144]
    serial = SerialExecutor()
    assert serial.fetch(serial.start_parts(square, [1, 2, 3], 10)) == [44]


def test_balanced_bounds_cut_near_equal_token_sums():
    from lsdask.learn.svi_gibbs import balanced_bounds

    np.testing.assert_array_equal(balanced_bounds(np.ones(10), 2), [0, 5, 10])
    np.testing.assert_array_equal(balanced_bounds(np.ones(7), 3), [0, 2, 5, 7])
    # one long document: the other part takes the rest
    np.testing.assert_array_equal(balanced_bounds(np.array([1.0, 1, 30, 1, 1, 1]), 2), [0, 3, 6])
    rng = np.random.default_rng(9)
    w = rng.pareto(1.5, 1000) + 1
    for n in (2, 3, 4):
        b = balanced_bounds(w, n)
        assert b[0] == 0 and b[-1] == w.size and (np.diff(b) >= 0).all()
        sums = np.add.reduceat(w, b[:-1])
        # each cut is at most one document off the even share
        assert np.abs(np.cumsum(sums)[:-1] - w.sum() * np.arange(1, n) / n).max() <= w.max()


def test_parts_are_split_by_the_tokens_seen(tmp_path, dask_client):
    """From the second epoch the driver knows each document's tokens and cuts
    minibatches by them; the topics are still the in-process run's."""
    from lsdask.engine import DaskExecutor

    rng = np.random.default_rng(10)
    X = _docs(rng, 60)
    X = sp.vstack([X[:3] * 40, X[3:]]).tocsr()  # three long documents
    learner = _learner(n_epochs=2)
    seen = []

    class Recording(DaskExecutor):
        def register(self, batches):
            seen.append([b.n_docs for b in batches])
            return super().register(batches)

    stream = DocumentStream(X)
    there = learner.run(stream, Recording(dask_client), learner.start(stream, seed=4))
    here = learner.run(DocumentStream(X), SerialExecutor(), learner.start(DocumentStream(X), 4))
    _same_topics(there.topics, here.topics)
    first, second = seen[: len(seen) // 2], seen[len(seen) // 2 :]
    assert all(abs(a - b) <= 1 for a, b in first[:-1])  # even, by documents
    assert any(abs(a - b) > 1 for a, b in second)  # by tokens


@pytest.mark.parametrize(
    "minibatch, expected",
    [(100, [16]), (1000, [2, 4, 5, 7, 8, 10, 12, 13, 15, 16]), (1600, list(range(1, 17))),
     (5000, list(range(1, 17)))],
)  # fmt: skip
def test_pruning_follows_the_documents_seen_not_the_steps(minibatch, expected):
    """Prunings come every 1,600 documents, at the step whose minibatch passes
    the multiple: every 16 steps of 100 documents, every step of 1,600 or more."""
    assert [t for t in range(1, 17) if prunes_at(t, minibatch, 1600)] == expected
    steps = 200
    pruned = sum(prunes_at(t, minibatch, 1600) for t in range(1, steps + 1))
    assert pruned == min(steps, steps * minibatch // 1600)
