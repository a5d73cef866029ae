"""Real ``lsdask`` commands in child processes, stopped at named pause points
(:mod:`lsdask.io.faults`): what the lock and transaction tests drive."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest


def lsdask_env(**extra: str) -> dict[str, str]:
    """This process's environment, unbuffered, with ``extra`` set."""
    return {**os.environ, "PYTHONUNBUFFERED": "1", **extra}


def paused_env(pause: Path, at: str) -> dict[str, str]:
    """The environment of a process that stops at the point ``at`` until ``pause`` exists."""
    return lsdask_env(LSDASK_PAUSE_AT=at, LSDASK_PAUSE_FILE=str(pause))


def run_lsdask(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``lsdask ARGS`` to its end."""
    return subprocess.run(
        [sys.executable, "-m", "lsdask", *map(str, args)],
        capture_output=True, text=True, env=env or lsdask_env(), timeout=300,
    )  # fmt: skip


def start_lsdask(*args: object, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``lsdask ARGS`` in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "lsdask", *map(str, args)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env or lsdask_env(),
    )  # fmt: skip


def wait_reached(pause: Path, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Wait until ``proc`` stands at its pause point (it wrote ``pause.reached``)."""
    reached = Path(f"{pause}.reached")
    deadline = time.monotonic() + timeout
    while not reached.exists():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the process ended ({proc.returncode}) before its pause point:\n{err}")
        assert time.monotonic() < deadline, "the pause point was never reached"
        time.sleep(0.02)


#: a progress line of a command whose stderr is not a terminal (lsdask.cli.app)
PROGRESS_LINE = re.compile(r"^lsdask \[\d\d:\d\d:\d\d\] ")


def without_progress(stderr: str) -> list[str]:
    """The lines of ``stderr`` but the progress lines (one per start phase and lap)."""
    return [line for line in stderr.splitlines() if not PROGRESS_LINE.match(line)]
