"""What the learning algorithms need from an executor, and the in-process one.

The algorithms see only three verbs:

- ``register(batches)``: once per run, make the batches' loaders available
  where tasks run; returns one handle per batch;
- ``broadcast(obj)``: once per global update, make the globals available;
- ``map(fn, handles, shared)``: run ``fn(batch, shared)`` for each handle and
  return the results in order.

So the algorithms never import Dask, and an executor never knows what the
function computes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol


class Executor(Protocol):
    #: how many batches this executor runs at once
    n_slots: int

    def register(self, batches: Sequence[Any]) -> list[Any]: ...

    def broadcast(self, obj: Any) -> Any: ...

    def map(self, fn: Callable[[Any, Any], Any], handles: Sequence[Any], shared: Any) -> list: ...

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

    def close(self) -> None:
        pass

    def __enter__(self) -> SerialExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return "SerialExecutor()"
