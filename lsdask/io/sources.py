"""Batches of observations, wherever they live.

A :class:`BatchSource` cuts the data into the fixed batches of memoized VI
and hands out one small, picklable *loader* per batch. A loader's ``load()``
runs inside the batch's task (on a Dask worker, or in-process) and returns
the batch's rows, checked: numeric, 2-D, finite. Zarr loaders carry only the
array's location and row range, so a task reads its own chunk and the data
never passes through the driver.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from lsdask.errors import DataError


def missing_here(path: str) -> str:
    """Why a batch task cannot find ``path``: gone, or not visible where it runs."""
    return (
        f"{path} does not exist on host {socket.gethostname()} (process {os.getpid()}). If "
        "the process that started the fit sees it, the Dask workers do not: they need the "
        "data at the same path, e.g. on a shared file system"
    )


def check_rows(X: Any, where: str, dim: int | None = None) -> Any:
    """Validate one batch of rows: 2-D, numeric, finite, of dimension ``dim``."""
    if sp.issparse(X):
        values, shape, dtype = X.data, X.shape, X.dtype
    else:
        X = np.asarray(X)
        values, shape, dtype = X, X.shape, X.dtype
    if len(shape) != 2:
        raise DataError(f"{where}: expected a 2-D array (rows, features); got shape {shape}")
    if dtype.kind not in "biuf":
        raise DataError(
            f"{where}: expected a numeric dtype (integers or floats); got {dtype}. "
            "Convert the data with np.asarray(X, dtype=float) first."
        )
    if dim is not None and shape[1] != dim:
        raise DataError(f"{where}: expected {dim} features per row; got {shape[1]}")
    if dtype.kind == "f" and not np.all(np.isfinite(values)):
        bad = np.argwhere(~np.isfinite(X.toarray() if sp.issparse(X) else X))[0]
        raise DataError(
            f"{where}: found a non-finite value (NaN or inf) at row {bad[0]}, column {bad[1]}. "
            "Drop or impute such rows before fitting."
        )
    return X


@dataclass(frozen=True)
class ArrayBatch:
    """Rows held in memory (a numpy array or scipy sparse matrix)."""

    rows: Any
    where: str
    key: str

    @property
    def cost(self) -> int:
        """Work of the batch's task, relative to the others: its rows."""
        return int(self.rows.shape[0])

    def load(self) -> Any:
        return check_rows(self.rows, self.where)


@dataclass(frozen=True)
class ZarrBatch:
    """Rows ``start:stop`` of a Zarr array, read inside the task."""

    store: str
    start: int
    stop: int
    where: str

    @property
    def key(self) -> str:
        """Identifies the batch across runs (checkpoints map memo by key)."""
        return f"rows {self.start}:{self.stop}"

    @property
    def cost(self) -> int:
        """Work of the batch's task, relative to the others: its rows."""
        return self.stop - self.start

    def load(self) -> np.ndarray:
        from lsdask.io.patches import open_checked_array, read_rows

        try:
            rows = read_rows(open_checked_array(self.store), self.start, self.stop)
        except Exception as exc:
            if not os.path.exists(self.store):  # checked only on failure: no stat per task
                raise DataError(f"{self.where}: {missing_here(self.store)}") from exc
            if isinstance(exc, DataError):  # names the store, the chunk and its rows
                raise
            raise DataError(f"{self.where}: could not read the chunk: {exc}") from exc
        return check_rows(rows, self.where)


@dataclass(frozen=True)
class DaskBatch:
    """One row-block of a dask array, computed inside the task."""

    block: Any
    where: str
    key: str

    @property
    def cost(self) -> int:
        """Work of the batch's task, relative to the others: its rows."""
        return int(self.block.shape[0])

    def load(self) -> np.ndarray:
        return check_rows(self.block.compute(scheduler="sync"), self.where)


@dataclass(frozen=True)
class BatchSource:
    """The fixed batches of a dataset.

    Attributes
    ----------
    batches : list of loaders (objects with ``load()``)
    batch_rows : list of int, rows per batch
    n_features : int
    description : str
    """

    batches: list
    batch_rows: list[int]
    n_features: int
    description: str

    @property
    def n_rows(self) -> int:
        return int(sum(self.batch_rows))

    @property
    def n_batches(self) -> int:
        return len(self.batches)

    def sample(
        self,
        n_rows: int,
        rng: np.random.Generator,
        check: Callable[[Any], None] | None = None,
        max_batches: int | None = 16,
        oversample: int = 4,
        max_total: float | None = None,
    ) -> Any:
        """Up to ``n_rows`` rows drawn at random, read from batches chosen at
        random: at most ``max_batches`` of them (None: no limit), and no more
        once they hold ``oversample`` times ``n_rows`` or, with ``max_total``,
        once their values sum to at least that much (a corpus's tokens).

        ``check(rows)`` runs on every batch read; a ValueError it raises comes
        back as a :class:`DataError` that names the batch.
        """
        order = rng.permutation(self.n_batches)
        parts, got, total = [], 0, 0.0
        for b in order[:max_batches]:
            batch = self.batches[b]
            rows = batch.load()
            if check is not None:
                try:
                    check(rows)
                except ValueError as exc:
                    raise DataError(f"{batch.where}: {exc}") from exc
            parts.append(rows)
            got += rows.shape[0]
            total += float(rows.sum()) if max_total is not None else 0.0
            if got >= oversample * n_rows or (max_total is not None and total >= max_total):
                break
        data = sp.vstack(parts, format="csr") if sp.issparse(parts[0]) else np.concatenate(parts)
        return rows_at_most(data, n_rows, rng)


