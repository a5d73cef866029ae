"""Named points where a test can pause or kill a writer.

Concurrency and crash tests drive real processes to an exact step of a write
(a part file renamed in, its manifest not yet written) instead of guessing with
timings. A writer calls :func:`fault_point` at such a step; unarmed (the
environment variables below unset, as always outside tests) it costs a few
dictionary look-ups.

``LSDASK_PAUSE_AT=NAME`` with ``LSDASK_PAUSE_FILE=PATH``
    At the point ``NAME`` the process creates ``PATH.reached`` and waits until
    ``PATH`` exists (a test creates it to let the process go on); after
    ``LSDASK_PAUSE_TIMEOUT`` seconds (default 120) it raises ``RuntimeError``
    rather than hang. Once ``PATH`` exists, later passes do not stop.
``LSDASK_CRASH_AT=NAME``
    At the point ``NAME`` the process kills itself with SIGKILL, as a lost
    machine or the out-of-memory killer would: no ``finally`` block runs.

``LSDASK_CRASH_AT_FS=N``
    At the ``N``-th file-system step of the process (an fsync of
    :mod:`lsdask.io.fsops`, a rename or removal of :mod:`lsdask.io.guarded`;
    counted from 1) the process kills itself with
    SIGKILL. ``LSDASK_FS_LOG=PATH`` appends each step (``<n> <op> <path>``) to
    ``PATH``: how a test learns a command's steps.

``LSDASK_SIGNAL_AT_FS=N:SIG``
    At the ``N``-th file-system step, before the step, the process sends
    itself the signal ``SIG`` (``TERM`` or ``INT``) and goes on: the signal is
    handled as one from outside would be, between that step and the next.
``LSDASK_SIGNAL_AT=NAME:SIG``
    The same at the named point ``NAME`` (below).

``NAME`` may list several points, separated by commas. The points:

``corpus.append.locked``
    An append holds the corpus's lock and has chosen its part file's name.
``corpus.append.renamed``
    An append's part file is renamed into ``parts/``; its manifest entry is not
    yet committed.
``corpus.open.read``
    A rescan (what a fit does to its corpus) has read the manifest its batches
    come from.
``replace_dir.swapping``
    A whole output (a corpus, a model folder) is renamed aside; the new one is
    not yet renamed into its place.
``checkpoint.written``
    A fit has committed a checkpoint (and holds its checkpoint folder's lock).
``fit.output``
    ``lsdask fit`` has trained (its last checkpoint is written) and not yet
    written its output folder.
``transform.output``
    ``lsdask transform`` has written its weights file under a temporary name
    and not yet renamed it into place.
``command.committed``
    A command's work is saved (its output in place, its corpus appended to):
    a signal from here on changes nothing (:mod:`lsdask.jobs.commit`).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

__all__ = ["POINTS", "fault_point", "fs_point"]

#: The named points (see the module's documentation).
POINTS = (
    "corpus.append.locked",
    "corpus.append.renamed",
    "corpus.open.read",
    "replace_dir.swapping",
    "checkpoint.written",
    "fit.output",
    "transform.output",
    "command.committed",
)


def _armed(variable: str, name: str) -> bool:
    value = os.environ.get(variable)
    return value is not None and name in value.split(",")


def fault_point(name: str) -> None:
    """Pause or crash here if a test armed the point ``name`` (see the module's
    documentation); otherwise do nothing."""
    if _armed("LSDASK_CRASH_AT", name):
        os.kill(os.getpid(), signal.SIGKILL)
    if _armed("LSDASK_PAUSE_AT", name):
        _pause(name)
    _signal_at("LSDASK_SIGNAL_AT", name)


_SIGNALS = {"TERM": signal.SIGTERM, "INT": signal.SIGINT}


def _signal_at(variable: str, here: str) -> None:
    """Send this process the signal that ``variable`` (``WHERE:SIG``) asks for at
    ``here``; a setting that names no known signal is an error, not ignored."""
    value = os.environ.get(variable)
    if value is None:
        return
    where, _, name = value.rpartition(":")
    if name not in _SIGNALS or not where:
        raise RuntimeError(f"{variable}={value!r}: expected WHERE:TERM or WHERE:INT")
    if where == here:
        os.kill(os.getpid(), _SIGNALS[name])


_fs_steps = 0  # file-system steps of this process (see fs_point)


def fs_point(op: str, path: object) -> None:
    """A file-system step of a writer (:mod:`lsdask.io.fsops`): logged with
    ``LSDASK_FS_LOG``, killed at with ``LSDASK_CRASH_AT_FS`` (see the module's
    documentation); otherwise nothing."""
    global _fs_steps
    log, crash = os.environ.get("LSDASK_FS_LOG"), os.environ.get("LSDASK_CRASH_AT_FS")
    if log is None and crash is None and "LSDASK_SIGNAL_AT_FS" not in os.environ:
        return
    _fs_steps += 1
    if log is not None:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{_fs_steps} {op} {path}\n")
    if crash is not None and _fs_steps == int(crash):
        os.kill(os.getpid(), signal.SIGKILL)
    _signal_at("LSDASK_SIGNAL_AT_FS", str(_fs_steps))


def _pause(name: str) -> None:
    release = os.environ.get("LSDASK_PAUSE_FILE")
    if not release:
        raise RuntimeError(f"LSDASK_PAUSE_AT={name} needs LSDASK_PAUSE_FILE, the file to wait for")
    path = Path(release)
    if path.exists():
        return
    Path(f"{release}.reached").write_text(f"{os.getpid()}\n", encoding="utf-8")
    timeout = float(os.environ.get("LSDASK_PAUSE_TIMEOUT", "120"))
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"paused at {name} for {timeout:g} s and {release} did not appear; giving up"
            )
        time.sleep(0.02)
