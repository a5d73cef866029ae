"""Reading corpus metadata: the manifest, the vocabulary, and rescanning ``parts/``.

Part of the Parquet corpus store (:mod:`lsdask.io.corpus`): reading and
checking ``manifest.json`` and ``vocab.txt``, listing the Parquet files of a
corpus, rebuilding the batch list from their footers (``rescan``) and
checking that the files the manifest lists are present, and finding the next
free doc_id and part-file name for an append. A part of an append that has not
committed (its transaction id under ``manifest["pending"]``, or not yet in the
manifest a rescan started from) is never taken in by a rescan.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lsdask.errors import DataError, one_line
from lsdask.io import guarded
from lsdask.io.corpus.batch import COLUMNS, DocBatch
from lsdask.io.corpus.write import (
    DIGEST_KEY,
    FORMAT,
    MANIFEST_NAME,
    PARTS_DIR,
    TXN_KEY,
    VERSION,
    VOCAB_DIGEST_KEY,
    VOCAB_NAME,
    _as_number,
    _now,
    _write_json_atomic,
    file_digest,
)

logger = logging.getLogger(__name__)


_PART_NAME = re.compile(r"^part-(\d+)\.parquet$")
#: A part file as the manifest names it: ``parts/<plain name>.parquet``.
_PART_FILE = re.compile(r"^parts/(?![.])[^/\x00\n\r]+\.parquet$")
#: A transaction id as :func:`lsdask.io.corpus.write.new_txn` makes it.
_TXN = re.compile(r"^[0-9a-f]{8,64}$")


def is_part_file(file: Any) -> bool:
    """Whether ``file`` is a part file name as lsdask writes it in a manifest:
    ``parts/<plain name>.parquet`` (no folders, links or odd names)."""
    return (
        isinstance(file, str)
        and bool(_PART_FILE.match(file))
        and len(file.encode("utf-8", "surrogateescape")) <= 255 + len(PARTS_DIR) + 1
    )


def is_txn(txn: Any) -> bool:
    """Whether ``txn`` is a transaction id as lsdask makes it (hex digits)."""
    return isinstance(txn, str) and bool(_TXN.match(txn))


def open_part(root: Path, file: str) -> Any:
    """The part ``file`` of the corpus ``root`` opened for reading (binary),
    through :mod:`lsdask.io.guarded`: a regular file reached without links."""
    return guarded.open_read(root, file)


# --------------------------------------------------------------------------- reading


def _read_vocab(path: Path, corpus: Path) -> list[str]:
    """The words of ``vocab.txt`` in the corpus folder ``corpus`` (``path`` is
    that file, named for messages): a regular file of at most the "vocab" limit."""
    try:
        text = guarded.read_text(corpus, VOCAB_NAME, "vocab")
    except FileNotFoundError as exc:
        raise DataError(
            f"corpus {corpus}: {VOCAB_NAME} is missing; a corpus needs its vocabulary "
            "(one word per line). Re-run the ingestion."
        ) from exc
    except UnicodeDecodeError as exc:
        raise DataError(f"corpus {corpus}: {VOCAB_NAME} is not valid UTF-8 ({exc})") from exc
    words = text.split("\n")
    if words and words[-1] == "":
        words.pop()
    return [w[:-1] if w.endswith("\r") else w for w in words]


def _read_manifest(root: Path) -> dict[str, Any]:
    """``manifest.json`` of the corpus ``root``, read through :mod:`lsdask.io.guarded`
    (a regular file, at most the "manifest" limit) and checked; the corpus folder's
    own entries are checked first (:func:`check_layout`)."""
    path = root / MANIFEST_NAME
    check_layout(root)
    try:
        data = guarded.read_bytes(root, MANIFEST_NAME, "manifest")
    except FileNotFoundError as exc:
        raise DataError(
            f"{root}: not an lsdask corpus (no {MANIFEST_NAME}). Make a corpus with "
            "`lsdask ingest` (in Python lsdask.io.ingest or Corpus.write)."
        ) from exc
    try:
        manifest = json.loads(data)
    except ValueError as exc:
        raise DataError(f"{path}: not valid JSON ({exc}); the manifest is corrupt") from exc
    _check_manifest(manifest, path)
    return manifest


def check_layout(root: Path) -> None:
    """Refuse a corpus folder holding a link or a special file (``parts/``,
    ``quarantine/``, ``manifest.json``, ``vocab.txt`` or anything else that is a
    symbolic link, a FIFO, a device or a socket): lsdask reads and writes only
    below the folder it was given, so it never follows a link in it."""
    if not root.is_dir():
        return
    for name in guarded.listdir(root):
        st = guarded.lstat(root, name)
        if st is None or stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
            continue
        if stat.S_ISLNK(st.st_mode):
            kind = "a symbolic link"
        elif stat.S_ISFIFO(st.st_mode):
            kind = "a FIFO"
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            kind = "a device"
        else:
            kind = "a socket or other special file"
        raise guarded.UnsafePath(
            f"corpus {root}: {name!r} is {kind}. A corpus holds only regular files and "
            "folders: lsdask never follows a link inside a folder it is given (a linked "
            f"{PARTS_DIR}/ would let an append write into another corpus). Replace it with "
            "the real file or folder (a copy), or remove it"
        )


def _check_manifest(manifest: Any, path: Path) -> None:
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else type(manifest).__name__
        raise DataError(f"{path}: expected format {FORMAT!r}; found {found!r}")
    if manifest.get("version") != VERSION:
        raise DataError(
            f"{path}: manifest version {manifest.get('version')!r}; this lsdask reads "
            f"version {VERSION}. Upgrade lsdask or re-ingest the data."
        )
    for key, kind in (("vocab_size", int), ("batches", list)):
        if not isinstance(manifest.get(key), kind):
            raise DataError(f"{path}: key {key!r} is missing or not a {kind.__name__}")
    for i, b in enumerate(manifest["batches"]):
        ok = (
            isinstance(b, dict)
            and isinstance(b.get("file"), str)
            and isinstance(b.get("row_group"), int)
            and isinstance(b.get("n_docs"), int)
            and isinstance(b.get("n_tokens"), int | float)
            and b["n_docs"] >= 0
            and b["n_tokens"] >= 0
            and math.isfinite(b["n_tokens"])
        )
        if not ok:
            raise DataError(
                f"{path}: batches[{i}] is {b!r}; expected "
                "{'file': str, 'row_group': int, 'n_docs': int >= 0, 'n_tokens': number >= 0}"
            )
        if not is_part_file(b["file"]):
            raise DataError(
                f"{path}: batches[{i}] names file {b['file']!r}; files must be "
                f"'{PARTS_DIR}/<name>.parquet' inside the corpus"
            )
    _check_pending(manifest, path)


def _check_pending(manifest: dict[str, Any], path: Path) -> None:
    """Refuse ``pending`` entries that lsdask did not write: each names a file
    ``parts/<plain name>.parquet`` and a transaction id of hex digits. Their
    fields become paths when a stopped append is recovered, so an entry that
    names anything else (an absolute path, ``..``, another folder) is an error
    rather than dropped: dropped, the part it stands for would be taken in by the
    next rescan as if committed."""
    entries = manifest.get("pending")
    if entries is None:
        return
    if not isinstance(entries, list):
        raise DataError(
            f"{path}: 'pending' is a {type(entries).__name__}; expected a list of the appends "
            "under way. The manifest was edited or damaged: remove the key 'pending' (and "
            f"any file in {PARTS_DIR}/ that no batch lists) and run again"
        )
    for i, e in enumerate(entries):
        if not isinstance(e, dict):
            field, value = "entry", e
        elif not is_part_file(e.get("file")):
            field, value = "file", e.get("file")
        elif not is_txn(e.get("txn")):
            field, value = "txn", e.get("txn")
        else:
            continue
        expected = {
            "entry": "an object {'txn', 'file', 'host', 'pid', 'started'}",
            "file": f"'{PARTS_DIR}/<plain name>.parquet'",
            "txn": "a transaction id of hex digits",
        }[field]
        raise DataError(
            f"{path}: pending[{i}] {field} is {str(value)[:200]!r}; expected {expected}. "
            "lsdask never writes such an entry: the manifest was edited or damaged, and "
            "nothing was moved. Remove that entry from 'pending' (if the append it stands "
            f"for was stopped, also its part file in {PARTS_DIR}/, which no batch lists) "
            "and run again"
        )


def _parquet_files(root: Path) -> list[str]:
    """The part files in ``parts/`` (hidden temporaries left out); a link or
    special file named ``*.parquet`` there, or ``parts`` itself being one, is
    refused (:class:`~lsdask.io.guarded.UnsafePath`)."""
    if not guarded.is_dir(root, PARTS_DIR):
        return []
    files = []
    for name in guarded.listdir(root, PARTS_DIR):
        if not name.endswith(".parquet") or name.startswith("."):
            continue
        if guarded.is_file(root, f"{PARTS_DIR}/{name}"):
            files.append(f"{PARTS_DIR}/{name}")
    return sorted(files)


def _file_row_groups(
    root: Path, file: str, vocab_size: int, meta: pq.FileMetaData
) -> list[dict[str, Any]]:
    """Batch entries of one new or changed Parquet file, every row group read and
    checked as a batch task would (so a bad file is refused here, naming its row
    group and document, before its token counts reach the manifest). Its
    vocabulary stamp was checked with its footer ``meta`` (:func:`_footer_sizes`),
    which is not read again."""
    where = f"corpus {root}, file {file}"
    txn = part_txn(meta)
    try:
        with (
            open_part(root, file) as raw,
            pq.ParquetFile(raw, metadata=meta, page_checksum_verification=True) as f,
        ):
            names = f.schema_arrow.names
            if any(c not in names for c in COLUMNS):
                raise DataError(
                    f"{where}: has columns {names}; a corpus file needs {list(COLUMNS)}"
                )
            entries = []
            for g in range(f.num_row_groups):
                n = f.metadata.row_group(g).num_rows
                if n == 0:
                    continue
                table = f.read_row_group(g, columns=list(COLUMNS))
                batch = DocBatch.from_arrow(table, f"{where}, row group {g}", vocab_size)
                entries.append(
                    {"file": file, "row_group": g, "n_docs": n, "n_tokens": batch.n_tokens}
                    | ({} if txn is None else {"txn": txn})
                )
        size, digest = file_digest(root, file)
        remember_verified(root, file, digest)
        for e in entries:
            e["file_bytes"], e[DIGEST_KEY] = size, digest
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{where}: could not read the Parquet file ({type(exc).__name__}: "
            f"{one_line(exc, 300)}); it is probably truncated or corrupt. Delete or replace it "
            "and rescan."
        ) from exc
    for e in entries:
        e["n_tokens"] = _as_number(e["n_tokens"])
    return entries


def _footer_sizes(
    root: Path, file: str, vocab_digest: str
) -> tuple[list[tuple[int, int]], pq.FileMetaData]:
    """(row group, documents) of a part's nonempty row groups, and its footer; a
    part stamped with another vocabulary than ``vocab_digest`` is refused (for a
    part the manifest lists, that is ``vocab.txt`` changed after it was written)."""
    where = f"corpus {root}, file {file}"
    try:
        with open_part(root, file) as raw:
            meta = pq.read_metadata(raw)
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{where}: could not read the Parquet footer ({type(exc).__name__}: "
            f"{one_line(exc, 300)}); the file is probably truncated or corrupt. Delete or replace "
            "it and rescan."
        ) from exc
    stamp = (meta.metadata or {}).get(VOCAB_DIGEST_KEY)
    if stamp is not None and stamp.decode() != vocab_digest:
        raise DataError(
            f"{where}: was written over another vocabulary than the corpus's {VOCAB_NAME} "
            "now holds, so its word ids would be read as other words. Remove it and add its "
            f"documents with lsdask ingest ... --append-to {root} (in Python "
            "Corpus.append_corpus of a corpus ingested with vocab=this one); if the part was "
            f"there before and {VOCAB_NAME} was edited, restore {VOCAB_NAME}"
        )
    sizes = [(g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups)]
    return [(g, n) for g, n in sizes if n > 0], meta


def part_txn(meta: pq.FileMetaData) -> str | None:
    """The transaction id a part file written by lsdask carries (None: written
    by another tool, or by lsdask before transactions were recorded)."""
    stamp = (meta.metadata or {}).get(TXN_KEY)
    return None if stamp is None else stamp.decode()


def pending(manifest: dict[str, Any]) -> list[dict[str, Any]]:
    """The appends under way (or stopped before they committed): entries
    ``{"txn", "file", "host", "pid", "started"}`` of ``manifest["pending"]``
    whose ``file`` is a part file name and ``txn`` a transaction id (a manifest
    read from disk with others is refused by :func:`_read_manifest`)."""
    entries = manifest.get("pending")
    if not isinstance(entries, list):
        return []
    return [
        e for e in entries
        if isinstance(e, dict) and is_part_file(e.get("file")) and is_txn(e.get("txn"))
    ]  # fmt: skip


def committed_txns(manifest: dict[str, Any]) -> set[str]:
    """The transaction ids the manifest's batches record."""
    return {b["txn"] for b in manifest["batches"] if isinstance(b.get("txn"), str)}


