"""The Dask executor: one task per batch on a distributed cluster.

- By default it starts a :class:`distributed.LocalCluster` of worker
  *processes* with one thread each (numba kernels are serial, so Dask's
  processes are the only parallelism and cores are never oversubscribed;
  ``distributed`` also sets ``OMP_NUM_THREADS=1`` etc. in its workers).
- ``client=`` uses an existing client; a ``tcp://`` address connects to a
  running scheduler.
- Globals are scattered once per update (one future, broadcast to the
  workers) and passed to every task by reference.
- ``map_sum`` adds batch statistics in a tree on the workers; futures are
  dropped once gathered, so the scheduler's task count stays flat however
  many laps run. ``start_parts`` leaves the tasks' results where they ran,
  unsummed, so later tasks can take them from there (``fetch`` gathers them
  for the driver).
- Every task is a pure function of (batch, globals): one that runs twice,
  or again after its worker was lost, returns the same statistics, and each
  result is added exactly once, on the driver, in batch order.
- The slots a fit groups its batches by (:attr:`DaskExecutor.n_slots`) are
  those the cluster was set up with, fixed for the executor's life: a worker
  lost before the first wave, or one still starting, changes neither the
  waves nor the result.
- In-memory batches are scattered once per run; Zarr and dask-array loaders
  are small and read their own rows inside the task.
- A worker lost with scattered data (in-memory batches, the globals), or
  while the globals were being sent, does not end the run: the executor
  keeps what it scattered, sends it again from the driver, and runs the
  wave's unfinished tasks again (with a warning each time, up to
  ``config.LOST_WORKER_RETRIES`` times in a row). Tasks are pure, so the
  result is the undisturbed run's.
"""

from __future__ import annotations

import logging
import operator
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NoReturn, TypeVar, cast

from lsdask import config
from lsdask.config import NOTICE
from lsdask.errors import ClusterError, one_line
from lsdask.learn.protocols import A, Batch, Executor, Handle, Pending, Task

if TYPE_CHECKING:  # distributed itself is imported only when a cluster is used
    from distributed import Client, Future, LocalCluster

    from lsdask.engine.executor import SerialExecutor

R = TypeVar("R")

logger = logging.getLogger(__name__)


