"""Replacing outputs atomically, shared by every writer of stores.

A writer builds its output in a temporary sibling (:func:`temp_sibling`) and,
once complete, calls :func:`replace_dir` (or ``os.replace`` for a file): an
existing output is first renamed aside, the new one renamed into place, and
only then is the old one deleted, so a failure at any point leaves either the
old or the new output, never half of one.

A writer killed outright (SIGKILL, a lost machine) cannot clean up. The next
writer of the same output (:func:`temp_sibling`), or a reader that calls
:func:`recover_output`, finishes for it, for processes of this host that are no
longer running: a temporary still being built (``.<name>.tmp-...``) is
removed; if the output is missing because the writer died inside the swap, the
complete new output (``.<name>.new-...``: a temporary is renamed so only once
it is complete, just before the swap) or else the old one
(``.<name>.old-...``) is put in its place, with a warning; what is left of a
finished swap is removed.
"""

from __future__ import annotations

import glob
import logging
import os
import re
import socket
import uuid
from pathlib import Path

from lsdask.io import fsops
from lsdask.io.faults import fault_point

logger = logging.getLogger(__name__)


def remove_tree(path: Path) -> None:
    """Delete a folder tree if it exists, logging rather than raising on failure."""
    if path.exists():
        fsops.rmtree(path)
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


def _stale(out: Path, kind: str) -> list[tuple[Path, int]]:
    """Entries ``.<name>.<kind>-<host>-<pid>-<hex>`` beside ``out`` of processes of
    this host that are no longer running, and their process ids."""
    host, name = _host(), re.escape(out.name)
    pattern = re.compile(rf"^\.{name}\.{re.escape(kind)}-{re.escape(host)}-(\d+)-[0-9a-f]{{8}}$")
    if not out.parent.is_dir():
        return []
    found = []
    for entry in out.parent.glob(f".{glob.escape(out.name)}.{kind}-{glob.escape(host)}-*"):
        match = pattern.match(entry.name)
        if match and not _running(int(match.group(1))):
            found.append((entry, int(match.group(1))))
    return sorted(found, key=lambda e: e[0].name)


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        remove_tree(entry)
    else:
        fsops.unlink(entry)


def _newest(entries: list[tuple[Path, int]]) -> tuple[Path, int]:
    def mtime(entry: tuple[Path, int]) -> float:
        try:
            return entry[0].stat().st_mtime
        except OSError:
            return -1.0

    return max(entries, key=mtime)


def recover_output(out: str | os.PathLike[str]) -> None:
    """Finish the swap of a writer of ``out`` that was killed inside it.

    If ``out`` is missing and a process of this host that is gone left the
    complete new output beside it (``.<name>.new-<host>-<pid>-<hex>``), that is
    renamed into place; failing that, the old output it had moved aside
    (``.<name>.old-...``). Either is logged as a warning. Leftovers of a swap of
    a gone process beside an ``out`` that exists are removed. Writers call this
    through :func:`temp_sibling`; readers of a whole output (opening a corpus,
    loading a model) call it first. Errors (a read-only folder) are logged.
    """
    out = Path(out)
    try:
        for entry, pid in _stale(out, "pictures"):  # a fit's pictures, drawn before its save
            logger.warning(
                "removing %s, left behind by a writer of %s that was stopped (process %d)",
                entry, out, pid,
            )  # fmt: skip
            _remove(entry)
        fresh, old = _stale(out, "new"), _stale(out, "old")
        if not (fresh or old):
            return
        if not (out.exists() or out.is_symlink()):
            chosen, pid = _newest(fresh) if fresh else _newest(old)
            fsops.rename(chosen, out)
            logger.warning(
                "%s was missing: its writer (process %d) was stopped while it swapped the "
                "output in. Put %s in its place (%s).",
                out, pid, "the complete new output" if fresh else "the previous output back",
                chosen.name,
            )  # fmt: skip
        for entry, pid in fresh + old:
            if entry.exists() or entry.is_symlink():
                logger.warning(
                    "removing %s, left behind by a writer of %s that was stopped (process %d)",
                    entry, out, pid,
                )  # fmt: skip
                _remove(entry)
    except OSError as exc:
        logger.warning("could not recover %s after a stopped writer: %s", out, exc)


def temp_sibling(out: Path, kind: str = "tmp") -> Path:
    """A fresh hidden name beside ``out`` for building it:
    ``.<name>.<kind>-<host>-<pid>-<hex>``. First an output that a writer on this
    host was killed while swapping is restored (:func:`recover_output`), and
    temporaries that such writers left (their process is gone) are removed, with
    a warning; those of running processes, or of other hosts sharing the folder,
    are left alone. (Containers that share a host name and a folder but not their
    process ids would see each other's writers as gone: give them host names of
    their own.)"""
    recover_output(out)
    for entry, pid in _stale(out, kind) + _stale_nested(out):
        logger.warning(
            "removing %s, left behind by a writer of %s that was stopped (process %s)",
            entry, out, pid,
        )  # fmt: skip
        _remove(entry)
    return _sibling(out, kind)


def _stale_nested(out: Path) -> list[tuple[Path, int]]:
    """Temporaries that a gone writer of a temporary of ``out`` left: a staging
    folder's own temporary, ``..<name>.<kind>-<host>-<pid>-<hex>.tmp-...``."""
    host, name = _host(), re.escape(out.name)
    pattern = re.compile(rf"^\.\.{name}\.[a-z]+-{re.escape(host)}-(\d+)-[0-9a-f]{{8}}\..+$")
    if not out.parent.is_dir():
        return []
    found = []
    for entry in out.parent.glob(f"..{glob.escape(out.name)}.*"):
        match = pattern.match(entry.name)
        if match and not _running(int(match.group(1))):
            found.append((entry, int(match.group(1))))
    return sorted(found, key=lambda e: e[0].name)


def _sibling(out: Path, kind: str) -> Path:
    return out.with_name(f".{out.name}.{kind}-{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def replace_dir(new_dir: Path, out_dir: Path) -> None:
    """Put the complete folder ``new_dir`` in place of ``out_dir``.

    ``new_dir`` is first renamed ``.<name>.new-<host>-<pid>-<hex>`` (its name now
    says it is complete); an existing ``out_dir`` is renamed aside
    (``.<name>.old-...``), the new one renamed into place, and the old one
    deleted. A failure puts the old one back; a writer killed in between leaves
    the two beside a missing ``out_dir``, which :func:`recover_output` mends.
    """
    ready = _sibling(out_dir, "new")
    fsops.rename(new_dir, ready)
    old_dir: Path | None = None
    try:
        if out_dir.exists():
            old_dir = _sibling(out_dir, "old")
            fsops.rename(out_dir, old_dir)
            fault_point("replace_dir.swapping")
        fsops.rename(ready, out_dir)
    except BaseException:
        if old_dir is not None and old_dir.exists() and not out_dir.exists():
            fsops.rename(old_dir, out_dir)
        remove_tree(ready)
        raise
    if old_dir is not None:
        remove_tree(old_dir)
