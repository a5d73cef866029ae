"""ESVI's checkpoints, written block by block (:mod:`lsdask.learn.esvi`).

After a rotation, every part writes its own shard and the block it holds
into ``<folder>/rotation-<r>/`` (``shard-<p>.npz``, ``block-<b>.npz``), each
file written to a temporary name, flushed to disk and renamed, so a file
that exists is complete. The driver then writes the manifest
(``MANIFEST.json``, atomically, naming the rotation, its files and the
shared totals) and removes the older rotations' folders. A rotation without
a manifest naming it is incomplete and ignored: a run resumes from the last
complete rotation. No process holds more than its own part while writing.

The vocabulary partition (V-sized arrays, not K x V) is written once
(``partition.npz``) by the driver, before the first manifest.

A saved fitted model (:mod:`lsdask.persist.esvi_model`) uses the same
writer and manifest for its blocks alone: its parts name no shard.

A damaged or incomplete folder (a cut manifest, a missing or damaged file, a
file without an array the model reads) raises :class:`lsdask.errors.DataError`
naming the file, what is wrong and how to go on.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.errors import DataError
from lsdask.io import guarded
from lsdask.persist.checked_npz import Bound, read_npz
from lsdask.persist.files import remove_matching, temp_name, write_atomic

MANIFEST = "MANIFEST.json"
_ROTATION = re.compile(r"rotation-\d{6}")
_PART_FILE = re.compile(r"(shard|block)-\d+\.npz")


def _fix(folder: str | Path) -> str:
    return (
        f"Restore {folder} from a copy to resume it, or start afresh: remove it (or give "
        "another checkpoint_dir) and fit without resume"
    )


class _Arrays(dict[str, np.ndarray]):
    """The arrays of one checkpoint file; a missing one is a DataError naming the file."""

    def __init__(self, arrays: dict[str, np.ndarray], path: Path, folder: str | Path) -> None:
        super().__init__(arrays)
        self.path = path
        self.folder = folder

    def __missing__(self, key: str) -> np.ndarray:
        names = sorted(self)
        held = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        raise DataError(
            f"ESVI checkpoint file {self.path} has no array {key!r} (it holds {held or 'none'}): "
            f"it was written by another version or modified. {_fix(self.folder)}"
        )


def _root(folder: str | Path) -> Path:
    """The folder a store's files are reached from: the one holding the store
    (a checkpoint or model folder), so that the store's own folder may not be a
    link either."""
    return Path(folder).parent


def _write_npz(path: Path, arrays: dict[str, np.ndarray], folder: str | Path) -> int:
    """``arrays`` to ``path`` (in the store ``folder``) atomically; returns the bytes written."""
    return write_atomic(_root(folder), path, lambda f: np.savez(f, **arrays),
                        tmp=temp_name(path, ".tmp-").with_suffix(""))  # fmt: skip


def _write_json(path: Path, obj: Any, folder: str | Path) -> None:
    write_atomic(_root(folder), path, lambda f: json.dump(obj, f, indent=1), text=True,
                 tmp=temp_name(path, ".tmp-").with_suffix(""))  # fmt: skip


def _read_npz(
    path: Path, folder: str | Path, shapes: Mapping[str, Bound] | None = None
) -> dict[str, np.ndarray]:
    """The arrays of ``path``, a file of the checkpoint folder ``folder``, or a DataError
    (:class:`~lsdask.io.guarded.UnsafePath` for a link or special file)."""
    try:
        arrays = read_npz(path, path.name, root=_root(folder), shapes=shapes)
    except FileNotFoundError as exc:
        raise DataError(
            f"ESVI checkpoint file {path} is missing: the checkpoint in {folder} is "
            f"incomplete. {_fix(folder)}"
        ) from exc
    except guarded.UnsafePath:
        raise
    except (OSError, ValueError) as exc:
        cause = type(exc.__cause__ or exc).__name__
        raise DataError(
            f"ESVI checkpoint file {path} is damaged ({cause}: {exc}). {_fix(folder)}"
        ) from exc
    return _Arrays(arrays, path, folder)


@dataclass(frozen=True)
class ESVIStore:
    """A folder of ESVI checkpoints; small and picklable (the workers write through it)."""

    folder: str

    def _rotation_dir(self, rotation: int) -> Path:
        return Path(self.folder) / f"rotation-{rotation:06d}"

    def write_part(
        self, rotation: int, part: int, shard: dict[str, np.ndarray] | None, block_index: int,
        block: dict[str, np.ndarray],
    ) -> dict[str, Any]:  # fmt: skip
        """Write part ``part``'s shard and the block it holds (on its worker); a
        saved model has no shards (``shard=None``)."""
        where = self._rotation_dir(rotation)
        guarded.makedirs(_root(self.folder), where)
        shard_name = None if shard is None else f"shard-{part}.npz"
        shard_bytes = (
            0 if shard is None else _write_npz(where / f"shard-{part}.npz", shard, self.folder)
        )
        block_bytes = _write_npz(where / f"block-{block_index}.npz", block, self.folder)
        return {
            "part": part, "shard": shard_name, "block": f"block-{block_index}.npz",
            "block_index": block_index, "shard_bytes": shard_bytes, "block_bytes": block_bytes,
        }  # fmt: skip

    def write_partition(self, arrays: dict[str, np.ndarray]) -> None:
        _write_npz(Path(self.folder) / "partition.npz", arrays, self.folder)

    def read_partition(self, shapes: Mapping[str, Bound] | None = None) -> dict[str, np.ndarray]:
        """The vocabulary partition; ``shapes`` bounds its arrays (as :meth:`read`)."""
        return _read_npz(Path(self.folder) / "partition.npz", self.folder, shapes)

    def commit(self, rotation: int, parts: list[dict[str, Any]], meta: dict[str, Any]) -> None:
        """Record rotation ``rotation`` as complete; remove the older ones."""
        current = self._rotation_dir(rotation).name
        _write_json(
            Path(self.folder) / MANIFEST,
            {"rotation": rotation, "folder": current, "parts": parts, **meta},
            self.folder,
        )
        remove_matching(_root(self.folder), self.folder, "rotation-*", keep=current.__eq__)

    def latest(self) -> dict[str, Any] | None:
        """The manifest of the last complete rotation, or None; a DataError when it
        cannot be read or lacks the rotation, its folder or its parts' files."""
        path = Path(self.folder) / MANIFEST
        try:
            manifest = guarded.read_json(_root(self.folder), path, "state")
        except FileNotFoundError:
            return None
        except guarded.UnsafePath:
            raise
        except (OSError, ValueError, RecursionError) as exc:
            raise DataError(
                f"ESVI checkpoint manifest {path} is unreadable ({type(exc).__name__}: "
                f"{exc}). {_fix(self.folder)}"
            ) from exc
        problem = _manifest_problem(manifest)
        if problem:
            raise DataError(f"ESVI checkpoint manifest {path} {problem}. {_fix(self.folder)}")
        return dict(manifest)

    def read(
        self, manifest: dict[str, Any], name: str, shapes: Mapping[str, Bound] | None = None
    ) -> dict[str, np.ndarray]:
        """One file of the manifest's rotation (on the worker that loads it).
        ``shapes`` (the model's largest shape, or most entries, of named arrays)
        refuses a larger array from its header, before it is read; every array is
        bounded by the file's size in any case."""
        return _read_npz(Path(self.folder) / manifest["folder"] / name, self.folder, shapes)

    def exists(self) -> bool:
        return guarded.exists(_root(self.folder), Path(self.folder) / MANIFEST)


