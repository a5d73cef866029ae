"""Every file lsdask touches below a folder it was handed, checked.

A corpus, checkpoint, model or patch folder may be written by other jobs and
other people, so nothing in it is trusted. Every open, read, write, rename and
delete that lsdask makes below such a folder goes through this module, which

- takes the folder itself (``root``) as the caller names it, and walks down
  from it one plain name at a time (``openat`` with ``O_NOFOLLOW``): a path
  component that is a symbolic link, ``..``, ``.``, an empty or absolute name,
  or a name holding a ``/``, NUL or newline is refused, so nothing outside the
  folder can be reached through it;
- opens only regular files (and folders where a folder is asked for): a FIFO,
  device or socket in a file's place is refused without blocking;
- reads no more than a stated limit (:data:`LIMITS`, by kind of file) and
  checks the size before anything is allocated;
- writes new files with ``O_EXCL``, never through an existing name, and
  renames, deletes and removes trees by directory handle, never following a
  link.

Every refusal is an :class:`UnsafePath` (a :class:`~lsdask.errors.DataError`)
whose message names the folder, the path below it and what was found.

The root itself may be a link (it is what the user handed over); below it,
nothing may be.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

from lsdask.errors import DataError
from lsdask.io.faults import fs_point

__all__ = [
    "LIMITS",
    "UnsafePath",
    "check_tree",
    "exists",
    "fsync_dir",
    "is_dir",
    "is_file",
    "kind_of",
    "listdir",
    "lstat",
    "makedirs",
    "open_lock_file",
    "open_read",
    "open_write",
    "read_bytes",
    "read_json",
    "read_text",
    "relative",
    "remove_tree",
    "rename",
    "replace",
    "unlink",
]

_MiB = 1 << 20

#: The most bytes read from a file of each kind (its size is checked before reading).
LIMITS: dict[str, int] = {
    "pointer": 4096,  # LATEST, a lock record
    "lock": 64 * 1024,
    "state": 256 * _MiB,  # a checkpoint's state.json, a model's params.json
    "manifest": 1024 * _MiB,  # a corpus's manifest.json (grows with its batches)
    "vocab": 1024 * _MiB,  # vocab.txt
    "json": 64 * _MiB,  # any other small JSON document
    "text": 64 * _MiB,
    "document": 256 * _MiB,  # one text file of an input folder, one document
}

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_BAD_CHARS = ("/", "\x00", "\n", "\r")
_MAX_NAME = 255


class UnsafePath(DataError):
    """A path below a handed folder that lsdask refuses to use: a link, a
    special file, a name that leaves the folder, or a file over its size limit."""


def _fail(root: Path, rel: str, found: str, fix: str = "") -> UnsafePath:
    fix = fix or (
        "lsdask never follows links or opens special files inside a folder it is given; "
        "replace it with a regular file or folder (or remove it)"
    )
    return UnsafePath(f"{root}: {rel!r} {found}. {fix}")


def relative(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> tuple[str, ...]:
    """The plain names that lead from ``root`` to ``path``.

    ``path`` is either built from ``root`` (``Path(root) / "parts" / name``:
    it starts with ``root`` as given, or with its absolute form) or names a
    path relative to ``root`` (``"parts/part-0.parquet"``). Nothing is
    normalized: ``..``, an absolute path elsewhere or an odd name raises
    :class:`UnsafePath`.
    """
    root_p, text = Path(root), os.fspath(path)
    if "\x00" in text:
        raise _fail(root_p, text, "holds a NUL character", "Names must be plain file names")
    p, rp = PurePosixPath(text), PurePosixPath(os.fspath(root_p))
    if p.is_absolute():
        top = rp if rp.is_absolute() else PurePosixPath(os.path.abspath(root_p))
        if p.parts[: len(top.parts)] != top.parts:
            raise _fail(root_p, text, "is outside the folder", "Names must stay inside it")
        names = p.parts[len(top.parts) :]
    elif rp.parts and not rp.is_absolute() and p.parts[: len(rp.parts)] == rp.parts:
        names = p.parts[len(rp.parts) :]
    else:
        names = p.parts
    for name in names:
        check_name(root_p, text, name)
    return tuple(names)


def check_name(root: Path, rel: str, name: str) -> None:
    """Refuse ``name`` unless it is one plain file name."""
    if name in ("", ".", "..") or any(c in name for c in _BAD_CHARS):
        raise _fail(root, rel, f"holds the name {name!r}, which is not a plain name in its folder",
                    "Names must be plain file names inside the folder")  # fmt: skip
    if len(name.encode("utf-8", "surrogateescape")) > _MAX_NAME:
        raise _fail(root, rel, f"holds a name of {len(name)} characters",
                    "Names must be at most 255 bytes")  # fmt: skip


def kind_of(mode: int) -> str:
    """What a file of the mode ``mode`` is, for messages ("a FIFO", ...)."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "a special file"