class DaskExecutor:
    """Run batch tasks on a Dask cluster.

    Parameters
    ----------
    client : distributed.Client, str or None
        An existing client, a scheduler address, or None for a new
        LocalCluster owned (and closed) by this executor.
    n_workers : int or None
        Worker processes of a new LocalCluster; default the number of cores.
    """

    def __init__(self, client: Client | str | None = None, n_workers: int | None = None) -> None:
        self.client, self._owned = open_client(client, n_workers or os.cpu_count() or 1)
        # what was scattered, by future key, to send again after a worker is lost
        self._scattered: dict[str, object] = {}
        self._broadcasts: OrderedDict[str, None] = OrderedDict()  # the newest few
        # a lost scattered future's key -> the future that replaced it
        self._replaced: dict[str, Future[Any]] = {}
        self._asking_memory: threading.Thread | None = None  # the last memory() question
        self._wait_for_a_worker()  # a scheduler without workers: say so before any work
        self._slots = self._planned_slots()

    @property
    def n_slots(self) -> int:
        """The tasks the cluster runs at once, as it was set up: a fit groups its
        batches into waves (updates) of this many, so it is fixed for the
        executor's life; a worker lost (or not yet started) does not change it,
        nor, therefore, the result."""
        return self._slots

    def _planned_slots(self) -> int:
        """The threads of the workers the cluster is meant to have: a
        LocalCluster's (any cluster object's with a ``worker_spec``) as specified,
        whether or not all run now; for a scheduler reached by its address, the
        threads of the workers it has now."""
        spec = getattr(getattr(self.client, "cluster", None), "worker_spec", None)
        if isinstance(spec, dict) and spec:
            threads = [
                (s.get("options") or {}).get("nthreads", 1) if isinstance(s, dict) else 1
                for s in spec.values()
            ]
            if all(isinstance(n, int) and n >= 1 for n in threads):
                return max(1, sum(threads))
        info = self.client.scheduler_info(n_workers=-1)
        return max(1, sum(w.get("nthreads", 1) for w in info["workers"].values()))

    def register(self, batches: Sequence[Batch]) -> list[Handle]:
        from lsdask.io.sources import ArrayBatch

        handles: list[Handle] = list(batches)
        in_memory = [i for i, b in enumerate(batches) if isinstance(b, ArrayBatch)]
        if in_memory:
            futures = self._retrying(
                "sending the batches", lambda: self._scatter([batches[i] for i in in_memory])
            )
            for i, fut in zip(in_memory, futures, strict=True):
                handles[i] = fut
                self._scattered[fut.key] = batches[i]
        return handles

    def broadcast(self, obj: object) -> Handle:
        fut = self._retrying("sending the globals", lambda: self._scatter(obj, broadcast=True))
        self._scattered[fut.key] = obj
        self._broadcasts[fut.key] = None
        # older globals are never used again (memo collects a wave before it sends the
        # next globals; a caller keeping more waves in flight needs a larger number)
        while len(self._broadcasts) > _BROADCASTS_KEPT:
            old, _ = self._broadcasts.popitem(last=False)
            self._scattered.pop(old, None)
            for lost in [k for k, new in self._replaced.items() if new.key == old]:
                del self._replaced[lost]  # the future that replaced it is released too
        return fut

    def map(self, fn: Task[R], handles: Sequence[Handle], shared: Handle) -> list[R]:
        return self.collect(self.submit(fn, handles, shared))

    def submit(self, fn: Task[R], handles: Sequence[Handle], shared: Handle) -> Pending:
        """Start one task per handle; returns the wave's futures (see :meth:`collect`)."""
        current = [self._current(h) for h in handles]
        shared = self._current(shared)
        futures = [self.client.submit(fn, h, shared, pure=False) for h in current]
        return _Wave(fn, current, shared, futures)

    def collect(self, pending: Pending) -> list[Any]:
        """The results of :meth:`submit`'s tasks, in order (the futures are released)."""
        wave = cast(_Wave[Any], pending)  # what submit returned
        for attempt in range(config.LOST_WORKER_RETRIES + 1):
            try:
                return self.client.gather(wave.futures)
            except _lost_worker_errors() as exc:
                self._recover(exc, attempt, len(wave.futures))
                wave.handles, wave.shared = self._resent(wave.handles, wave.shared)
                wave.futures = [
                    f if f.status == "finished" else
                    self.client.submit(wave.fn, h, wave.shared, pure=False)
                    for f, h in zip(wave.futures, wave.handles, strict=True)
                ]  # fmt: skip
        raise AssertionError("unreachable")  # _recover raises on the last attempt

    def map_sum(self, fn: Task[A], handles: Sequence[Handle], shared: Handle) -> A:
        """Map, then add results pairwise on the workers; one result is gathered."""
        for attempt in range(config.LOST_WORKER_RETRIES + 1):
            try:
                return self._tree_sum(fn, handles, shared).result()
            except _lost_worker_errors() as exc:
                self._recover(exc, attempt, len(handles))
                handles, shared = self._resent(handles, shared)
        raise AssertionError("unreachable")  # _recover raises on the last attempt

    def start_parts(self, fn: Task[A], handles: Sequence[Handle], shared: Handle) -> Handle:
        """Start the tasks, with no sum: the handle's value (by :meth:`fetch`, or in a
        later task that takes it) is the list of their results, each taken from the
        worker that made it. Dropping the handle releases them."""
        return _Parts(fn, list(handles), shared, self._parts(fn, handles, shared))

    def fetch(self, handle: Handle) -> Any:
        """The value of a :meth:`start_parts` handle; after a lost worker its tasks
        run again (pure tasks give the same results)."""
        started = cast(_Parts, handle)  # what start_parts returned
        for attempt in range(config.LOST_WORKER_RETRIES + 1):
            try:
                value = self.client.gather(started.futures)
                # what made it is not needed any more: a handle passed on to later
                # tasks must not keep every earlier step's inputs alive
                started.handles, started.shared = [], ()
                return value
            except _lost_worker_errors() as exc:
                self._recover(exc, attempt, len(started.handles))
                started.handles, started.shared = self._resent(started.handles, started.shared)
                started.futures = self._parts(started.fn, started.handles, started.shared)
        raise AssertionError("unreachable")  # _recover raises on the last attempt

    def _parts(self, fn: Task[A], handles: Sequence[Handle], shared: Handle) -> list[Future[A]]:
        """The futures of the tasks' results."""
        shared = self._current(shared)
        return [self.client.submit(fn, self._current(h), shared, pure=False) for h in handles]

    def _tree_sum(self, fn: Task[A], handles: Sequence[Handle], shared: Handle) -> Future[A]:
        """The future of the pairwise sum of the tasks' results."""
        shared = self._current(shared)
        level = [self.client.submit(fn, self._current(h), shared, pure=False) for h in handles]
        while len(level) > 1:
            nxt = [
                self.client.submit(operator.add, level[i], level[i + 1], pure=False)
                for i in range(0, len(level) - 1, 2)
            ]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        return level[0]

    # ---- after a lost worker

    def _scatter(self, obj: object, broadcast: bool = False) -> Any:
        """A future of ``obj`` on the workers (a list of futures for a list)."""
        return self.client.scatter(obj, broadcast=broadcast, hash=False)

    def _current(self, handle: Handle, resend: bool = False) -> Handle:
        """``handle``, or the future that replaced it; with ``resend``, a
        scattered future no worker holds any more is scattered again."""
        from distributed import Future

        if isinstance(handle, tuple):  # a shared tuple: its handles, each current
            return tuple(self._current(h, resend) for h in handle)
        if isinstance(handle, _Parts):  # tasks started earlier: their latest futures
            return handle.futures
        if not isinstance(handle, Future):
            return handle  # a loader (a corpus row group, a Zarr chunk) or the globals in-process
        future = handle
        while future.key in self._replaced:
            future = self._replaced[future.key]
        key = future.key
        if resend and key in self._scattered and not self._held(future):
            obj = self._scattered[key]
            broadcast = key in self._broadcasts
            new = self._retrying("sending lost data again", lambda: self._scatter(obj, broadcast))
            self._scattered[new.key] = obj
            if broadcast:
                self._broadcasts[new.key] = None
            self._replaced[key] = new
            future = new
        return future

    def _resent(self, handles: Sequence[Handle], shared: Handle) -> tuple[list[Handle], Handle]:
        """A wave's inputs after a lost worker, what no worker holds sent again."""
        return [self._current(h, resend=True) for h in handles], self._current(shared, True)

    def _held(self, fut: Future[Any]) -> bool:
        if fut.status != "finished":
            return False
        return bool(self.client.who_has([fut]).get(fut.key))

    def _recover(self, exc: BaseException, attempt: int, n_tasks: int) -> None:
        """Log a lost worker and wait for one to run on; raise once retries are spent."""
        self._check_scheduler(exc)
        if attempt >= config.LOST_WORKER_RETRIES:
            raise ClusterError(
                f"Dask workers were lost {attempt + 1} times in a row ({type(exc).__name__}: "
                f"{one_line(exc)}); giving up. Check the workers' logs (memory limits, killed "
                "processes) and the network; a fit with a checkpoint folder resumes from "
                "its last lap (lsdask: --resume)"
            ) from exc
        logger.warning(
            "a Dask worker was lost (%s: %s); sending what it held again and rerunning "
            "the unfinished tasks of %d",
            type(exc).__name__, one_line(exc), n_tasks,
        )  # fmt: skip
        self._wait_for_a_worker(after_loss=True)

    def _check_scheduler(self, exc: BaseException) -> None:
        """A ClusterError when the connection to the scheduler is lost (no retry helps)."""
        if self.client.status == "running" and "scheduler-connection-lost" not in str(exc):
            return
        self._lost_scheduler(exc)

    def _lost_scheduler(self, exc: BaseException) -> NoReturn:
        address = getattr(getattr(self.client, "scheduler", None), "address", "?")
        raise ClusterError(
            f"lost the connection to the Dask scheduler at {address} ({type(exc).__name__}: "
            f"{one_line(exc)}). Restart the cluster and run again; a fit with a checkpoint "
            "folder resumes from its last lap (lsdask: --resume DIR)"
        ) from exc

    def _cluster_totals(self) -> dict[str, Any]:
        """The scheduler's address and totals (``n_workers``, no per-worker entries);
        a ClusterError when it cannot be reached (its identity is empty once the
        client lost it)."""
        try:
            info = self.client.scheduler_info(n_workers=0)
        except OSError as exc:  # CommClosedError among them
            self._lost_scheduler(exc)
        if not info or self.client.status not in ("running", "newly-created"):
            self._lost_scheduler(ConnectionError(f"client status {self.client.status!r}"))
        return info

    def _wait_for_a_worker(self, after_loss: bool = False) -> None:
        """Return once the cluster has a worker; a ValueError (before a run: how it
        was set up) or a ClusterError (``after_loss``: workers lost under a run)
        after ``config.WORKER_WAIT_SECONDS`` without one."""
        totals = self._cluster_totals()
        if totals.get("n_workers"):
            return
        address = totals.get("address", "?")
        quiet = min(_QUIET_WAIT_SECONDS, config.WORKER_WAIT_SECONDS)  # workers still starting
        try:
            self.client.wait_for_workers(1, timeout=quiet)
            return
        except TimeoutError:  # distributed's WorkerStartTimeoutError is one
            pass
        logger.warning(
            "the Dask cluster at %s has no workers; waiting up to %d s more for one",
            address, config.WORKER_WAIT_SECONDS - quiet,
        )  # fmt: skip
        try:
            self.client.wait_for_workers(1, timeout=max(config.WORKER_WAIT_SECONDS - quiet, 0.1))
        except TimeoutError:
            if after_loss:
                raise ClusterError(
                    f"the Dask cluster at {address} lost its workers and has had none for "
                    f"{config.WORKER_WAIT_SECONDS} s; check the workers' logs (memory "
                    "limits, killed processes). A fit with a checkpoint folder resumes from "
                    "its last lap (lsdask: --resume DIR)"
                ) from None
            self.close()
            raise ValueError(
                f"the Dask cluster at {address} has had no workers for "
                f"{config.WORKER_WAIT_SECONDS} s; start workers (dask worker "
                "SCHEDULER_ADDRESS) or run without a cluster (client='sync'; lsdask: --sync)"
            ) from None

    def _retrying(self, what: str, send: Callable[[], R]) -> R:
        """``send()``, again after a lost connection to a worker (CommClosedError)."""
        # the scheduler's replication raises KeyError(address) for a worker that left
        # while the data was being copied to it; TimeoutError: "No valid workers
        # found" (none, or all paused)
        retried: tuple[type[BaseException], ...] = (
            *_lost_worker_errors(), KeyError, TimeoutError,
        )  # fmt: skip
        for attempt in range(config.LOST_WORKER_RETRIES + 1):
            try:
                return send()
            except retried as exc:
                if isinstance(exc, KeyError) and "://" not in str(exc):
                    raise
                self._check_scheduler(exc)
                if attempt >= config.LOST_WORKER_RETRIES:
                    raise ClusterError(
                        f"{what} to the Dask workers failed {attempt + 1} times in a row "
                        f"({type(exc).__name__}: {one_line(exc)}); check the workers and the "
                        "network"
                    ) from exc
                logger.warning(
                    "%s: a Dask worker was lost (%s: %s); trying again",
                    what, type(exc).__name__, one_line(exc),
                )  # fmt: skip
                time.sleep(0.5)
                self._check_scheduler(exc)  # the client may only now see a lost scheduler
                self._wait_for_a_worker(after_loss=True)
        raise AssertionError("unreachable")  # the last attempt raises

    def memory(self) -> list[int]:
        """Resident memory of each worker process, in bytes; for a progress line,
        so a worker that does not answer within a few seconds (hung, or gone) is
        left out rather than holding up the run."""

        def rss() -> int:
            import psutil

            return psutil.Process().memory_info().rss

        if self._asking_memory is not None and self._asking_memory.is_alive():
            return []  # the last question is still unanswered: do not wait again

        answers: list[dict[str, int]] = []  # worker address -> bytes

        def ask() -> None:
            try:
                answers.append(self.client.run(rss, on_error="ignore"))
            except Exception as exc:  # a closed client, a lost scheduler: no figures
                logger.info("no worker memory figures (%s: %s)", type(exc).__name__, exc)

        self._asking_memory = threading.Thread(target=ask, daemon=True)
        self._asking_memory.start()
        self._asking_memory.join(_MEMORY_TIMEOUT_SECONDS)
        if not answers:
            logger.info(
                "the Dask workers did not report their memory within %d s", _MEMORY_TIMEOUT_SECONDS
            )
            return []
        return list(answers[0].values())

    def close(self) -> None:
        for obj in self._owned:
            obj.close()
        self._owned = []

    def __enter__(self) -> DaskExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"DaskExecutor({self.client!r})"


