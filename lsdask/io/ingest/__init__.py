"""Ingestion: raw text and bag-of-words files become Parquet corpora.

The modules: :mod:`~lsdask.io.ingest.text_files` (folders, tar archives, JSON
lines), :mod:`~lsdask.io.ingest.table` (CSV and Parquet tables),
:mod:`~lsdask.io.ingest.bow` (LDA-C, UCI), :mod:`~lsdask.io.ingest.options`
(the options they share), :mod:`~lsdask.io.ingest.words` (the tokenizer,
vocabulary selection, encoding), :mod:`~lsdask.io.ingest.stopwords`,
:mod:`~lsdask.io.ingest.mail` (cleaning mail and news posts) and
:mod:`~lsdask.io.ingest.phrases` (joining frequent pairs of words), on the
shared machinery of :mod:`~lsdask.io.ingest.common` and the input files'
opening and errors of :mod:`~lsdask.io.ingest.inputs`.

Raw text (a folder of files or a tar archive, JSON lines, a CSV or Parquet
text column) is read twice, streaming, in bounded memory:

* pass 1 tokenizes every document and counts document frequencies to choose
  the vocabulary (:class:`~lsdask.io.ingest.words.VocabularyBuilder`);
* pass 2 tokenizes again, encodes each document over the vocabulary and
  writes it with :meth:`Corpus.write <lsdask.io.corpus.Corpus.write>`, which
  buffers one row group at a time and renames the finished corpus into place;
* with ``phrases=True``, a pass before them counts the pairs of words to join
  (:class:`~lsdask.io.ingest.phrases.PhraseCounter`).

Bag-of-words files (LDA-C, UCI docword) already have a vocabulary and are
converted in one pass; a second pass is added only when ``min_df``,
``max_df`` or ``max_vocab`` prune the vocabulary.

Besides the arguments of its format (``subset``, ``text_column``,
``encoding``, ...), every function takes the options of
:class:`~lsdask.io.ingest.options.IngestOptions` (``vocab``, ``min_df``,
``max_df``, ``max_vocab``, ``docs_per_row_group``, ``docs_per_file``,
``overwrite``, ``progress``; raw text also ``tokenizer``, ``strip_mail``,
``phrases``, ``phrase_min_count`` and ``phrase_threshold``), as keyword
arguments or as one ``options=`` object.

Every function accepts ``vocab=`` an existing vocabulary (a list of words, a
:class:`~lsdask.io.corpus.Corpus`, or a corpus path) to *impose*, as when new
documents arrive for retraining: words outside it are dropped and counted,
pass 1 is skipped, and the counts are reported in the returned summary, in
``manifest["ingest"]`` and in an INFO log line. A document left without words
is still written (empty lists) and counted in ``n_empty_docs``.

Every function returns an :class:`~lsdask.io.ingest.common.IngestSummary`
(``path``, ``n_docs``, ``n_tokens``, ``vocab_size``, ``n_batches``,
``n_empty_docs``, ``oov_tokens``, ``oov_types``, ``vocab_imposed``,
``n_skipped_files``), read as attributes or as a mapping.
"""

from __future__ import annotations

from lsdask.io.ingest.bow import import_ldac, import_uci
from lsdask.io.ingest.common import MAX_NAMES_IN_MANIFEST as MAX_NAMES_IN_MANIFEST
from lsdask.io.ingest.common import IngestSummary
from lsdask.io.ingest.options import IngestOptions, TextIngestOptions
from lsdask.io.ingest.options import PathLike as PathLike
from lsdask.io.ingest.options import VocabArg as VocabArg
from lsdask.io.ingest.table import ingest_table
from lsdask.io.ingest.text_files import ingest_jsonl, ingest_text_folder

__all__ = [
    "IngestOptions",
    "IngestSummary",
    "TextIngestOptions",
    "import_ldac",
    "import_uci",
    "ingest_jsonl",
    "ingest_table",
    "ingest_text_folder",
]
