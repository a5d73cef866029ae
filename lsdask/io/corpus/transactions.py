"""Appends as transactions: one writer at a time, visible only once committed.

Part of the Parquet corpus store (:mod:`lsdask.io.corpus`). An append
(:meth:`~lsdask.io.corpus.Corpus.append`) holds the corpus's lock
(:func:`corpus_lock`, see :mod:`lsdask.io.locks`) from reading the manifest to
committing it, so the next part name and the next doc_ids are chosen by one
writer at a time. Its part file carries a fresh transaction id in its Parquet
key-value metadata (``lsdask.transaction``). Before the part is renamed into
``parts/``, the manifest records the append as pending (:func:`begin_append`);
the commit (:func:`commit_append`) adds the part's batches, each recording the
transaction id, and drops the pending entry, in one atomic manifest write.

A writer killed between the two leaves a part that no committed manifest
lists. Rescans leave it out; the next writer (an append, or a rescan that finds
the corpus unlocked) moves it to ``quarantine/`` with a warning
(:func:`recover_appends`), so a retried append adds its documents exactly once.
The fields of ``pending`` entries are checked before they name any file (see
:func:`lsdask.io.corpus.read._check_pending`), and every file is reached through
:mod:`lsdask.io.guarded`: nothing outside the corpus is moved or overwritten.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path, PurePosixPath
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lsdask.io import guarded
from lsdask.io.corpus.read import committed_txns, open_part, part_txn, pending
from lsdask.io.corpus.write import MANIFEST_NAME, _as_number, _now, _write_json_atomic
from lsdask.io.locks import FolderLock

logger = logging.getLogger(__name__)

#: Where the parts of appends that never committed are moved.
QUARANTINE_DIR = "quarantine"

_ADVICE = (
    "Two writers at once would choose the same part file and lose documents. Wait for it "
    "(lsdask ingest ... --wait SECONDS; Python: Corpus.append(..., wait=SECONDS)), or run "
    "again once it is done."
)


def corpus_lock(
    root: str | os.PathLike[str], *, wait: float | None = None, enabled: bool | None = None
) -> FolderLock:
    """The lock of the corpus ``root`` (an existing folder), for a writer;
    re-entrant in the thread holding it (a job holds it around an append)."""
    if not Path(root).is_dir():
        raise FileNotFoundError(f"no corpus at {str(root)!r}: the path is not a folder")
    return FolderLock(root, "corpus", _ADVICE, wait=wait, enabled=enabled, reentrant=True)


def begin_append(root: Path, manifest: dict[str, Any], txn: str, file: str) -> dict[str, Any]:
    """Record in the manifest that the append ``txn`` is about to put ``file``
    into ``parts/``; returns the manifest written."""
    intent = {
        "txn": txn,
        "file": file,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": _now(),
    }
    new = dict(manifest)
    new["pending"] = [*pending(manifest), intent]
    _write_json_atomic(root / MANIFEST_NAME, new)
    return new


def commit_append(
    root: Path, manifest: dict[str, Any], txn: str, entries: list[dict[str, Any]]
) -> dict[str, Any]:
    """Add the batches ``entries`` of the append ``txn`` and drop its pending
    entry, in one atomic write of the manifest; returns it."""
    batches = manifest["batches"] + [{**e, "txn": txn} for e in entries]
    new = dict(manifest)
    new.update(
        batches=batches,
        n_docs=int(sum(b["n_docs"] for b in batches)),
        n_tokens=_as_number(sum(float(b["n_tokens"]) for b in batches)),
        updated=_now(),
    )
    rest = [e for e in pending(manifest) if e.get("txn") != txn]
    if rest:
        new["pending"] = rest
    else:
        new.pop("pending", None)
    _write_json_atomic(root / MANIFEST_NAME, new)
    return new


def recover_appends(root: Path, manifest: dict[str, Any]) -> dict[str, Any]:
    """Finish for the appends that stopped before they committed; call it
    holding the corpus's lock (so none is under way).

    The part file of each such append, if it was renamed in, is moved to
    ``quarantine/<name>.<txn>.parquet`` with a warning; the pending entries are
    dropped from the manifest (saved). Returns the manifest.
    """
    intents = pending(manifest)  # checked names only: 'parts/<name>.parquet', hex txn
    if not intents:
        return manifest
    committed = committed_txns(manifest)
    for intent in intents:
        file, txn = intent["file"], intent["txn"]
        if txn in committed:
            continue
        if not guarded.is_file(root, file):
            logger.info("corpus %s: append %s stopped before it wrote %s", root, txn, file)
            continue
        try:
            with open_part(root, file) as raw:
                meta = pq.read_metadata(raw)
            stamp, n_docs = part_txn(meta), meta.num_rows
        except (pa.ArrowException, OSError):
            stamp, n_docs = txn, None  # unreadable where that append wrote: set it aside
        if stamp != txn:
            continue  # another file of that name, dropped in since: a rescan judges it
        _quarantine(root, file, txn, intent, n_docs)
    new = dict(manifest)
    new.pop("pending", None)
    _write_json_atomic(root / MANIFEST_NAME, new)
    return new


def _quarantine(
    root: Path, file: str, txn: str, intent: dict[str, Any], n_docs: int | None
) -> None:
    name = PurePosixPath(file).name  # file and txn were checked: plain names
    target = f"{QUARANTINE_DIR}/{name[: -len('.parquet')]}.{txn}.parquet"
    guarded.makedirs(root, QUARANTINE_DIR)
    guarded.replace(root, file, target)
    documents = "its documents" if n_docs is None else f"its {n_docs} documents"
    logger.warning(
        "corpus %s: %s was written by an append that stopped before it committed "
        "(transaction %s, process %s on host %s, started %s), so %s are not in the corpus. "
        "Moved it to %s. Run that append again to add them (then delete the file).",
        root, file, txn, intent.get("pid"), intent.get("host"), intent.get("started"),
        documents, target,
    )  # fmt: skip
