"""The contracts the learning loops are written against.

The loops of :mod:`lsdask.learn` see their collaborators only through these
protocols (structural types: a class satisfies one by having its members, it
does not inherit from it):

- :class:`Model`: the math of one model (lsparse Sec. 2-3): the local step
  of a batch, the global step from whole-data statistics ``S``, and the ELBO
  computed exactly from ``S`` and the globals;
- :class:`Batch`: one fixed memoized batch, loaded where its task runs;
- :class:`Executor`: where batch tasks run (in this process, or on Dask);
- :class:`MemoStore`: where memoized VI keeps each batch's statistics
  ``S_b`` between visits (in memory, or in files).

A capability that only some collaborators have is a small protocol of its
own, checked with ``isinstance`` (:class:`CountsTokens`, :class:`HasCost`,
:class:`InMemoryMemo`, :class:`StepsFromPrevious`).
The executors (:mod:`lsdask.engine`) and the on-disk memo
(:mod:`lsdask.persist.memo_files`) sit above this package and satisfy these
protocols without importing anything from the loops.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, Self, TypeAlias, TypeVar, runtime_checkable

from lsdask.models.stats import SuffStats

#: a model's global parameters (its variational posterior over the globals,
#: e.g. :class:`lsdask.models.MixtureGlobals`)
G = TypeVar("G")

#: what a task returns
R = TypeVar("R")

#: what an executor hands back for a batch or a broadcast object, to be passed
#: back to it: the object itself in this process, a Dask future on a cluster
Handle: TypeAlias = object

#: a wave of tasks started by :meth:`Executor.submit`, opaque to the caller
Pending: TypeAlias = object


class Model(Protocol[G]):
    """What the learning loops need of a model (allocation x observation).

    Every method is a pure function of its arguments; statistics are additive
    (:class:`SuffStats`), so a batch's statistics can be added to and removed
    from the whole-data ``S``.
    """

    def local_step(self, rows: Any, glob: G, sparsity: int | None) -> SuffStats:
        """The statistics ``S_b`` of one batch's rows (what :meth:`Batch.load`
        returned) under the globals: responsibilities ``r_n`` (dense with
        ``sparsity=None``, else the top L per row, lsparse Eq. 8) summarized."""
        ...

    def empty_stats(self) -> SuffStats:
        """Zero statistics of the model's shapes."""
        ...

    def for_local_step(self, glob: G) -> G:
        """The part of the globals the local step reads (what is broadcast)."""
        ...

    def global_step(self, stats: SuffStats) -> G:
        """The optimal globals given whole-data statistics ``S``."""
        ...

    def elbo(self, stats: SuffStats, glob: G) -> float:
        """The ELBO, exact from the whole-data statistics and the globals
        (lsparse Eq. 18; App. C for LDA)."""
        ...

    def row_count(self, stats: SuffStats) -> float:
        """Observations (rows, documents) summarized in the statistics."""
        ...

    def data_size(self, stats: SuffStats) -> float:
        """What the ELBO is reported per (rows of a mixture, tokens of LDA)."""
        ...


@runtime_checkable
class CountsTokens(Protocol):
    """A model of word tokens (LDA): its progress line reports tokens per second."""

    def token_count(self, stats: SuffStats) -> float:
        """Word tokens summarized in the statistics."""
        ...


@runtime_checkable
class StepsFromPrevious(Protocol):
    """A model whose global step also starts from the globals it replaces.

    Part of its globals (the HDP's stick posteriors) is found by a numerical
    search that starts from their previous values and keeps a result only
    where the objective rises, so the globals are not a function of the
    statistics alone. The loops pass that part from each global step to the
    next (:func:`lsdask.learn.base.next_globals`), and a checkpoint keeps it
    (:attr:`lsdask.learn.state.LearnState.carried`), from which a resumed run
    restores the globals it stopped with (:func:`lsdask.learn.base.resumed_globals`).
    """

    def carry(self, glob: Any) -> dict[str, list[float]]:
        """What the next global step starts from, of the globals ``glob``, as
        JSON-able lists of floats (a checkpoint stores it)."""
        ...

    def global_step_from(self, stats: SuffStats, carried: Mapping[str, Any] | None) -> Any:
        """The global step from whole-data statistics, its search started from
        ``carried`` (what :meth:`carry` returned); None starts it from the
        model's own start, as :meth:`Model.global_step` does."""
        ...

    def restore_globals(self, stats: SuffStats, carried: Mapping[str, Any]) -> Any:
        """The globals that a global step on ``stats`` left and :meth:`carry`
        described as ``carried``, without a new search (a resumed run's)."""
        ...


