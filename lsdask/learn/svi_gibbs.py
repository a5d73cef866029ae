"""Stochastic VI with a Gibbs local step (Mimno, Hoffman & Blei 2012, Alg. 1).

Each step draws a minibatch of ``|B|`` documents at random across the
stream's groups, splits it over the executor's slots (one task per part),
samples each document's topics against the fixed topics (the sequential
start, ``burnin`` sweeps, ``samples`` kept sweeps; :mod:`lsdask.kernels.svi_gibbs`),
adds the parts' integer topic-word counts in a tree (exact in any order),
divides them by what the kept sweeps add per token (``samples``, times the
quanta per token of the Rao-Blackwellised estimator: N-hat, Eq. 10) and
updates the topics sparsely (:class:`lsdask.models.sparse_topics.SparseTopics`,
Eq. 11 by Eq. 19) with ``rho_t = (delay + t) ** -kappa``.

One round trip a step
---------------------
The driver keeps the topics; every process that runs tasks keeps a *replica*
of them (:class:`TopicsSource`, :func:`replica_view`), so a task reads its
own documents, builds the view of the topics for its own words and samples,
all in one go: no first trip for the parts' words, no view built in the
driver and sent. A step's tasks get the replica's *base* (the topics
broadcast every ``rebase_every`` steps) and the counts of every step since,
as the list of its parts' counts, each still on the worker whose task made it
(no task waits for a sum: a part's counts go straight to the next step's
tasks and to the driver, which add them); a process whose replica is at an
earlier step applies the missing updates, one that has none starts from the
base. The replica applies each update by the very function the driver
applies it by (:func:`apply_update`), so it is bit for bit the driver's
topics, and the draws are the in-process run's.

A growing stream
----------------
``D``, the corpus size in Eq. 11, is the number of documents the stream
holds when the step is taken: it grows as groups arrive. An *epoch* is one
pass over a random order of the documents known when it starts; documents of
groups that arrive during an epoch are shuffled into the part of the epoch
not yet visited, so each document is in exactly one minibatch of every epoch
it takes part in. The last minibatch of an epoch may be smaller. The stream
is looked at before every minibatch.

The loop is written against the :mod:`~lsdask.learn.protocols` (an
:class:`Executor`); a document id keys each document's random draws, so the
result does not depend on how minibatches are split over workers.
"""

from __future__ import annotations

import copy
import functools
import itertools
import logging
import operator
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import scipy.sparse as sp

from lsdask import config
from lsdask.errors import DataError
from lsdask.learn.base import progress_bar
from lsdask.learn.protocols import Executor
from lsdask.models.collapsed import DocTopicCounts, StreamPrior
from lsdask.models.sparse_topics import (
    RB_QUANTA,
    RESET_BELOW,
    SamplerView,
    SparseTopics,
    TopicWordCounts,
    quanta_per_token,
    sample_counts,
    sum_as_matrix,
)

logger = logging.getLogger(__name__)

#: CPU seconds of this process's threads by phase of a step (the tasks' and the
#: driver's), and how often each ran: what a benchmark reads to see where a
#: step's time goes (:func:`phase_seconds`)
_PHASES: dict[str, list[float]] = {}
_PHASES_LOCK = threading.Lock()

#: documents between prunings of the decayed entries of Ñ (``SviGibbs.prune_every_docs``)
PRUNE_EVERY_DOCS = 1600


@contextmanager
def _phase(name: str) -> Iterator[None]:
    """Add the CPU time of the calling thread inside the block to ``name``."""
    start = time.thread_time()
    try:
        yield
    finally:
        spent = time.thread_time() - start
        with _PHASES_LOCK:
            entry = _PHASES.setdefault(name, [0.0, 0])
            entry[0] += spent
            entry[1] += 1


def phase_seconds(reset: bool = False) -> dict[str, tuple[float, int]]:
    """This process's CPU seconds and counts by phase since the last reset:
    ``read`` (a part's documents), ``replica`` (bringing the replica up to date),
    ``view``, ``sample``, ``sum`` (adding parts' counts), ``driver_start``
    (starting a step's tasks), ``driver_update`` (the driver's update)."""
    with _PHASES_LOCK:
        out = {k: (v[0], int(v[1])) for k, v in _PHASES.items()}
        if reset:
            _PHASES.clear()
    return out