#: seconds :meth:`DaskExecutor.memory` waits for the workers' answers
_MEMORY_TIMEOUT_SECONDS = 5

#: seconds to wait for a worker before warning that there is none (workers
#: started with the scheduler may still be connecting)
_QUIET_WAIT_SECONDS = 5

#: broadcasts kept for sending again: a wave in flight uses the newest or the one before
_BROADCASTS_KEPT = 3


@dataclass
class _Wave(Generic[R]):
    """Tasks started by :meth:`DaskExecutor.submit`: what ran them, to run again."""

    fn: Task[R]
    handles: list[Handle]
    shared: Handle
    futures: list[Future[Any]]


@dataclass
class _Parts:
    """The tasks started by :meth:`DaskExecutor.start_parts`: their futures, and
    what made them, to make them again."""

    fn: Task[Any]
    handles: list[Handle]
    shared: Handle
    futures: list[Future[Any]]


def _lost_worker_errors() -> tuple[type[BaseException], ...]:
    """What a task or a send raises when a worker (and data only it held) is lost."""
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError

    return (FutureCancelledError, CommClosedError)


def open_client(
    client: Client | str | None, n_workers: int, *, dashboard_address: str | None = None
) -> tuple[Client, list[Client | LocalCluster]]:
    """``(client, owned)``: ``client`` itself when it is a Client; for None, a
    Client of a new LocalCluster of ``n_workers`` processes (its dashboard at
    ``dashboard_address``, see :func:`start_local_cluster`); for a string, a
    Client of the scheduler at that address. ``owned``: what the caller
    closes when done (the new client and cluster; nothing for a given Client)."""
    from distributed import Client

    if client is None:
        logger.info("starting a Dask LocalCluster with %d worker processes", n_workers)
        cluster = start_local_cluster(n_workers, dashboard_address=dashboard_address)
        client = Client(cluster)
        owned: list[Client | LocalCluster] = [client, cluster]
    elif isinstance(client, str):
        logger.info("connecting to the Dask scheduler at %s", client)
        client = connect(client)
        owned = [client]
    else:
        owned = []
    if owned and getattr(client, "dashboard_link", None):  # a client of our own: say where
        logger.info("Dask dashboard: %s", client.dashboard_link, extra=NOTICE)
    return client, owned


