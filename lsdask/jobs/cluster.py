"""One Dask client shared by several fits: start a cluster once, close it at the end."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_WORKERS", "dask_client", "describe_client"]

#: Workers of the LocalCluster started when no client is given.
DEFAULT_WORKERS = 2


@contextlib.contextmanager
def dask_client(client: Any = None, n_workers: int | None = None) -> Iterator[Any]:
    """Yield something to pass as ``client=`` to several fits in a row.

    Starting a cluster once and sharing it between the L-sparse and the dense
    fit saves the start-up of worker processes for the second fit.

    Parameters
    ----------
    client : None, "sync", str or distributed.Client
        None starts a :class:`distributed.LocalCluster` of ``n_workers``
        single-threaded worker processes (closed on exit); ``"sync"`` runs
        in this process; another string is a scheduler address to connect
        to (the connection is closed on exit); a Client is used as it is.
    n_workers : int or None
        Workers of a new LocalCluster; default :data:`DEFAULT_WORKERS`.

    Yields
    ------
    "sync" or distributed.Client
    """
    if isinstance(client, str) and client == "sync":
        yield "sync"
        return
    from lsdask.engine.dask_executor import open_client

    n = DEFAULT_WORKERS
    if client is None and n_workers is not None:
        n = int(n_workers)
        if n < 1:
            raise ValueError(f"n_workers must be a positive integer; got {n_workers!r}")
    opened, owned = open_client(client, n)
    try:
        yield opened
    finally:
        for obj in owned:
            obj.close()


def describe_client(client: Any, n_workers: int | None = None) -> str:
    """Where a job with ``client`` (as passed to :func:`dask_client`) runs, in words."""
    if isinstance(client, str) and client == "sync":
        return "in this process"
    if client is None:
        return f"on a local Dask cluster of {n_workers or DEFAULT_WORKERS} workers"
    if isinstance(client, str):
        return f"on the Dask scheduler at {client}"
    return "on the given Dask client"