@runtime_checkable
class HasMoves(Protocol):
    """A model whose laps prepare and judge moves that change its number of
    components (the HDP's delete and merge moves, :mod:`lsdask.models.hdp_moves`).

    At the start of a lap the loop asks for the lap's plan, which rides on the
    globals to every local step; at its end, with every batch visited, the model
    judges the plan from the whole-data statistics and the memo's entries, and
    the loop applies the accepted moves to every entry, so the memo still sums to
    the whole-data statistics, and continues with the resized model.
    """

    @property
    def has_moves(self) -> bool:
        """Whether the laps prepare moves at all."""
        ...

    @property
    def n_components(self) -> int: ...

    def resized(self, n_components: int) -> Any:
        """This model with ``n_components`` components (a checkpoint's, after moves)."""
        ...

    def plan_moves(self, stats: SuffStats, glob: Any, lap: int) -> Any:
        """The globals with lap ``lap``'s plan, chosen from the statistics."""
        ...

    def judge_moves(
        self, stats: SuffStats, glob: Any, entries: Iterator[SuffStats], sparsity: int | None
    ) -> MoveJudgement:
        """Judge the plan of ``glob`` given the whole-data statistics and every
        batch's memo entry (batch order)."""
        ...

    def apply_move_map(self, move_map: dict[str, Any], stats: SuffStats) -> SuffStats:
        """One batch's memo entry under the moves ``move_map`` describes
        (:meth:`MoveJudgement.move_map`)."""
        ...


class MoveJudgement(Protocol):
    """What :meth:`HasMoves.judge_moves` decided."""

    @property
    def model(self) -> Any:
        """The model to go on with (resized where moves were accepted)."""
        ...

    @property
    def carried(self) -> dict[str, list[float]]:
        """What the globals are restored from (:meth:`StepsFromPrevious.restore_globals`)."""
        ...

    @property
    def n_accepted(self) -> int: ...

    def kept_globals(self, glob: Any) -> Any:
        """Where nothing was accepted: the judged globals ``glob`` with what
        :attr:`carried` changes, equal to those it restores (the statistics and the
        sticks are the same), without recomputing the topics."""
        ...

    @property
    def kept_objective(self) -> float | None:
        """Where nothing was accepted, the objective of :meth:`kept_globals` at the
        same statistics if the judgement computed it (else None)."""
        ...

    def edit(self, b: int, stats: SuffStats) -> SuffStats:
        """Batch ``b``'s memo entry under the accepted moves."""
        ...

    @property
    def stats(self) -> SuffStats:
        """The whole-data statistics under the accepted moves (the sum of every
        batch's edited entry)."""
        ...

    @property
    def eager_batches(self) -> set[int]:
        """The batches whose entries cannot be edited from the map alone (they
        need what only the judgement computed): edited at once."""
        ...

    def move_map(self) -> dict[str, Any]:
        """A JSON-able description of the accepted moves, which
        :meth:`HasMoves.apply_move_map` applies to any other batch's entry."""
        ...

    def summary(self) -> str:
        """One line for the log."""
        ...


class Batch(Protocol):
    """One fixed batch of the data: small and picklable, it loads its own rows
    inside the task (:mod:`lsdask.io.sources`, :mod:`lsdask.io.corpus`)."""

    @property
    def where(self) -> str:
        """Where the batch lies, for error messages."""
        ...

    def load(self) -> Any:
        """The batch's rows, in the form the model's local step reads (a dense
        array, a CSR matrix of counts)."""
        ...


@runtime_checkable
class HasCost(Protocol):
    """A batch that knows the work of its task, so that waves can group
    batches of similar cost (:func:`lsdask.learn.base.lap_order`)."""

    @property
    def cost(self) -> float:
        """Work of the batch's task relative to the others (rows, tokens); may
        raise ValueError or TypeError where it is not known."""
        ...


