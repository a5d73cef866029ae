"""Forcing a writer's data to disk, a crash point of the fault-injection tests.

Every write that must survive a crash forces its data to disk (:func:`fsync`)
before the file is renamed into place. The renames and removals themselves go
through :mod:`lsdask.io.guarded`, which never follows a link. Each of these
steps first passes :func:`lsdask.io.faults.fs_point`, so the fault-injection
tests (``tests/faults``) can count a command's steps and kill it at any one of
them; unarmed, a step costs a dictionary look-up.
"""

from __future__ import annotations

import os
from typing import IO, Any

from lsdask.io.faults import fs_point


def fsync(f: IO[Any]) -> None:
    """Flush ``f`` and force its data to disk."""
    fs_point("fsync", getattr(f, "name", ""))
    f.flush()
    os.fsync(f.fileno())
