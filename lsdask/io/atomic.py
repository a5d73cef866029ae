"""Replacing output folders atomically, shared by every writer of stores.

A writer builds its output in a temporary sibling folder and, once complete,
calls :func:`replace_dir`: an existing output is first renamed aside, the new
one renamed into place, and only then is the old one deleted, so a failure at
any point leaves either the old or the new output, never half of one.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from pathlib import Path

logger = logging.getLogger(__name__)


def remove_tree(path: Path) -> None:
    """Delete a folder tree if it exists, logging rather than raising on failure."""
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            logger.warning("could not remove temporary directory %s", path)


def replace_dir(new_dir: Path, out_dir: Path) -> None:
    """Rename ``new_dir`` to ``out_dir``; an existing ``out_dir`` is moved aside
    first and put back if the final rename fails."""
    if not out_dir.exists():
        os.replace(new_dir, out_dir)
        return
    old_dir = out_dir.with_name(f".{out_dir.name}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    os.replace(out_dir, old_dir)
    try:
        os.replace(new_dir, out_dir)
    except BaseException:
        os.replace(old_dir, out_dir)
        raise
    remove_tree(old_dir)
