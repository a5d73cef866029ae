"""Where a table lies: a local folder, or a prefix in any store fsspec knows.

A :class:`TableLocation` is small and picklable: the root as the user gave it
(a path or a URL such as ``s3://bucket/table``, ``memory://table``,
``file:///data/table``) and the ``storage_options`` of its file system
(credentials, endpoints). Each batch task resolves them again
(:func:`lsdask.io.stores.open_location`; fsspec keeps one file system per set
of options in each process), so a task opens its own file and no data passes
through the driver. Messages show the URL without credentials.

Local folders are read through :mod:`lsdask.io.guarded`, as lsdask's own
corpora are: a symbolic link, FIFO, device or socket anywhere below the root
is refused, and nothing outside the root can be reached. Other stores are
read through ``pyarrow.fs.PyFileSystem(FSSpecHandler(fs))``, so that pyarrow
reads only the byte ranges of the row group a task asks for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from lsdask.io import guarded
from lsdask.io.stores import Location, open_location
from lsdask.io.stores.location import redact

__all__ = ["TableLocation"]


@dataclass(frozen=True, eq=False)
class TableLocation:
    """A table's root and how to reach it.

    Attributes
    ----------
    url : str
        The root: an absolute local path, or a URL with its protocol.
    storage_options : dict
        Keyword arguments of the fsspec file system (``key``, ``secret``,
        ``endpoint_url``, ``client_kwargs``, ...); they travel with every batch
        task, credentials included, as they do with Dask's own readers.
    """

    url: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, path: Any, storage_options: dict[str, Any] | None = None) -> TableLocation:
        """The location of ``path`` (a local path, made absolute, or a URL)."""
        if not isinstance(path, str | os.PathLike):
            raise TypeError(
                f"path must be a folder or a URL (str or os.PathLike); got {type(path).__name__}"
            )
        text = os.fspath(path)
        if not isinstance(text, str) or not text:
            raise ValueError(f"path must be a non-empty folder or URL; got {path!r}")
        if storage_options is not None and not isinstance(storage_options, dict):
            raise TypeError(
                "storage_options must be a dict of the file system's options (e.g. "
                f"{{'key': ..., 'secret': ...}} for s3://); got {type(storage_options).__name__}"
            )
        if "://" not in text and "::" not in text:
            # a task may run in a worker started in another folder
            text = os.path.abspath(text)
        return cls(text, dict(storage_options or {}))

    @property
    def shown(self) -> str:
        """The root fit to print: without a ``user:password@`` part."""
        return redact(self.url)

    def resolve(self) -> Location:
        """The fsspec file system and the root's path in it. A protocol whose
        package is not installed is an ImportError that names the package."""
        return open_location(self.url, self.storage_options, parameter="table")

    # -- listing and opening ------------------------------------------------------
    def list_files(self) -> list[tuple[str, int]]:
        """Every file below the root as ``(path relative to the root, size in
        bytes)``, sorted by path. In a local folder a link or special file
        anywhere below the root is refused
        (:class:`~lsdask.io.guarded.UnsafePath`)."""
        where = self.resolve()
        fs, root = where.fs, where.root
        if where.is_local:
            if not os.path.isdir(root):
                raise FileNotFoundError(f"table {self.shown}: no such folder")
            files = guarded.check_tree(root)
            sizes = [guarded.lstat(root, rel) for rel in files]
            return [(rel, int(st.st_size)) for rel, st in zip(files, sizes, strict=True) if st]
        if not fs.isdir(root):
            raise FileNotFoundError(
                f"table {self.shown}: no such folder (prefix) in the store, or no file below it"
            )
        found = fs.find(root, withdirs=False, detail=True)
        out = []
        for path, info in found.items():
            path = path.rstrip("/")
            if not path.startswith(root.rstrip("/") + "/") or info.get("type") == "directory":
                continue
            out.append((path[len(root.rstrip("/")) + 1 :], int(info.get("size") or 0)))
        return sorted(out)

    def open_input(self, rel: str) -> Any:
        """The file ``rel`` (relative to the root) opened for random-access reads,
        as pyarrow's readers take it: through :mod:`lsdask.io.guarded` in a local
        folder, through fsspec elsewhere. FileNotFoundError where it is missing."""
        where = self.resolve()
        if where.is_local:
            return guarded.open_read(where.root, rel)
        from pyarrow.fs import FSSpecHandler, PyFileSystem

        _check_relative(self.shown, rel)
        return PyFileSystem(FSSpecHandler(where.fs)).open_input_file(f"{where.root}/{rel}")

    def full_path(self, rel: str) -> str:
        """The file ``rel`` as a path or URL, for messages."""
        return f"{self.shown.rstrip('/')}/{rel}"


def _check_relative(url: str, rel: str) -> None:
    """Refuse a file name that is not plain names below the root (``..``, an
    absolute path, NUL or a line break): nothing outside the table is read."""
    parts = rel.split("/")
    if any(p in ("", ".", "..") or any(c in p for c in "\x00\n\r") for p in parts):
        raise guarded.UnsafePath(
            f"table {url}: the file name {rel!r} does not stay below the table's root; names "
            "must be plain names, separated by '/'"
        )