def pending_txns(manifest: dict[str, Any]) -> set[str]:
    """The transaction ids of the appends the manifest lists as pending."""
    return {e["txn"] for e in pending(manifest) if isinstance(e.get("txn"), str)}


def _same_size(root: Path, file: str, listed: list[dict[str, Any]]) -> bool:
    """Whether ``file`` still has the size its manifest entries recorded (entries
    of manifests written before sizes were kept record none: taken as the same)."""
    recorded = {b.get("file_bytes") for b in listed} - {None}
    if not recorded:
        return True
    st = guarded.lstat(root, file)
    return st is not None and recorded == {st.st_size}


def _rescan(root: Path, manifest: dict[str, Any], vocab_digest: str) -> dict[str, Any]:
    """Rebuild the batch list from the Parquet files present in ``parts/`` (every
    file's vocabulary stamp checked against ``vocab_digest``, new and changed
    files read and checked whole)."""
    listed: dict[str, list[dict[str, Any]]] = {}
    for b in manifest["batches"]:
        listed.setdefault(b["file"], []).append(b)
    on_disk = _parquet_files(root)
    present = set(on_disk)
    candidates = [f for f in listed if f in present] + [f for f in on_disk if f not in listed]
    uncommitted = _Uncommitted(root, manifest)
    batches: list[dict[str, Any]] = []
    order: list[str] = []
    n_changed = 0
    for file in candidates:
        old = listed.get(file, [])
        try:
            sizes, meta = _footer_sizes(root, file, vocab_digest)
        except DataError:
            if not old and not guarded.exists(root, file):
                continue  # moved away meanwhile (quarantined by an append)
            raise
        if not old and uncommitted.holds(file, part_txn(meta)):
            continue
        order.append(file)
        same_size = _same_size(root, file, old)
        if [(b["row_group"], b["n_docs"]) for b in old] == sizes and same_size:
            batches.extend(old)
        else:
            if old and same_size:
                # other row groups at the very size recorded: a rewrite would change the
                # size, damage (a flipped bit in the footer) keeps it; the digest decides
                verify_parts(root, old)
            batches.extend(_file_row_groups(root, file, manifest["vocab_size"], meta))
            n_changed += file in listed
    new_files = [f for f in order if f not in listed]
    if new_files:
        _warn_of_shared_doc_ids(root, new_files, order)
    gone = sorted(set(listed) - present)
    removed = [
        {
            "file": f,
            "n_docs": int(sum(b["n_docs"] for b in listed[f])),
            "n_tokens": _as_number(sum(float(b["n_tokens"]) for b in listed[f])),
            "noticed": _now(),
        }
        for f in gone
    ]
    if removed:
        logger.warning(
            "corpus %s: %d part file(s) listed in its manifest are gone (%s): %d of %d "
            "documents are left out from now on, and the manifest records the files under "
            "'removed_parts'. If that was not meant, restore the files from a backup.",
            root,
            len(gone),
            ", ".join(f"{r['file']}: {r['n_docs']} documents" for r in removed[:5])
            + (", ..." if len(removed) > 5 else ""),
            sum(r["n_docs"] for r in removed),
            sum(b["n_docs"] for b in manifest["batches"]),
        )
    logger.info(
        "rescanned corpus %s: %d files (%d new, %d changed, %d gone), %d batches (was %d)",
        root,
        len(order),
        len(order) - len(listed) + len(gone),
        n_changed,
        len(gone),
        len(batches),
        len(manifest["batches"]),
    )
    new = dict(manifest)
    if removed:
        new["removed_parts"] = list(manifest.get("removed_parts", [])) + removed
    new.update(
        batches=batches,
        n_docs=int(sum(b["n_docs"] for b in batches)),
        n_tokens=_as_number(sum(float(b["n_tokens"]) for b in batches)),
        updated=_now(),
    )
    return new


