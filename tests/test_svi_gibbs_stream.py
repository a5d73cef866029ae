"""SVI-Gibbs over a growing corpus: appended parts consumed once, exact resumes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import lsdask
from lsdask.engine import SerialExecutor
from lsdask.io.corpus import Corpus
from lsdask.io.doc_stream import DocumentStream
from lsdask.learn.svi_gibbs import SviGibbs
from lsdask.persist.svi_gibbs import load_stream_state, save_stream_state

V = 40


def _docs(rng, n):
    X = sp.csr_matrix(rng.poisson(0.5, size=(n, V)).astype(float))
    X.data = np.maximum(X.data, 1.0)
    return X


def _learner(n_epochs=2):
    K = 4
    return SviGibbs(
        n_topics=K, alpha=np.full(K, 0.25), eta=0.2, burnin=1, samples=2, minibatch_size=17,
        delay=5.0, kappa=0.7, n_epochs=n_epochs,
    )  # fmt: skip


class Appender:
    """on_minibatch: appends a part to the corpus after the given steps; logs every
    minibatch's doc ids with the epoch it belongs to."""

    def __init__(self, path, at_steps, rng):
        self.path, self.at, self.rng = path, dict(at_steps), rng
        self.log: list[tuple[int, np.ndarray]] = []
        self.appended: list[np.ndarray] = []

    def __call__(self, state):
        self.log.append((state.epoch, state.minibatch_log[-1]))
        n = self.at.pop(state.step, None)
        if n is not None:
            batches = Corpus.open(self.path).append(_docs(self.rng, n))
            ids = np.concatenate([b.load().doc_ids for b in batches])
            self.appended.append(ids)


def _make(tmp_path, rng, n=100):
    path = tmp_path / "c"
    Corpus.write(path, _docs(rng, n), [f"w{i}" for i in range(V)], docs_per_row_group=30)
    return path


def test_appended_parts_are_consumed_exactly_once_per_epoch(tmp_path):
    rng = np.random.default_rng(0)
    path = _make(tmp_path, rng)
    first = set(np.concatenate([b.load().doc_ids for b in Corpus.open(path).batches]).tolist())
    learner = _learner(n_epochs=2)
    stream = DocumentStream(str(path))
    state = learner.start(stream, seed=1)
    state.minibatch_log = []
    hook = Appender(path, {2: 25, 5: 40}, np.random.default_rng(1))
    state = learner.run(stream, SerialExecutor(), state, on_minibatch=hook)
    assert state.finished and state.epoch == 2
    new = [set(ids.tolist()) for ids in hook.appended]
    assert len(new) == 2 and all(len(s) == n for s, n in zip(new, (25, 40), strict=True))
    everything = first | new[0] | new[1]
    assert len(everything) == 165
    for epoch in (0, 1):
        seen = np.concatenate([ids for e, ids in hook.log if e == epoch])
        assert len(seen) == len(set(seen.tolist())) == 165  # each document exactly once
        assert set(seen.tolist()) == everything
    # D grew: the last epoch's minibatches were scaled by 165 documents
    assert state.docs_trace == [165, 165]
    # a new document is not visited before it was appended
    steps_before = [i for i, (_, ids) in enumerate(hook.log) if set(ids.tolist()) & new[1]]
    assert min(steps_before) >= 5


def _run_logged(learner, path, state, hook, stop_after=None, checkpoint=None):
    stream = DocumentStream(str(path))
    state.minibatch_log = []
    stop = None if stop_after is None else (lambda: state.step >= stop_after)
    return learner.run(
        stream, SerialExecutor(), state, on_minibatch=hook, checkpoint=checkpoint,
        stop_requested=stop,
    )  # fmt: skip


