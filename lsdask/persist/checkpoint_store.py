"""Checkpoints in object stores: a local working copy, committed after every checkpoint.

A fit whose checkpoint folder is a store URL checkpoints into a local
working copy (:class:`StoreMirror`, below :func:`mirror_root`) exactly as
into any local folder (its lock, its atomic ``LATEST``, its memo files),
and after each checkpoint commits the copy as the store location's next
version (:func:`~lsdask.io.stores.upload_folder`: files that did not change
keep their objects, so a lap uploads its new memo files and its state). A
fit that starts, on this machine or another, rebuilds the copy from the
newest version where the copy is not that version already, and resumes
from it.

Two fits on one store location: each commits the version after the one it
started from, so the second to commit is refused (``CommitConflict``) instead
of overwriting the first's checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lsdask.io.stores import Version, VersionLog, download_folder, open_location, upload_folder
from lsdask.kernels.cache import cache_root

logger = logging.getLogger(__name__)

__all__ = ["StoreMirror", "mirror_root"]

#: the file in a working copy that records the version it is
_STAMP = ".lsdask-store-version.json"
#: entries of a checkpoint folder that stay local: its lock, temporaries, the stamp
_LOCAL_ONLY = (".lsdask.lock", ".tmp-", ".LATEST.", _STAMP)


def mirror_root() -> Path:
    """Where working copies of store locations live: ``$LSDASK_STORE_COPIES``,
    else ``stores`` in lsdask's per-user cache (:func:`~lsdask.kernels.cache.cache_root`,
    ``~/.cache/lsdask`` by default), else the system's temporary folder."""
    chosen = os.environ.get("LSDASK_STORE_COPIES", "")
    if chosen:
        return Path(os.path.abspath(os.path.expanduser(chosen)))
    root = cache_root()
    return (root if root is not None else Path(tempfile.gettempdir()) / "lsdask") / "stores"


def _stays_local(name: str) -> bool:
    return any(name == p or name.startswith(p) for p in _LOCAL_ONLY)


class StoreMirror:
    """The local working copy of a checkpoint location in a store."""

    def __init__(self, url: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.log = VersionLog(open_location(url, storage_options, parameter="checkpoint"))
        key = hashlib.sha256(self.log.location.url.encode()).hexdigest()[:24]
        self.folder = mirror_root() / key
        self.version: Version | None = None
        self._known: dict[str, tuple[int, int, str]] = {}  # digests of files pushed

    def pull(self) -> Path:
        """Make the working copy the newest committed version (rebuilt where it
        is not that version already, keeping the lock of the fit that holds
        it); its folder."""
        newest = self.log.latest()
        self.version = newest
        if newest is None:
            self.folder.mkdir(parents=True, exist_ok=True)
            return self.folder
        if self._stamp() == (newest.number, newest.writer.get("id")):
            return self.folder
        fresh = self.folder.with_name(f"{self.folder.name}.pull-{os.getpid()}")
        if fresh.exists():
            shutil.rmtree(fresh)
        download_folder(self.log, newest, fresh)
        self.folder.mkdir(parents=True, exist_ok=True)
        for entry in os.scandir(self.folder):  # all but what stays local (the fit's lock)
            if not _stays_local(entry.name):
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        for entry in os.scandir(fresh):
            os.rename(entry.path, self.folder / entry.name)
        fresh.rmdir()
        self._write_stamp(newest)
        logger.info(
            "checkpoint %s: version %d rebuilt in %s", self.log.location.url, newest.number,
            self.folder,
        )  # fmt: skip
        return self.folder

    def push(self) -> Version:
        """Commit the working copy as the version after the one pulled or pushed last."""
        committed = upload_folder(
            self.log,
            self.folder,
            {"what": "lsdask checkpoint"},
            parent=self.version,
            exclude=_stays_local,
            known=self._known,
        )
        self.version = committed
        self._write_stamp(committed)
        return committed

    def _stamp(self) -> tuple[int, Any] | None:
        try:
            doc = json.loads((self.folder / _STAMP).read_text())
            return int(doc["version"]), doc.get("writer")
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_stamp(self, version: Version) -> None:
        text = json.dumps({"version": version.number, "writer": version.writer.get("id")})
        (self.folder / _STAMP).write_text(text)