def _manifest_problem(manifest: Any) -> str:
    """What is wrong with a manifest's own entries (the rotation, its folder and
    its parts' files), or ''."""
    if not isinstance(manifest, dict):
        return "is not a JSON object"
    missing = [k for k in ("rotation", "folder", "parts") if k not in manifest]
    if missing:
        return f"lacks {missing}"
    if not isinstance(manifest["rotation"], int) or not _ROTATION.fullmatch(
        str(manifest["folder"])
    ):
        return (
            f"names rotation {manifest['rotation']!r} in folder {str(manifest['folder'])[:80]!r}, "
            "not a rotation number and a rotation-NNNNNN folder"
        )
    parts = manifest["parts"]
    keys = ("part", "shard", "block", "block_index")
    if not isinstance(parts, list) or not all(
        isinstance(e, dict) and all(k in e for k in keys) for e in parts
    ):
        return f"lacks a list of parts, each with {list(keys)}"
    bad = [
        e[k] for e in parts for k in ("shard", "block")
        if not (k == "shard" and e[k] is None) and not _PART_FILE.fullmatch(str(e[k]))
    ]  # fmt: skip
    if bad:
        return f"names part file {str(bad[0])[:80]!r}, not a shard-N.npz or block-N.npz"
    return ""


def checkpoint_store(
    checkpoint_dir: str | os.PathLike[str] | None, resume: bool
) -> ESVIStore | None:
    """The ESVI checkpoint store of an estimator's ``checkpoint_dir`` (None without
    one); a ValueError where it already holds a checkpoint and ``resume`` is off."""
    if checkpoint_dir is None:
        return None
    store = ESVIStore(os.path.join(os.fspath(checkpoint_dir), "esvi"))
    if store.exists() and not resume:
        raise ValueError(
            f"{store.folder} holds an ESVI checkpoint; pass resume=True (lsdask fit "
            "--resume DIR) to continue it, or give another checkpoint folder (or remove "
            "that one) to start afresh"
        )
    return store