class DocumentStream(Protocol):
    """Groups of documents that may grow (:class:`lsdask.io.doc_stream.DocumentStream`)."""

    n_features: int
    description: str

    @property
    def keys(self) -> list[str]: ...

    @property
    def sizes(self) -> list[int]: ...

    def refresh(self) -> int: ...

    def part(self, refs: np.ndarray, where: str) -> DocumentsPart: ...


class DocumentsPart(Protocol):
    """Part of a minibatch, read where its task runs (a task's batch):
    :class:`lsdask.io.doc_stream.DocumentRefs`."""

    where: str

    def load(self) -> tuple[sp.csr_matrix, np.ndarray]:
        """The part's documents as CSR counts, and their ids."""
        ...


@dataclass(frozen=True)
class Update:
    """How step ``step``'s summed counts changed the topics: ``rho`` and the
    factor ``D / (|B| S Q)`` that turns the counts into ``(D/|B|) N-hat`` (``Q``
    the estimator's quanta per token)."""

    step: int
    rho: float
    factor: float
    #: entries of Ñ below this are dropped after the update (0: none)
    prune_below: float = 0.0
    #: where the document-topic prior is learned, the kept sweeps per document
    #: that the parts' document-topic counts add up (0: the prior is fixed),
    #: and ``D / (|B| S)``, what turns them into the corpus's
    prior_sweeps: int = 0
    prior_scale: float = 0.0


def apply_update(
    topics: SparseTopics,
    counts: TopicWordCounts | list[TopicWordCounts],
    update: Update,
    reset_below: float,
    doc_topics: DocTopicCounts | None = None,
) -> None:
    """One step's update of ``topics`` (in place) by its summed counts, or by the
    list of the parts' counts (their sum is exact, so both are the same
    update), and of the learned prior ``topics.prior`` by the minibatch's
    ``doc_topics`` where ``update.prior_sweeps``; the same in the driver and in
    every replica, so that they stay equal bit for bit."""
    terms = counts if isinstance(counts, list) else [counts]
    scaled = sum_as_matrix(terms, topics.vocab_size) * update.factor
    topics.step(update.rho, scaled, reset_below)
    topics.prune(update.prune_below)
    if update.prior_sweeps:
        if topics.prior is None or doc_topics is None:
            raise RuntimeError(f"step {update.step} learns the prior but has no prior or counts")
        topics.prior.update(doc_topics, update.rho, update.prior_scale)


def _apply_parts(
    topics: SparseTopics,
    summed: PartCounts | list[PartCounts],
    update: Update,
    reset_below: float,
) -> None:
    """:func:`apply_update` by a step's parts (or their sum)."""
    doc_topics = None
    if update.prior_sweeps:
        doc_topics = PartCounts.doc_topic_counts(summed, topics.n_topics, update.prior_sweeps)
    apply_update(topics, PartCounts.terms(summed), update, reset_below, doc_topics)


