"""Documents as a stream of groups, for learners that draw minibatches of documents.

A :class:`DocumentStream` lists *groups* of documents (the row groups of a
Parquet corpus, or one in-memory matrix), each under a key that stays the
same across runs; :meth:`DocumentStream.refresh` takes in the groups added
since the last look (new Parquet parts appended to a corpus while a fit runs),
and :meth:`DocumentStream.load` reads any documents, named by ``(group,
row)``, as a CSR matrix of counts with each document's id. Row groups read are
kept in a small per-process cache, since a minibatch drawn at random across
groups reads a few documents of many groups.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse as sp

from lsdask import config
from lsdask.io import guarded

logger = logging.getLogger(__name__)

_CACHE: OrderedDict[Any, tuple[sp.csr_matrix, np.ndarray]] = OrderedDict()
_CACHE_BYTES = [0]
_CACHE_LOCK = threading.Lock()


def _cached_rows(batch: Any, vocab_size: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """A corpus row group (:class:`lsdask.io.corpus.CorpusBatch`) as CSR counts and
    doc ids, from this process's cache of the row groups read last."""
    with _CACHE_LOCK:
        hit = _CACHE.get(batch)
        if hit is not None:
            _CACHE.move_to_end(batch)
            return hit
    docs = batch.load()
    rows = docs.to_csr(vocab_size)
    entry = (rows, np.asarray(docs.doc_ids, dtype=np.int64))
    size = rows.data.nbytes + rows.indices.nbytes + rows.indptr.nbytes
    with _CACHE_LOCK:
        _CACHE[batch] = entry
        _CACHE_BYTES[0] += size
        while _CACHE_BYTES[0] > config.STREAM_CACHE_BYTES and len(_CACHE) > 1:
            _, (old, _ids) = _CACHE.popitem(last=False)
            _CACHE_BYTES[0] -= old.data.nbytes + old.indices.nbytes + old.indptr.nbytes
    return entry