class _Uncommitted:
    """Tells the part files of appends that have not committed in the manifest a
    rescan starts from: their transaction id is pending there, or (an append
    that began after it was read) in the manifest as it is when the rescan meets
    the file (an append records itself before its part reaches ``parts/``). A
    part with a transaction id neither knows was copied in from another corpus,
    and is taken in as any other part."""

    def __init__(self, root: Path, manifest: dict[str, Any]) -> None:
        self._root = root
        self._committed = committed_txns(manifest)
        self._pending = pending_txns(manifest)

    def holds(self, file: str, txn: str | None) -> bool:
        if txn is None or txn in self._committed:
            return False
        if txn not in self._pending and txn not in self._known_now():
            return False
        logger.info(
            "corpus %s: %s belongs to an append that has not committed (transaction %s); "
            "it is left out",
            self._root, file, txn,
        )  # fmt: skip
        return True

    def _known_now(self) -> set[str]:
        """The transaction ids the manifest on disk knows (read again each time:
        only parts of other corpora and of appends under way ask)."""
        try:
            now = _read_manifest(self._root)
        except DataError:
            return set()
        return committed_txns(now) | pending_txns(now)


def _doc_id_range(root: Path, file: str) -> tuple[int, int] | None:
    """Smallest and largest doc_id of a part file, from the Parquet row-group
    statistics where present, else the column itself; None when it holds none."""
    with open_part(root, file) as raw:
        meta = pq.read_metadata(raw)
    col = meta.schema.to_arrow_schema().get_field_index("doc_id")
    lo, hi = None, None
    for rg in range(meta.num_row_groups):
        if meta.row_group(rg).num_rows == 0:
            continue
        stats = meta.row_group(rg).column(col).statistics
        if stats is None or not stats.has_min_max:
            ids = _doc_ids(root, file)
            return (int(ids.min()), int(ids.max())) if ids.size else None
        lo = int(stats.min) if lo is None else min(lo, int(stats.min))
        hi = int(stats.max) if hi is None else max(hi, int(stats.max))
    return None if lo is None else (lo, hi)


