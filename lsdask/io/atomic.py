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

Everything here happens in the output's parent folder, through
:mod:`lsdask.io.guarded` with that folder as root: an entry beside the output
(a temporary, the output itself) that is a link is renamed or removed as a
link, never followed; the output's own name being a link is replaced, not
written through. Files are forced to disk before they are renamed into place,
and the parent folder after.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import socket
import stat
import uuid
from pathlib import Path

from lsdask.io import guarded
from lsdask.io.faults import fault_point, fs_point

logger = logging.getLogger(__name__)

#: Tries of :func:`replace_dir` when other writers of the same output swap theirs in meanwhile.
_SWAP_TRIES = 20


def remove_tree(path: Path) -> None:
    """Delete a folder tree (or a file, or a link: never what it points to) if
    it exists, logging rather than raising on failure."""
    path = Path(path)
    try:
        if guarded.lstat(path.parent, path.name) is None:
            return
        guarded.remove_tree(path.parent, path.name)
    except OSError as exc:
        logger.warning("could not remove temporary %s: %s", path, exc)
        return
    if guarded.lstat(path.parent, path.name) is not None:
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


def _names_beside(out: Path) -> list[str]:
    """The names in ``out``'s parent folder ([] where it is not a folder)."""
    if not out.parent.is_dir():
        return []
    return guarded.listdir(out.parent)


def stale_siblings(out: Path, kind: str) -> list[tuple[Path, int]]:
    """Entries ``.<name>.<kind>-<host>-<pid>-<hex>`` beside ``out`` of processes of
    this host that are no longer running, and their process ids (by name)."""
    host, name = _host(), re.escape(out.name)
    pattern = re.compile(rf"^\.{name}\.{re.escape(kind)}-{re.escape(host)}-(\d+)-[0-9a-f]{{8}}$")
    found = []
    for entry in _names_beside(out):
        match = pattern.match(entry)
        if match and not _running(int(match.group(1))):
            found.append((out.parent / entry, int(match.group(1))))
    return sorted(found, key=lambda e: e[0].name)


_stale = stale_siblings


def _remove(entry: Path) -> None:
    guarded.remove_tree(entry.parent, entry.name)


def _exists(path: Path) -> bool:
    """Whether ``path`` is there as anything (a link included), not following it."""
    return guarded.lstat(path.parent, path.name) is not None


def _newest(entries: list[tuple[Path, int]]) -> tuple[Path, int]:
    def mtime(entry: tuple[Path, int]) -> float:
        try:
            st = guarded.lstat(entry[0].parent, entry[0].name)
        except OSError:
            return -1.0
        return -1.0 if st is None else st.st_mtime

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
        if not _exists(out):
            chosen, pid = _newest(fresh) if fresh else _newest(old)
            guarded.rename(out.parent, chosen.name, out.name)
            logger.warning(
                "%s was missing: its writer (process %d) was stopped while it swapped the "
                "output in. Put %s in its place (%s).",
                out, pid, "the complete new output" if fresh else "the previous output back",
                chosen.name,
            )  # fmt: skip
        for entry, pid in fresh + old:
            if _exists(entry):
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
    out = Path(out)
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
    found = []
    for entry in _names_beside(out):
        match = pattern.match(entry)
        if match and not _running(int(match.group(1))):
            found.append((out.parent / entry, int(match.group(1))))
    return sorted(found, key=lambda e: e[0].name)


def _sibling(out: Path, kind: str) -> Path:
    return out.with_name(f".{out.name}.{kind}-{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def sync_tree(path: Path) -> None:
    """Force every regular file and folder of the tree ``path`` to disk (links
    and special files in it are neither followed nor synced): what a writer
    does before it renames a new output into place. One crash point."""
    path = Path(path)
    fs_point("fsync", path)
    root = path.parent

    def sync(rel: str) -> None:
        st = guarded.lstat(root, rel)
        if st is None:
            return
        if stat.S_ISDIR(st.st_mode):
            for entry in guarded.listdir(root, rel):
                sync(f"{rel}/{entry}")
            _fsync_folder(root, rel)
        elif stat.S_ISREG(st.st_mode):
            with guarded.open_read(root, rel) as f:
                os.fsync(f.fileno())

    sync(path.name)


def _fsync_folder(root: Path, rel: str = ".") -> None:
    """fsync a folder's entries (where the file system allows it)."""
    try:
        guarded.fsync_dir(root, rel)
    except OSError as exc:  # e.g. EINVAL: this file system cannot sync folders
        logger.debug("could not fsync folder %s/%s: %s", root, rel, exc)


def sync_parent(path: Path) -> None:
    """Force the entries of ``path``'s parent folder (a rename into it) to disk."""
    _fsync_folder(Path(path).parent)


def replace_dir(new_dir: Path, out_dir: Path) -> None:
    """Put the complete folder ``new_dir`` (a :func:`temp_sibling` of ``out_dir``)
    in place of ``out_dir``.

    Its files are first forced to disk; ``new_dir`` is renamed
    ``.<name>.new-<host>-<pid>-<hex>`` (its name now says it is complete); an
    existing ``out_dir`` (a folder, a file or a link: renamed as it is, never
    followed) is renamed aside (``.<name>.old-...``), the new one renamed into
    place, and the old one deleted. Another writer of the same output that swaps
    its own in between is moved aside in turn (the last writer's output stays);
    one that keeps doing so past a few tries is a FileExistsError naming the
    output. A failure puts the old one back; a writer killed in between leaves
    the two beside a missing ``out_dir``, which :func:`recover_output` mends.
    """
    new_dir, out_dir = Path(new_dir), Path(out_dir)
    parent = out_dir.parent
    if os.path.abspath(new_dir.parent) != os.path.abspath(parent):
        raise ValueError(f"replace_dir: {new_dir} is not beside {out_dir}")
    sync_tree(new_dir)
    ready = _sibling(out_dir, "new")
    guarded.rename(parent, new_dir.name, ready.name)
    olds: list[Path] = []
    try:
        for _ in range(_SWAP_TRIES):
            if _exists(out_dir):
                old_dir = _sibling(out_dir, "old")
                try:
                    guarded.rename(parent, out_dir.name, old_dir.name)
                except FileNotFoundError:
                    continue  # another writer moved it aside meanwhile: look again
                olds.append(old_dir)
                fault_point("replace_dir.swapping")
            try:
                guarded.rename(parent, ready.name, out_dir.name)
                break
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                    raise
                # another writer of this output put its own in place meanwhile: move it aside
        else:
            raise FileExistsError(
                f"{out_dir}: other processes kept writing this output at the same time "
                f"({_SWAP_TRIES} tries to put this one in place failed). Give each command "
                "its own output path, or run them one after the other"
            )
    except BaseException:
        if olds and _exists(olds[-1]) and not _exists(out_dir):
            guarded.rename(parent, olds[-1].name, out_dir.name)
            olds.pop()
        remove_tree(ready)
        for old in olds:
            remove_tree(old)
        raise
    _fsync_folder(parent)
    for old in olds:
        remove_tree(old)
