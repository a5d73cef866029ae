"""The files of checkpoint and model folders, written and cleaned through
:mod:`lsdask.io.guarded`.

Every file persist writes is built under a hidden temporary name in its
folder, forced to disk, renamed into place, and the folder forced to disk, so
a crash leaves the old file or the new one, never half of one. A failure (a
full disk) removes the temporary and names the file (the message of an
``OSError`` without a file name gets it). Clean-ups list a folder and remove
what matches as it is: a link is removed as a link, never followed.
"""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from lsdask.io import fsops, guarded

logger = logging.getLogger(__name__)

__all__ = ["naming", "remove_matching", "temp_name", "write_atomic", "write_text_atomic"]


def temp_name(path: Path, sep: str = ".") -> Path:
    """A fresh hidden name beside ``path``: ``.<name><sep><hex>.tmp``."""
    return path.with_name(f".{path.name}{sep}{uuid.uuid4().hex}.tmp")


@contextlib.contextmanager
def naming(path: str | os.PathLike[str]) -> Iterator[None]:
    """Within the block, an ``OSError`` that names no file (a full disk seen by a
    write or an fsync) is raised again naming ``path``."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(path)) from exc


def write_atomic(
    root: str | os.PathLike[str],
    path: str | os.PathLike[str],
    write: Callable[[IO[Any]], object],
    *,
    text: bool = False,
    tmp: Path | None = None,
    sync_folder: bool = True,
) -> int:
    """Write the file ``path`` below the folder ``root`` with ``write(handle)``:
    into a temporary beside it (``tmp``, default :func:`temp_name`), forced to
    disk, renamed over ``path``, the folder forced to disk (unless
    ``sync_folder`` is off: a writer of many files that syncs their folder once,
    before anything refers to them). Returns the bytes written. On failure the
    temporary is removed and an ``OSError`` names ``path``; a link or special
    file on the way is an :class:`~lsdask.io.guarded.UnsafePath`."""
    target = Path(root).joinpath(*guarded.relative(root, path))
    tmp = tmp if tmp is not None else temp_name(target)
    with naming(target):
        try:
            mode = "w" if text else "wb"
            with guarded.open_write(root, tmp, mode, newline="\n" if text else None) as fh:
                write(fh)
                fsops.fsync(fh)
                size = os.fstat(fh.fileno()).st_size
            guarded.replace(root, tmp, target)
        except BaseException:
            with contextlib.suppress(OSError, ValueError):
                guarded.unlink(root, tmp)
            raise
        if sync_folder:
            guarded.fsync_dir(root, target.parent)
    return size


def write_text_atomic(
    root: str | os.PathLike[str], path: str | os.PathLike[str], text: str
) -> None:
    """:func:`write_atomic` of UTF-8 text."""
    write_atomic(root, path, lambda fh: fh.write(text), text=True)


def remove_matching(
    root: str | os.PathLike[str],
    folder: str | os.PathLike[str],
    pattern: str,
    keep: Callable[[str], bool] = lambda name: False,
) -> list[str]:
    """Remove every entry of ``folder`` (below ``root``) whose name matches the
    glob ``pattern`` and that ``keep`` does not keep: a file or link unlinked, a
    folder removed with what it holds (links in it removed as links). Returns
    the names removed."""
    removed = []
    for name in guarded.listdir(root, folder):
        if fnmatch.fnmatchcase(name, pattern) and not keep(name):
            guarded.remove_tree(root, Path(folder) / name)
            removed.append(name)
    return removed
