"""A Parquet corpus in an object store (``s3://``, ``gs://``, ``abfs://``, ``memory://``).

The same documents as a local corpus (one row per document, ``doc_id``,
``word_ids``, ``counts``; one row group per batch), kept the way stores allow
(docs/storage.md, "Object stores"): the vocabulary and the part files are
immutable objects with random names, and each write or append commits a new
version of the manifest through :class:`~lsdask.io.stores.VersionLog`, an
exclusive create. Two appends at once both land, each once: the one that
loses the race for a version number commits again on the winner's version.

Document ids: an append of a sparse matrix writes its rows numbered from 0 and
the commit gives its batches a ``doc_id_offset`` (the corpus's ``next_doc_id``
at that version), so a commit that has to be made again renumbers nothing in
the files. Documents given as ``(doc_id, word_ids, counts)`` keep their ids.

A batch (:class:`StoreCorpusBatch`) carries the store's URL, its options, the
object and the row group; the task that loads it opens the store itself, on
the worker that runs it.
"""

from __future__ import annotations

import hashlib
import logging
import math
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from lsdask.errors import DataError, one_line
from lsdask.io.corpus.batch import COLUMNS, SCHEMA, DocBatch
from lsdask.io.corpus.vocabulary import vocabulary_digest
from lsdask.io.corpus.write import (
    DEFAULT_DOCS_PER_FILE,
    DEFAULT_DOCS_PER_ROW_GROUP,
    FORMAT,
    PARQUET_WRITE_OPTIONS,
    TXN_KEY,
    VERSION,
    VOCAB_DIGEST_KEY,
    _as_number,
    _check_positive,
    _check_vocab,
    _doc_groups,
    _group_table,
    _now,
)
from lsdask.io.stores import Location, Version, VersionLog, open_location

logger = logging.getLogger(__name__)

#: the most bytes of a vocabulary object read
MAX_VOCAB_BYTES = 1 << 30


@lru_cache(maxsize=16)
def _location(url: str, options_key: str) -> Location:
    """One :class:`Location` per store and options in a process (a worker
    loading many batches opens the file system once)."""
    import json

    return open_location(url, json.loads(options_key))


def _options_key(options: Mapping[str, Any]) -> str:
    import json

    return json.dumps(dict(options), sort_keys=True)


@dataclass(frozen=True, eq=False)
class StoreCorpusBatch:
    """One row group of a part object: a memoized batch, loaded inside its task."""

    url: str
    file: str
    row_group: int
    n_docs: int
    n_tokens: float
    vocab_size: int | None
    doc_id_offset: int = 0
    storage_options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"corpus {self.url}, object {self.file}, row group {self.row_group}"

    def load(self) -> DocBatch:
        """Read this row group (page checksums verified), check it against the
        manifest, and number its documents."""
        location = _location(self.url, _options_key(self.storage_options))
        path = location.path(*self.file.split("/"))
        try:
            with location.fs.open(path, "rb") as raw:
                with pq.ParquetFile(raw, page_checksum_verification=True) as f:
                    if self.row_group >= f.num_row_groups:
                        raise DataError(
                            f"{self.where}: the object has {f.num_row_groups} row groups; the "
                            "manifest names another object's"
                        )
                    table = f.read_row_group(self.row_group, columns=list(COLUMNS))
        except FileNotFoundError:
            raise DataError(
                f"{self.where}: the object is missing from the store (removed by hand, or "
                "by a clean-up that did not know this version); the corpus version that "
                "names it cannot be read"
            ) from None
        except (pa.ArrowException, OSError) as exc:
            raise DataError(
                f"{self.where}: could not read the Parquet object ({one_line(exc, 300)})"
            ) from exc
        if table.num_rows != self.n_docs:
            raise DataError(
                f"{self.where}: holds {table.num_rows} documents; the manifest says {self.n_docs}"
            )
        batch = DocBatch.from_arrow(table, self.where, self.vocab_size)
        if not math.isclose(batch.n_tokens, self.n_tokens, rel_tol=1e-6, abs_tol=1e-6):
            raise DataError(
                f"{self.where}: holds {batch.n_tokens:g} tokens; the manifest says "
                f"{self.n_tokens:g}"
            )
        if self.doc_id_offset:
            batch = replace(batch, doc_ids=batch.doc_ids + np.int64(self.doc_id_offset))
        return batch