def _open_root(root: Path, *, create: bool = False) -> int:
    if create:
        root.mkdir(parents=True, exist_ok=True)
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except NotADirectoryError as exc:
        raise UnsafePath(f"{root}: not a folder") from exc


def _walk(root: Path, names: tuple[str, ...], rel: str, *, create: bool = False) -> int:
    """A handle on the folder ``root/names...``, every step a real folder."""
    fd = _open_root(root, create=create)
    try:
        for name in names:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError as exc:
                if not create:
                    raise FileNotFoundError(
                        exc.errno, exc.strerror, os.path.join(root, rel)
                    ) from None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except (NotADirectoryError, OSError) as exc:
                if isinstance(exc, FileNotFoundError):
                    raise
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                    raise _fail(
                        root, rel, f"passes through {name!r}, {kind_of(st.st_mode)}"
                    ) from exc
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def _parent(
    root: str | os.PathLike[str], path: str | os.PathLike[str], *, create: bool = False
) -> Iterator[tuple[int, str, Path, str]]:
    """(handle on the parent folder, last name, root, rel) of ``path`` below ``root``."""
    root_p = Path(root)
    names = relative(root_p, path)
    rel = "/".join(names)
    if not names:
        raise _fail(root_p, os.fspath(path), "is the folder itself, not a file in it")
    fd = _walk(root_p, names[:-1], rel, create=create)
    try:
        yield fd, names[-1], root_p, rel
    finally:
        os.close(fd)


def _lstat(fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _open_regular(fd: int, name: str, root: Path, rel: str, flags: int) -> int:
    """Open ``name`` in the folder ``fd``: a regular file only, never blocking on a FIFO."""
    try:
        handle = os.open(name, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666,
                         dir_fd=fd)  # fmt: skip
    except FileNotFoundError as exc:
        raise FileNotFoundError(exc.errno, exc.strerror, os.path.join(root, rel)) from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EMLINK):
            st = _lstat(fd, name)
            raise _fail(root, rel, f"is {kind_of(st.st_mode) if st else 'not a file'}") from exc
        raise
    try:
        st = os.fstat(handle)
        if not stat.S_ISREG(st.st_mode):
            raise _fail(root, rel, f"is {kind_of(st.st_mode)}")
        os.set_blocking(handle, True)
    except BaseException:
        os.close(handle)
        raise
    return handle


