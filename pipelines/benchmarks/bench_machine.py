"""What every benchmark report says about the machine and the code it measured."""

from __future__ import annotations

import importlib
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


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


def machine_info(packages: dict[str, str]) -> dict[str, Any]:
    """CPU, cores, memory, platform, the versions of ``packages`` (shown name ->
    module; None where not installed), the git commit and where lsdask came from."""
    import lsdask

    versions = {}
    for shown, module in packages.items():
        try:
            versions[shown] = importlib.import_module(module).__version__
        except ImportError:
            versions[shown] = None
    return {
        "cpu": cpu_name(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "git_commit": git_commit(),
        "lsdask_path": str(Path(lsdask.__file__).resolve().parent),
    }
