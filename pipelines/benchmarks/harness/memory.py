"""Resident memory of a process: its peak, its current size, a process tree's.

The peak is ``VmHWM`` from ``/proc/self/status``, the high-water mark of this
process's own address space. ``getrusage(RUSAGE_SELF).ru_maxrss`` survives
``execve`` on Linux, so a process started by a bigger parent (a Dask worker
spawned by the driver) may report the parent's peak; it is only the fallback
(and reported beside VmHWM where a report shows both).
"""

from __future__ import annotations

import resource
from pathlib import Path
from typing import Any


def peak_rss_kib() -> int:
    """Peak resident set of this process in KiB (``VmHWM``; ``ru_maxrss`` without /proc)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return max_rss_kib()


def max_rss_kib() -> int:
    """``resource.getrusage(resource.RUSAGE_SELF).ru_maxrss`` (KiB on Linux)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def rss_now_kib() -> int:
    """Current resident set of this process in KiB."""
    import psutil

    return int(psutil.Process().memory_info().rss // 1024)


def tree_rss_bytes(proc: Any) -> int:
    """Resident memory of a ``psutil`` process and all its descendants (driver,
    nannies, workers)."""
    import psutil

    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def mib(kib: float) -> str:
    """KiB as a MiB figure for a report."""
    return f"{kib / 1024:,.0f} MiB"