class Addable(Protocol):
    """What :meth:`Executor.map_sum` adds: statistics, numbers."""

    def __add__(self, other: Self) -> Self: ...


A = TypeVar("A", bound=Addable)


#: a task mapped over batches: ``fn(batch, shared)``, where the executor has
#: turned the handles back into the batch and the broadcast object
Task: TypeAlias = Callable[[Any, Any], R]


class Executor(Protocol):
    """Where batch tasks run; the loops never know whether that is Dask.

    - ``register(batches)``: once per run, make the batches' loaders available
      where tasks run; returns one handle per batch;
    - ``broadcast(obj)``: once per global update, make the globals available;
    - ``map(fn, handles, shared)``: run ``fn(batch, shared)`` for each handle and
      return the results in order; ``submit`` and ``collect`` are the same in
      two halves, so the driver can work (write memo, compute the ELBO) while
      the workers run the next wave;
    - ``map_sum(fn, handles, shared)``: the same, summed in a binary tree
      (pairs of neighbours, then pairs of pairs), so only one result reaches
      the driver. Every executor pairs results the same way, so sums are
      identical;
    - ``start_parts`` and ``fetch``: ``map_sum`` in two halves, with no sum made:
      the handle's value is a list of terms whose sum is ``map_sum``'s (the
      tasks' results, left where they ran). The handle can also be passed to
      later tasks, which get the terms where they were made, without a trip
      through the driver, and add them themselves: no task waits for a sum.

    ``shared`` is a handle, or a tuple (nested tuples too) of handles and plain
    values: the task gets the same tuple with every handle turned into its value.

    An executor never knows what the function computes.
    """

    @property
    def n_slots(self) -> int:
        """How many batches this executor runs at once."""
        ...

    def register(self, batches: Sequence[Batch]) -> list[Handle]: ...

    def broadcast(self, obj: object) -> Handle: ...

    def map(self, fn: Task[R], handles: Sequence[Handle], shared: Handle) -> list[R]: ...

    def submit(self, fn: Task[R], handles: Sequence[Handle], shared: Handle) -> Pending:
        """Start one task per handle; :meth:`collect` returns their results."""
        ...

    def collect(self, pending: Pending) -> list[Any]:
        """The results of :meth:`submit`'s tasks, in order."""
        ...

    def map_sum(self, fn: Task[A], handles: Sequence[Handle], shared: Handle) -> A: ...

    def start_parts(self, fn: Task[A], handles: Sequence[Handle], shared: Handle) -> Handle:
        """Start the tasks; a handle of a list of terms whose sum is what
        :meth:`map_sum` computes (see :meth:`fetch`)."""
        ...

    def fetch(self, handle: Handle) -> Any:
        """The value of a :meth:`start_parts` handle."""
        ...

    def memory(self) -> list[int]:
        """Resident memory of each worker process in bytes, for the progress
        line (empty where there are no worker processes, or no answer)."""
        ...

    def close(self) -> None: ...


class MemoStore(Protocol):
    """Each batch's statistics ``S_b`` as of its last visit (memoized VI).

    :class:`lsdask.learn.memo_store.MemoryMemo` keeps them in memory,
    :class:`lsdask.persist.memo_files.DiskMemo` in files.
    """

    def __len__(self) -> int:
        """Batches (kept or not)."""
        ...

    def get(self, b: int) -> SuffStats | None:
        """Batch ``b``'s statistics, None before its first visit."""
        ...

    def put(self, b: int, stats: SuffStats) -> None:
        """Keep ``stats`` as batch ``b``'s statistics (replacing the old)."""
        ...

    def has(self, b: int) -> bool:
        """Whether batch ``b`` has statistics."""
        ...

    def values(self) -> Iterator[SuffStats]:
        """The kept statistics, in batch order."""
        ...


@runtime_checkable
class InMemoryMemo(MemoStore, Protocol):
    """A memo held in memory, which a run's result can list (tests, small data)."""

    def as_list(self) -> list[SuffStats | None]:
        """Every batch's statistics (None where not visited), in batch order."""
        ...