@dataclass(frozen=True)
class PartCounts:
    """What a part's task returns: its kept sweeps' counts and its documents'
    ids (in the part's order); sums keep the parts' order. A step's counts
    travel as the list of its parts' (:meth:`Executor.start_parts`), added by
    whoever applies them (:func:`apply_update`)."""

    counts: TopicWordCounts
    doc_ids: np.ndarray
    #: each document's tokens, in the part's order (the driver balances later
    #: parts by them); None where not known
    n_tokens: np.ndarray | None = None
    #: the documents' topic counts at the end of each kept sweep
    #: (:func:`~lsdask.models.sparse_topics.doc_topic_histogram`) where the
    #: prior is learned; else None
    doc_topics: TopicWordCounts | None = None

    def __add__(self, other: PartCounts) -> PartCounts:
        with _phase("sum"):
            tokens = None
            if self.n_tokens is not None and other.n_tokens is not None:
                tokens = np.concatenate([self.n_tokens, other.n_tokens])
            doc_topics = None
            if self.doc_topics is not None and other.doc_topics is not None:
                doc_topics = self.doc_topics + other.doc_topics
            return PartCounts(
                self.counts + other.counts, np.concatenate([self.doc_ids, other.doc_ids]),
                tokens, doc_topics,
            )  # fmt: skip

    @staticmethod
    def terms(summed: PartCounts | list[PartCounts]) -> list[TopicWordCounts]:
        """The counts of a step's parts (or of their sum), in order."""
        return [p.counts for p in summed] if isinstance(summed, list) else [summed.counts]

    @staticmethod
    def doc_topic_counts(
        summed: PartCounts | list[PartCounts], n_topics: int, sweeps: int
    ) -> DocTopicCounts:
        """The minibatch's document-topic counts over its ``sweeps`` kept sweeps
        (exact sums, so the same whatever the parts)."""
        parts = summed if isinstance(summed, list) else [summed]
        hists = [p.doc_topics for p in parts if p.doc_topics is not None]
        lengths = [p.n_tokens for p in parts if p.n_tokens is not None]
        if len(hists) < len(parts) or len(lengths) < len(parts):
            raise RuntimeError("a part came back without its document-topic counts")
        hist = functools.reduce(operator.add, hists)
        return DocTopicCounts.of_histogram(
            n_topics, hist.keys, hist.counts, np.concatenate(lengths), sweeps
        )


@dataclass(frozen=True)
class TopicsSource:
    """Where a step's tasks get the topics from: the replica ``key`` of this
    run, its base (the topics after step ``base_step``) and the updates of
    steps ``base_step + 1 ..`` (each with its parts' counts), as a tuple
    ``(source, base, ((update, counts), ...))`` whose handles the executor
    turns into their values (:meth:`GibbsTask.__call__`)."""

    key: str
    base_step: int
    reset_below: float


#: this process's replicas of the topics: run key -> (step, topics); the newest few
_REPLICAS: OrderedDict[str, tuple[int, SparseTopics]] = OrderedDict()
_REPLICAS_KEPT = 2
_REPLICAS_LOCK = threading.Lock()


def replica_view(
    source: TopicsSource,
    base: SparseTopics,
    updates: tuple[tuple[Update, PartCounts | list[PartCounts]], ...],
    words: np.ndarray,
    alpha: np.ndarray,
    step: int,
    weights: str,
) -> SamplerView:
    """The view for step ``step`` over ``words`` of this process's replica of the
    topics, brought to the step before by the updates it has not applied yet
    (from a copy of ``base`` where it has no replica, or one older than the base),
    with the replica's learned prior where it has one, else ``alpha``."""
    last = updates[-1][0].step if updates else source.base_step
    if last != step - 1:
        raise RuntimeError(f"step {step} needs the topics after step {step - 1}, not {last}")
    with _REPLICAS_LOCK:
        with _phase("replica"):
            at, topics = _REPLICAS.pop(source.key, (-1, base))
            if not source.base_step <= at <= last:  # none here, or older than the base
                at, topics = source.base_step, copy.deepcopy(base)
            for update, summed in updates:
                if update.step > at:
                    _apply_parts(topics, summed, update, source.reset_below)
                    at = update.step
            _REPLICAS[source.key] = (at, topics)
            while len(_REPLICAS) > _REPLICAS_KEPT:
                _REPLICAS.popitem(last=False)
        with _phase("view"):
            prior = alpha if topics.prior is None else topics.prior.alpha
            return topics.view(words, prior, step, weights)


@dataclass(frozen=True)
class GibbsTask:
    """Sample one part's documents against step ``step``'s topics (the view of
    this process's replica for the part's own words); returns the kept sweeps'
    integer topic-word counts and the part's doc ids (a pure function of the
    part and the topics)."""

    burnin: int
    samples: int
    seed: int
    alpha: tuple[float, ...]
    step: int
    estimator: str = "draws"
    quanta: int = RB_QUANTA
    weights: str = "mean"
    #: return the documents' topic counts too (the prior is learned)
    doc_topics: bool = False

    def __call__(self, part: DocumentsPart, shared: Any) -> PartCounts:
        source, base, updates = shared
        with _phase("read"):
            rows, doc_ids = part.load()
            words = np.unique(rows.indices).astype(np.int64)
        alpha = np.asarray(self.alpha, dtype=np.float64)
        view = replica_view(source, base, updates, words, alpha, self.step, self.weights)
        try:
            with _phase("sample"):
                counts, doc_topics = sample_counts(
                    rows,
                    doc_ids,
                    view,
                    self.burnin,
                    self.samples,
                    self.seed,
                    self.estimator,
                    self.quanta,
                    self.doc_topics,
                )
        except ValueError as exc:
            raise DataError(f"{part.where}: {exc}") from exc
        n_tokens = np.asarray(rows.sum(axis=1), dtype=np.int64).ravel()
        return PartCounts(counts, np.asarray(doc_ids, dtype=np.int64), n_tokens, doc_topics)