def _doc_ids(root: Path, file: str) -> np.ndarray:
    """The doc_id column of a part file."""
    with open_part(root, file) as raw:
        table = pq.read_table(raw, columns=["doc_id"], page_checksum_verification=True)
    return table.column(0).to_numpy()


def _next_doc_id(root: Path, manifest: dict[str, Any]) -> int:
    """One more than the largest doc_id of the listed files (0 for an empty corpus)."""
    ranges = [_doc_id_range(root, f) for f in sorted({b["file"] for b in manifest["batches"]})]
    return max((r[1] for r in ranges if r is not None), default=-1) + 1


def _warn_of_shared_doc_ids(root: Path, new_files: list[str], files: list[str]) -> None:
    """Warn where a new part's doc_id range meets another part's: the same
    documents dropped in twice, or new ones numbered from 0 again (ingested
    apart, then copied in), which transform's output cannot tell apart."""
    ranges = {f: _doc_id_range(root, f) for f in files}
    position = {f: i for i, f in enumerate(files)}
    fresh = set(new_files)
    for f in new_files:
        mine = ranges[f]
        if mine is None:
            continue
        for g in files:
            theirs = ranges[g]
            # another part, listed or new before this one (a pair is told once)
            if g == f or theirs is None or (g in fresh and position[g] > position[f]):
                continue
            if mine[0] <= theirs[1] and theirs[0] <= mine[1]:
                logger.warning(
                    "corpus %s: new part %s holds doc_ids %d..%d, and %s holds %d..%d: if these "
                    "are the same documents they are now counted twice, and the doc_ids of "
                    "transform's output do not tell the two apart. Give new documents their "
                    "own ids (lsdask ingest jsonl/table --id), or add them with lsdask ingest "
                    "... --append-to (Corpus.append_corpus), which numbers them after the "
                    "corpus's largest doc_id",
                    root, f, mine[0], mine[1], g, theirs[0], theirs[1],
                )  # fmt: skip
                break


