"""A local folder kept in a store as versions: how models and checkpoints reach stores.

lsdask writes a model or a checkpoint into a local folder with its own,
checked writers; :func:`upload_folder` then commits that folder as the next
version of a :class:`~lsdask.io.stores.VersionLog`: every file an immutable
object (a file whose size and BLAKE2b equal the previous version's reuses
its object, so a checkpoint written every lap uploads only what changed),
and the version a list of (relative path, object, size, digest).
:func:`download_folder` rebuilds a version in a fresh local folder, checking
every file's size and digest, for the same readers to read.

A writer killed during an upload commits nothing: readers keep the previous
version, and the objects it had written are garbage for
:meth:`~lsdask.io.stores.VersionLog.remove_unreferenced`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from lsdask.errors import DataError
from lsdask.io.stores.versions import CommitConflict, Version, VersionLog

logger = logging.getLogger(__name__)

KIND = "folder"
_CHUNK = 1 << 20
_PLAIN = re.compile(r"^(?!\.{1,2}$)[^/\\\x00\n]+$")


def _digest(path: Path) -> tuple[int, str]:
    """(bytes, BLAKE2b-256 hex) of a local file, read in chunks."""
    h = hashlib.blake2b(digest_size=32)
    size = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def _known_digest(
    path: Path, rel: str, known: dict[str, tuple[int, int, str]] | None
) -> tuple[int, str]:
    """``_digest(path)``, taken from ``known`` where the file's size and
    modification time are those recorded there (and recorded otherwise)."""
    if known is None:
        return _digest(path)
    st = os.stat(path)
    held = known.get(rel)
    if held is not None and held[:2] == (st.st_size, st.st_mtime_ns):
        return st.st_size, held[2]
    size, digest = _digest(path)
    known[rel] = (size, st.st_mtime_ns, digest)
    return size, digest


def _files(folder: Path, exclude: Callable[[str], bool] | None = None) -> list[str]:
    """Relative paths (``/``-separated) of the regular files below ``folder``,
    sorted, less those whose name ``exclude`` is true of (a folder's, and all
    below it); a link or special file is refused (the folder is lsdask's own)."""
    found = []
    for here, dirs, names in os.walk(folder, followlinks=False):
        if exclude is not None:
            dirs[:] = [d for d in dirs if not exclude(d)]
            names = [n for n in names if not exclude(n)]
        for name in [*dirs, *names]:
            mode = os.lstat(os.path.join(here, name)).st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise DataError(f"{os.path.join(here, name)}: not a regular file or folder")
        found += [os.path.relpath(os.path.join(here, n), folder) for n in names]
    return sorted(p.replace(os.sep, "/") for p in found)


def _suffix(rel: str) -> str:
    ext = os.path.splitext(rel)[1]
    return ext if re.fullmatch(r"\.[A-Za-z0-9_-]{1,32}", ext) else ""


#: ``upload_folder``'s default parent: the newest version when it starts
NEWEST: Any = object()


def upload_folder(
    log: VersionLog,
    folder: str | os.PathLike[str],
    meta: Mapping[str, Any] | None = None,
    *,
    parent: Version | None = NEWEST,
    exclude: Callable[[str], bool] | None = None,
    known: dict[str, tuple[int, int, str]] | None = None,
) -> Version:
    """Commit the files below ``folder`` (less those ``exclude`` names) as the
    version after ``parent`` (default the newest; None: the first), with
    ``meta`` (JSON) beside the file list. :class:`CommitConflict` where another
    writer committed that version number first.

    ``known`` (kept by a caller that uploads the same folder again and again,
    a checkpoint's working copy) maps a file to its (size, mtime_ns, BLAKE2b)
    when last read: a file whose size and modification time are unchanged is
    not read again."""
    folder = Path(folder)
    if parent is NEWEST:
        parent = log.latest()
    previous: dict[str, dict[str, Any]] = {}
    if parent is not None and parent.content.get("kind") == KIND:
        previous = {f["path"]: f for f in parent.content.get("files", [])}
    files, uploaded = [], 0
    for rel in _files(folder, exclude):
        size, digest = _known_digest(folder / rel, rel, known)
        old = previous.get(rel)
        if old is not None and old.get("bytes") == size and old.get("blake2b") == digest:
            name = old["object"]
        else:
            name = log.put_file(folder / rel, _suffix(rel))
            uploaded += size
        files.append({"path": rel, "object": name, "bytes": size, "blake2b": digest})
    content = {"kind": KIND, "files": files, **dict(meta or {})}
    try:
        committed = log.commit(content, parent)
    except CommitConflict as exc:
        raise CommitConflict(
            f"{exc}. Another process writes {log.location.url} at the same time; a model or "
            "checkpoint location has one writer"
        ) from None
    logger.info(
        "%s: version %d, %d files (%d bytes uploaded)",
        log.location.url, committed.number, len(files), uploaded,
    )  # fmt: skip
    return committed


def download_folder(log: VersionLog, version: Version, dest: str | os.PathLike[str]) -> Path:
    """Rebuild ``version``'s files in ``dest`` (a new folder), each checked
    against its recorded size and BLAKE2b; ``dest``."""
    dest = Path(dest)
    where = f"{log.location.url}, version {version.number}"
    if version.content.get("kind") != KIND or not isinstance(version.content.get("files"), list):
        raise DataError(f"{where}: not a folder version (no file list)")
    dest.mkdir(parents=True, exist_ok=False)
    for entry in version.content["files"]:
        rel = entry.get("path") if isinstance(entry, dict) else None
        parts = rel.split("/") if isinstance(rel, str) else []
        if not parts or not all(_PLAIN.match(p) for p in parts):
            raise DataError(f"{where}: the file list names {rel!r}, not a path below the folder")
        target = dest.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        log.get_file(str(entry.get("object")), target)
        size, digest = _digest(target)
        if size != entry.get("bytes") or digest != entry.get("blake2b"):
            raise DataError(
                f"{where}: {rel} came back with {size} bytes and another digest than recorded; "
                "the object was changed or damaged in the store"
            )
    return dest