def open_read(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> IO[bytes]:
    """``path`` (below ``root``) opened for reading in binary: a regular file
    reached without links. FileNotFoundError if it is missing."""
    with _parent(root, path) as (fd, name, root_p, rel):
        return os.fdopen(_open_regular(fd, name, root_p, rel, os.O_RDONLY), "rb")


def _read_limited(f: IO[bytes], root: Path, rel: str, limit: int) -> bytes:
    size = os.fstat(f.fileno()).st_size
    if size > limit:
        raise _fail(root, rel, f"holds {size:,} bytes, more than the {limit:,} such a file "
                    "may hold", "The file is damaged or not lsdask's")  # fmt: skip
    data = f.read(limit + 1)
    if len(data) > limit:
        raise _fail(root, rel, f"holds more than the {limit:,} bytes such a file may hold",
                    "The file is damaged or not lsdask's")  # fmt: skip
    return data


def read_bytes(
    root: str | os.PathLike[str], path: str | os.PathLike[str], kind: str = "text"
) -> bytes:
    """The bytes of ``path`` below ``root``, at most ``LIMITS[kind]``."""
    limit = LIMITS[kind]
    with open_read(root, path) as f:
        return _read_limited(f, Path(root), "/".join(relative(root, path)), limit)


def read_text(
    root: str | os.PathLike[str], path: str | os.PathLike[str], kind: str = "text"
) -> str:
    """``path`` below ``root`` decoded as UTF-8 (UnicodeDecodeError where it is not)."""
    return read_bytes(root, path, kind).decode("utf-8")


def read_json(
    root: str | os.PathLike[str], path: str | os.PathLike[str], kind: str = "json"
) -> Any:
    """``path`` below ``root`` parsed as JSON (ValueError where it is not)."""
    return json.loads(read_bytes(root, path, kind))


def open_write(
    root: str | os.PathLike[str],
    path: str | os.PathLike[str],
    mode: str = "wb",
    *,
    encoding: str | None = None,
    newline: str | None = None,
) -> IO[Any]:
    """A new file ``path`` below ``root`` (its folders created), opened for
    writing; FileExistsError where the name is taken: writers build under a
    fresh temporary name and :func:`replace` it into place."""
    with _parent(root, path, create=True) as (fd, name, root_p, rel):
        handle = _open_regular(fd, name, root_p, rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        if "b" in mode:
            return os.fdopen(handle, mode)
        return os.fdopen(handle, mode, encoding=encoding or "utf-8", newline=newline)


def open_lock_file(root: str | os.PathLike[str], name: str) -> int:
    """The lock file ``name`` in ``root`` (created), opened read-write (read-only
    where another user made it): a regular file, never a link."""
    with _parent(root, name, create=True) as (fd, last, root_p, rel):
        try:
            return _open_regular(fd, last, root_p, rel, os.O_RDWR | os.O_CREAT)
        except PermissionError:
            return _open_regular(fd, last, root_p, rel, os.O_RDONLY)


def _stat(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> os.stat_result | None:
    try:
        with _parent(root, path) as (fd, name, _, _rel):
            return _lstat(fd, name)
    except (FileNotFoundError, NotADirectoryError):
        return None


def lstat(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> os.stat_result | None:
    """``os.lstat`` of ``path`` below ``root`` (a link's own status, never what
    it points to); None where it is missing. UnsafePath where the way to it
    passes a link."""
    return _stat(root, path)


def fsync_dir(root: str | os.PathLike[str], path: str | os.PathLike[str] = ".") -> None:
    """Force the entries of the folder ``path`` below ``root`` (a rename or a new
    file in it) to disk."""
    names = relative(root, path)
    fd = _walk(Path(root), names, "/".join(names) or ".")
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def exists(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` below ``root`` exists (as anything, a link included);
    UnsafePath where the way to it passes a link."""
    return _stat(root, path) is not None


def is_file(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` below ``root`` is a regular file; UnsafePath where it
    exists as something else (a link, a FIFO, a device)."""
    st = _stat(root, path)
    if st is None:
        return False
    if not stat.S_ISREG(st.st_mode):
        if stat.S_ISDIR(st.st_mode):
            return False
        raise _fail(Path(root), "/".join(relative(root, path)), f"is {kind_of(st.st_mode)}")
    return True


def is_dir(root: str | os.PathLike[str], path: str | os.PathLike[str] = ".") -> bool:
    """Whether ``path`` below ``root`` is a real folder; UnsafePath where it is
    a link or a special file."""
    names = relative(root, path)
    if not names:
        return Path(root).is_dir()
    st = _stat(root, path)
    if st is None:
        return False
    if stat.S_ISDIR(st.st_mode):
        return True
    if stat.S_ISREG(st.st_mode):
        return False
    raise _fail(Path(root), "/".join(names), f"is {kind_of(st.st_mode)}")


def listdir(root: str | os.PathLike[str], path: str | os.PathLike[str] = ".") -> list[str]:
    """The names in the folder ``path`` below ``root`` (sorted; [] if missing)."""
    names = relative(root, path)
    try:
        fd = _walk(Path(root), names, "/".join(names) or ".")
    except FileNotFoundError:
        return []
    try:
        return sorted(os.listdir(fd))
    finally:
        os.close(fd)


def makedirs(root: str | os.PathLike[str], path: str | os.PathLike[str] = ".") -> None:
    """Create the folder ``path`` below ``root`` and those above it (none may be a link)."""
    names = relative(root, path)
    os.close(_walk(Path(root), names, "/".join(names) or ".", create=True))


def replace(
    root: str | os.PathLike[str], src: str | os.PathLike[str], dst: str | os.PathLike[str]
) -> None:
    """Rename ``src`` to ``dst`` (both below ``root``), replacing a file at
    ``dst``; a crash point of the fault-injection tests."""
    fs_point("replace", dst)
    with _parent(root, src) as (sfd, sname, _r, _s), _parent(root, dst) as (dfd, dname, _r2, _d):
        os.replace(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)


def rename(
    root: str | os.PathLike[str], src: str | os.PathLike[str], dst: str | os.PathLike[str]
) -> None:
    """Rename ``src`` to ``dst`` below ``root`` (``os.rename``: a folder onto an
    empty folder, a file onto a file); a crash point (as :func:`replace`)."""
    fs_point("rename", dst)
    with _parent(root, src) as (sfd, sname, _r, _s), _parent(root, dst) as (dfd, dname, _r2, _d):
        os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)


def unlink(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Remove the file (or link) ``path`` below ``root`` if it is there; the
    link itself, never what it points to. A crash point."""
    fs_point("unlink", path)
    try:
        with _parent(root, path) as (fd, name, root_p, rel):
            st = _lstat(fd, name)
            if st is None:
                return
            if stat.S_ISDIR(st.st_mode):
                raise _fail(root_p, rel, "is a folder where a file was expected")
            os.unlink(name, dir_fd=fd)
    except (FileNotFoundError, NotADirectoryError):
        return


def remove_tree(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Remove ``path`` below ``root`` and what it holds, if it is there; a link
    in its place (or anywhere inside it) is removed as a link, never followed.
    A crash point."""
    fs_point("rmtree", path)
    try:
        with _parent(root, path) as (fd, name, _root_p, _rel):
            _remove_entry(fd, name)
    except (FileNotFoundError, NotADirectoryError):
        return


def _remove_entry(fd: int, name: str) -> None:
    st = _lstat(fd, name)
    if st is None:
        return
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=fd)
        return
    try:
        sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        return
    try:
        for entry in os.listdir(sub):
            _remove_entry(sub, entry)
    finally:
        os.close(sub)
    with contextlib.suppress(FileNotFoundError):
        os.rmdir(name, dir_fd=fd)


def check_tree(root: str | os.PathLike[str], path: str | os.PathLike[str] = ".") -> list[str]:
    """Every regular file below ``path`` (relative to ``root``, sorted), after
    refusing any link, special file or odd name anywhere in that tree: what a
    store read by another library (Zarr) is checked with before it is opened."""
    names = relative(root, path)
    root_p = Path(root)
    files: list[str] = []

    def walk(fd: int, prefix: str) -> None:
        for entry in sorted(os.listdir(fd)):
            rel = f"{prefix}{entry}"
            check_name(root_p, rel, entry)
            st = os.stat(entry, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                sub = os.open(entry, _DIR_FLAGS, dir_fd=fd)
                try:
                    walk(sub, rel + "/")
                finally:
                    os.close(sub)
            elif stat.S_ISREG(st.st_mode):
                files.append(rel)
            else:
                raise _fail(root_p, rel, f"is {kind_of(st.st_mode)}")

    top = _walk(root_p, names, "/".join(names) or ".")
    try:
        walk(top, "/".join(names) + "/" if names else "")
    finally:
        os.close(top)
    return files
