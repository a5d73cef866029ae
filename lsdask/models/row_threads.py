"""The driver's large row-wise passes, split over threads.

The global step streams the (K, V) running statistics once per update while
the workers wait for the new globals, so the driver's cores are free. Its
passes are row-wise (each row's result depends on that row alone) and run
in code that releases the GIL (numba ``nogil`` kernels, numpy and scipy
ufuncs), so contiguous blocks of rows in threads give the serial result
bit for bit. Small arrays stay serial: starting a thread pool would cost
more than the threads save.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np

#: arrays with fewer entries than this are processed in the calling thread
MIN_PARALLEL_SIZE = 1 << 21

#: at most this many threads, whatever the machine
MAX_THREADS = 8


def usable_threads() -> int:
    """Cores this process may run on, at most ``MAX_THREADS``."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_THREADS))


def row_blocks(n_rows: int, size: int, threads: int | None = None) -> list[tuple[int, int]]:
    """``(start, stop)`` of contiguous row blocks, one per thread; a single
    block for arrays of fewer than ``MIN_PARALLEL_SIZE`` entries."""
    threads = usable_threads() if threads is None else threads
    n = 1 if size < MIN_PARALLEL_SIZE else max(1, min(threads, n_rows))
    edges = np.linspace(0, n_rows, n + 1).round().astype(np.int64)
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges)]


T = TypeVar("T")


def map_blocks(fn: Callable[[int, int], T], blocks: list[tuple[int, int]]) -> list[T]:
    """``[fn(start, stop) for each block]``, in threads when there are several."""
    if len(blocks) == 1:
        return [fn(*blocks[0])]
    with ThreadPoolExecutor(max_workers=len(blocks)) as pool:
        return list(pool.map(lambda block: fn(*block), blocks))
