"""Arrays reused from one block of a batch to the next.

A batch is processed in blocks of rows; each block needs the same
temporaries (features, log weights, responsibilities). Allocating them afresh
costs fresh pages every block where the allocator returns freed memory to the
system at once, as in Dask workers (``MALLOC_TRIM_THRESHOLD_=65536``). The
local step keeps a ``Workspace`` for the batch and takes views of it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


class Workspace:
    """Named arrays (float64 unless asked), grown on demand; ``take`` views the first rows."""

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def take(
        self, name: str, shape: tuple[int, ...], dtype: npt.DTypeLike = np.float64
    ) -> np.ndarray:
        """An uninitialized (shape) view, valid until the next ``take`` of ``name``."""
        a = self._arrays.get(name)
        if (
            a is None
            or a.shape[0] < shape[0]
            or a.shape[1:] != tuple(shape[1:])
            or a.dtype != np.dtype(dtype)
        ):
            a = self._arrays[name] = np.empty(shape, dtype=dtype)
        return a[: shape[0]]


def take(
    ws: Workspace | None, name: str, shape: tuple[int, ...], dtype: npt.DTypeLike = np.float64
) -> np.ndarray:
    """``ws.take(name, shape, dtype)``, or a fresh array without a workspace."""
    return np.empty(shape, dtype=dtype) if ws is None else ws.take(name, shape, dtype)