def _check_files(root: Path, manifest: dict[str, Any]) -> None:
    """Without rescan: files that are gone are an error, unlisted files a warning."""
    listed = {b["file"] for b in manifest["batches"]}
    on_disk = set(_parquet_files(root))
    gone = sorted(listed - on_disk)
    if gone:
        raise DataError(
            f"corpus {root}: the manifest lists {len(gone)} file(s) that are gone "
            f"({', '.join(gone[:5])}{', ...' if len(gone) > 5 else ''}); reopen with "
            "Corpus.open(path, rescan=True) to rebuild the batch list from the files present"
        )
    appending = {e.get("file") for e in pending(manifest)}
    new = sorted(on_disk - listed - appending)
    if new:
        logger.warning(
            "corpus %s: %d Parquet file(s) in %s/ are not in the manifest (%s); they are "
            "ignored. Open with rescan=True to add them as new batches.",
            root,
            len(new),
            PARTS_DIR,
            ", ".join(new[:5]),
        )


def _save_rescanned(root: Path, manifest: dict[str, Any]) -> None:
    try:
        _write_json_atomic(root / MANIFEST_NAME, manifest)
    except OSError as exc:
        logger.warning(
            "corpus %s: could not save the rescanned manifest (%s); using it in memory only",
            root,
            exc,
        )


