"""Saved models in object stores: the model folder, committed as a version.

A model is saved to a store URL (:func:`~lsdask.persist.save_model` with a
URL) by writing its usual folder in a local temporary folder and
committing that folder as the store location's next version
(:func:`~lsdask.io.stores.upload_folder`); it is loaded by rebuilding the
newest version (or a given one) in a local folder, every file checked against
its recorded digest, and reading it as a local model folder.
A save interrupted anywhere leaves the previous version as the model. The
folders a load rebuilds live until the process ends (a loaded model may read
its files later), in the system's temporary folder.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from lsdask.io.stores import (
    VersionLog,
    download_folder,
    is_store_url,
    open_location,
    upload_folder,
)

logger = logging.getLogger(__name__)

__all__ = ["is_store_url", "load_from_store", "save_to_store", "staged_for_store"]

_REBUILT: list[str] = []


@contextlib.contextmanager
def staged_for_store(
    url: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
    what: str = "lsdask model",
) -> Iterator[Path]:
    """A local folder (not yet made) to write a model into; when the block ends
    without an error, the folder is committed as the next version at the store
    URL ``url``. FileExistsError at once where a model is there and not
    ``overwrite``."""
    log = VersionLog(open_location(url, storage_options, parameter="path"))
    log.newest_to_replace("a saved model", overwrite)
    with tempfile.TemporaryDirectory(prefix="lsdask-save-") as tmp:
        folder = Path(tmp) / "model"
        yield folder
        version = upload_folder(log, folder, {"what": what})
    logger.info("saved %s to %s, version %d", what, log.location.url, version.number)


def save_to_store(
    write: Callable[[Path], Path],
    url: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    overwrite: bool = False,
) -> str:
    """Save a model at the store URL ``url``: ``write(folder)`` writes its
    folder, which is then committed (see the module); the URL as printed.
    FileExistsError where a model is there and not ``overwrite``."""
    with staged_for_store(url, storage_options=storage_options, overwrite=overwrite) as folder:
        write(folder)
    return open_location(url, storage_options).url


def load_from_store(
    read: Callable[[Path], Any],
    url: str,
    *,
    storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
) -> Any:
    """The model saved at the store URL ``url`` (its newest version, or
    ``version``): its folder rebuilt locally and given to ``read``."""
    log = VersionLog(open_location(url, storage_options, parameter="path"))
    found = log.latest() if version is None else log.read(version)
    if found is None:
        raise FileNotFoundError(
            f"no lsdask model at {log.location.url}: nothing was committed there (save one "
            "with lsdask.persist.save_model(model, URL))"
        )
    tmp = tempfile.mkdtemp(prefix="lsdask-model-")
    if not _REBUILT:
        atexit.register(_remove_rebuilt)
    _REBUILT.append(tmp)
    folder = download_folder(log, found, Path(tmp) / "model")
    return read(folder)


def _remove_rebuilt() -> None:
    for tmp in _REBUILT:
        if os.path.isdir(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
