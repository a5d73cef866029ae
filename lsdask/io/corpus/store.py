"""The Parquet corpus store: documents as bags of words, one row group per batch.

A corpus is a directory::

    corpus/
        manifest.json     # format, version, sizes, the batch list, ingest info
        vocab.txt         # UTF-8, one word per line; line i is word id i
        parts/
            part-00000.parquet
            part-00001.parquet
            ...

Every Parquet file holds one row per document with the schema
``doc_id int64, word_ids list<int32>, counts list<float32>`` (the two lists
of a document have the same length and its word ids are distinct), written in
row groups of a fixed number of documents. One row group is one *memoized
batch* (lsparse paper, Sec. 3.4): a :class:`CorpusBatch` names it by file and
row-group index, is small and picklable, and its :meth:`CorpusBatch.load`
runs inside the batch's task and reads just that row group into a
:class:`DocBatch` of CSR arrays that are views of the Arrow buffers (no copy).

The manifest looks like::

    {"format": "lsdask-corpus", "version": 1, "vocab_size": V, "n_docs": D,
     "n_tokens": N, "docs_per_row_group": 1000,
     "batches": [{"file": "parts/part-00000.parquet", "row_group": 0,
                  "n_docs": 1000, "n_tokens": 183731}, ...],
     "ingest": {...}}

Writes are atomic: :meth:`Corpus.write` builds the whole directory under a
temporary sibling name and renames it into place at the end;
:meth:`Corpus.append` holds the corpus's lock, writes a new Parquet file under
a temporary name, records the append as pending in the manifest, renames the
file into ``parts/`` and commits the manifest (each manifest written to a
temporary file and renamed): see :mod:`lsdask.io.corpus.transactions`. New
Parquet files dropped into ``parts/`` by another job become new batches with
``Corpus.open(path, rescan=True)``; the part of an append that has not
committed never does.

Nothing in a corpus folder is trusted: every file is opened, written, renamed
and deleted through :mod:`lsdask.io.guarded` (a link or special file anywhere in
the folder is refused, ``manifest.json`` and ``vocab.txt`` are read up to a size
limit, ``pending`` entries are checked before they name a file). Part files are
written with Parquet page checksums, verified on every read, and each batch
entry records its file's size and BLAKE2b digest (``file_bytes``,
``file_blake2b``), checked once per part per process by every command that reads
the corpus (:meth:`Corpus.verify`).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from lsdask.errors import DataError
from lsdask.io import guarded
from lsdask.io.atomic import recover_output, remove_tree, replace_dir, temp_sibling
from lsdask.io.corpus.batch import COLUMNS, SCHEMA, CorpusBatch, DocBatch
from lsdask.io.corpus.read import (
    _check_files,
    _check_new_part,
    _doc_id_range,
    _doc_ids,
    _next_doc_id,
    _next_part_name,
    _read_manifest,
    _read_vocab,
    _rescan,
    _save_rescanned,
    verify_parts,
)
from lsdask.io.corpus.transactions import (
    begin_append,
    commit_append,
    corpus_lock,
    recover_appends,
)
from lsdask.io.corpus.vocabulary import vocabulary_difference, vocabulary_digest
from lsdask.io.corpus.write import (
    DEFAULT_DOCS_PER_FILE,
    DEFAULT_DOCS_PER_ROW_GROUP,
    FORMAT,
    MANIFEST_NAME,
    PARTS_DIR,
    VERSION,
    VOCAB_NAME,
    _check_positive,
    _check_target,
    _check_vocab,
    _doc_groups,
    _make_manifest,
    _write_groups,
    _write_json_atomic,
    _write_vocab,
    check_out_dir,
    new_txn,
)
from lsdask.io.faults import fault_point
from lsdask.io.locks import try_lock

logger = logging.getLogger(__name__)

__all__ = [
    "COLUMNS",
    "FORMAT",
    "SCHEMA",
    "VERSION",
    "Corpus",
    "CorpusBatch",
    "DocBatch",
    "check_out_dir",
    "read_all",
]


class Corpus:
    """A Parquet corpus on disk: vocabulary, manifest and batches.

    Use :meth:`open` to read one and :meth:`write` to make one; the
    ingestion functions of :mod:`lsdask.io.ingest` build them from raw text
    and bag-of-words files.

    Attributes
    ----------
    path : str
        Absolute path of the corpus directory.
    vocab : list of str
        Word ``i`` of the vocabulary is ``vocab[i]``.
    batches : list of CorpusBatch
        One per row group, in manifest order.
    """

    def __init__(self, path: str | os.PathLike[str], vocab: list[str], manifest: dict[str, Any]):
        self._path = os.path.abspath(os.fspath(path))
        self._vocab = vocab
        self._set_manifest(manifest)

    def _set_manifest(self, manifest: dict[str, Any]) -> None:
        self._manifest = manifest
        self._batches = [
            CorpusBatch(
                self._path,
                b["file"],
                int(b["row_group"]),
                int(b["n_docs"]),
                float(b["n_tokens"]),
                len(self._vocab),
            )
            for b in manifest["batches"]
        ]

    # ---- properties

    @property
    def path(self) -> str:
        return self._path

    @property
    def vocab(self) -> list[str]:
        return self._vocab

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    @property
    def n_docs(self) -> int:
        return int(sum(b.n_docs for b in self._batches))

    @property
    def n_tokens(self) -> float:
        return float(sum(b.n_tokens for b in self._batches))

    @property
    def batches(self) -> list[CorpusBatch]:
        return list(self._batches)

    @property
    def docs_per_row_group(self) -> int:
        return int(self._manifest.get("docs_per_row_group", DEFAULT_DOCS_PER_ROW_GROUP))

    @property
    def ingest_info(self) -> dict[str, Any]:
        """The free-form ``manifest["ingest"]`` (source, tokenizer, OOV counts, ...)."""
        return dict(self._manifest.get("ingest") or {})

    @property
    def manifest(self) -> dict[str, Any]:
        """A copy of the manifest as read (or last written)."""
        return json.loads(json.dumps(self._manifest))

    def __repr__(self) -> str:
        return (
            f"Corpus({self._path!r}, n_docs={self.n_docs}, vocab_size={self.vocab_size}, "
            f"n_tokens={self.n_tokens:g}, n_batches={len(self._batches)})"
        )

    # ---- open

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, rescan: bool = False) -> Corpus:
        """Open a corpus directory.

        Parameters
        ----------
        path : str or os.PathLike
            The corpus directory (holding ``manifest.json``, ``vocab.txt``, ``parts/``).
        rescan : bool, default False
            Rebuild the batch list from the Parquet footers in ``parts/``: files
            not in the manifest become new batches (after the listed ones, by
            name), files that are gone are dropped (a warning names them and the
            documents that leave; the manifest keeps them under
            ``removed_parts``), files whose row groups changed are re-read. The
            rebuilt manifest is saved (atomically) when the directory is writable
            and no append changed it meanwhile. The part file of an append that
            has not committed is left out; one whose append was stopped (its
            process is gone: the corpus is not locked) is first moved to
            ``quarantine/``, with a warning.

        Raises
        ------
        FileNotFoundError
            If ``path`` does not exist.
        DataError
            If it is not a corpus, its manifest or vocabulary is invalid, or
            (without ``rescan``) the manifest lists files that are gone.
        """
        root = Path(path)
        recover_output(root)  # a writer killed while it swapped the whole corpus
        if not root.exists():
            raise FileNotFoundError(
                f"no corpus at {str(root)!r}: the path does not exist. Make one with "
                "`lsdask ingest` (in Python lsdask.io.ingest, e.g. ingest_text_folder, "
                "import_ldac, or Corpus.write)."
            )
        if not root.is_dir():
            raise DataError(
                f"{root}: not an lsdask corpus (a corpus is a directory holding "
                f"{MANIFEST_NAME}, {VOCAB_NAME} and {PARTS_DIR}/)"
            )
        manifest = _read_manifest(root)
        if rescan:
            with try_lock(root, "corpus") as unlocked:
                if unlocked:  # no append under way: finish for stopped ones
                    manifest = _recovered(root)
            fault_point("corpus.open.read")
        vocab = _read_vocab(root / VOCAB_NAME, root)
        if len(vocab) != manifest["vocab_size"]:
            raise DataError(
                f"corpus {root}: {VOCAB_NAME} has {len(vocab)} words but the manifest says "
                f"vocab_size {manifest['vocab_size']}; the two do not belong together"
            )
        if rescan:
            rescanned = _rescan(root, manifest, vocabulary_digest(vocab))
            if rescanned["batches"] != manifest["batches"]:
                _save_if_unchanged(root, manifest, rescanned)
            manifest = rescanned
            verify_parts(root, manifest["batches"])  # a reader's open: the parts it reads
        else:
            _check_files(root, manifest)
        return cls(root, vocab, manifest)

    def verify(self) -> None:
        """Check every part file against the size and digest its manifest recorded
        (once per part per process; see :func:`lsdask.io.corpus.read.verify_parts`).
        ``open(..., rescan=True)``, what every command that reads a corpus does,
        calls it; parts written before digests were kept are checked by their
        Parquet page checksums only, when read.

        Raises
        ------
        DataError
            Naming a part whose content changed, the digests and the fix.
        """
        verify_parts(Path(self._path), self._manifest["batches"])

    # ---- write

    @classmethod
    def write(
        cls,
        out_dir: str | os.PathLike[str],
        docs: Any,
        vocab: Sequence[str],
        *,
        docs_per_row_group: int = DEFAULT_DOCS_PER_ROW_GROUP,
        docs_per_file: int = DEFAULT_DOCS_PER_FILE,
        ingest_info: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
        overwrite: bool = False,
    ) -> Corpus:
        """Write a corpus, streaming, atomically.

        Parameters
        ----------
        out_dir : str or os.PathLike
            The corpus directory to create.
        docs : iterable of (doc_id, word_ids, counts), or scipy sparse matrix
            Documents in order. In an iterable, ``word_ids`` and ``counts`` are
            1-D arrays of the same length with distinct ids in ``[0, V)``;
            only one row group of documents is buffered at a time, so a
            generator can stream any number of them. Row ``i`` of a sparse
            matrix (``V`` columns) is document ``doc_id = i``; repeated
            entries are summed. Ids are sorted, zero counts dropped and counts
            stored as float32.
        vocab : sequence of str
            The ``V`` distinct words (no line breaks).
        docs_per_row_group : int, default 1000
            Documents per row group, i.e. per batch (the last may be smaller).
        docs_per_file : int, default 100000
            At most this many documents per Parquet file (whole row groups).
        ingest_info : dict, or callable returning a dict, optional
            Stored as ``manifest["ingest"]``; a callable is called after the
            last document was written (so it can report counts gathered
            while streaming).
        overwrite : bool, default False
            Replace an existing corpus at ``out_dir`` (only once the new one is
            complete). A non-empty folder that is not a corpus is never replaced.

        Returns
        -------
        Corpus

        Raises
        ------
        FileExistsError
            If ``out_dir`` exists and ``overwrite`` is false, or it is a
            file or a folder that is not a corpus.
        DataError
            For an invalid document (naming its position and doc_id).
        ValueError
            For invalid parameters or vocabulary.

        Notes
        -----
        Everything is written to a temporary sibling directory
        (``.<name>.tmp-<pid>-<hex>``) that is renamed to ``out_dir`` at the end.
        On any error it is removed and ``out_dir`` is left as it was.
        """
        rows = _check_positive("docs_per_row_group", docs_per_row_group)
        per_file = _check_positive("docs_per_file", docs_per_file)
        if per_file < rows:
            raise ValueError(
                f"docs_per_file ({per_file}) must be at least docs_per_row_group ({rows}); "
                "a file holds whole row groups"
            )
        if per_file % rows:
            logger.warning(
                "docs_per_file (%d) is not a multiple of docs_per_row_group (%d): a file holds "
                "whole row groups, so %d documents (%d row groups) each",
                per_file, rows, per_file // rows * rows, per_file // rows,
            )  # fmt: skip
        words = _check_vocab(vocab)
        out = Path(os.path.abspath(os.fspath(out_dir)))
        _check_target(out, overwrite)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_sibling(out)
        try:
            guarded.makedirs(tmp.parent, f"{tmp.name}/{PARTS_DIR}")
            _write_vocab(tmp, words)
            entries = _write_groups(
                _doc_groups(docs, len(words), rows, 0),
                tmp,
                lambda i: f"part-{i:05d}.parquet",
                per_file // rows,
                vocabulary_digest(words),
                new_txn(),
            )
            info = ingest_info() if callable(ingest_info) else ingest_info
            manifest = _make_manifest(len(words), entries, rows, info)
            _write_json_atomic(tmp / MANIFEST_NAME, manifest)
            _check_target(out, overwrite)
            replace_dir(tmp, out)
        except BaseException:
            remove_tree(tmp)
            raise
        corpus = cls(out, words, manifest)
        logger.info(
            "wrote corpus %s: %d documents, %g tokens, %d words, %d batches",
            corpus.path,
            corpus.n_docs,
            corpus.n_tokens,
            corpus.vocab_size,
            len(entries),
        )
        return corpus

    # ---- append

    def append(
        self,
        docs: Any,
        file_name: str | None = None,
        *,
        wait: float | None = None,
        lock: bool | None = None,
        origin: Mapping[str, Any] | None = None,
    ) -> list[CorpusBatch]:
        """Add documents as one new Parquet file (new batches), atomically.

        Parameters
        ----------
        docs : iterable of (doc_id, word_ids, counts), or scipy sparse matrix
            As in :meth:`write`, over this corpus's vocabulary; rows of a
            sparse matrix get ``doc_id = m + 1 + i`` where m is the largest doc_id
            in the corpus (so ids stay unique after files were removed).
        file_name : str, optional
            Name of the new file in ``parts/`` (must end in ``.parquet``);
            default the next free ``part-NNNNN.parquet``.
        wait : float, optional
            Seconds to wait for the corpus's lock while another process
            appends (default: refuse at once, or what
            :func:`lsdask.io.locks.lock_settings` set).
        lock : bool, optional
            False appends without the lock, on a file system without locks
            where no other process writes the corpus (default: lock, or what
            :func:`lsdask.io.locks.lock_settings` set).
        origin : mapping, optional
            Recorded (JSON) in each new batch's manifest entry under ``"origin"``
            in the commit itself: what made the append (``lsdask ingest
            --append-to`` records its command's key, so that a rerun of a command
            killed after its commit knows it is done).

        Returns
        -------
        list of CorpusBatch
            The new batches (also appended to :attr:`batches`); empty if
            ``docs`` was empty, in which case nothing is written.

        Raises
        ------
        lsdask.errors.LockError
            If another process holds the corpus (past ``wait``), naming it.

        Notes
        -----
        The append holds the corpus's lock throughout. The file, stamped with
        a new transaction id, is written under a hidden temporary name; the
        manifest, re-read from disk, records the append as pending; the file
        is renamed into ``parts/``; then one atomic write of the manifest adds
        its batches and drops the pending entry (the commit). A part whose
        append stopped before its commit is never read, and the next append
        moves it to ``quarantine/``.
        """
        root = Path(self._path)
        with corpus_lock(root, wait=wait, enabled=lock):
            manifest = recover_appends(root, _read_manifest(root))
            name = file_name if file_name is not None else _next_part_name(root, manifest)
            _check_new_part(root, manifest, name)
            fault_point("corpus.append.locked")
            tmp = f"{PARTS_DIR}/{temp_sibling(root / PARTS_DIR / name).name}"
            final = f"{PARTS_DIR}/{name}"
            rows = int(manifest.get("docs_per_row_group", DEFAULT_DOCS_PER_ROW_GROUP))
            txn = new_txn()
            try:
                # only a matrix's rows are numbered here (every part's footer is read for it)
                first = _next_doc_id(root, manifest) if sp.issparse(docs) else 0
                groups = _doc_groups(docs, self.vocab_size, rows, first)
                entries = _write_groups(
                    groups, root, lambda i: tmp.split("/")[-1], None,
                    vocabulary_digest(self.vocab), txn,
                )  # fmt: skip
                if not entries:
                    logger.info("append to corpus %s: no documents, nothing written", root)
                    return []
                manifest = begin_append(root, manifest, txn, final)
                guarded.replace(root, tmp, final)
            finally:
                guarded.unlink(root, tmp)
            try:
                fault_point("corpus.append.renamed")
                for e in entries:
                    e["file"] = final
                    if origin:
                        e["origin"] = dict(origin)
                new = commit_append(root, manifest, txn, entries)
            except BaseException:  # not committed: the part goes (its entry stays pending)
                guarded.unlink(root, final)
                raise
        self._set_manifest(new)
        logger.info(
            "appended %s to corpus %s: %d documents in %d batches",
            name,
            root,
            sum(e["n_docs"] for e in entries),
            len(entries),
        )
        return self._batches[-len(entries) :]

    def append_corpus(
        self,
        other: Corpus,
        *,
        keep_ids: bool = False,
        file_name: str | None = None,
        wait: float | None = None,
        lock: bool | None = None,
        origin: Mapping[str, Any] | None = None,
    ) -> list[CorpusBatch]:
        """Add the documents of ``other``, a corpus over this one's vocabulary
        (ingested with ``vocab=`` this corpus), as one new part file, row group
        by row group (bounded memory). They are numbered after this corpus's
        largest doc_id, so that ids stay unique, unless ``keep_ids`` (ids of
        their own, e.g. ingested with ``id_field``). ``wait``, ``lock`` and
        ``origin`` as in :meth:`append`, which this is. Returns the new batches.
        """
        difference = vocabulary_difference(self.vocab, other.vocab)
        if difference is not None:
            raise ValueError(
                f"corpus {other.path} is over another vocabulary than corpus {self.path}: "
                f"{difference}. Ingest its documents with vocab={self.path} (lsdask ingest "
                f"... --append-to {self.path})"
            )
        root = Path(self._path)
        with corpus_lock(root, wait=wait, enabled=lock):  # the doc_ids are chosen under it
            manifest = recover_appends(root, _read_manifest(root))
            if keep_ids:
                _check_ids_are_new(root, manifest, other)
            first = 0 if keep_ids else _next_doc_id(root, manifest)
            other.verify()
            return self.append(
                _documents(other, first, keep_ids), file_name=file_name, wait=wait, lock=lock,
                origin=origin,
            )  # fmt: skip


def _documents(
    other: Corpus, first: int, keep_ids: bool
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """The documents of ``other``, row group by row group, numbered from
    ``first`` unless ``keep_ids``."""
    i = first
    for batch in other.batches:
        rows = batch.load()
        for d in range(rows.n_docs):
            lo, hi = rows.indptr[d], rows.indptr[d + 1]
            doc_id = int(rows.doc_ids[d]) if keep_ids else i
            yield doc_id, rows.word_ids[lo:hi], rows.counts[lo:hi]
            i += 1


def _recovered(root: Path) -> dict[str, Any]:
    """The manifest, after finishing for appends that were stopped (holding the
    corpus's lock); as it is where the corpus cannot be written."""
    manifest = _read_manifest(root)
    try:
        return recover_appends(root, manifest)
    except OSError as exc:
        logger.warning(
            "corpus %s: could not set aside the part of a stopped append (%s); it is left out",
            root, exc,
        )  # fmt: skip
        return manifest


def _save_if_unchanged(root: Path, read: dict[str, Any], rescanned: dict[str, Any]) -> None:
    """Save a rescanned manifest, holding the corpus's lock, unless the manifest
    changed since it was ``read`` (an append committed meanwhile: the rescan is
    used as it is, and the next one saves)."""
    with try_lock(root, "corpus") as unlocked:
        try:
            unchanged = unlocked and _read_manifest(root) == read
        except DataError:
            unchanged = False
        if unchanged:
            _save_rescanned(root, rescanned)
        else:
            logger.info(
                "corpus %s: not saving the rescanned manifest: an append is under way or "
                "committed meanwhile (the next rescan saves it)",
                root,
            )


def _check_ids_are_new(root: Path, manifest: dict[str, Any], other: Corpus) -> None:
    """Refuse documents whose own doc_ids are already in the corpus (the id
    columns are read only for parts whose id range meets theirs)."""
    new = np.concatenate(
        [_doc_ids(Path(other.path), f) for f in sorted({b.file for b in other.batches})]
    )
    if new.size == 0:
        return
    lo, hi = int(new.min()), int(new.max())
    for file in sorted({b["file"] for b in manifest["batches"]}):
        theirs = _doc_id_range(root, file)
        if theirs is None or theirs[1] < lo or hi < theirs[0]:
            continue
        shared = np.intersect1d(new, _doc_ids(root, file))
        if shared.size:
            raise ValueError(
                f"{shared.size} of the documents to append have doc_ids that corpus {root}'s "
                f"{file} already holds (e.g. {int(shared[0])}): doc_ids must stay unique. "
                "Give them ids the corpus does not use, or let them be numbered after its "
                "largest (no id option)"
            )


def read_all(
    corpus: Corpus | str | os.PathLike[str], *, return_doc_ids: bool = False
) -> sp.csr_matrix | tuple[sp.csr_matrix, np.ndarray]:
    """Read a whole (small) corpus into one ``(n_docs, V)`` CSR matrix of float32 counts.

    Rows follow the batch order. With ``return_doc_ids`` also return the
    int64 ``doc_id`` of every row.
    """
    if not isinstance(corpus, Corpus):
        corpus = Corpus.open(corpus)
    corpus.verify()
    loaded = [b.load() for b in corpus.batches]
    if loaded:
        X = sp.vstack([b.to_csr(corpus.vocab_size) for b in loaded], format="csr")
        doc_ids = np.concatenate([b.doc_ids for b in loaded])
    else:
        X = sp.csr_matrix((0, corpus.vocab_size), dtype=np.float32)
        doc_ids = np.empty(0, dtype=np.int64)
    return (X, doc_ids) if return_doc_ids else X