def _next_part_name(root: Path, manifest: dict[str, Any]) -> str:
    names = [Path(b["file"]).name for b in manifest["batches"]]
    names += [Path(f).name for f in _parquet_files(root)]
    names += [Path(str(e.get("file"))).name for e in pending(manifest)]
    numbers = [int(m.group(1)) for n in names if (m := _PART_NAME.match(n))]
    return f"part-{max(numbers, default=-1) + 1:05d}.parquet"


def _check_new_part(root: Path, manifest: dict[str, Any], name: str) -> Path:
    if (
        not isinstance(name, str)
        or not name.endswith(".parquet")
        or name.startswith(".")
        or "/" in name
        or os.sep in name
    ):
        raise ValueError(
            f"file_name must be a plain file name ending in '.parquet' (no folders, not "
            f"hidden); got {name!r}"
        )
    guarded.check_name(root, f"{PARTS_DIR}/{name}", name)
    final = root / PARTS_DIR / name
    guarded.makedirs(root, PARTS_DIR)  # refuses a parts/ that is a link
    if guarded.exists(root, f"{PARTS_DIR}/{name}") or any(
        Path(b["file"]).name == name for b in manifest["batches"]
    ):
        raise FileExistsError(
            f"corpus {root}: {PARTS_DIR}/{name} already exists; choose another file_name"
        )
    return final


# --------------------------------------------------------------------------- digests

#: Parts whose digest this process checked, by (corpus, file, size, mtime, inode,
#: digest): each part is hashed once per process (a command), not per read.
_VERIFIED: set[tuple[Any, ...]] = set()
_VERIFIED_LOCK = threading.Lock()
_told_no_digest: set[str] = set()


def _verified_key(root: Path, file: str, digest: str) -> tuple[Any, ...] | None:
    st = guarded.lstat(root, file)
    if st is None:
        return None
    return (os.path.realpath(root), file, st.st_size, st.st_mtime_ns, st.st_ino, digest)


def remember_verified(root: Path, file: str, digest: str) -> None:
    """Record that ``file`` was just hashed to ``digest`` (it need not be again)."""
    key = _verified_key(root, file, digest)
    if key is not None:
        with _VERIFIED_LOCK:
            _VERIFIED.add(key)


def verify_parts(root: Path, batches: list[dict[str, Any]]) -> None:
    """Check each part file the manifest ``batches`` list against the size and
    BLAKE2b digest recorded when it was written, once per part per process (a
    part changed since, by size, time or inode, is checked again).

    A part of a corpus written before digests were kept is read with its Parquet
    page checksums only (said at debug level).

    Raises
    ------
    DataError
        Naming the part, the digest recorded and the one found, and the fix.
    """
    recorded: dict[str, tuple[Any, Any]] = {}
    for b in batches:
        recorded.setdefault(b["file"], (b.get(DIGEST_KEY), b.get("file_bytes")))
    for file, (expected, size) in recorded.items():
        if not isinstance(expected, str):
            if f"{root}/{file}" not in _told_no_digest:
                _told_no_digest.add(f"{root}/{file}")
                logger.debug(
                    "corpus %s, file %s: no digest recorded (written before lsdask kept "
                    "them); checked by its Parquet page checksums only", root, file,
                )  # fmt: skip
            continue
        key = _verified_key(root, file, expected)
        with _VERIFIED_LOCK:
            if key is not None and key in _VERIFIED:
                continue
        try:
            found_size, found = file_digest(root, file)
        except FileNotFoundError:
            continue  # gone: reported where the batch is read, or by a rescan
        if found != expected or (isinstance(size, int) and found_size != size):
            raise DataError(
                f"corpus {root}, file {file}: its content is not what was written: BLAKE2b "
                f"{found} ({found_size:,} bytes) where the manifest recorded {expected}"
                + (f" ({size:,} bytes)" if isinstance(size, int) else "")
                + ". The file was damaged (a disk or copy error) or changed after it was "
                "written, so its documents cannot be trusted. Restore it from a backup, or "
                "re-ingest its documents (delete the file, rescan with "
                "Corpus.open(path, rescan=True), and append them again)"
            )
        if key is not None:
            with _VERIFIED_LOCK:
                _VERIFIED.add(key)
