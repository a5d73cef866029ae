"""Tables that other tools write, read in place as batches of documents.

A Parquet dataset (:class:`ParquetTable`: a folder or store prefix of Parquet
files, hive-partitioned or not, as pyarrow, Spark, DuckDB or Polars write
them) or a Delta Lake table (:class:`DeltaTable`, through the optional
``deltalake`` package) is read where it lies, never copied into lsdask's own
corpus store. Documents are rows; their words come from a column of token-id
lists (with a vocabulary file or list) or from a text column (cut into words
by lsdask's tokenizer, with a vocabulary given or built in one pass).

``table.source()`` returns a :class:`~lsdask.io.sources.BatchSource` (one
batch per row group of each data file, each read inside its own task) and the
vocabulary; ``lsdask.LDA(...).fit(table)`` (``lsdask fit --table`` on the
command line) takes the table itself.

Modules, one idea each:

- :mod:`~lsdask.io.tables.location`: where the table lies (local folder or
  fsspec URL), listing and opening its files;
- :mod:`~lsdask.io.tables.footer`: a data file's row groups, schema, identity;
- :mod:`~lsdask.io.tables.batch`: the loader of one row group;
- :mod:`~lsdask.io.tables.token_ids`, :mod:`~lsdask.io.tables.text`: rows
  as word counts, checked;
- :mod:`~lsdask.io.tables.vocabulary`: side files, and the one-pass build;
- :mod:`~lsdask.io.tables.table`: the options every table shares, and the
  batches; :mod:`~lsdask.io.tables.parquet`, :mod:`~lsdask.io.tables.delta`:
  which files are the table's.
"""

from lsdask.io.tables.delta import DeltaTable
from lsdask.io.tables.parquet import ParquetTable
from lsdask.io.tables.table import TableOptions

__all__ = ["DeltaTable", "ParquetTable", "TableOptions"]