def test_a_resumed_stream_neither_repeats_nor_skips_a_minibatch(tmp_path):
    learner = _learner(n_epochs=3)
    # uninterrupted, with parts appended after steps 3 and 11
    path_a = _make(tmp_path / "a", np.random.default_rng(5))
    hook_a = Appender(path_a, {3: 20, 11: 30}, np.random.default_rng(6))
    whole = learner.start(DocumentStream(str(path_a)), seed=9)
    whole = _run_logged(learner, path_a, whole, hook_a)
    # the same, stopped after step 7 (a checkpoint written), then resumed from the file
    path_b = _make(tmp_path / "b", np.random.default_rng(5))
    hook_b = Appender(path_b, {3: 20, 11: 30}, np.random.default_rng(6))
    ckpt = tmp_path / "ckpt"
    part = learner.start(DocumentStream(str(path_b)), seed=9)
    part = _run_logged(
        learner, path_b, part, hook_b, stop_after=7,
        checkpoint=lambda s: save_stream_state(ckpt, s, {}),
    )  # fmt: skip
    assert not part.finished and part.step == 7
    resumed, _ = load_stream_state(ckpt)
    assert resumed.step == 7
    resumed = _run_logged(learner, path_b, resumed, hook_b)
    assert resumed.finished
    assert len(hook_a.log) == len(hook_b.log) == whole.step
    for (ea, ids_a), (eb, ids_b) in zip(hook_a.log, hook_b.log, strict=True):
        assert ea == eb
        np.testing.assert_array_equal(ids_a, ids_b)
    np.testing.assert_array_equal(whole.topics.lam(), resumed.topics.lam())
    assert whole.nonzero_trace == resumed.nonzero_trace


def test_estimator_resume_of_a_finished_fit_equals_one_longer_fit(tmp_path):
    rng = np.random.default_rng(2)
    path = _make(tmp_path, rng, n=120)
    kw = dict(
        algorithm="svi-gibbs", alpha=1.0, minibatch_size=25, gibbs_burnin=1, gibbs_samples=1,
        random_state=0, client="sync",
    )  # fmt: skip
    straight = lsdask.LDA(4, n_laps=3, **kw).fit(str(path))
    ck = tmp_path / "ck"
    lsdask.LDA(4, n_laps=2, checkpoint_dir=str(ck), **kw).fit(str(path))
    again = lsdask.LDA(4, n_laps=1, checkpoint_dir=str(ck), resume=True, **kw).fit(str(path))
    np.testing.assert_array_equal(straight.components_, again.components_)
    assert again.n_laps_ == 3
    # a folder that holds a checkpoint is not overwritten without resume
    with pytest.raises(ValueError, match="pass resume=True"):
        lsdask.LDA(4, n_laps=1, checkpoint_dir=str(ck), **kw).fit(str(path))
    with pytest.raises(ValueError, match="written by another fit"):
        lsdask.LDA(4, n_laps=1, checkpoint_dir=str(ck), resume=True, **{**kw, "alpha": 2.0}).fit(
            str(path)
        )


def test_a_checkpoint_resumes_only_with_its_own_pruning_threshold(tmp_path):
    """A checkpoint written under another ``gibbs_prune`` (the default was 0.01
    before it became 0.3) is refused with the default, naming both values, and
    resumes when given its own."""
    path = _make(tmp_path, np.random.default_rng(5), n=60)
    kw = dict(
        algorithm="svi-gibbs", alpha=1.0, minibatch_size=20, gibbs_burnin=1, gibbs_samples=1,
        random_state=0, client="sync", checkpoint_dir=str(tmp_path / "ck"),
    )  # fmt: skip
    lsdask.LDA(4, n_laps=1, gibbs_prune=0.01, **kw).fit(str(path))
    with pytest.raises(ValueError, match=r"gibbs_prune: checkpoint 0\.01, asked 0\.3"):
        lsdask.LDA(4, n_laps=1, resume=True, **kw).fit(str(path))
    resumed = lsdask.LDA(4, n_laps=1, resume=True, gibbs_prune=0.01, **kw).fit(str(path))
    assert resumed.n_laps_ == 2


