"""Memoized statistics on disk: one ``.npz`` file per batch visit.

The driver then holds only the whole-data statistics however many batches
there are, and a checkpoint is a list of file names. Files are written under a
temporary name and renamed, never modified, and a superseded file is deleted
only when no committed checkpoint refers to it.
"""

from __future__ import annotations

import logging
import math
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from lsdask.io import guarded
from lsdask.models.stats import SparseBlock, SuffStats
from lsdask.persist.checked_npz import Bound, check_values, read_npz
from lsdask.persist.files import remove_matching, write_atomic

logger = logging.getLogger(__name__)

#: the temporaries ``save_stats`` leaves behind when it is killed (or the disk
#: fills) between writing and renaming: ``.b<batch>-<run>-<visit>.npz.<hex>.tmp``
_STALE_TEMPORARIES = ".b*.npz.*.tmp"

#: the arrays ``save_stats`` writes for a sparse block ``<name>__<part>`` (and
#: ``width``, of the older column format)
_BLOCK_PARTS = ("rows", "cols", "values", "shape", "width")


#: the prefix of a note's arrays (:attr:`SuffStats.notes`) in a memo file
_NOTE = "note."


def save_stats(
    path: Path,
    stats: SuffStats,
    root: str | os.PathLike[str] | None = None,
    sync_folder: bool = True,
) -> None:
    """Write statistics (and their notes) to ``path`` (.npz) atomically: temporary
    name, then rename (:func:`lsdask.persist.files.write_atomic`; ``sync_folder``
    off leaves forcing the folder to disk to the caller). ``root`` is the
    folder it is written in (a checkpoint folder; default: ``path``'s own
    folder): no step below it may be a link."""
    arrays: dict[str, np.ndarray] = {}
    fields = [*stats.items(), *((_NOTE + k, v) for k, v in stats.notes.items())]
    for name, value in fields:
        if isinstance(value, SparseBlock):
            arrays[f"{name}__rows"] = value.rows
            arrays[f"{name}__cols"] = value.cols
            arrays[f"{name}__values"] = value.values
            arrays[f"{name}__shape"] = np.array(value.shape)
        else:
            arrays[name] = value
    path = Path(path)
    write_atomic(
        path.parent if root is None else root, path, lambda fh: np.savez(fh, **arrays),
        sync_folder=sync_folder,
    )  # fmt: skip


def member_bounds(limits: dict[str, tuple[int, ...]]) -> dict[str, Bound]:
    """The most each member of a memo file may declare, from the model's largest
    shape of each field (``limits``): a dense field its shape; a sparse block's
    entries (rows, cols, values) the field's size, its shape two numbers."""
    bounds: dict[str, Bound] = {}
    for name, shape in limits.items():
        size = math.prod(shape)
        bounds[name] = tuple(shape)
        bounds.update({f"{name}__{part}": size for part in ("rows", "cols", "values")})
        bounds[f"{name}__shape"] = (len(shape),)
        bounds[f"{name}__width"] = (1,)
    return bounds


def load_stats(
    path: Path,
    limits: dict[str, tuple[int, ...]] | None = None,
    root: str | os.PathLike[str] | None = None,
) -> SuffStats:
    """Read statistics written by :func:`save_stats` (no pickle), checked
    (:func:`~lsdask.persist.checked_npz.read_npz`; every value finite); with
    ``limits`` (a field's largest shape: the model's), also every field's shape,
    checked in the file's headers before anything is read, so that no damaged
    file can make the reader or a sum allocate more than the model holds.
    ``root`` is the folder the file is in (a checkpoint folder; default: its own
    folder): no step below it may be a link."""
    try:
        stats = _read_stats(Path(path), limits, root)
    except guarded.UnsafePath:
        raise
    except (KeyError, ValueError, IndexError, TypeError, OverflowError) as exc:
        raise ValueError(f"memo file {path}: not a valid statistics file ({exc})") from exc
    if limits is not None:
        _check_limits(path, stats, limits)
    return stats


def _check_limits(path: Path, stats: SuffStats, limits: dict[str, tuple[int, ...]]) -> None:
    for name, value in stats.items():
        limit = limits.get(name)
        shape = value.shape
        if (
            limit is None
            or len(shape) != len(limit)
            or any(n > m for n, m in zip(shape, limit, strict=True))
        ):
            raise ValueError(
                f"memo file {path}: field {name!r} has shape {shape}; the model's is "
                f"{limit} (a memo of another model, or a damaged file)"
            )