@dataclass
class StreamState:
    """Everything a run continues from (a checkpoint holds it).

    ``queue`` holds the current epoch's documents as (group, row), ``pos`` how
    many were visited; ``keys`` the groups known, whose indices ``queue`` uses.
    """

    topics: SparseTopics
    seed: int
    rng_state: dict[str, Any]
    step: int = 0
    epoch: int = 0
    queue: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    pos: int = 0
    keys: list[str] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    finished: bool = False
    #: the command running the fit (``lsdask fit``): ``id`` (its arguments' hash),
    #: ``target`` (epochs in all it asked for), ``done`` (its output written); a
    #: rerun of an interrupted command trains to exactly its target
    command: dict[str, Any] | None = None
    #: per completed epoch: stored entries of Ñ, documents in the stream, seconds
    nonzero_trace: list[int] = field(default_factory=list)
    docs_trace: list[int] = field(default_factory=list)
    time_trace: list[float] = field(default_factory=list)
    #: per completed epoch: the document-topic prior's total ``sum_k a_k``
    alpha_trace: list[float] = field(default_factory=list)
    #: the documents of every minibatch, as doc ids, when asked (tests)
    minibatch_log: list[np.ndarray] | None = None
    #: seconds of this run in the driver (the parts, the update) and waiting for
    #: the tasks (not checkpointed)
    driver_seconds: float = 0.0
    task_seconds: float = 0.0


