"""Atomic checkpoints of memoized runs.

A checkpoint folder holds::

    memo/b<batch>-<run>-<visit>.npz   per-batch statistics (DiskMemo), never modified
    ckpt-<lap>-<position>-<id>/        one checkpoint: state.json (+ init.npz)
    LATEST                             the name of the newest complete checkpoint

``state.json`` holds the model configuration, the estimator's parameters, the
lap and position, the RNG state, the traces and, for every batch key, the
memo file of that batch. A checkpoint is written under a temporary name and
renamed, then ``LATEST`` is replaced atomically, and only then are older
checkpoints and unreferenced memo files deleted: a crash at any point leaves
the previous checkpoint usable. Nothing is pickled. One fit at a time writes a
folder: it holds the folder's lock (``.lsdask.lock``, see
:func:`lsdask.persist.resume.checkpoint_lock`) while it runs.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

from lsdask.errors import DataError
from lsdask.io import fsops
from lsdask.io.faults import fault_point
from lsdask.learn.state import LearnState
from lsdask.models.stats import SuffStats
from lsdask.persist.memo_files import DiskMemo, load_stats, save_stats

logger = logging.getLogger(__name__)

FORMAT = "lsdask-checkpoint"
VERSION = 1

#: what LATEST may name: a checkpoint folder of :meth:`CheckpointDir.write`
_CHECKPOINT_NAME = re.compile(r"ckpt-\d{5,}-\d{6,}-[0-9a-f]{6}")
#: what a checkpoint may name as a memo file: a plain name in the memo folder
_MEMO_NAME = re.compile(r"b\d{6,}-[0-9A-Za-z_-]+\.npz")
#: the largest state.json read (a checkpoint of millions of batches stays far below)
_MAX_STATE_BYTES = 1 << 30


def _write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fsops.fsync(fh)
    fsops.replace(tmp, path)


class CheckpointDir:
    """A checkpoint folder: writes checkpoints and finds the latest one.

    Parameters
    ----------
    root : path
        Created if missing.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    @property
    def memo_folder(self) -> Path:
        return self.root / "memo"

    def latest(self) -> Path | None:
        """The newest complete checkpoint, or None if there is none."""
        pointer = self.root / "LATEST"
        if not pointer.exists():
            return None
        try:
            name = pointer.read_bytes()[:256].decode("utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise DataError(f"checkpoint folder {self.root}: LATEST is unreadable: {exc}") from exc
        if not _CHECKPOINT_NAME.fullmatch(name):
            raise DataError(
                f"checkpoint folder {self.root}: LATEST holds {name[:80]!r}, not the name of a "
                "checkpoint folder in it (ckpt-LLLLL-PPPPPP-xxxxxx); the folder was modified by "
                "hand. Remove LATEST to start over."
            )
        path = self.root / name
        if not (path / "state.json").exists():
            raise DataError(
                f"checkpoint folder {self.root}: LATEST names {path.name}, which has no "
                "state.json; the folder was modified by hand. Remove LATEST to start over."
            )
        return path

    def write(
        self,
        state: LearnState,
        memo: DiskMemo,
        keys: list[str],
        config: dict[str, Any],
        init_stats: SuffStats | None = None,
    ) -> Path:
        """Write a checkpoint of ``state`` atomically and make it the latest."""
        name = f"ckpt-{state.lap:05d}-{state.position:06d}-{uuid.uuid4().hex[:6]}"
        # one writer per folder (the fit holding its lock): temporary folders left are
        # of a writer killed mid-write
        for stale in self.root.glob(".tmp-ckpt-*"):
            fsops.rmtree(stale)
        for stale in self.root.glob(".LATEST.*.tmp"):  # of a writer killed mid-write
            fsops.unlink(stale)
        tmp = self.root / f".tmp-{name}"
        tmp.mkdir()
        try:
            if init_stats is not None:
                save_stats(tmp / "init.npz", init_stats)
            document = {
                "format": FORMAT,
                "version": VERSION,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "config": config,
                "state": state.to_json(),
                "memo": {k: f for k, f in zip(keys, memo.files(), strict=True) if f is not None},
                "keys": list(keys),  # the batch list that state.order indexes
                "has_init": init_stats is not None,
            }
            _write_text_atomic(tmp / "state.json", json.dumps(document, indent=1))
            fsops.replace(tmp, self.root / name)
        except BaseException:
            fsops.rmtree(tmp)
            raise
        _write_text_atomic(self.root / "LATEST", name + "\n")
        memo.commit()
        for old in self.root.glob("ckpt-*"):
            if old.name != name:
                fsops.rmtree(old)
        logger.info("checkpoint written: %s (lap %d, position %d)", name, state.lap, state.position)
        fault_point("checkpoint.written")
        return self.root / name

    def mark_done(self, command_id: str) -> bool:
        """Record in the latest checkpoint that the command ``command_id`` wrote its
        output (a rerun of it is then a new command); False where the latest
        checkpoint belongs to another command. The caller holds the folder's lock."""
        path = self.latest()
        if path is None:
            return False
        document = json.loads((path / "state.json").read_text(encoding="utf-8"))
        command = document.get("state", {}).get("command")
        if not isinstance(command, dict) or command.get("id") != command_id:
            return False
        command["done"] = True
        for stale in path.glob(".state.json.*.tmp"):  # of an earlier mark killed mid-write
            fsops.unlink(stale)
        _write_text_atomic(path / "state.json", json.dumps(document, indent=1))
        return True

    def read_state(self) -> LearnState | None:
        """The latest checkpoint's progress alone (no statistics read); None if none."""
        path = self.latest()
        if path is None:
            return None
        return self.read(path, with_init=False)["state"]

    def read(self, path: Path | None = None, *, with_init: bool = True) -> dict[str, Any]:
        """The latest checkpoint (or ``path``) as a dict with ``state`` a LearnState,
        ``init_stats`` (or None), ``memo`` (key -> file), ``keys`` (the batch list
        of the run), ``config``."""
        path = path or self.latest()
        if path is None:
            raise FileNotFoundError(f"checkpoint folder {self.root}: holds no checkpoint yet")
        try:
            file = path / "state.json"
            if file.stat().st_size > _MAX_STATE_BYTES:
                raise ValueError(
                    f"it holds {file.stat().st_size:,} bytes, more than any run writes"
                )
            document = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            raise DataError(f"checkpoint {path}: state.json is unreadable: {exc}") from exc
        if not isinstance(document, dict):
            raise DataError(f"checkpoint {path}: state.json is not a JSON object")
        if document.get("format") != FORMAT or document.get("version") != VERSION:
            raise DataError(
                f"checkpoint {path}: not an lsdask checkpoint of version {VERSION} "
                f"(found format {document.get('format')!r}, version {document.get('version')!r})"
            )
        memo, keys = document.get("memo"), document.get("keys")
        if not (
            isinstance(memo, dict)
            and all(isinstance(k, str) and isinstance(f, str) for k, f in memo.items())
            and (keys is None or (isinstance(keys, list) and all(isinstance(k, str) for k in keys)))
            and isinstance(document.get("config"), dict)
        ):
            raise DataError(f"checkpoint {path}: state.json lacks a valid memo, keys or config")
        bad = [f for f in memo.values() if not _MEMO_NAME.fullmatch(f)]
        if bad:
            raise DataError(
                f"checkpoint {path}: state.json names memo file {bad[0][:80]!r}, not a plain "
                "memo file name (b<batch>-...npz) inside the memo folder; the file was modified"
            )
        try:
            state = LearnState.from_json(document.get("state"), None if keys is None else len(keys))
        except (TypeError, ValueError) as exc:
            raise DataError(f"checkpoint {path}: state.json: {exc}") from exc
        missing = [f for f in document["memo"].values() if not (self.memo_folder / f).exists()]
        if missing:
            raise DataError(
                f"checkpoint {path}: {len(missing)} memo files are missing from "
                f"{self.memo_folder} (e.g. {missing[0]})"
            )
        return {
            "path": path,
            "config": document["config"],
            "state": state,
            "memo": document["memo"],
            "keys": document.get("keys"),  # None in checkpoints before it was kept
            "init_stats": (
                load_stats(path / "init.npz") if with_init and document.get("has_init") else None
            ),
        }