def _read_stats(
    path: Path, limits: dict[str, tuple[int, ...]] | None, root: str | os.PathLike[str] | None
) -> SuffStats:
    shapes = None if limits is None else member_bounds(limits)
    data = read_npz(path, f"memo file {path}", root=root, shapes=shapes)
    names = sorted(data)
    fields: dict = {}
    for name in names:
        base, _, part = name.rpartition("__")
        if not (base and f"{base}__cols" in data and part in _BLOCK_PARTS):
            fields[name] = check_values(f"memo file {path}", name, data[name])
        elif part == "cols" and f"{base}__rows" in data:
            rows, shape = data[f"{base}__rows"], data[f"{base}__shape"]
            parts = (rows, data[name], shape)
            if any(p.dtype.kind not in "iu" for p in parts) or shape.shape != (2,):
                raise ValueError(f"the sparse block {base!r} has non-integer indices or shape")
            values = check_values(f"memo file {path}", base, data[f"{base}__values"])
            fields[base] = SparseBlock(rows, data[name], values, tuple(shape))
        elif part == "cols":  # written by lsdask <= 0.1: dense values at a few columns
            values = data[f"{base}__values"]
            width = int(data[f"{base}__width"][0])
            fields[base] = SparseBlock.from_columns(data[name], values, width)
    notes = {k[len(_NOTE) :]: fields.pop(k) for k in list(fields) if k.startswith(_NOTE)}
    stats = SuffStats(**fields)
    return stats.with_notes(notes) if notes else stats


class DiskMemo:
    """Per-batch statistics in files under ``folder``.

    Parameters
    ----------
    folder : path
        Holds ``b<batch>-<visit>.npz`` files.
    n_batches : int
    files : list of (str or None), optional
        The file of each batch to start from (a resumed checkpoint's); those
        files are *pinned*: kept until a later checkpoint no longer needs them.
    limits : dict of str to shape, optional
        Each field's largest shape (the model's empty statistics): a file read
        back with a field beyond it is refused (:func:`load_stats`).
    root : path, optional
        The folder ``folder`` lies in (the checkpoint folder; default: its
        parent): every file is reached from it through
        :mod:`lsdask.io.guarded`, so a ``folder`` (or a file in it) that is a
        link is refused, never followed.

    Temporaries of memo files that an interrupted writer left in ``folder``
    (``.b*.npz.*.tmp``) are deleted when the memo is created.
    """

    def __init__(
        self,
        folder: str | os.PathLike,
        n_batches: int,
        files=None,
        limits: dict[str, tuple[int, ...]] | None = None,
        root: str | os.PathLike | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.root = self.folder.parent if root is None else Path(root)
        self.limits = limits
        guarded.makedirs(self.root, self.folder)
        self._files: list[str | None] = list(files) if files is not None else [None] * n_batches
        if len(self._files) != n_batches:
            raise ValueError(f"files lists {len(self._files)} batches; expected {n_batches}")
        self._pinned: set[str] = {f for f in self._files if f is not None}
        self._stamp = uuid.uuid4().hex[:8]
        self._visits = 0
        self._remove_stale_temporaries()

    def _remove_stale_temporaries(self) -> None:
        """Delete the temporaries of memo files that an earlier writer of this
        folder left (killed, or a full disk, mid-write); a link among them is
        removed as a link. Only the folder's one writer calls this, when it
        starts: the fit holds the checkpoint folder's lock
        (:func:`lsdask.persist.resume.checkpoint_lock`)."""
        stale = remove_matching(self.root, self.folder, _STALE_TEMPORARIES)
        if stale:
            logger.info(
                "removed %d unfinished memo file(s) left in %s by an interrupted run (e.g. %s)",
                len(stale), self.folder, stale[0],
            )  # fmt: skip

    def __len__(self) -> int:
        return len(self._files)

    def _load(self, name: str) -> SuffStats:
        return load_stats(self.folder / name, self.limits, self.root)

    def get(self, b: int) -> SuffStats | None:
        name = self._files[b]
        return None if name is None else self._load(name)

    def has(self, b: int) -> bool:
        return self._files[b] is not None

    def put(self, b: int, stats: SuffStats) -> None:
        self._visits += 1
        name = f"b{b:06d}-{self._stamp}-{self._visits:08d}.npz"
        # the folder is forced to disk once per checkpoint, before it names the file
        save_stats(self.folder / name, stats, self.root, sync_folder=False)
        old, self._files[b] = self._files[b], name
        if old is not None and old not in self._pinned:
            guarded.unlink(self.root, self.folder / old)

    def values(self) -> Iterator[SuffStats]:
        return (self._load(f) for f in self._files if f is not None)

    def files(self) -> list[str | None]:
        return list(self._files)

    def commit(self, still_needed: set[str] | None = None) -> None:
        """Pin the current files (a checkpoint now refers to them) and delete
        files that neither the current state nor ``still_needed`` refer to (a
        link among them is removed as a link)."""
        keep = {f for f in self._files if f is not None} | (still_needed or set())
        remove_matching(self.root, self.folder, "b*.npz", keep=keep.__contains__)
        self._pinned = {f for f in self._files if f is not None}
