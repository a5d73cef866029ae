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
(``partition.npz``) by the driver.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.io import fsops

MANIFEST = "MANIFEST.json"


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> int:
    """``arrays`` to ``path`` atomically; returns the bytes written."""
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
        fsops.fsync(f)
    size = tmp.stat().st_size
    fsops.replace(tmp, path)
    return size


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex}")
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        fsops.fsync(f)
    fsops.replace(tmp, path)


def _read_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


@dataclass(frozen=True)
class ESVIStore:
    """A folder of ESVI checkpoints; small and picklable (the workers write through it)."""

    folder: str

    def _rotation_dir(self, rotation: int) -> Path:
        return Path(self.folder) / f"rotation-{rotation:06d}"

    def write_part(
        self, rotation: int, part: int, shard: dict[str, np.ndarray], block_index: int,
        block: dict[str, np.ndarray],
    ) -> dict[str, Any]:  # fmt: skip
        """Write part ``part``'s shard and the block it holds (on its worker)."""
        where = self._rotation_dir(rotation)
        where.mkdir(parents=True, exist_ok=True)
        shard_bytes = _write_npz(where / f"shard-{part}.npz", shard)
        block_bytes = _write_npz(where / f"block-{block_index}.npz", block)
        return {
            "part": part, "shard": f"shard-{part}.npz", "block": f"block-{block_index}.npz",
            "block_index": block_index, "shard_bytes": shard_bytes, "block_bytes": block_bytes,
        }  # fmt: skip

    def write_partition(self, arrays: dict[str, np.ndarray]) -> None:
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        _write_npz(Path(self.folder) / "partition.npz", arrays)

    def read_partition(self) -> dict[str, np.ndarray]:
        return _read_npz(Path(self.folder) / "partition.npz")

    def commit(self, rotation: int, parts: list[dict[str, Any]], meta: dict[str, Any]) -> None:
        """Record rotation ``rotation`` as complete; remove the older ones."""
        _write_json(
            Path(self.folder) / MANIFEST,
            {"rotation": rotation, "folder": self._rotation_dir(rotation).name,
             "parts": parts, **meta},
        )  # fmt: skip
        for old in Path(self.folder).glob("rotation-*"):
            if old.name != self._rotation_dir(rotation).name:
                shutil.rmtree(old, ignore_errors=True)

    def latest(self) -> dict[str, Any] | None:
        """The manifest of the last complete rotation, or None."""
        path = Path(self.folder) / MANIFEST
        if not path.exists():
            return None
        with open(path) as f:
            return dict(json.load(f))

    def read(self, manifest: dict[str, Any], name: str) -> dict[str, np.ndarray]:
        """One file of the manifest's rotation (on the worker that loads it)."""
        return _read_npz(Path(self.folder) / manifest["folder"] / name)

    def exists(self) -> bool:
        return os.path.exists(Path(self.folder) / MANIFEST)
