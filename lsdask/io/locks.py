"""One writer at a time: advisory locks on folders.

A corpus folder has one lock, taken by every append (and by a rescan, briefly,
to save what it found); a checkpoint folder has one, held by the fit that
writes it for the whole fit. The lock is an ``fcntl.flock`` on the file
``.lsdask.lock`` in the folder. The kernel (or, on NFS, the server) releases it
when its holder ends, also when it is killed, so there is never a stale lock to
break. While held, the file records who holds it (host, process id, since when,
the command line), so that a second writer is told whom it waits for.

A second writer is refused at once with :class:`~lsdask.errors.LockError`, or,
with ``wait`` seconds, waits that long for the lock first. The defaults of
``wait`` and of locking at all come from :func:`lock_settings` (the command
line's ``--wait SECONDS`` and ``--no-lock``). A file system without locks
(``flock`` fails with ENOLCK or EOPNOTSUPP) is refused with a message that
says so, unless locking is turned off.

The lock file is never deleted: deleting it would let two processes lock two
different files of the same name. It is opened through :mod:`lsdask.io.guarded`:
a link, FIFO or device in its place is refused (naming the folder), never
followed, created through or truncated; a lock file with several hard links
(a snapshot made with ``cp -al``) is locked, but its record is not written.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import errno
import fcntl
import json
import logging
import math
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsdask.errors import DataError, LockError
from lsdask.io import guarded

logger = logging.getLogger(__name__)

__all__ = [
    "LOCK_NAME",
    "FolderLock",
    "LockSettings",
    "current_settings",
    "holder",
    "lock_settings",
    "try_lock",
]

#: The lock file in a locked folder.
LOCK_NAME = ".lsdask.lock"

#: flock errors that mean "this file system has no locks"
_NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}
#: seconds between two tries while waiting for a lock
_POLL = 0.1


@dataclass(frozen=True)
class LockSettings:
    """Defaults for the locks taken by lsdask's writers.

    Attributes
    ----------
    wait : float
        Seconds a writer waits for a folder another process holds (0: refuse at
        once; ``math.inf``: wait as long as it takes).
    enabled : bool
        Take locks at all. Turn off only on a file system without locks, and
        only where no two processes write one folder at the same time.
    """

    wait: float = 0.0
    enabled: bool = True


_SETTINGS: contextvars.ContextVar[LockSettings | None] = contextvars.ContextVar(
    "lsdask_lock_settings", default=None
)


def current_settings() -> LockSettings:
    """The lock settings in force here (see :func:`lock_settings`)."""
    return _SETTINGS.get() or LockSettings()


def _check_wait(wait: Any) -> float:
    try:
        seconds = float(wait)
    except (TypeError, ValueError):
        seconds = math.nan
    if isinstance(wait, bool) or not seconds >= 0:
        raise ValueError(
            f"wait must be a number of seconds >= 0 (0: refuse at once if another process "
            f"holds the lock); got {wait!r}"
        )
    return seconds


@contextlib.contextmanager
def lock_settings(*, wait: float | None = None, enabled: bool | None = None) -> Iterator[None]:
    """Set the defaults of :class:`LockSettings` for the locks taken inside the
    block (in this thread): ``lsdask fit --wait 600`` is ``with
    lock_settings(wait=600): lda.fit(...)``. None keeps the current value."""
    current = current_settings()
    token = _SETTINGS.set(
        LockSettings(
            current.wait if wait is None else _check_wait(wait),
            current.enabled if enabled is None else bool(enabled),
        )
    )
    try:
        yield
    finally:
        _SETTINGS.reset(token)


# --------------------------------------------------------------------------- the holder


def _command() -> str:
    """This process's command line, as typed (``lsdask ...`` for ``python -m lsdask``)."""
    if not sys.argv or not sys.argv[0]:
        return ""
    program = Path(sys.argv[0])
    name = program.parent.name if program.name == "__main__.py" else program.name
    return " ".join([name, *sys.argv[1:]])[:500]


def _record() -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "since": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": _command(),
    }