@dataclass
class SviGibbs:
    """The SVI-Gibbs loop.

    Parameters
    ----------
    n_topics : int
    alpha : (K,) per-topic document-topic prior ``a_k`` of Eq. 9 (where it is
        learned, ``learn_alpha``, its start)
    eta : float
    burnin, samples : int
        Gibbs sweeps discarded and kept per document (B >= 0, S >= 1).
    minibatch_size : int
        Documents per minibatch ``|B|``.
    delay, kappa : float
        ``rho_t = (delay + t) ** -kappa``; ``delay > 0`` (``rho_1 < 1``), ``kappa``
        in (0.5, 1].
    n_epochs : int
        Epochs in all (a resumed run goes on towards it).
    checkpoint_every : int
        Minibatches between calls of ``checkpoint`` (also called at every epoch's
        end and when stopped).
    estimator : str
        How the kept sweeps make N-hat: ``"rao-blackwell"`` (each token's
        conditional, unbiased and of lower variance) or ``"draws"`` (each
        token's drawn topic); see :mod:`lsdask.kernels.svi_gibbs`.
    weights : str
        What the documents are sampled against: the topics' posterior mean
        ``E[phi]`` (``"mean"``) or the paper's ``exp E[log phi]``
        (``"geometric"``); see :mod:`lsdask.models.sparse_topics`.
    quanta : int
        The Rao-Blackwellised estimator's quanta per token ``Q`` (at most ``Q``
        entries per token; ``Q = 1`` is a second, independent draw).
    prune : float
        At the step whose minibatch passes a multiple of ``prune_every_docs``
        documents, the entries of Ñ below ``prune * eta`` are dropped
        (:meth:`SparseTopics.prune`); 0 keeps every entry (Eq. 11 exactly).
    prune_every_docs : int
        Documents between prunings: counted in documents, not steps, so that
        an entry gets the same number of chances to be dropped per epoch
        whatever the minibatch size (every 16 steps of 100 documents, about
        every other step of 1,000).
    learn_alpha : bool
        Learn the per-topic prior, starting from ``alpha``: the minibatches'
        sampled document-topic counts are averaged as the topics' are, and the
        prior is refitted to them after every step
        (:class:`~lsdask.models.collapsed.StreamPrior`, kept in
        ``state.topics.prior``).
    rebase_every : int
        Steps between broadcasts of the whole topics to the tasks' replicas.
    """

    n_topics: int
    alpha: np.ndarray
    eta: float
    burnin: int
    samples: int
    minibatch_size: int
    delay: float
    kappa: float
    n_epochs: int
    checkpoint_every: int = 50
    reset_below: float = RESET_BELOW
    progress: bool | None = None
    estimator: str = "rao-blackwell"
    quanta: int = RB_QUANTA
    weights: str = "mean"
    prune: float = config.SVI_GIBBS_PRUNE
    prune_every_docs: int = PRUNE_EVERY_DOCS
    learn_alpha: bool = False
    #: steps between broadcasts of the whole topics to the replicas (a process
    #: that has none, or a stale one, starts from the last)
    rebase_every: int = 8

    def _per_token(self) -> int:
        """What the kept sweeps add to the counts per token: ``S`` times the
        estimator's quanta per token."""
        return self.samples * quanta_per_token(self.estimator, self.quanta)

    def start(self, stream: DocumentStream, seed: int) -> StreamState:
        """The state before the first minibatch: topics at the prior."""
        rng = np.random.default_rng(seed)
        topics = SparseTopics.at_prior(self.n_topics, stream.n_features, self.eta)
        if self.learn_alpha:
            topics.prior = StreamPrior.start(self.alpha)
        return StreamState(
            topics=topics,
            seed=int(rng.integers(2**62)),
            rng_state=dict(rng.bit_generator.state),
        )

    def run(
        self,
        stream: DocumentStream,
        executor: Executor,
        state: StreamState,
        on_epoch: Callable[[StreamState], None] | None = None,
        on_minibatch: Callable[[StreamState], None] | None = None,
        checkpoint: Callable[[StreamState], None] | None = None,
        stop_requested: Callable[[], bool] | None = None,
    ) -> StreamState:
        """Minibatches until ``n_epochs`` epochs are done (or a stop is asked, after
        a minibatch: the state is checkpointed and returned unfinished)."""
        rng = np.random.default_rng()
        rng.bit_generator.state = state.rng_state
        self._catch_up(stream, state, rng)
        if stream_docs(state) == 0:
            raise DataError(f"{stream.description}: holds no documents; nothing to learn from")
        if self.minibatch_size > stream_docs(state):
            raise ValueError(
                f"minibatch_size={self.minibatch_size} is larger than {stream.description}, "
                f"which holds {stream_docs(state)} documents; use minibatch_size <= "
                f"{stream_docs(state)}"
            )
        chain = _Chain(self.alpha, self.rebase_every, self.reset_below)
        # the epochs' times run on from the checkpoint's (the time of a stopped
        # epoch's part before the stop is not kept)
        started = time.perf_counter() - (state.time_trace[-1] if state.time_trace else 0.0)
        since_checkpoint = 0
        while state.epoch < self.n_epochs:
            if state.pos >= len(state.queue):  # a new epoch: every known document once
                state.queue = _shuffled_refs(state.sizes, rng)
                state.pos = 0
            bar = progress_bar(len(state.queue), f"epoch {state.epoch + 1}", self.progress)
            bar.update(state.pos)
            while state.pos < len(state.queue):
                self._take_new(stream, state, rng)
                refs = state.queue[state.pos : state.pos + self.minibatch_size]
                self._minibatch(stream, executor, state, refs, chain)
                state.pos += len(refs)
                state.rng_state = dict(rng.bit_generator.state)
                bar.update(len(refs))
                if on_minibatch is not None:
                    on_minibatch(state)
                since_checkpoint += 1
                if state.pos < len(state.queue) and stop_requested is not None and stop_requested():
                    bar.close()
                    if checkpoint is not None:
                        checkpoint(state)
                    logger.info("svi-gibbs stopped after minibatch %d", state.step)
                    return state
                # not after an epoch's last minibatch: the epoch's end is checkpointed
                # once it is counted (a state between the two would redo the epoch)
                due = since_checkpoint >= self.checkpoint_every and state.pos < len(state.queue)
                if checkpoint is not None and due:
                    checkpoint(state)
                    since_checkpoint = 0
            bar.close()
            state.epoch += 1
            state.nonzero_trace.append(state.topics.n_stored)
            state.docs_trace.append(stream_docs(state))
            state.time_trace.append(time.perf_counter() - started)
            prior = self.alpha if state.topics.prior is None else state.topics.prior.alpha
            state.alpha_trace.append(float(np.sum(prior)))
            logger.info(
                "svi-gibbs epoch %d: %d minibatches, %d stored entries of N-tilde (%.3g%% of KV)",
                state.epoch, state.step, state.topics.n_stored,
                100.0 * state.topics.n_stored / (self.n_topics * stream.n_features),
            )  # fmt: skip
            if on_epoch is not None:
                on_epoch(state)
            state.finished = state.epoch >= self.n_epochs
            if checkpoint is not None:
                checkpoint(state)
                since_checkpoint = 0
            if stop_requested is not None and stop_requested() and not state.finished:
                return state
        state.finished = True
        return state

    def _minibatch(
        self,
        stream: DocumentStream,
        executor: Executor,
        state: StreamState,
        refs: np.ndarray,
        chain: _Chain,
    ) -> None:
        """One step of Alg. 1 on the documents ``refs``: one wave of tasks, each
        sampling its part against its process's replica of the topics.

        Before this step's sum comes back, the epoch's next minibatch is started
        too (its tasks take this step's sum where it is made), so the workers go
        on while the driver updates its topics; ``chain.ahead`` keeps it for the
        next step, which uses it if its documents are the same (no new documents
        were shuffled in; after a stop nobody does)."""
        started = time.perf_counter()
        t = state.step + 1
        ahead, chain.ahead = chain.ahead, None
        with _phase("driver_start"):
            if ahead is not None and ahead.step == t and np.array_equal(ahead.refs, refs):
                current = ahead
            else:
                current = self._start(stream, executor, state, refs, chain, t, ())
            rho = (self.delay + t) ** (-self.kappa)
            factor = stream_docs(state) / (len(refs) * self._per_token())
            due = prunes_at(t, self.minibatch_size, self.prune_every_docs)
            prune = self.prune * self.eta if due else 0.0
            sweeps = self.samples if self.learn_alpha else 0
            scale = stream_docs(state) / (len(refs) * self.samples) if sweeps else 0.0
            update = Update(t, rho, factor, prune, sweeps, scale)
            end = state.pos + len(refs)
            following = state.queue[end : end + self.minibatch_size]
            if len(following):
                pending = ((update, current.summed),)
                chain.ahead = self._start(stream, executor, state, following, chain, t + 1, pending)
        asked = time.perf_counter()
        parts: list[PartCounts] = executor.fetch(current.summed)
        back = time.perf_counter()
        if state.minibatch_log is not None:
            state.minibatch_log.append(np.concatenate([p.doc_ids for p in parts]))
        if all(p.n_tokens is not None for p in parts):
            tokens = np.concatenate([p.n_tokens for p in parts if p.n_tokens is not None])
            chain.tokens.record(current.refs, tokens, state.sizes)
        with _phase("driver_update"):
            _apply_parts(state.topics, parts, update, self.reset_below)
        chain.add(update, current.summed)
        state.step = t
        state.task_seconds += back - asked
        state.driver_seconds += (asked - started) + (time.perf_counter() - back)

    def _start(
        self,
        stream: DocumentStream,
        executor: Executor,
        state: StreamState,
        refs: np.ndarray,
        chain: _Chain,
        t: int,
        pending: tuple[tuple[Update, Any], ...],
    ) -> _Started:
        """Start step ``t``'s tasks on ``refs``, the driver's topics being those after
        step ``t - 1 - len(pending)`` and ``pending`` the updates since."""
        n_parts = max(1, min(executor.n_slots, len(refs)))
        bounds = balanced_bounds(chain.tokens.weights(refs, state.sizes), n_parts)
        where = f"{stream.description}, minibatch {t}"
        parts = [stream.part(refs[a:b], where) for a, b in itertools.pairwise(bounds) if b > a]
        handles = executor.register(parts)
        shared = chain.shared(executor, state.topics, state.step, pending)
        task = GibbsTask(
            self.burnin,
            self.samples,
            state.seed,
            chain.alpha,
            t,
            self.estimator,
            self.quanta,
            self.weights,
            self.learn_alpha,
        )
        return _Started(t, refs, executor.start_parts(task, handles, shared))

    def _take_new(
        self, stream: DocumentStream, state: StreamState, rng: np.random.Generator
    ) -> bool:
        """Look at the stream; shuffle new documents into the epoch's unvisited part."""
        if stream.refresh() == 0 and len(stream.keys) == len(state.keys):
            return False
        known = len(state.keys)
        state.keys = stream.keys
        state.sizes = stream.sizes
        new = [_group_refs(g, n) for g, n in enumerate(state.sizes[known:], start=known)]
        rest = np.concatenate([state.queue[state.pos :], *new])
        state.queue = np.concatenate([state.queue[: state.pos], rng.permutation(rest)])
        return True

    def _catch_up(
        self, stream: DocumentStream, state: StreamState, rng: np.random.Generator
    ) -> None:
        """Match a (resumed) state's groups to the stream's: groups gone are dropped
        from the queue (logged), groups new to the state are shuffled in. After a
        finished epoch only the groups are updated: the next epoch shuffles every
        document known when it starts."""
        stream.refresh()
        if not state.keys:  # a fresh start: the groups known now make the first epoch
            state.keys, state.sizes = stream.keys, stream.sizes
            state.queue = _shuffled_refs(state.sizes, rng)
            state.pos = 0
            return
        epoch_done = state.pos >= len(state.queue)
        index = {k: i for i, k in enumerate(stream.keys)}
        gone = [k for k in state.keys if k not in index]
        if gone:
            logger.warning(
                "%d row groups of the checkpoint left %s; their documents are not visited",
                len(gone), stream.description,
            )  # fmt: skip
        remap = np.array([index.get(k, -1) for k in state.keys], np.int64)
        queue = state.queue.copy()
        if len(queue):
            queue[:, 0] = remap[queue[:, 0]]
        visited = queue[: state.pos]
        rest = queue[state.pos :]
        state.queue = np.concatenate([visited[visited[:, 0] >= 0], rest[rest[:, 0] >= 0]])
        state.pos = int((visited[:, 0] >= 0).sum())
        old = set(state.keys)
        fresh = [i for i, k in enumerate(stream.keys) if k not in old]
        state.keys, state.sizes = stream.keys, stream.sizes
        if epoch_done:  # the queue is spent: run() draws the next epoch's order
            return
        if fresh:
            new = [_group_refs(g, state.sizes[g]) for g in fresh]
            rest = np.concatenate([state.queue[state.pos :], *new])
            state.queue = np.concatenate([state.queue[: state.pos], rng.permutation(rest)])


