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
  many laps run.
- Every task is a pure function of (batch, globals): one that runs twice,
  or again after its worker was lost, returns the same statistics, and each
  result is added exactly once, on the driver, in batch order.
- In-memory batches are scattered once per run; Zarr and dask-array loaders
  are small and read their own rows inside the task.
"""

from __future__ import annotations

import logging
import operator
import os
from collections.abc import Callable, Sequence
from typing import Any

from lsdask.config import NOTICE

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

    def __init__(self, client: Any = None, n_workers: int | None = None) -> None:
        self.client, self._owned = open_client(client, n_workers or os.cpu_count() or 1)

    @property
    def n_slots(self) -> int:
        info = self.client.scheduler_info(n_workers=-1)
        return max(1, sum(w.get("nthreads", 1) for w in info["workers"].values()))

    def register(self, batches: Sequence[Any]) -> list[Any]:
        from lsdask.io.sources import ArrayBatch

        handles: list[Any] = list(batches)
        in_memory = [i for i, b in enumerate(batches) if isinstance(b, ArrayBatch)]
        if in_memory:
            futures = self.client.scatter([batches[i] for i in in_memory], hash=False)
            for i, fut in zip(in_memory, futures, strict=True):
                handles[i] = fut
        return handles

    def broadcast(self, obj: Any) -> Any:
        return self.client.scatter(obj, broadcast=True, hash=False)

    def map(self, fn: Callable[[Any, Any], Any], handles: Sequence[Any], shared: Any) -> list:
        return self.collect(self.submit(fn, handles, shared))

    def submit(self, fn: Callable[[Any, Any], Any], handles: Sequence[Any], shared: Any) -> list:
        """Start one task per handle; returns the futures (see :meth:`collect`)."""
        return [self.client.submit(fn, h, shared, pure=False) for h in handles]

    def collect(self, pending: list) -> list:
        """The results of :meth:`submit`'s tasks, in order (the futures are released)."""
        return self.client.gather(pending)

    def map_sum(self, fn: Callable[[Any, Any], Any], handles: Sequence[Any], shared: Any) -> Any:
        """Map, then add results pairwise on the workers; one result is gathered."""
        level = [self.client.submit(fn, h, shared, pure=False) for h in handles]
        while len(level) > 1:
            nxt = [
                self.client.submit(operator.add, level[i], level[i + 1], pure=False)
                for i in range(0, len(level) - 1, 2)
            ]
            if len(level) % 2:
                nxt.append(level[-1])
            level = nxt
        return level[0].result()

    def memory(self) -> list[int]:
        """Resident memory of each worker process, in bytes."""

        def rss() -> int:
            import psutil

            return psutil.Process().memory_info().rss

        return list(self.client.run(rss).values())

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


def open_client(client: Any, n_workers: int) -> tuple[Any, list[Any]]:
    """``(client, owned)``: ``client`` itself when it is a Client; for None, a
    Client of a new LocalCluster of ``n_workers`` processes; for a string, a
    Client of the scheduler at that address. ``owned``: what the caller
    closes when done (the new client and cluster; nothing for a given Client)."""
    from distributed import Client

    if client is None:
        logger.info("starting a Dask LocalCluster with %d worker processes", n_workers)
        cluster = start_local_cluster(n_workers)
        client = Client(cluster)
        owned = [client, cluster]
    elif isinstance(client, str):
        logger.info("connecting to the Dask scheduler at %s", client)
        client = connect(client)
        owned = [client]
    else:
        owned = []
    if owned and getattr(client, "dashboard_link", None):  # a client of our own: say where
        logger.info("Dask dashboard: %s", client.dashboard_link, extra=NOTICE)
    return client, owned


def connect(address: str) -> Any:
    """A Client of the scheduler at ``address``, or a ValueError saying what to check."""
    from distributed import Client

    try:
        return Client(address)
    except (OSError, TimeoutError, ValueError) as exc:  # ValueError: not an address
        raise ValueError(
            f"client={address!r}: could not connect to a Dask scheduler at that address "
            f"({type(exc).__name__}: {exc}); check the address and that the scheduler runs, "
            "or start a local cluster (client=None; lsdask: --workers N) or run in this "
            "process (client='sync'; --sync)"
        ) from None


def start_local_cluster(n_workers: int) -> Any:
    """A LocalCluster of ``n_workers`` single-threaded worker processes that
    ignore SIGINT.

    A Ctrl-C in a terminal (or ``timeout -s INT``) signals the whole process
    group: the workers would die under the fit, which then fails with
    cancelled futures instead of stopping after the wave under way and
    writing its checkpoint. The workers inherit an ignored SIGINT (set only
    while they start, from the main thread) and are closed with the cluster.
    """
    import signal
    import threading

    from distributed import LocalCluster

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        return LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0"
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


def make_executor(client: Any = None, n_workers: int | None = None):
    """``"sync"`` gives the in-process executor; anything else a :class:`DaskExecutor`."""
    from lsdask.engine.executor import SerialExecutor

    if isinstance(client, str) and client == "sync":
        return SerialExecutor()
    if isinstance(client, SerialExecutor | DaskExecutor):
        return client
    return DaskExecutor(client, n_workers=n_workers)
