"""What every report says about the machine and the code it measured."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from harness import REPO

#: the packages whose versions a report names (shown name -> distribution)
PACKAGES = (
    "lsdask",
    "numpy",
    "scipy",
    "numba",
    "dask",
    "distributed",
    "pyarrow",
    "zarr",
    "threadpoolctl",
    "matplotlib",
    "gensim",
    "scikit-learn",
    "tomotopy",
)

#: the fields of a ``threadpoolctl`` thread pool that a report keeps
POOL_FIELDS = (
    "user_api",
    "internal_api",
    "version",
    "num_threads",
    "threading_layer",
    "architecture",
    "filepath",
)


def load_avg() -> list[float]:
    """The 1, 5 and 15 minute load averages (the machine is shared)."""
    return [round(x, 2) for x in os.getloadavg()]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def git_commit() -> str:
    """Short HEAD commit, marked when lsdask/ has uncommitted changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "lsdask"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return commit + (" (lsdask/ modified)" if dirty else "")


def versions() -> dict[str, str | None]:
    """Installed version of each of ``PACKAGES`` (None where not installed)."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def thread_pools() -> list[dict[str, Any]]:
    """The BLAS and OpenMP thread pools loaded in this process (``threadpoolctl``)."""
    from threadpoolctl import threadpool_info

    return [{k: v for k, v in pool.items() if k in POOL_FIELDS} for pool in threadpool_info()]


def describe() -> dict[str, Any]:
    """CPU, cores, memory, platform, package versions, thread pools, the git
    commit and the folder lsdask is imported from."""
    spec = importlib.util.find_spec("lsdask")
    origin = spec.origin if spec is not None and spec.origin else ""
    return {
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions(),
        "threadpools": thread_pools(),
        "git_commit": git_commit(),
        "lsdask_path": str(Path(origin).resolve().parent) if origin else "unknown",
    }
