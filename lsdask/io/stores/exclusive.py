"""Create an object only if no object of that name exists: the commit step on stores.

Object stores have no atomic rename and no ``flock``; the one atomic step
they offer a writer is a conditional create: S3's ``PUT`` with
``If-None-Match: *``, GCS's ``ifGenerationMatch=0``, Azure Blob's upload
without overwrite, all reached through fsspec's ``pipe_file(mode="create")``.
In ``memory://`` (one process) a lock makes the check and the write one step.
Local folders are not written this way: they keep lsdask's local protocol
(locks, rename into place, :mod:`lsdask.io.guarded`).

Not every store keeps the promise: an S3-compatible server may ignore the
header and overwrite. :func:`check_conditional_writes` therefore creates a probe
object twice before a location is first written and refuses the location when
the second create succeeds.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from typing import Any

from lsdask.errors import LockError, one_line
from lsdask.io.stores.location import LOCAL_PROTOCOLS, Location

logger = logging.getLogger(__name__)

#: protocols whose fsspec driver creates an object only if it is absent, atomically
CONDITIONAL_PROTOCOLS = frozenset({"memory", "s3", "s3a", "gs", "gcs", "abfs", "abfss", "az"})

_MEMORY_LOCK = threading.Lock()
_PROBED: set[tuple[str, str, str]] = set()
_PROBED_LOCK = threading.Lock()


class ConditionalWritesUnsupported(LockError):
    """A store that cannot create an object only if it is absent, where lsdask
    would need it to keep two writers from both committing the same version."""


def create_exclusive(fs: Any, path: str, data: bytes) -> bool:
    """Create the object ``path`` of ``fs`` holding ``data`` if none exists:
    True where it was created, False where an object of that name was there
    already (``data`` is then not written). A reader sees all of ``data`` or
    no object."""
    protocol = _protocol(fs)
    if protocol in LOCAL_PROTOCOLS:
        raise ValueError(
            f"{path}: a local folder keeps lsdask's local protocol (locks, rename into "
            "place), not the store protocol"
        )
    try:
        if protocol == "memory":
            with _MEMORY_LOCK:
                fs.pipe_file(path, data, mode="create")
        else:
            fs.pipe_file(path, data, mode="create")
    except FileExistsError:
        return False
    finally:
        _forget_listing(fs, path)
    return True


def check_conditional_writes(location: Location, *, single_writer: bool = False) -> None:
    """Refuse (:class:`ConditionalWritesUnsupported`) a location where two
    writers could both commit: a protocol without conditional creates, or a
    store that accepts a second create of the same object (probed once per
    location and process). ``single_writer=True``: the caller vouches that only
    one process writes there at a time; nothing is checked."""
    if single_writer:
        return
    if location.protocol not in CONDITIONAL_PROTOCOLS:
        raise ConditionalWritesUnsupported(
            f"{location.url}: the {location.protocol}:// file system cannot create an object "
            "only if it is absent, so two writers could both commit the same version and "
            "one's data would be lost. lsdask does not write there unless told that one "
            "process at a time writes: pass single_writer=True"
        )
    key = (
        location.protocol,
        location.root,
        json.dumps(dict(location.storage_options), sort_keys=True, default=str),
    )
    with _PROBED_LOCK:
        if key in _PROBED:
            return
    probe = location.path(f".lsdask-probe-{uuid.uuid4().hex}")
    try:
        first = create_exclusive(location.fs, probe, b"probe")
        second = create_exclusive(location.fs, probe, b"again")
    except (OSError, NotImplementedError, TypeError) as exc:
        raise ConditionalWritesUnsupported(
            f"{location.url}: the store refused a conditional create ({one_line(exc)}); "
            "lsdask commits versions with one, so that two writers never both commit. "
            "Use a store that supports If-None-Match writes, or pass single_writer=True "
            "if one process at a time writes there"
        ) from exc
    finally:
        _remove_quietly(location.fs, probe)
    if not first or second:
        raise ConditionalWritesUnsupported(
            f"{location.url}: the store accepted a second create of the same object "
            "(it ignores If-None-Match), so two writers could both commit the same version. "
            "Use a store that honours conditional writes, or pass single_writer=True "
            "if one process at a time writes there"
        )
    with _PROBED_LOCK:
        _PROBED.add(key)


def _protocol(fs: Any) -> str:
    names = fs.protocol
    return str(names if isinstance(names, str) else names[0])


def _forget_listing(fs: Any, path: str) -> None:
    """Drop fsspec's cached listing of ``path``'s folder, which the write changed."""
    invalidate = getattr(fs, "invalidate_cache", None)
    if invalidate is not None:
        invalidate(path)


def _remove_quietly(fs: Any, path: str) -> None:
    try:
        fs.rm_file(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        logger.warning("could not remove the probe object %s: %s", path, one_line(exc))