@dataclass
class _Started:
    """A step whose tasks were started: its documents and the handle of its
    parts' counts."""

    step: int
    refs: np.ndarray
    summed: Any


class _Chain:
    """The driver's side of the replicas: the base last broadcast and the updates
    since (their parts' counts left where their tasks made them); and the next
    minibatch when it was started early."""

    def __init__(self, alpha: np.ndarray, rebase_every: int, reset_below: float) -> None:
        self.key = uuid.uuid4().hex
        self.alpha = tuple(float(a) for a in alpha)
        self.rebase_every = rebase_every
        self.reset_below = reset_below
        self.base: Any = None
        self.base_step = -1
        self.updates: list[tuple[Update, Any]] = []
        self.ahead: _Started | None = None  # the next minibatch, started early
        self.tokens = _DocTokens()

    def shared(
        self,
        executor: Executor,
        topics: SparseTopics,
        topics_step: int,
        pending: tuple[tuple[Update, Any], ...],
    ) -> tuple[Any, ...]:
        """What a step's tasks get the topics from: the driver's ``topics`` are those
        after step ``topics_step``, ``pending`` the updates after it not applied to
        them yet. The topics are broadcast again once ``rebase_every`` updates
        are chained."""
        if self.base is None or len(self.updates) >= self.rebase_every:
            # a copy: the driver's topics change under the next update
            self.base = executor.broadcast(copy.deepcopy(topics))
            self.base_step = topics_step
            self.updates = []
        if self.base_step + len(self.updates) != topics_step:
            raise RuntimeError(
                f"the replicas' base (step {self.base_step}) and {len(self.updates)} updates "
                f"do not make the driver's topics after step {topics_step}"
            )
        source = TopicsSource(self.key, self.base_step, self.reset_below)
        return (source, self.base, (*self.updates, *pending))

    def add(self, update: Update, summed: Any) -> None:
        """Chain step ``update.step``'s update, once the driver has applied it."""
        self.updates.append((update, summed))