@pytest.mark.parametrize("damage", ["cut", "garbage", "negative", "command"])
def test_a_damaged_checkpoint_is_refused_naming_the_file(tmp_path, damage):
    from lsdask.errors import DataError
    from lsdask.persist.svi_gibbs import checkpoint_path

    rng = np.random.default_rng(3)
    path = _make(tmp_path, rng, n=40)
    learner = _learner(n_epochs=1)
    state = learner.start(DocumentStream(str(path)), seed=0)
    state = learner.run(DocumentStream(str(path)), SerialExecutor(), state)
    file = save_stream_state(tmp_path / "ck", state, {})
    raw = file.read_bytes()
    if damage == "cut":
        file.write_bytes(raw[: len(raw) // 2])
    elif damage == "garbage":
        file.write_bytes(b"not an npz file at all")
    elif damage == "negative":
        state.topics.scaled.data[:] = -1.0
        save_stream_state(tmp_path / "ck", state, {})
    else:  # a command without its target
        state.command = {"id": "abc", "done": False}
        save_stream_state(tmp_path / "ck", state, {})
    with pytest.raises(DataError, match=r"ckpt-svi-gibbs\.npz"):
        load_stream_state(tmp_path / "ck")
    assert checkpoint_path(tmp_path / "ck") == file


def _finished_epoch(tmp_path, n_epochs=1):
    """A 60-document corpus, one epoch run and checkpointed in tmp_path / "ck"."""
    path = tmp_path / "c"
    Corpus.write(path, _docs(np.random.default_rng(4), 60), [f"w{i}" for i in range(V)],
                 docs_per_row_group=30)  # fmt: skip
    learner = _learner(n_epochs=n_epochs)
    state = learner.start(DocumentStream(str(path)), seed=2)
    state = learner.run(DocumentStream(str(path)), SerialExecutor(), state)
    assert state.finished and state.pos == len(state.queue) == 60
    save_stream_state(tmp_path / "ck", state, {})
    return path, learner


def test_a_resume_at_an_epoch_boundary_visits_every_known_document(tmp_path):
    path, learner = _finished_epoch(tmp_path)
    known = set(np.concatenate([b.load().doc_ids for b in Corpus.open(path).batches]).tolist())
    batches = Corpus.open(path).append(_docs(np.random.default_rng(8), 20))
    known |= set(np.concatenate([b.load().doc_ids for b in batches]).tolist())
    assert len(known) == 80
    state, _ = load_stream_state(tmp_path / "ck")
    learner.n_epochs = 2
    state.minibatch_log = []
    state = learner.run(DocumentStream(str(path)), SerialExecutor(), state)
    assert state.finished and state.epoch == 2
    seen = np.concatenate(state.minibatch_log)
    assert len(seen) == len(set(seen.tolist())) == 80  # each document exactly once
    assert set(seen.tolist()) == known
    assert state.docs_trace == [60, 80]


def test_the_time_trace_runs_on_after_a_resume(tmp_path):
    path, learner = _finished_epoch(tmp_path)
    state, _ = load_stream_state(tmp_path / "ck")
    state.time_trace = [1000.0]  # as if the first epoch took 1000 s
    learner.n_epochs = 2
    state = learner.run(DocumentStream(str(path)), SerialExecutor(), state)
    assert state.time_trace[0] == 1000.0 and 1000.0 < state.time_trace[1] < 1000.0 + 600.0


@pytest.mark.parametrize("field", ["row", "sizes"])
def test_a_queue_outside_its_groups_is_refused_naming_the_file(tmp_path, field):
    from lsdask.errors import DataError

    _finished_epoch(tmp_path)
    state, _ = load_stream_state(tmp_path / "ck")
    if field == "row":
        state.queue[5, 1] = state.sizes[state.queue[5, 0]]  # one past the group's rows
    else:
        state.sizes = state.sizes[:1]  # a group of the queue without its size
    save_stream_state(tmp_path / "ck", state, {})
    with pytest.raises(DataError, match=r"ckpt-svi-gibbs\.npz.*(queue|sizes)"):
        load_stream_state(tmp_path / "ck")


def test_a_crash_at_an_epoch_end_resumes_within_the_epoch(tmp_path):
    """A checkpoint is never written between an epoch's last minibatch and its
    end: a run stopped by a failing on_epoch resumes with that minibatch, not
    with a whole epoch more."""
    path = tmp_path / "c"
    Corpus.write(path, _docs(np.random.default_rng(4), 60), [f"w{i}" for i in range(V)],
                 docs_per_row_group=30)  # fmt: skip
    learner = _learner(n_epochs=1)
    learner.checkpoint_every = 1
    straight = learner.start(DocumentStream(str(path)), seed=2)
    straight = learner.run(DocumentStream(str(path)), SerialExecutor(), straight)

    def crash(state):
        raise RuntimeError("scoring failed")

    state = learner.start(DocumentStream(str(path)), seed=2)
    with pytest.raises(RuntimeError, match="scoring failed"):
        learner.run(
            DocumentStream(str(path)), SerialExecutor(), state, on_epoch=crash,
            checkpoint=lambda s: save_stream_state(tmp_path / "ck", s, {}),
        )  # fmt: skip
    resumed, _ = load_stream_state(tmp_path / "ck")
    resumed.minibatch_log = []
    resumed = learner.run(DocumentStream(str(path)), SerialExecutor(), resumed)
    assert resumed.finished and resumed.epoch == 1
    assert resumed.step == straight.step == 4  # 60 documents in minibatches of 17
    assert len(resumed.minibatch_log) == 1 and len(resumed.minibatch_log[0]) == 60 - 3 * 17
    np.testing.assert_array_equal(resumed.topics.lam(), straight.topics.lam())


def test_a_part_carries_where_its_documents_are_not_the_documents(tmp_path):
    """A corpus part names row groups and rows (it reads them where it is
    loaded); an in-memory matrix's part carries its rows. Both load the
    documents asked, in the order asked."""
    import pickle

    rng = np.random.default_rng(4)
    X = _docs(rng, 100)
    path = tmp_path / "c"
    Corpus.write(path, X, [f"w{i}" for i in range(V)], docs_per_row_group=30)
    ids = np.concatenate([b.load().doc_ids for b in Corpus.open(path).batches])
    refs = np.array([[3, 5], [0, 29], [1, 0], [0, 2], [3, 9]])  # (group, row), groups mixed
    rows_asked = refs[:, 0] * 30 + refs[:, 1]
    in_memory = np.column_stack([np.zeros_like(rows_asked), rows_asked])  # one group
    for stream, asked, expect_ids in ((DocumentStream(str(path)), refs, ids[rows_asked]),
                                      (DocumentStream(X), in_memory, rows_asked)):  # fmt: skip
        part = stream.part(asked, "here")
        rows, got_ids = pickle.loads(pickle.dumps(part)).load()
        np.testing.assert_array_equal(rows.toarray(), X[rows_asked].toarray())
        np.testing.assert_array_equal(got_ids, expect_ids)
        np.testing.assert_array_equal(stream.load(asked)[0].toarray(), rows.toarray())
    corpus_part = DocumentStream(str(path)).part(refs, "here")
    assert not any(sp.issparse(group) for group, _ in corpus_part.pieces)
    size = len(pickle.dumps(corpus_part))
    corpus_part.load()  # kept for this process's next task, never pickled
    assert len(pickle.dumps(corpus_part)) == size
    # its size does not grow with the documents' lengths: 50 times the words, same size
    longer = tmp_path / "long"
    Corpus.write(longer, X * 50, [f"w{i}" for i in range(V)], docs_per_row_group=30)
    size = len(pickle.dumps(corpus_part))
    assert abs(len(pickle.dumps(DocumentStream(str(longer)).part(refs, "here"))) - size) < 64
