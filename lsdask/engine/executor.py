"""The in-process executor, and the sum every executor makes of a wave.

The contract every executor satisfies is :class:`lsdask.learn.protocols.Executor`
(re-exported here): ``register`` the batches once per run, ``broadcast`` the
globals once per update, ``map``/``submit``+``collect`` a task over the
batches, ``map_sum`` it into one result. So the algorithms never import Dask,
and an executor never knows what the function computes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, cast

from lsdask.learn.protocols import A, Batch, Executor, Handle, Pending, Task

R = TypeVar("R")

__all__ = ["Executor", "SerialExecutor", "tree_sum"]


def tree_sum(items: Sequence[A]) -> A:
    """Sum by adding neighbours pairwise, level by level (the Dask reduction's order)."""
    level = list(items)
    if not level:
        raise ValueError("tree_sum needs at least one item")
    while len(level) > 1:
        nxt = [level[i] + level[i + 1] for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


class SerialExecutor:
    """Runs every task in this process, one after another: for tests and small data."""

    n_slots = 1

    def register(self, batches: Sequence[Batch]) -> list[Handle]:
        return list(batches)

    def broadcast(self, obj: object) -> Handle:
        return obj

    def map(self, fn: Task[R], handles: Sequence[Handle], shared: Handle) -> list[R]:
        return [fn(h, shared) for h in handles]

    def submit(self, fn: Task[R], handles: Sequence[Handle], shared: Handle) -> Pending:
        """Run the tasks at once; the pending wave is their results."""
        return self.map(fn, handles, shared)

    def collect(self, pending: Pending) -> list[Any]:
        return cast("list[Any]", pending)  # what submit returned: the results

    def map_sum(self, fn: Task[A], handles: Sequence[Handle], shared: Handle) -> A:
        return tree_sum(self.map(fn, handles, shared))

    def start_parts(self, fn: Task[A], handles: Sequence[Handle], shared: Handle) -> Handle:
        """In this process the results are added at once, and a handle is its value:
        the list of one term, their sum."""
        return [self.map_sum(fn, handles, shared)]

    def fetch(self, handle: Handle) -> Any:
        return handle

    def memory(self) -> list[int]:
        """Nothing: the tasks run in the driver, whose memory the progress line gives."""
        return []

    def close(self) -> None:
        pass

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "SerialExecutor()"