def holder(folder: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The record of the process that holds (or last held, if it was killed)
    ``folder``'s lock: ``host``, ``pid``, ``since`` (UTC, ISO 8601) and
    ``command``; None when there is none."""
    try:
        text = guarded.read_text(folder, LOCK_NAME, "lock")
        record = json.loads(text) if text.strip() else None
    except (OSError, ValueError):  # missing, unreadable, not a regular file, not JSON
        return None
    return record if isinstance(record, dict) else None


def _describe(record: dict[str, Any] | None) -> str:
    if record is None:
        return "a process that is just starting or ending (it has not said who it is)"
    text = f"process {record.get('pid')} on host {record.get('host')}"
    since = record.get("since")
    if since:
        try:
            started = datetime.datetime.fromisoformat(since)
            age = (datetime.datetime.now(datetime.UTC) - started).total_seconds()
            text += f", since {since} ({_duration(age)} ago)"
        except (TypeError, ValueError):
            text += f", since {since}"
    if record.get("command"):
        text += f", running `{record['command']}`"
    return text


def _duration(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# --------------------------------------------------------------------------- held locks


@dataclass
class _Held:
    fd: int
    thread: int
    count: int


#: locks this process holds, by lock file path
_HELD: dict[str, _Held] = {}
_HELD_GUARD = threading.Lock()


def _forget_after_fork() -> None:
    """A forked child shares its parent's lock; it drops its copy of the file so
    that the lock ends with the parent, and holds nothing itself."""
    for held in _HELD.values():
        with contextlib.suppress(OSError):
            os.close(held.fd)
    _HELD.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def _lock_path(folder: Path) -> str:
    """The key of ``folder``'s lock in this process: the folder itself resolved
    (it may be a link: the user handed it over), the lock file's name as it is."""
    return os.path.join(os.path.realpath(folder), LOCK_NAME)


class FolderLock:
    """The lock of one folder, as a context manager.

    Parameters
    ----------
    folder : str or os.PathLike
        The folder (created if missing).
    what : str
        What the folder is, for messages ("corpus", "checkpoint folder").
    advice : str
        What a refused writer should do, for the message of its LockError.
    wait : float or None
        Seconds to wait for a lock another process holds; None: the default
        of :func:`lock_settings` (0: refuse at once).
    enabled : bool or None
        Lock at all; None: the default of :func:`lock_settings`.
    reentrant : bool
        Whether the thread holding the lock may take it again (an append that
        a job already holds the corpus for); otherwise a second take, even by
        the same thread, is refused.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        what: str,
        advice: str = "",
        *,
        wait: float | None = None,
        enabled: bool | None = None,
        reentrant: bool = False,
    ) -> None:
        settings = current_settings()
        self.folder = Path(folder)
        self.what = what
        self.advice = advice
        self.wait = settings.wait if wait is None else _check_wait(wait)
        self.enabled = settings.enabled if enabled is None else bool(enabled)
        self.reentrant = reentrant
        self._key: str | None = None

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self, *, blocking: bool = True) -> bool:
        """Take the lock (waiting up to ``wait`` seconds when ``blocking``).

        Returns False only when not ``blocking`` and the lock is held elsewhere.

        Raises
        ------
        LockError
            If another process (or thread) holds it past ``wait``, or the file
            system has no locks.
        """
        if not self.enabled:
            return True
        self.folder.mkdir(parents=True, exist_ok=True)
        key = _lock_path(self.folder)
        with _HELD_GUARD:
            held = _HELD.get(key)
            if held is not None and held.thread == threading.get_ident():
                if not self.reentrant:
                    raise LockError(
                        f"{self.what} {self.folder} is already locked by this thread (process "
                        f"{os.getpid()}); it cannot be taken twice. {self.advice}".rstrip()
                    )
                held.count += 1
                self._key = key
                return True
        fd = _open_lock_file(self.folder, self.what)
        try:
            if not self._flock(fd, key, blocking):
                os.close(fd)
                return False
        except BaseException:
            os.close(fd)
            raise
        if _own_file(fd):
            with contextlib.suppress(OSError):
                data = json.dumps(_record()).encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, data, 0)
        self._key = key
        return True

    def _flock(self, fd: int, key: str, blocking: bool) -> bool:
        deadline = time.monotonic() + (self.wait if blocking else 0.0)
        told = False
        while True:
            # another thread of this process holds it: busy, whatever the file system
            # says (NFS emulates flock with byte-range locks, which are per process)
            with _HELD_GUARD:
                if key not in _HELD:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        _HELD[key] = _Held(fd, threading.get_ident(), 1)
                        return True
                    except BlockingIOError:
                        pass
                    except OSError as exc:
                        if exc.errno in _NO_LOCKS:
                            raise LockError(self._no_locks_message(exc)) from exc
                        raise
            remaining = deadline - time.monotonic()
            if not blocking:
                return False
            if remaining <= 0:
                raise LockError(self._held_message())
            if not told:
                logger.warning(
                    "%s %s is locked by %s; waiting %s for it",
                    self.what, self.folder, _describe(holder(self.folder)),
                    "as long as it takes" if math.isinf(self.wait)
                    else f"up to {_duration(self.wait)}",
                )  # fmt: skip
                told = True
            time.sleep(min(_POLL, remaining))

    def _held_message(self) -> str:
        waited = f" (waited {_duration(self.wait)})" if self.wait > 0 else ""
        return (
            f"{self.what} {self.folder} is locked by {_describe(holder(self.folder))}{waited}. "
            "The lock ends when that process ends, also if it is killed. "
            f"{self.advice}".rstrip()
        )

    def _no_locks_message(self, exc: OSError) -> str:
        return (
            f"{self.what} {self.folder}: its file system does not support locks (flock: "
            f"{exc.strerror or exc}), so lsdask cannot make sure that no other process writes "
            "it at the same time. Put it on a local or NFSv4 file system, or, if you are sure "
            "that only one process at a time writes it, run with --no-lock (Python: "
            "lock=False, or lsdask.io.locks.lock_settings(enabled=False))"
        )

    def release(self) -> None:
        """Give the lock up (once per :meth:`acquire`); the record is cleared."""
        key, self._key = self._key, None
        if key is None:
            return
        with _HELD_GUARD:
            held = _HELD.get(key)
            if held is None:
                return
            held.count -= 1
            if held.count > 0:
                return
            del _HELD[key]
        if _own_file(held.fd):
            with contextlib.suppress(OSError):
                os.ftruncate(held.fd, 0)
        with contextlib.suppress(OSError):
            fcntl.flock(held.fd, fcntl.LOCK_UN)
        os.close(held.fd)


def _open_lock_file(folder: Path, what: str) -> int:
    """The lock file of ``folder``, opened for writing its record (read-only
    where another user made it: flock needs no write access); a link or special
    file in its place is a DataError naming the folder."""
    try:
        return guarded.open_lock_file(folder, LOCK_NAME)
    except guarded.UnsafePath as exc:
        raise DataError(
            f"{what} {folder}: its lock file {LOCK_NAME} is not a regular file ({exc}). "
            f"lsdask never opens a lock file through a link; remove {folder / LOCK_NAME} "
            "(lsdask makes a new one) and run again"
        ) from exc


def _own_file(fd: int) -> bool:
    """Whether the lock file is a regular file of one name, whose record this
    process may write (one with other hard links is another file's too)."""
    try:
        return os.fstat(fd).st_nlink == 1
    except OSError:
        return False


@contextlib.contextmanager
def try_lock(
    folder: str | os.PathLike[str], what: str, *, enabled: bool | None = None
) -> Iterator[bool]:
    """Take ``folder``'s lock if it is free, for a short step that may be
    skipped (a reader saving what it found): yields True while held (also when
    locking is off, or this thread holds it already), False when another
    process holds it, the folder cannot hold a lock file (read-only), or its
    file system has no locks."""
    lock = FolderLock(folder, what, wait=0, enabled=enabled, reentrant=True)
    try:
        taken = lock.acquire(blocking=False)
    except (LockError, OSError) as exc:
        logger.debug("%s %s: not locked (%s)", what, folder, exc)
        taken = False
    try:
        yield taken
    finally:
        if taken:
            lock.release()
