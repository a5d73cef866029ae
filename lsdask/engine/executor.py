"""What the learning algorithms need from an executor, and the in-process one.

The algorithms see only three verbs:

- ``register(batches)``: once per run, make the batches' loaders available
  where tasks run; returns one handle per batch;
- ``broadcast(obj)``: once per global update, make the globals available;
- ``map(fn, handles, shared)``: run ``fn(batch, shared)`` for each handle and
  return the results in order; ``submit`` and ``collect`` are the same in
  two halves, so the driver can work (write memo, compute the ELBO) while
  the workers run the next wave;
- ``map_sum(fn, handles, shared)``: the same, summed in a binary tree
  (pairs of neighbours, then pairs of pairs), so only one result reaches the
  driver. Every executor pairs results the same way, so sums are identical.

So the algorithms never import Dask, and an executor never knows what the
function computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol


def tree_sum(items: Sequence[Any]) -> Any:
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


class Executor(Protocol):
    #: how many batches this executor runs at once
    n_slots: int

    def register(self, batches: Sequence[Any]) -> list[Any]: ...

    def broadcast(self, obj: Any) -> Any: ...

    def map(self, fn: Callable[[Any, Any], Any], handles: Sequence[Any], shared: Any) -> list: ...

    def submit(self, fn: Callable[[Any, Any], Any], handles: Sequence[Any], shared: Any) -> Any: ...

    def collect(self, pending: Any) -> list: ...

    def map_sum(
        self, fn: Callable[[Any, Any], Any], handles: Sequence[Any], shared: Any
    ) -> Any: ...

    def close(self) -> None: ...


class SerialExecutor:
    """Runs every task in this process, one after another: for tests and small data."""

    n_slots = 1

    def register(self, batches: Sequence[Any]) -> list[Any]:
        return list(batches)

    def broadcast(self, obj: Any) -> Any:
        return obj

    def map(self, fn: Callable[[Any, Any], Any], handles: Sequence[Any], shared: Any) -> list:
        return [fn(h, shared) for h in handles]

    def submit(self, fn: Callable[[Any, Any], Any], handles: Sequence[Any], shared: Any) -> Any:
        return self.map(fn, handles, shared)

    def collect(self, pending: Any) -> list:
        return pending

    def map_sum(self, fn: Callable[[Any, Any], Any], handles: Sequence[Any], shared: Any) -> Any:
        return tree_sum(self.map(fn, handles, shared))

    def close(self) -> None:
        pass

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "SerialExecutor()"