def rows_at_most(data: Any, n_rows: int, rng: np.random.Generator) -> Any:
    """``data``, or ``n_rows`` of its rows drawn at random (kept in their order)."""
    if data.shape[0] <= n_rows:
        return data
    return data[np.sort(rng.choice(data.shape[0], size=n_rows, replace=False))]


def _check_batch_size(batch_size: int | None) -> None:
    if batch_size is not None and (not isinstance(batch_size, int | np.integer) or batch_size < 1):
        raise ValueError(
            f"batch_size must be a positive integer or None; got {batch_size!r}. "
            "Use None to take the store's chunk size."
        )


def _check_shape(shape: tuple, dtype: Any, what: str) -> None:
    if len(shape) != 2:
        raise DataError(f"{what}: expected a 2-D array (rows, features); got shape {shape}")
    if shape[0] == 0:
        raise DataError(f"{what}: the data has no rows; give at least one")
    if shape[1] == 0:
        raise DataError(f"{what}: the data has no features (0 columns)")
    if np.dtype(dtype).kind not in "biuf":
        raise DataError(
            f"{what}: expected a numeric dtype (integers or floats); got {dtype}. "
            "Convert the data with np.asarray(X, dtype=float) first."
        )


def _ranges(n: int, size: int) -> list[tuple[int, int]]:
    return [(s, min(s + size, n)) for s in range(0, n, size)]


def zarr_source(array_or_path: Any, batch_size: int | None = None) -> BatchSource:
    """Batches over a Zarr array in a folder: by default one chunk of rows per batch.

    The folder is checked first (:func:`lsdask.io.patches.open_checked_array`
    with ``whole``): no link or special file anywhere in it, every chunk file
    present; each batch then reads its chunks checked.
    """
    from lsdask.io.patches import open_checked_array

    if isinstance(array_or_path, str | os.PathLike):
        path = Path(array_or_path)
        if not path.exists():
            raise FileNotFoundError(
                f"X: no Zarr array at {str(path)!r} (the path does not exist). "
                "Make one with datasets/make_patches.py or pass an array."
            )
        store = str(path)
    else:
        given = array_or_path
        store = str(given.store.root / given.path) if hasattr(given.store, "root") else None
        if store is None:
            raise DataError(
                f"X: a Zarr array in a {type(given.store).__name__}, which the batch tasks "
                "cannot open again by path; only arrays in a local folder store are read "
                "batch by batch. Write it to a folder (zarr.create_array(path, ...)) and pass "
                "the path, or pass its values (X[:]) if they fit in memory"
            )
    store = os.path.abspath(store)  # a task may run in a worker started in another folder
    array = open_checked_array(store, where=f"X: Zarr array {store!r}", whole=True)
    _check_shape(array.shape, array.dtype, f"X (Zarr array {store!r})")
    size = batch_size or int(array.chunks[0])
    ranges = _ranges(array.shape[0], size)
    batches = [
        ZarrBatch(store, a, b, f"Zarr array {store!r}, chunk {i} (rows {a}:{b})")
        for i, (a, b) in enumerate(ranges)
    ]
    return BatchSource(
        batches, [b - a for a, b in ranges], int(array.shape[1]), f"Zarr array {store}"
    )


def as_batch_source(X: Any, batch_size: int | None = None) -> BatchSource:
    """Turn any supported input into a :class:`BatchSource`.

    Parameters
    ----------
    X : Zarr array or path to one, dask array, numpy array, or scipy sparse matrix
    batch_size : int or None
        Rows per batch; default the Zarr chunk rows, the dask array's row
        chunks, or :data:`lsdask.config.DEFAULT_BATCH_SIZE` for in-memory data.
    """
    from lsdask.config import DEFAULT_BATCH_SIZE

    _check_batch_size(batch_size)
    if isinstance(X, BatchSource):
        return X
    if isinstance(X, str | os.PathLike) or type(X).__module__.startswith("zarr"):
        return zarr_source(X, batch_size)
    if type(X).__module__.startswith("dask"):
        if any(c != c for c in X.chunks[0]):  # nan: sizes known only once computed
            raise ValueError(
                "X (dask array) has chunks of unknown size (e.g. after boolean indexing); "
                "call X.compute_chunk_sizes() first, or write it to Zarr"
            )
        _check_shape(X.shape, X.dtype, "X (dask array)")
        if batch_size is not None:
            X = X.rechunk({0: batch_size, 1: -1})
        else:
            X = X.rechunk({1: -1})
        starts = np.concatenate([[0], np.cumsum(X.chunks[0])])
        batches = [
            DaskBatch(
                X.blocks[i],
                f"dask array block {i} (rows {starts[i]}:{starts[i + 1]})",
                f"rows {starts[i]}:{starts[i + 1]}",
            )
            for i in range(len(X.chunks[0]))
        ]
        return BatchSource(batches, list(X.chunks[0]), int(X.shape[1]), "dask array")
    if sp.issparse(X):
        X = sp.csr_matrix(X)
    else:
        X = np.asarray(X)
    _check_shape(X.shape, X.dtype, "X")
    size = batch_size or DEFAULT_BATCH_SIZE
    ranges = _ranges(X.shape[0], size)
    batches = [
        ArrayBatch(X[a:b], f"X batch {i} (rows {a}:{b})", f"rows {a}:{b}")
        for i, (a, b) in enumerate(ranges)
    ]
    return BatchSource(batches, [b - a for a, b in ranges], int(X.shape[1]), "in-memory array")