class StoreCorpus:
    """A corpus at a store URL, as of one committed version (see the module)."""

    def __init__(self, log: VersionLog, version: Version, vocab: list[str]) -> None:
        self._log = log
        self._version = version
        self._vocab = vocab
        self._batches = [self._batch(e) for e in version.content["batches"]]

    # -- the corpus as read ------------------------------------------------------

    @property
    def path(self) -> str:
        return self._log.location.url

    @property
    def version(self) -> int:
        """The committed version this object reads."""
        return self._version.number

    @property
    def manifest(self) -> dict[str, Any]:
        return dict(self._version.content)

    @property
    def vocab(self) -> list[str]:
        return list(self._vocab)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    @property
    def n_docs(self) -> int:
        return int(self._version.content["n_docs"])

    @property
    def n_tokens(self) -> float:
        return float(self._version.content["n_tokens"])

    @property
    def docs_per_row_group(self) -> int:
        return int(self._version.content["docs_per_row_group"])

    @property
    def batches(self) -> list[StoreCorpusBatch]:
        return list(self._batches)

    @property
    def ingest_info(self) -> dict[str, Any]:
        info = self._version.content.get("ingest")
        return dict(info) if isinstance(info, dict) else {}

    def __repr__(self) -> str:
        return (
            f"StoreCorpus({self.path!r}, version {self.version}, {self.n_docs} documents, "
            f"{len(self._batches)} batches, V={self.vocab_size})"
        )

    @classmethod
    def open(
        cls,
        url: str,
        storage_options: Mapping[str, Any] | None = None,
        *,
        version: int | None = None,
    ) -> StoreCorpus:
        """The corpus at ``url``: its newest version, or ``version``."""
        log = VersionLog(open_location(url, storage_options, parameter="corpus"))
        found = log.latest() if version is None else log.read(version)
        if found is None:
            raise DataError(
                f"corpus {log.location.url}: no corpus there (no committed version). Write "
                "one with `lsdask ingest ... --out URL` or StoreCorpus.write"
            )
        return cls(log, found, _read_vocab(log, found))

    # -- writing -----------------------------------------------------------------

    @classmethod
    def write(
        cls,
        url: str,
        docs: Any,
        vocab: Sequence[str],
        *,
        storage_options: Mapping[str, Any] | None = None,
        docs_per_row_group: int = DEFAULT_DOCS_PER_ROW_GROUP,
        docs_per_file: int = DEFAULT_DOCS_PER_FILE,
        ingest_info: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
        overwrite: bool = False,
        single_writer: bool = False,
    ) -> StoreCorpus:
        """Write a new corpus at ``url`` (as :meth:`lsdask.io.corpus.Corpus.write`):
        its objects first, then version 1 (or, with ``overwrite``, the next
        version, which replaces what the corpus held)."""
        words = _check_vocab(vocab)
        rows = _check_positive("docs_per_row_group", docs_per_row_group)
        per_file = _check_positive("docs_per_file", docs_per_file)
        log = VersionLog(
            open_location(url, storage_options, parameter="out"), single_writer=single_writer
        )
        parent = log.newest_to_replace("a corpus", overwrite)
        digest = vocabulary_digest(words)
        vocab_object = log.put_object("".join(f"{w}\n" for w in words).encode(), ".vocab")
        groups = _doc_groups(docs, len(words), rows, 0)
        entries = _put_parts(log, groups, max(1, per_file // rows), digest)
        next_id = _next_id_after(entries, 0)
        content = {
            "format": FORMAT,
            "version": VERSION,
            "vocab": vocab_object,
            "vocab_size": len(words),
            "vocab_sha256": digest,
            "docs_per_row_group": rows,
            "created": _now(),
            "ingest": dict((ingest_info() if callable(ingest_info) else ingest_info) or {}),
            "next_doc_id": next_id,
            **_totals(entries),
            "batches": entries,
        }
        committed = log.commit(content, parent)
        logger.info(
            "wrote corpus %s, version %d: %d documents in %d batches",
            log.location.url, committed.number, content["n_docs"], len(entries),
        )  # fmt: skip
        return cls(log, committed, words)

    @classmethod
    def check_target(
        cls, url: str, overwrite: bool = False, storage_options: Mapping[str, Any] | None = None
    ) -> None:
        """Refuse (FileExistsError) to write a corpus at ``url`` where one is and
        not ``overwrite``, before any work is done."""
        VersionLog(open_location(url, storage_options, parameter="out")).newest_to_replace(
            "a corpus", overwrite
        )

    def append(
        self,
        docs: Any,
        *,
        origin: Mapping[str, Any] | None = None,
        renumber: bool | None = None,
    ) -> list[Any]:
        """Add documents as new part objects and commit them as the next version
        (made again on another writer's version where that one won the race).
        ``renumber``: number the documents after the corpus's (default for a
        sparse matrix) rather than keep the ids given (default for
        ``(doc_id, word_ids, counts)`` items). The new batches; empty where
        ``docs`` holds none."""
        digest = vocabulary_digest(self._vocab)
        relative = sp.issparse(docs) if renumber is None else bool(renumber)
        groups = _doc_groups(docs, self.vocab_size, self.docs_per_row_group, 0)
        if relative and not sp.issparse(docs):
            groups = _numbered_from_zero(groups)
        per_file = max(1, DEFAULT_DOCS_PER_FILE // self.docs_per_row_group)
        entries = _put_parts(self._log, groups, per_file, digest)
        if not entries:
            return []
        for e in entries:
            if origin:
                e["origin"] = dict(origin)

        def change(parent: Version | None) -> dict[str, Any]:
            if parent is None or parent.content.get("vocab_sha256") != digest:
                raise DataError(
                    f"corpus {self.path}: changed under this append (its newest version has "
                    "another vocabulary, or none); nothing was appended. Reopen the corpus "
                    "and append again"
                )
            first = int(parent.content["next_doc_id"])
            placed = [{**e, "doc_id_offset": first if relative else 0} for e in entries]
            content = dict(parent.content)
            content["batches"] = [*parent.content["batches"], *placed]
            content["next_doc_id"] = _next_id_after(placed, first)
            content.update(_totals(content["batches"]))
            return content

        committed = self._log.update(change)
        self._version = committed
        self._batches = [self._batch(e) for e in committed.content["batches"]]
        logger.info(
            "appended to corpus %s, version %d: %d documents in %d batches",
            self.path, committed.number, sum(e["n_docs"] for e in entries), len(entries),
        )  # fmt: skip
        return self._batches[-len(entries) :]

    def _batch(self, entry: Mapping[str, Any]) -> StoreCorpusBatch:
        location = self._log.location
        return StoreCorpusBatch(
            url=location.url,
            file=str(entry["file"]),
            row_group=int(entry["row_group"]),
            n_docs=int(entry["n_docs"]),
            n_tokens=float(entry["n_tokens"]),
            vocab_size=self.vocab_size,
            doc_id_offset=int(entry.get("doc_id_offset", 0)),
            storage_options=dict(location.storage_options),
        )


def _numbered_from_zero(groups: Iterable[DocBatch]) -> Iterable[DocBatch]:
    """The row groups with their documents numbered 0, 1, ... across them."""
    first = 0
    for group in groups:
        yield replace(group, doc_ids=np.arange(first, first + group.n_docs, dtype=np.int64))
        first += group.n_docs


def _put_parts(
    log: VersionLog, groups: Iterable[DocBatch], groups_per_file: int, vocab_digest: str
) -> list[dict[str, Any]]:
    """Write the row groups as new Parquet objects, ``groups_per_file`` each;
    their manifest entries (object, row group, sizes, the object's BLAKE2b)."""
    txn = uuid.uuid4().hex
    schema = SCHEMA.with_metadata({VOCAB_DIGEST_KEY: vocab_digest.encode(), TXN_KEY: txn.encode()})
    entries: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    sink: pa.BufferOutputStream | None = None
    writer: pq.ParquetWriter | None = None

    def flush() -> None:
        nonlocal sink, writer
        if writer is None or sink is None:
            return
        writer.close()
        data = sink.getvalue().to_pybytes()
        name = log.put_object(data, ".parquet")
        blake = hashlib.blake2b(data, digest_size=32).hexdigest()
        for e in pending:
            e.update(file=name, file_bytes=len(data), file_blake2b=blake)
        entries.extend(pending)
        pending.clear()
        sink, writer = None, None

    for group in groups:
        if writer is None:
            sink = pa.BufferOutputStream()
            writer = pq.ParquetWriter(sink, schema, **PARQUET_WRITE_OPTIONS)
        writer.write_table(_group_table(group), row_group_size=max(group.n_docs, 1))
        ids = group.doc_ids
        pending.append(
            {
                "row_group": len(pending),
                "n_docs": group.n_docs,
                "n_tokens": _as_number(group.n_tokens),
                "doc_ids": [int(ids.min()), int(ids.max())] if ids.size else None,
                "txn": txn,
            }
        )
        if len(pending) == groups_per_file:
            flush()
    flush()
    return entries


def _next_id_after(entries: list[dict[str, Any]], first: int) -> int:
    """The corpus's next free document id after ``entries`` (at ``first`` or later)."""
    top = first - 1
    for e in entries:
        if e.get("doc_ids"):
            top = max(top, int(e["doc_ids"][1]) + int(e.get("doc_id_offset", 0)))
    return top + 1


def _totals(batches: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "n_docs": int(sum(int(b["n_docs"]) for b in batches)),
        "n_tokens": _as_number(sum(float(b["n_tokens"]) for b in batches)),
    }


def _read_vocab(log: VersionLog, version: Version) -> list[str]:
    """The vocabulary object a version names, checked against its digest."""
    content = version.content
    where = f"corpus {log.location.url}, version {version.number}"
    if content.get("format") != FORMAT or not isinstance(content.get("batches"), list):
        raise DataError(f"{where}: not an {FORMAT} manifest")
    data = log.read_object(str(content.get("vocab")), MAX_VOCAB_BYTES)
    try:
        words = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise DataError(f"{where}: the vocabulary object is not UTF-8 ({exc})") from None
    if words and words[-1] == "":
        words.pop()
    if vocabulary_digest(words) != content.get("vocab_sha256") or len(words) != content.get(
        "vocab_size"
    ):
        raise DataError(
            f"{where}: the vocabulary object does not match the manifest's size and SHA-256"
        )
    return words
