"""One Dask client shared by several fits: start a cluster once, close it at the end."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["DEFAULT_WORKERS", "dask_client", "describe_client", "on_shared_client"]

#: Workers of the LocalCluster started when no client is given.
DEFAULT_WORKERS = 2


@contextlib.contextmanager
def dask_client(
    client: Any = None, n_workers: int | None = None, *, dashboard_address: str | None = None
) -> Iterator[Any]:
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
    dashboard_address : str or None
        ``HOST:PORT`` of a new LocalCluster's dashboard (default: a free port
        on 127.0.0.1); only with ``client=None``.

    Yields
    ------
    "sync" or distributed.Client
    """
    if dashboard_address is not None and client is not None:
        raise ValueError(
            "dashboard_address is the dashboard of a local cluster started here; "
            f"it cannot go with client={client!r} (lsdask: --dashboard-address needs "
            "neither --scheduler nor --sync)"
        )
    if isinstance(client, str) and client == "sync":
        yield "sync"
        return
    from lsdask.engine.dask_executor import open_client

    n = DEFAULT_WORKERS
    if client is None and n_workers is not None:
        n = int(n_workers)
        if n < 1:
            raise ValueError(f"n_workers must be a positive integer; got {n_workers!r}")
    opened, owned = open_client(client, n, dashboard_address=dashboard_address)
    try:
        yield opened
    finally:
        for obj in owned:
            obj.close()


@contextlib.contextmanager
def on_shared_client(estimator: Any, *others: Any) -> Iterator[Any]:
    """Run ``estimator`` and ``others`` on one client for the time of the block,
    then give each its own ``client`` back.

    The client is opened by :func:`dask_client` from ``estimator``'s
    ``client`` and ``n_workers`` (a LocalCluster started for the block is
    closed at its end); every estimator gets it with ``set_params`` and gets
    its own ``client`` back on exit, also when the block raises.

    Parameters
    ----------
    estimator, *others
        lsdask estimators.

    Yields
    ------
    "sync" or distributed.Client
        The shared client.
    """
    estimators = (estimator, *others)
    own = [e.client for e in estimators]
    with dask_client(estimator.client, estimator.n_workers) as shared:
        for e in estimators:
            e.set_params(client=shared)
        try:
            yield shared
        finally:
            for e, client in zip(estimators, own, strict=True):
                e.set_params(client=client)


def describe_client(client: Any, n_workers: int | None = None) -> str:
    """Where a job with ``client`` (as passed to :func:`dask_client`) runs, in words."""
    if isinstance(client, str) and client == "sync":
        return "in this process"
    if client is None:
        return f"on a local Dask cluster of {n_workers or DEFAULT_WORKERS} workers"
    if isinstance(client, str):
        return f"on the Dask scheduler at {client}"
    return "on the given Dask client"
