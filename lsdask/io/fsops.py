"""The file-system steps of lsdask's writers, each a crash point.

Every write that must survive a crash ends in these steps: the data forced to
disk (:func:`fsync`), a temporary renamed into place (:func:`replace`,
:func:`rename`), an old file or folder removed (:func:`unlink`, :func:`rmtree`).
Each first passes :func:`lsdask.io.faults.fs_point`, so the fault-injection
tests (``tests/faults``) can count a command's steps and kill it at any one of
them; unarmed, a step costs a dictionary look-up.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import IO, Any

from lsdask.io.faults import fs_point


def fsync(f: IO[Any]) -> None:
    """Flush ``f`` and force its data to disk."""
    fs_point("fsync", getattr(f, "name", ""))
    f.flush()
    os.fsync(f.fileno())


def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """``os.replace``: ``src`` takes the place of ``dst`` (atomic on one file system)."""
    fs_point("replace", dst)
    os.replace(src, dst)


def rename(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """``os.rename``."""
    fs_point("rename", dst)
    os.rename(src, dst)


def unlink(path: str | os.PathLike[str]) -> None:
    """Remove the file ``path`` if it exists."""
    fs_point("unlink", path)
    Path(path).unlink(missing_ok=True)


def rmtree(path: str | os.PathLike[str]) -> None:
    """Remove the folder ``path`` and what it holds, if it exists (errors ignored)."""
    fs_point("rmtree", path)
    shutil.rmtree(path, ignore_errors=True)
