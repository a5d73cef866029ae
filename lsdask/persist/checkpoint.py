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
from lsdask.io import guarded
from lsdask.io.faults import fault_point
from lsdask.learn.state import LearnState
from lsdask.models.stats import SuffStats
from lsdask.persist.checked_state import check_rng_state
from lsdask.persist.files import naming, remove_matching, write_text_atomic
from lsdask.persist.memo_files import DiskMemo, load_stats, save_stats

logger = logging.getLogger(__name__)

FORMAT = "lsdask-checkpoint"
VERSION = 1

#: what LATEST may name: a checkpoint folder of :meth:`CheckpointDir.write`
_CHECKPOINT_NAME = re.compile(r"ckpt-\d{5,}-\d{6,}-[0-9a-f]{6}")
#: what a checkpoint may name as a memo file: a plain name in the memo folder
_MEMO_NAME = re.compile(r"b\d{6,}-[0-9A-Za-z_-]+\.npz")


class CheckpointDir:
    """A checkpoint folder: writes checkpoints and finds the latest one.

    Every file below the folder is read, written, renamed and deleted through
    :mod:`lsdask.io.guarded`: a link or special file in the place of
    ``LATEST``, ``memo/``, a ``ckpt-*`` folder or a file in them is refused
    (:class:`~lsdask.io.guarded.UnsafePath`, naming the folder and the entry),
    never followed; clean-ups remove a link as a link.

    Parameters
    ----------
    root : path
        Created if missing.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = Path(root)
        guarded.makedirs(self.root)

    @property
    def memo_folder(self) -> Path:
        return self.root / "memo"

    def memo(
        self,
        n_batches: int,
        files: list[str | None] | None = None,
        limits: dict[str, tuple[int, ...]] | None = None,
    ) -> DiskMemo:
        """The memo of this folder (``memo/``), reached from the folder's root."""
        return DiskMemo(self.memo_folder, n_batches, files, limits, root=self.root)

    def _damaged(self, what: str) -> DataError:
        return DataError(
            f"checkpoint folder {self.root}: {what}; the folder was modified by hand. "
            "Remove LATEST to start over."
        )

    def latest(self) -> Path | None:
        """The newest complete checkpoint, or None if there is none."""
        try:
            name = guarded.read_text(self.root, "LATEST", "pointer").strip()
        except FileNotFoundError:
            return None
        except UnicodeDecodeError as exc:
            raise self._damaged(f"LATEST is not UTF-8 text ({exc})") from exc
        except guarded.UnsafePath:
            raise
        except OSError as exc:
            raise DataError(f"checkpoint folder {self.root}: LATEST is unreadable: {exc}") from exc
        if not _CHECKPOINT_NAME.fullmatch(name):
            raise self._damaged(
                f"LATEST holds {name[:80]!r}, not the name of a checkpoint folder in it "
                "(ckpt-LLLLL-PPPPPP-xxxxxx)"
            )
        path = self.root / name
        if not guarded.is_file(self.root, path / "state.json"):
            raise self._damaged(f"LATEST names {path.name}, which has no state.json")
        return path

    def write(
        self,
        state: LearnState,
        memo: DiskMemo,
        keys: list[str],
        config: dict[str, Any],
        init_stats: SuffStats | None = None,
        best_stats: SuffStats | None = None,
    ) -> Path:
        """Write a checkpoint of ``state`` atomically and make it the latest;
        ``best_stats``: the statistics of early stopping's best lap (``state.best``)
        where it is an earlier one."""
        name = f"ckpt-{state.lap:05d}-{state.position:06d}-{uuid.uuid4().hex[:6]}"
        # one writer per folder (the fit holding its lock): temporary folders left are
        # of a writer killed mid-write
        remove_matching(self.root, self.root, ".tmp-ckpt-*")
        remove_matching(self.root, self.root, ".LATEST.*.tmp")
        tmp = self.root / f".tmp-{name}"
        try:
            with naming(self.memo_folder):  # the memo files the checkpoint names, on disk
                if guarded.is_dir(self.root, self.memo_folder):
                    guarded.fsync_dir(self.root, self.memo_folder)
            with naming(tmp):
                guarded.makedirs(self.root, tmp)
            if init_stats is not None:
                save_stats(tmp / "init.npz", init_stats, self.root)
            if best_stats is not None:
                save_stats(tmp / "best.npz", best_stats, self.root)
            document = {
                "format": FORMAT,
                "version": VERSION,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "config": config,
                "state": state.to_json(),
                "memo": {k: f for k, f in zip(keys, memo.files(), strict=True) if f is not None},
                "keys": list(keys),  # the batch list that state.order indexes
                "has_init": init_stats is not None,
                "has_best": best_stats is not None,
            }
            write_text_atomic(self.root, tmp / "state.json", json.dumps(document, indent=1))
            with naming(self.root / name):
                guarded.replace(self.root, tmp, self.root / name)
                guarded.fsync_dir(self.root)
        except BaseException:
            guarded.remove_tree(self.root, tmp)
            raise
        write_text_atomic(self.root, self.root / "LATEST", name + "\n")
        memo.commit()
        remove_matching(
            self.root, self.root, "ckpt-*",
            keep=lambda entry: entry == name or not _CHECKPOINT_NAME.fullmatch(entry),
        )  # fmt: skip
        logger.info("checkpoint written: %s (lap %d, position %d)", name, state.lap, state.position)
        fault_point("checkpoint.written")
        return self.root / name

    def _read_document(self, path: Path) -> Any:
        """The parsed ``state.json`` of the checkpoint ``path``, or a DataError."""
        try:
            return guarded.read_json(self.root, path / "state.json", "state")
        except guarded.UnsafePath:
            raise
        except (OSError, ValueError, RecursionError) as exc:
            raise DataError(f"checkpoint {path}: state.json is unreadable: {exc}") from exc

    def mark_done(self, command_id: str) -> bool:
        """Record in the latest checkpoint that the command ``command_id`` wrote its
        output (a rerun of it is then a new command); False where the latest
        checkpoint belongs to another command. The caller holds the folder's lock."""
        path = self.latest()
        if path is None:
            return False
        # of an earlier mark killed mid-write (whatever command it was for)
        remove_matching(self.root, path, ".state.json.*.tmp")
        document = self._read_document(path)
        state = document.get("state") if isinstance(document, dict) else None
        command = state.get("command") if isinstance(state, dict) else None
        if not isinstance(command, dict) or command.get("id") != command_id:
            return False
        command["done"] = True
        write_text_atomic(self.root, path / "state.json", json.dumps(document, indent=1))
        return True

    def read_state(self) -> LearnState | None:
        """The latest checkpoint's progress alone (no statistics read); None if none."""
        path = self.latest()
        if path is None:
            return None
        return self.read(path, with_init=False)["state"]

    def read(
        self,
        path: Path | None = None,
        *,
        with_init: bool = True,
        limits: dict[str, tuple[int, ...]] | None = None,
    ) -> dict[str, Any]:
        """The latest checkpoint (or ``path``) as a dict with ``state`` a LearnState,
        ``init_stats`` (or None), ``memo`` (key -> file), ``keys`` (the batch list
        of the run), ``config``. ``limits`` (the model's largest shape of each
        statistic) bounds ``init.npz``'s arrays (:func:`read_init`)."""
        path = path or self.latest()
        if path is None:
            raise FileNotFoundError(f"checkpoint folder {self.root}: holds no checkpoint yet")
        document = self._read_document(path)
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
        for flag in ("has_init", "has_best"):
            if not isinstance(document.get(flag, False), bool):
                raise DataError(
                    f"checkpoint {path}: state.json: {flag} is {document[flag]!r}; "
                    "expected true or false"
                )
        bad = [f for f in memo.values() if not _MEMO_NAME.fullmatch(f)]
        if bad:
            raise DataError(
                f"checkpoint {path}: state.json names memo file {bad[0][:80]!r}, not a plain "
                "memo file name (b<batch>-...npz) inside the memo folder; the file was modified"
            )
        fields = document.get("state")
        try:
            if isinstance(fields, dict) and fields.get("rng_state") is not None:
                check_rng_state(fields["rng_state"])
            state = LearnState.from_json(fields, None if keys is None else len(keys))
        except (TypeError, ValueError) as exc:
            raise DataError(f"checkpoint {path}: state.json: {exc}") from exc
        missing = [f for f in memo.values() if not guarded.is_file(self.root, self.memo_folder / f)]
        if missing:
            raise DataError(
                f"checkpoint {path}: {len(missing)} memo files are missing from "
                f"{self.memo_folder} (e.g. {missing[0]})"
            )
        return {
            "path": path,
            "config": document["config"],
            "state": state,
            "memo": memo,
            "keys": keys,  # None in checkpoints before it was kept
            "has_init": bool(document.get("has_init")),
            "has_best": bool(document.get("has_best")),
            "init_stats": (
                self.read_init(path, limits) if with_init and document.get("has_init") else None
            ),
        }

    def read_best(self, path: Path, limits: dict[str, tuple[int, ...]]) -> SuffStats:
        """The statistics of early stopping's best lap (``best.npz``), bounded as
        :meth:`read_init`."""
        return load_stats(path / "best.npz", limits, self.root)

    def read_init(self, path: Path, limits: dict[str, tuple[int, ...]] | None) -> SuffStats:
        """The statistics of the checkpoint ``path``'s ``init.npz``, each array
        checked against ``limits`` (the model's largest shapes) before it is read;
        without limits, no array may hold more than it occupies in the file."""
        return load_stats(path / "init.npz", limits, self.root)
