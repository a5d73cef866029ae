"""Parts pinned to workers: where ESVI's shards and blocks live (:mod:`lsdask.learn.esvi`).

Part p's tasks always run on the same worker (``workers=[w_p]``,
``allow_other_workers=False``), so its shard never moves; a handle given to a
task of another part (a parameter block) is copied to that worker by Dask and
the old one is released by the caller, so a block lives on one worker at a
time. A task's result is split into its items on the same worker, and each
item is a future of its own. The engine does not know what the tasks compute.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lsdask.errors import ClusterError
from lsdask.learn.protocols import Handle

#: seconds between checks that every part's worker is still in the cluster
_WATCH_SECONDS = 1.0

if TYPE_CHECKING:
    from distributed import Client


class SerialPartitions:
    """Every part in this process, one after another: the same schedule, no cluster."""

    def __init__(self, n_parts: int) -> None:
        self.n_parts = n_parts

    def run(
        self, fn: Callable[..., Any], args: Sequence[Sequence[Any]], shared: Handle, n_out: int
    ) -> list[list[Handle]]:
        out = []
        for a in args:
            result = fn(*a, shared)
            out.append(list(result) if n_out > 1 else [result])
        return out

    def submit(
        self, part: int, fn: Callable[..., Any], args: Sequence[Any], shared: Handle, n_out: int
    ) -> list[Handle]:
        """The task runs now: a schedule without a barrier, run in this process,
        sees its tasks end in the order they were started (:meth:`first_done`)."""
        result = fn(*args, shared)
        return list(result) if n_out > 1 else [result]

    def first_done(self, handles: Sequence[Handle]) -> list[int]:
        """The oldest task only, so a run without a barrier is deterministic."""
        if not handles:
            raise ValueError("first_done needs at least one handle")
        return [0]

    def broadcast(self, obj: object) -> Handle:
        return obj

    def gather(self, handles: Sequence[Handle]) -> list[Any]:
        return list(handles)

    def release(self, handles: Sequence[Handle]) -> None:
        pass

    def wait(self, handles: Sequence[Handle]) -> None:
        pass

    def settle(self, timeout: float = 30.0) -> None:
        pass

    def holdings(self, probe: Callable[[Any], Any]) -> dict[str, list[Any]]:
        """Nothing to inspect: every part is in this process."""
        return {}

    def close(self) -> None:
        pass


class DaskPartitions:
    """Parts pinned to the first ``n_parts`` workers of a Dask cluster (by address).

    Raises ValueError when the cluster has fewer workers than parts.
    """

    def __init__(self, client: Client, n_parts: int) -> None:
        self.client = client
        self.n_parts = n_parts
        workers = sorted(self._worker_addresses())
        if len(workers) < n_parts:
            raise ValueError(
                f"n_blocks={n_parts} needs {n_parts} Dask workers, one per block; the cluster "
                f"has {len(workers)}. Start more workers (n_workers={n_parts}; lsdask: "
                f"--workers {n_parts}) or use fewer blocks"
            )
        self.workers = workers[:n_parts]
        self._released: list[Any] = []

    def run(
        self, fn: Callable[..., Any], args: Sequence[Sequence[Any]], shared: Handle, n_out: int
    ) -> list[list[Handle]]:
        return [self.submit(p, fn, a, shared, n_out) for p, a in enumerate(args)]

    def submit(
        self, part: int, fn: Callable[..., Any], args: Sequence[Any], shared: Handle, n_out: int
    ) -> list[Handle]:
        """Part ``part``'s task ``fn(*args, shared)`` on its worker, not waited for;
        futures of its ``n_out`` items, each left on that worker."""
        where = {"workers": [self.workers[part]], "allow_other_workers": False, "pure": False}
        whole = self.client.submit(fn, *args, shared, **where)
        if n_out == 1:
            return [whole]
        items: list[Handle] = [
            self.client.submit(operator.getitem, whole, i, **where) for i in range(n_out)
        ]
        self.release([whole])
        return items

    def first_done(self, handles: Sequence[Handle]) -> list[int]:
        """The positions of the handles whose tasks are done, once one is (as
        ``distributed.wait(..., return_when="FIRST_COMPLETED")``); a ClusterError
        as soon as a part's worker has left the cluster."""
        from distributed import wait

        futures: list[Any] = list(handles)
        if not futures:
            raise ValueError("first_done needs at least one handle")
        while True:
            try:
                wait(futures, timeout=_WATCH_SECONDS, return_when="FIRST_COMPLETED")
                break
            except TimeoutError:
                self.check_workers()
        return [i for i, f in enumerate(futures) if f.done()]

    def broadcast(self, obj: object) -> Handle:
        return self.client.scatter(obj, broadcast=True, hash=False)

    def gather(self, handles: Sequence[Handle]) -> list[Any]:
        """The results, or a ClusterError as soon as a part's worker has left the
        cluster (its tasks could never run: they are pinned to it)."""
        from distributed.client import FutureCancelledError, FuturesCancelledError

        futures = list(handles)
        try:
            self.wait(futures)
            return list(self.client.gather(futures))
        except (FutureCancelledError, FuturesCancelledError) as exc:  # lost dependencies
            raise self._lost(exc) from exc

    def wait(self, handles: Sequence[Handle]) -> None:
        """Return once the handles' tasks are done (their data stays on the
        workers), or a ClusterError as soon as a part's worker has left."""
        from distributed import wait
        from distributed.client import FutureCancelledError, FuturesCancelledError

        futures = list(handles)
        try:
            while True:
                try:
                    wait(futures, timeout=_WATCH_SECONDS)
                    break
                except TimeoutError:
                    self.check_workers()
            self.check_workers()
        except (FutureCancelledError, FuturesCancelledError) as exc:  # lost dependencies
            raise self._lost(exc) from exc

    def _lost(self, exc: BaseException) -> ClusterError:
        """The error for a part's data lost with its worker: a ClusterError naming the
        lost worker where :meth:`check_workers` finds one, else this one."""
        self.check_workers()
        return ClusterError(
            f"data of an ESVI part was lost with a Dask worker ({exc}); a fit with "
            "checkpoint_dir goes on from the last complete rotation"
        )

    def _worker_addresses(self) -> list[str]:
        """The workers the scheduler knows now, asked of the scheduler itself (the
        client's ``scheduler_info`` is a copy it refreshes in the background)."""

        def addresses(dask_scheduler: Any) -> list[str]:
            return list(dask_scheduler.workers)

        return list(self.client.run_on_scheduler(addresses))

    def check_workers(self) -> None:
        """A ClusterError naming the parts whose worker has left the cluster."""
        current = set(self._worker_addresses())
        lost = [p for p, w in enumerate(self.workers) if w not in current]
        if lost:
            where = ", ".join(self.workers[p] for p in lost)
            raise ClusterError(
                f"the Dask worker of ESVI part(s) {lost} ({where}) was lost, and with it "
                "the part's shard and block; a fit with "
                "checkpoint_dir goes on from the last complete rotation"
            )

    def release(self, handles: Sequence[Handle]) -> None:
        from distributed import Future

        for h in handles:
            if isinstance(h, Future):
                self._released.append(h.key)
                h.release()

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until the released futures are forgotten by the scheduler and workers."""
        keys = list(self._released)
        self._released = []

        def held(dask_worker: Any, keys: list[Any] = keys) -> int:
            return sum(1 for k in keys if k in dask_worker.data)

        deadline = time.monotonic() + timeout
        pause = 0.002  # the scheduler forgets within milliseconds: look again soon, then less often
        while time.monotonic() < deadline:
            if not any(self.client.run(held).values()):
                return
            time.sleep(pause)
            pause = min(2 * pause, 0.05)
        raise TimeoutError(f"released data still held by the workers after {timeout} s")

    def holdings(self, probe: Callable[[Any], Any]) -> dict[str, list[Any]]:
        """``probe(value)`` of every value each worker holds (None left out), by worker,
        once released data is gone."""
        self.settle()

        def look(dask_worker: Any) -> list[Any]:
            found = [probe(v) for v in list(dask_worker.data.values())]
            return [f for f in found if f is not None]

        return dict(self.client.run(look))

    def close(self) -> None:
        pass


def open_partitions(
    client: Any, n_parts: int, n_workers: int | None = None
) -> tuple[SerialPartitions | DaskPartitions, list[Any]]:
    """``(parts, owned)``: in this process for ``client="sync"``; else pinned to the
    workers of ``client`` (a Client, a scheduler address, or None for a new
    LocalCluster of ``max(n_workers, n_parts)`` processes). ``owned``: what the
    caller closes when done."""
    from lsdask.engine.dask_executor import open_client

    if isinstance(client, str) and client == "sync":
        return SerialPartitions(n_parts), []
    dask_client, owned = open_client(client, max(n_workers or n_parts, n_parts))
    try:
        return DaskPartitions(dask_client, n_parts), owned
    except ValueError:
        for obj in owned:
            obj.close()
        raise


def reopen_partitions(
    parts: SerialPartitions | DaskPartitions, n_parts: int
) -> SerialPartitions | DaskPartitions:
    """Parts on the cluster's workers now, after one was lost: waits up to
    ``config.WORKER_WAIT_SECONDS`` for ``n_parts`` of them."""
    from lsdask import config

    if isinstance(parts, SerialPartitions):
        return parts
    parts.client.wait_for_workers(n_parts, timeout=config.WORKER_WAIT_SECONDS)
    return DaskPartitions(parts.client, n_parts)
