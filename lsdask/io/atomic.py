"""Replacing outputs atomically, shared by every writer of stores.

A writer builds its output in a temporary sibling (:func:`temp_sibling`) and,
once complete, calls :func:`replace_dir` (or ``os.replace`` for a file): an
existing output is first renamed aside, the new one renamed into place, and
only then is the old one deleted, so a failure at any point leaves either the
old or the new output, never half of one. A writer killed outright (SIGKILL, a
lost machine) cannot clean up: the next writer of the same output removes the
temporaries of processes of this host that are no longer running.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import shutil
import socket
import uuid
from pathlib import Path

logger = logging.getLogger(__name__)


def remove_tree(path: Path) -> None:
    """Delete a folder tree if it exists, logging rather than raising on failure."""
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            logger.warning("could not remove temporary directory %s", path)


def _host() -> str:
    """This machine's name, as it may stand in a file name."""
    return re.sub(r"[^A-Za-z0-9]", "_", socket.gethostname()) or "host"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. another user's process: it exists
        return True
    return True


def temp_sibling(out: Path, kind: str = "tmp") -> Path:
    """A fresh hidden name beside ``out`` for building it:
    ``.<name>.<kind>-<host>-<pid>-<hex>``. Temporaries that an earlier writer of
    ``out`` on this host left behind (its process is gone) are removed first, with
    a warning; those of running processes, or of other hosts sharing the folder,
    are left alone. (Containers that share a host name and a folder but not their
    process ids would see each other's writers as gone: give them host names of
    their own.)"""
    host, name = _host(), re.escape(out.name)
    stale = re.compile(rf"^\.{name}\.{re.escape(kind)}-{re.escape(host)}-(\d+)-[0-9a-f]{{8}}$")
    if out.parent.is_dir():
        for entry in out.parent.glob(f".{glob.escape(out.name)}.{kind}-{glob.escape(host)}-*"):
            match = stale.match(entry.name)
            if match and not _running(int(match.group(1))):
                logger.warning(
                    "removing %s, left behind by a writer of %s that was stopped (process %s)",
                    entry, out, match.group(1),
                )  # fmt: skip
                if entry.is_dir():
                    remove_tree(entry)
                else:
                    entry.unlink(missing_ok=True)
    return out.with_name(f".{out.name}.{kind}-{host}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def replace_dir(new_dir: Path, out_dir: Path) -> None:
    """Rename ``new_dir`` to ``out_dir``; an existing ``out_dir`` is moved aside
    first and put back if the final rename fails."""
    if not out_dir.exists():
        os.replace(new_dir, out_dir)
        return
    old_dir = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.replace(out_dir, old_dir)
    try:
        os.replace(new_dir, out_dir)
    except BaseException:
        os.replace(old_dir, out_dir)
        raise
    remove_tree(old_dir)
