"""A Parquet corpus as a batch source: one batch per row group."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import scipy.sparse as sp

from lsdask.errors import DataError
from lsdask.io.corpus.on_store import StoreCorpus
from lsdask.io.corpus.store import Corpus
from lsdask.io.sources import BatchSource
from lsdask.io.stores import is_store_url


@dataclass(frozen=True)
class CorpusRows:
    """A corpus row group as a scipy CSR matrix of word counts (documents x V).

    Wraps :class:`lsdask.io.corpus.CorpusBatch` (or a store corpus's
    :class:`~lsdask.io.corpus.on_store.StoreCorpusBatch`): the task reads its own
    row group; the CSR matrix shares the arrays read from Parquet.
    """

    batch: Any
    vocab_size: int

    @property
    def where(self) -> str:
        return self.batch.where

    @property
    def key(self) -> str:
        """Identifies the row group across runs, also after files were added or removed."""
        return f"{self.batch.file}#{self.batch.row_group}"

    @property
    def cost(self) -> float:
        """Work of the batch's task, relative to the others: its tokens."""
        return float(self.batch.n_tokens)

    def load(self) -> sp.csr_matrix:
        return self.batch.load().to_csr(self.vocab_size)


def corpus_source(
    corpus: Any, storage_options: Mapping[str, Any] | None = None
) -> tuple[BatchSource, list[str]]:
    """Batches (one per Parquet row group) and vocabulary of a corpus or its
    path: a local folder, or a store URL (``storage_options`` its fsspec options)."""
    if is_store_url(corpus):
        corpus = StoreCorpus.open(corpus, storage_options)
    elif not isinstance(corpus, Corpus | StoreCorpus):
        corpus = Corpus.open(corpus, rescan=True)  # take in added or removed files
    if corpus.n_docs == 0:
        raise DataError(f"corpus {corpus.path}: holds no documents; nothing to learn from")
    V = corpus.vocab_size
    batches = [CorpusRows(b, V) for b in corpus.batches]
    source = BatchSource(
        batches, [b.n_docs for b in corpus.batches], V, f"Parquet corpus {corpus.path}"
    )
    return source, corpus.vocab
