"""The Parquet corpus store: one row per document, one row group per batch.

- :mod:`~lsdask.io.corpus.store`: :class:`Corpus` (open, write, append, rescan);
- :mod:`~lsdask.io.corpus.batch`: one row group read and checked (:class:`CorpusBatch`);
- :mod:`~lsdask.io.corpus.read` and :mod:`~lsdask.io.corpus.write`: the manifest,
  the rescan of part files, writing row groups;
- :mod:`~lsdask.io.corpus.vocabulary`: vocabulary comparison and digest;
- :mod:`~lsdask.io.corpus.source`: a corpus as a batch source for learning.
"""

from lsdask.io.corpus.source import CorpusRows, corpus_source
from lsdask.io.corpus.store import (
    COLUMNS,
    FORMAT,
    SCHEMA,
    VERSION,
    Corpus,
    CorpusBatch,
    DocBatch,
    check_out_dir,
    read_all,
)

__all__ = [
    "COLUMNS",
    "FORMAT",
    "SCHEMA",
    "VERSION",
    "Corpus",
    "CorpusBatch",
    "CorpusRows",
    "DocBatch",
    "check_out_dir",
    "corpus_source",
    "read_all",
]