def connect(address: str) -> Client:
    """A Client of the scheduler at ``address``; a ValueError for what is not an
    address (bad input), a :class:`~lsdask.errors.ClusterError` for a scheduler
    that cannot be reached there (the environment: lsdask exits with status 1)."""
    from distributed import Client

    try:
        return Client(address)
    except (OSError, TimeoutError, ValueError) as exc:  # ValueError: not an address
        error = ValueError if isinstance(exc, ValueError) else ClusterError
        raise error(
            f"client={address!r}: could not connect to a Dask scheduler at that address "
            f"({type(exc).__name__}: {exc}); check the address and that the scheduler runs, "
            "or start a local cluster (client=None; lsdask: --workers N) or run in this "
            "process (client='sync'; --sync)"
        ) from None


def start_local_cluster(n_workers: int, dashboard_address: str | None = None) -> LocalCluster:
    """A LocalCluster of ``n_workers`` single-threaded worker processes that
    ignore SIGINT.

    A Ctrl-C in a terminal (or ``timeout -s INT``) signals the whole process
    group: the workers would die under the fit, which then fails with
    cancelled futures instead of stopping after the wave under way and
    writing its checkpoint. The workers inherit an ignored SIGINT (set only
    while they start, from the main thread) and are closed with the cluster.

    The scheduler and the workers listen on 127.0.0.1 only; so does the
    dashboard, unless ``dashboard_address`` (``HOST:PORT``, e.g.
    ``"0.0.0.0:8787"``) opens it elsewhere.

    The workers' statistical profiler is off: it samples every thread's Python
    stack 100 times a second, which cannot see inside a numba kernel (where a
    batch task spends its time) and costs a few percent of a worker's CPU,
    taken from the tasks when the workers fill the cores.
    """
    import signal
    import threading

    import dask
    from distributed import LocalCluster

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        # loopback only: the scheduler, the workers and the dashboard (no
        # authentication) are not reachable from other machines
        with dask.config.set({"distributed.worker.profile.enabled": False}):
            return LocalCluster(
                n_workers=n_workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=dashboard_address or "127.0.0.1:0",
            )
    except RuntimeError as exc:
        raise RuntimeError(
            f"could not start a local Dask cluster of {n_workers} worker processes ({exc}). "
            "If this runs from a script: each worker process imports the script again, so "
            "run the fit under `if __name__ == '__main__':`, or pass client='sync' to run in "
            "this process (lsdask: --sync)"
        ) from exc
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)


def make_executor(
    client: Client | str | SerialExecutor | DaskExecutor | None = None,
    n_workers: int | None = None,
) -> Executor:
    """``"sync"`` gives the in-process executor; an executor is used as it is;
    anything else (a Client, a scheduler address, None) gives a :class:`DaskExecutor`."""
    from lsdask.engine.executor import SerialExecutor

    if isinstance(client, str) and client == "sync":
        return SerialExecutor()
    if isinstance(client, SerialExecutor | DaskExecutor):
        return client
    return DaskExecutor(client, n_workers=n_workers)