class DocumentStream:
    """Groups of documents, growing where the source is a corpus that grows.

    Parameters
    ----------
    X : path of a Parquet corpus, a :class:`lsdask.io.corpus.Corpus`, or a
        scipy sparse matrix / numpy array of word counts (documents x V)
    """

    def __init__(self, X: Any) -> None:
        self._path: str | None = None
        self._groups: list[Any] = []  # loaders (CorpusBatch) or one in-memory matrix
        self._keys: list[str] = []
        self._sizes: list[int] = []
        self._stamp: tuple[int, int] | None = None
        if isinstance(X, str | os.PathLike) or type(X).__name__ == "Corpus":
            from lsdask.io.corpus.store import Corpus

            if isinstance(X, Corpus):
                corpus = X
                corpus.verify()  # each part against its digest, once per process
            else:
                corpus = Corpus.open(X, rescan=True)  # verifies the parts
            self._path = corpus.path
            self.vocab: list[str] | None = corpus.vocab
            self.n_features = corpus.vocab_size
            self.description = f"Parquet corpus {corpus.path}"
            self._take(corpus)
        else:
            rows = sp.csr_matrix(X) if not sp.issparse(X) else X.tocsr()
            self.vocab = None
            self.n_features = int(rows.shape[1])
            self.description = f"a {rows.shape[0]} x {rows.shape[1]} matrix"
            self._groups, self._keys, self._sizes = [rows], ["matrix"], [int(rows.shape[0])]

    # ---- groups

    @property
    def keys(self) -> list[str]:
        """Every known group's key, in order of arrival."""
        return list(self._keys)

    @property
    def sizes(self) -> list[int]:
        """Documents of every known group."""
        return list(self._sizes)

    @property
    def n_docs(self) -> int:
        return int(sum(self._sizes))

    def _manifest_stamp(self) -> tuple[int, int] | None:
        from lsdask.io.corpus.store import MANIFEST_NAME

        assert self._path is not None
        try:
            st = guarded.lstat(self._path, MANIFEST_NAME)
        except OSError:
            return None
        return None if st is None else (st.st_mtime_ns, st.st_size)

    def _take(self, corpus: Any) -> int:
        """Append the corpus's row groups not known yet; returns their documents."""
        self._stamp = self._manifest_stamp()
        known = set(self._keys)
        added = 0
        for b in corpus.batches:
            key = f"{b.file}#{b.row_group}"
            if key not in known:
                self._groups.append(b)
                self._keys.append(key)
                self._sizes.append(int(b.n_docs))
                added += int(b.n_docs)
        return added

    def refresh(self) -> int:
        """Take in the row groups appended to the corpus since the last look (the
        manifest changed); returns the number of new documents. Groups that left
        the corpus stay known (a fit does not drop documents under way)."""
        if self._path is None or self._manifest_stamp() == self._stamp:
            return 0
        from lsdask.io.corpus.store import Corpus

        corpus = Corpus.open(self._path)
        corpus.verify()  # the parts not checked yet in this process: the new ones
        added = self._take(corpus)
        if added:
            logger.info("%s: %d new documents picked up", self.description, added)
        return added

    # ---- documents

    def load(self, refs: np.ndarray) -> tuple[sp.csr_matrix, np.ndarray]:
        """Documents ``refs`` ((n, 2) of (group, row)), in that order: CSR counts and
        their ids (a corpus's doc_id; a matrix's row)."""
        return self.part(refs, self.description).load()

    def part(self, refs: np.ndarray, where: str) -> DocumentRefs:
        """Documents ``refs`` ((n, 2) of (group, row)) as a small picklable
        :class:`DocumentRefs` that reads them where it is loaded: a corpus row
        group travels as its location, only an in-memory matrix's rows as rows."""
        refs = np.asarray(refs, dtype=np.int64).reshape(-1, 2)
        pieces: list[tuple[Any, np.ndarray]] = []
        order = []
        for g in np.unique(refs[:, 0]):
            at = np.flatnonzero(refs[:, 0] == g)
            rows_here = refs[at, 1]
            group = self._groups[int(g)]
            if sp.issparse(group):
                pieces.append((group[rows_here], rows_here))
            else:
                pieces.append((group, rows_here))
            order.append(at)
        where_at = np.concatenate(order) if order else np.zeros(0, np.int64)
        back = np.empty_like(where_at)
        back[where_at] = np.arange(where_at.size)
        return DocumentRefs(tuple(pieces), back, self.n_features, where)


@dataclass(frozen=True)
class DocumentRefs:
    """Some documents of a stream, read where :meth:`load` runs (a Dask worker reads
    its own row groups; a worker's cache keeps the row groups it read last).

    ``pieces`` holds, per group, a corpus row group's loader
    (:class:`lsdask.io.corpus.CorpusBatch`) or an in-memory matrix's rows
    already taken, with the rows wanted of it (their document ids for a
    matrix); ``back`` puts the pieces' rows in the order asked.
    """

    pieces: tuple[tuple[Any, np.ndarray], ...]
    back: np.ndarray
    n_features: int
    where: str
    #: the documents once loaded in this process (never pickled: a task elsewhere
    #: reads its own), so that the tasks of one step run here read them once
    _loaded: Any = field(default=None, compare=False, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_loaded"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        for key, value in state.items():
            object.__setattr__(self, key, value)

    @property
    def n_docs(self) -> int:
        return int(self.back.size)

    def load(self) -> tuple[sp.csr_matrix, np.ndarray]:
        """The documents as CSR counts and their ids, in the order asked."""
        if self._loaded is None:
            object.__setattr__(self, "_loaded", self._read())
        return self._loaded

    def _read(self) -> tuple[sp.csr_matrix, np.ndarray]:
        if not self.pieces:
            return sp.csr_matrix((0, self.n_features)), np.zeros(0, np.int64)
        parts, ids = [], []
        for group, rows_here in self.pieces:
            if sp.issparse(group):  # a matrix's rows, taken in the driver; ids = rows
                parts.append(group)
                ids.append(rows_here)
            else:
                rows, doc_ids = _cached_rows(group, self.n_features)
                parts.append(rows[rows_here])
                ids.append(doc_ids[rows_here])
        rows = sp.vstack(parts, format="csr")[self.back]
        return rows, np.concatenate(ids)[self.back]
