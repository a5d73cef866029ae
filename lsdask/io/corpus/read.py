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
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lsdask.errors import DataError
from lsdask.io.corpus.batch import COLUMNS, DocBatch
from lsdask.io.corpus.write import (
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
)

logger = logging.getLogger(__name__)


_PART_NAME = re.compile(r"^part-(\d+)\.parquet$")


# --------------------------------------------------------------------------- reading


def _read_vocab(path: Path, corpus: Path) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8")
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
    path = root / MANIFEST_NAME
    try:
        with open(path, encoding="utf-8") as f:
            manifest = json.load(f)
    except FileNotFoundError as exc:
        raise DataError(
            f"{root}: not an lsdask corpus (no {MANIFEST_NAME}). Make a corpus with "
            "`lsdask ingest` (in Python lsdask.io.ingest or Corpus.write)."
        ) from exc
    except ValueError as exc:
        raise DataError(f"{path}: not valid JSON ({exc}); the manifest is corrupt") from exc
    _check_manifest(manifest, path)
    return manifest


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
        parts = Path(b["file"]).parts
        if len(parts) != 2 or parts[0] != PARTS_DIR or b["file"].startswith("/"):
            raise DataError(
                f"{path}: batches[{i}] names file {b['file']!r}; files must be "
                f"'{PARTS_DIR}/<name>.parquet' inside the corpus"
            )


def _parquet_files(root: Path) -> list[str]:
    parts = root / PARTS_DIR
    if not parts.is_dir():
        return []
    return sorted(
        f"{PARTS_DIR}/{p.name}"
        for p in parts.iterdir()
        if p.suffix == ".parquet" and not p.name.startswith(".") and p.is_file()
    )


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
        with pq.ParquetFile(str(root / file), metadata=meta) as f:
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
        size = (root / file).stat().st_size
        for e in entries:
            e["file_bytes"] = size
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{where}: could not read the Parquet file ({type(exc).__name__}: {exc}); it is "
            "probably truncated or corrupt. Delete or replace it and rescan."
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
        meta = pq.read_metadata(str(root / file))
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{where}: could not read the Parquet footer ({type(exc).__name__}: {exc}); the "
            "file is probably truncated or corrupt. Delete or replace it and rescan."
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
    ``{"txn", "file", "host", "pid", "started"}`` of ``manifest["pending"]``."""
    entries = manifest.get("pending")
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


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
    return not recorded or recorded == {(root / file).stat().st_size}


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
            if not old and not (root / file).exists():
                continue  # moved away meanwhile (quarantined by an append)
            raise
        if not old and uncommitted.holds(file, part_txn(meta)):
            continue
        order.append(file)
        if [(b["row_group"], b["n_docs"]) for b in old] == sizes and (_same_size(root, file, old)):
            batches.extend(old)
        else:
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
    meta = pq.ParquetFile(root / file).metadata
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
    return pq.read_table(root / file, columns=["doc_id"]).column(0).to_numpy()


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
    final = root / PARTS_DIR / name
    if final.exists() or any(Path(b["file"]).name == name for b in manifest["batches"]):
        raise FileExistsError(
            f"corpus {root}: {PARTS_DIR}/{name} already exists; choose another file_name"
        )
    final.parent.mkdir(exist_ok=True)
    return final