class _DocTokens:
    """Each document's tokens as the tasks reported them, over the groups known
    (groups only arrive, so a document keeps its place): what a minibatch is
    split by, so that the parts take about as long. A document not read yet
    weighs the mean of those read (all weigh 1 before any is)."""

    def __init__(self) -> None:
        self.tokens = np.zeros(0)  # nan where not known yet
        self.offsets = np.zeros(1, np.int64)  # where each group's documents start

    def _index(self, refs: np.ndarray, sizes: list[int]) -> np.ndarray:
        if len(sizes) + 1 != self.offsets.size:  # new groups: room for their documents
            self.offsets = np.r_[0, np.cumsum(sizes, dtype=np.int64)]
            grown = np.full(int(self.offsets[-1]), np.nan)
            grown[: self.tokens.size] = self.tokens
            self.tokens = grown
        return self.offsets[refs[:, 0]] + refs[:, 1]

    def record(self, refs: np.ndarray, tokens: np.ndarray, sizes: list[int]) -> None:
        at = self._index(refs, sizes)  # first: it may grow ``tokens``
        self.tokens[at] = tokens

    def weights(self, refs: np.ndarray, sizes: list[int]) -> np.ndarray:
        at = self._index(refs, sizes)  # first: it may grow ``tokens``
        w = self.tokens[at]
        known = ~np.isnan(w)
        w[~known] = w[known].mean() if known.any() else 1.0
        return np.maximum(w, 1.0)  # an empty document still costs its start


