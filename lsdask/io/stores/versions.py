"""Numbered versions, each committed by an exclusive create: the commit protocol on stores.

A store written this way (docs/storage.md) holds

- ``objects/<random>.<suffix>``: immutable data objects, uniquely named,
  written before any version names them and never overwritten;
- ``_versions/0000000001.json``, ``0000000002.json``, ...: one small JSON
  document per committed version, naming the objects it consists of (the
  caller's ``content``), with its number, the number it was made from, the
  writer and a SHA-256 of itself;
- ``_versions/LATEST``: a hint of the last number, written after each commit;
  readers walk forward from it, so a hint that lags (a writer died after its
  commit) costs a lookup, never a version.

Committing version n + 1 is creating its document only if it is absent
(:func:`~lsdask.io.stores.exclusive.create_exclusive`). Of two writers that
both read version n, exactly one creates n + 1; the other gets
:class:`CommitConflict` and, in :meth:`VersionLog.update`, reads n + 1 and
applies its change again. A version document is one object written in one
request, so a reader sees a complete version or the one before it. Objects
of a writer that lost or died are never named by a version; they are garbage,
removed by :meth:`VersionLog.remove_unreferenced` once older than a grace
period that no writer takes to commit.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import os
import random
import re
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from lsdask.errors import DataError, LockError
from lsdask.io.stores.exclusive import check_conditional_writes, create_exclusive
from lsdask.io.stores.location import Location

logger = logging.getLogger(__name__)

FORMAT = "lsdask-version"
LOG_DIR = "_versions"
OBJECTS_DIR = "objects"
HINT = "LATEST"
#: the largest version document read (the caller's content: a manifest)
MAX_VERSION_BYTES = 256 << 20
_VERSION_NAME = re.compile(r"^(\d{10})\.json$")
_OBJECT_NAME = re.compile(r"^objects/[0-9a-f]{32}(\.[A-Za-z0-9_-]{1,32})?$")


class CommitConflict(LockError):
    """Another writer committed the version this one was about to commit."""


@dataclass(frozen=True)
class Version:
    """One committed version: its number (from 1), the caller's ``content``,
    when and by whom it was committed."""

    number: int
    content: dict[str, Any]
    committed_at: str
    writer: dict[str, Any]


def _digest(document: dict[str, Any]) -> str:
    body = {k: v for k, v in document.items() if k != "sha256"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


class VersionLog:
    """The versions of one store location, and its immutable objects.

    ``single_writer=True`` skips the check that the store creates objects only
    if absent (see :func:`~lsdask.io.stores.exclusive.check_conditional_writes`);
    the caller vouches that one process at a time writes."""

    def __init__(self, location: Location, *, single_writer: bool = False) -> None:
        if location.is_local:
            raise ValueError(
                f"{location.url}: a local folder; lsdask writes local folders with its local "
                "protocol (locks, rename into place), the version log is for object stores"
            )
        self.location = location
        self.single_writer = bool(single_writer)
        self._writer = {"host": socket.gethostname(), "pid": os.getpid(), "id": uuid.uuid4().hex}

    # -- reading ---------------------------------------------------------------

    def numbers(self) -> list[int]:
        """Every committed version's number, in order (a listing of the log)."""
        fs, folder = self.location.fs, self.location.path(LOG_DIR)
        fs.invalidate_cache(folder)
        try:
            names = [p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(folder, detail=False)]
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_VERSION_NAME.match, names) if m)

    def latest(self) -> Version | None:
        """The newest committed version (None before the first commit)."""
        hint = self._hint()
        if hint is None or not self._exists(hint):
            found = self.numbers()
            hint = found[-1] if found else 0
        number = hint
        while self._exists(number + 1):  # the hint may lag its commit
            number += 1
        return self.read(number) if number > 0 else None

    def newest_to_replace(self, what: str, overwrite: bool) -> Version | None:
        """The newest version, which a write of ``what`` (a corpus, a saved
        model) replaces: FileExistsError where there is one and not
        ``overwrite``."""
        held = self.latest()
        if held is not None and not overwrite:
            raise FileExistsError(
                f"{self.location.url} holds {what} already (version {held.number}); pass "
                "overwrite=True (--overwrite) to save a new version over it"
            )
        return held

    def read(self, number: int) -> Version:
        """Version ``number``, checked: its name, number and digest agree."""
        name = f"{LOG_DIR}/{number:010d}.json"
        where = f"{self.location.url}/{name}"
        data = self._read(name, MAX_VERSION_BYTES)
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise self._damaged(where, f"it is not JSON ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise self._damaged(where, f"it is not an {FORMAT} document")
        if doc.get("version") != number:
            raise self._damaged(where, f"it says it is version {doc.get('version')!r}")
        if doc.get("sha256") != _digest(doc):
            raise self._damaged(where, "its SHA-256 does not match its content")
        if not isinstance(doc.get("content"), dict):
            raise self._damaged(where, "its content is not a JSON object")
        return Version(number, doc["content"], str(doc.get("committed_at")), doc.get("writer", {}))

    def read_object(self, name: str, limit: int) -> bytes:
        """The bytes of the object ``name`` (as :meth:`put_object` returned it),
        at most ``limit`` of them."""
        self._check_object_name(name)
        return self._read(name, limit)

    # -- writing ---------------------------------------------------------------

    def put_object(self, data: bytes, suffix: str = "") -> str:
        """Write ``data`` as a new immutable object; its name below the location."""
        name = self._new_object_name(suffix)
        if not create_exclusive(self.location.fs, self.location.path(*name.split("/")), data):
            raise LockError(f"{self.location.url}/{name}: exists already (a random name)")
        return name

    def put_file(self, local: str | os.PathLike[str], suffix: str = "") -> str:
        """Upload the local file ``local`` as a new immutable object, streamed
        (a multipart upload where it is large); its name below the location."""
        name = self._new_object_name(suffix)
        path = self.location.path(*name.split("/"))
        self.location.fs.put_file(os.fspath(local), path)
        return name

    def get_file(self, name: str, local: str | os.PathLike[str]) -> None:
        """Download the object ``name`` to the new local file ``local``."""
        self._check_object_name(name)
        self.location.fs.get_file(self.location.path(*name.split("/")), os.fspath(local))

    def _new_object_name(self, suffix: str) -> str:
        name = f"{OBJECTS_DIR}/{uuid.uuid4().hex}{suffix}"
        if not _OBJECT_NAME.match(name):
            raise ValueError(f"suffix {suffix!r}: expected '.' and 1-32 letters, digits, - or _")
        return name

    def _check_object_name(self, name: str) -> None:
        if not isinstance(name, str) or not _OBJECT_NAME.match(name):
            raise DataError(
                f"{self.location.url}: {name!r} is not the name of an object lsdask wrote "
                "(objects/<32 hex digits>[.suffix]); the version naming it is damaged"
            )

    def commit(self, content: dict[str, Any], parent: Version | None) -> Version:
        """Commit ``content`` as the version after ``parent`` (None: the first);
        :class:`CommitConflict` where another writer committed that number."""
        check_conditional_writes(self.location, single_writer=self.single_writer)
        number = (parent.number if parent is not None else 0) + 1
        committed_at = _dt.datetime.now(_dt.UTC).isoformat(timespec="milliseconds")
        doc = {
            "format": FORMAT,
            "version": number,
            "parent": number - 1,
            "committed_at": committed_at,
            "writer": self._writer,
            "content": content,
        }
        doc["sha256"] = _digest(doc)
        data = json.dumps(doc, sort_keys=True, allow_nan=False).encode()
        path = self.location.path(LOG_DIR, f"{number:010d}.json")
        if self.single_writer and self._exists(number):
            created = False
        elif self.single_writer:
            self.location.fs.pipe_file(path, data)
            created = True
        else:
            created = create_exclusive(self.location.fs, path, data)
        if not created:
            raise CommitConflict(
                f"{self.location.url}: version {number} was committed by another writer "
                "first; read the new version and apply the change again"
            )
        self._set_hint(number)
        return Version(number, content, committed_at, dict(self._writer))

    def update(
        self,
        change: Callable[[Version | None], dict[str, Any]],
        attempts: int = 20,
    ) -> Version:
        """Read the newest version, make the next one's content with
        ``change(newest)`` and commit it; where another writer committed
        first, do it again on theirs (``change`` must be a function of the
        version it is given). :class:`CommitConflict` after ``attempts`` lost
        races in a row."""
        for attempt in range(attempts):
            parent = self.latest()
            try:
                return self.commit(change(parent), parent)
            except CommitConflict:
                lost = 0 if parent is None else parent.number
                logger.info("version %d was committed by another writer; again", lost + 1)
                time.sleep(random.uniform(0, min(1.0, 0.01 * 2**attempt)))
        raise CommitConflict(
            f"{self.location.url}: {attempts} commits in a row lost to other writers; "
            "too many writers at once, try again later"
        )

    def remove_unreferenced(self, referenced: Iterable[str], older_than_s: float) -> list[str]:
        """Remove the objects not in ``referenced`` (the names every kept
        version uses) and last modified over ``older_than_s`` seconds ago, so
        that a writer still between its objects and its commit keeps them;
        the names removed."""
        keep = set(referenced)
        fs, folder = self.location.fs, self.location.path(OBJECTS_DIR)
        fs.invalidate_cache(folder)
        try:
            entries = fs.ls(folder, detail=True)
        except FileNotFoundError:
            return []
        now = time.time()
        removed = []
        for entry in entries:
            name = f"{OBJECTS_DIR}/{entry['name'].rstrip('/').rsplit('/', 1)[-1]}"
            if name in keep or not _OBJECT_NAME.match(name):
                continue
            modified = _modified(self.location.fs, entry)
            if modified is None or now - modified < older_than_s:
                continue
            fs.rm_file(self.location.path(*name.split("/")))
            removed.append(name)
        return removed

    # -- details ---------------------------------------------------------------

    def _exists(self, number: int) -> bool:
        if number <= 0:
            return False
        path = self.location.path(LOG_DIR, f"{number:010d}.json")
        self.location.fs.invalidate_cache(path)
        return bool(self.location.fs.exists(path))

    def _hint(self) -> int | None:
        try:
            text = self._read(f"{LOG_DIR}/{HINT}", 64).decode("ascii").strip()
        except (FileNotFoundError, DataError, UnicodeDecodeError):
            return None
        return int(text) if text.isdigit() and len(text) <= 10 else None

    def _set_hint(self, number: int) -> None:
        """Best effort: a lagging or lost hint costs readers a lookup."""
        try:
            self.location.fs.pipe_file(self.location.path(LOG_DIR, HINT), str(number).encode())
        except OSError as exc:
            logger.warning("%s: could not update the version hint: %s", self.location.url, exc)

    def _read(self, name: str, limit: int) -> bytes:
        """The object ``name`` below the location, refused past ``limit`` bytes."""
        parts = name.split("/")
        where = f"{self.location.url}/{name}"
        fs, path = self.location.fs, self.location.path(*parts)
        fs.invalidate_cache(path)
        size = fs.size(path)
        if size is not None and size > limit:
            raise DataError(f"{where}: {size} bytes, more than the {limit} expected")
        return bytes(fs.cat_file(path))

    def _damaged(self, where: str, why: str) -> DataError:
        return DataError(
            f"{where}: the version document is damaged: {why}. A version is written once and "
            "never changed; restore it from the store's object versioning or a backup, or "
            "remove it and the versions after it to go back to the one before"
        )


def _modified(fs: Any, entry: dict[str, Any]) -> float | None:
    """A listing entry's last-modified time (seconds since the epoch), where known."""
    for key in ("LastModified", "mtime", "last_modified", "created", "updated"):
        value = entry.get(key)
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, _dt.datetime):
            return value.timestamp()
        if isinstance(value, str):
            try:
                return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    try:
        return float(fs.modified(entry["name"]).timestamp())
    except (NotImplementedError, OSError, KeyError, AttributeError):
        return None