def balanced_bounds(weights: np.ndarray, n_parts: int) -> np.ndarray:
    """Where to cut ``weights`` into ``n_parts`` runs of about equal sums: the
    ``n_parts + 1`` bounds, the first 0 and the last ``len(weights)`` (a run may
    be empty where one weight outweighs the rest)."""
    cum = np.cumsum(weights, dtype=np.float64)
    targets = cum[-1] * np.arange(1, n_parts) / n_parts
    # the cut nearest each target: after the document whose running sum is closest
    after = np.searchsorted(cum, targets)
    before = np.maximum(after - 1, 0)
    nearer = np.where(np.abs(cum[before] - targets) <= np.abs(cum[after] - targets), before, after)
    cuts = np.maximum.accumulate(nearer + 1)
    return np.r_[0, np.minimum(cuts, len(weights)), len(weights)].astype(np.int64)


def prunes_at(t: int, minibatch_size: int, every_docs: int) -> bool:
    """Whether step ``t`` (from 1) prunes: its minibatch of ``minibatch_size``
    documents passes a multiple of ``every_docs`` documents since the start."""
    return (t * minibatch_size) // every_docs > ((t - 1) * minibatch_size) // every_docs


def stream_docs(state: StreamState) -> int:
    """D: documents in the stream as the state knows it."""
    return int(sum(state.sizes))


def _shuffled_refs(sizes: list[int], rng: np.random.Generator) -> np.ndarray:
    """Every document of the groups, as (group, row), in a random order."""
    if not sizes:
        return np.zeros((0, 2), np.int64)
    refs = np.concatenate([_group_refs(g, n) for g, n in enumerate(sizes)])
    return refs[rng.permutation(len(refs))]


def _group_refs(g: int, n: int) -> np.ndarray:
    """The documents of group ``g`` (of ``n``) as (group, row) pairs."""
    return np.column_stack([np.full(n, g, np.int64), np.arange(n, dtype=np.int64)])
