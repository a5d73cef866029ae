"""A Parquet dataset that another tool wrote, read in place.

A folder (or a store prefix) of Parquet files, as pyarrow, Spark, DuckDB or
Polars write them: hive-partitioned (``key=value/`` folders) or not. Every
file below the root is a data file, except those with a path component that
starts with ``_`` or ``.`` (``_SUCCESS``, ``_committed_*``, ``.crc`` files,
``_temporary/``), which Spark and pyarrow ignore too. Partition values are not
read: the words come from the columns the table options name.

A Delta table's folder is refused here: it holds files the table has removed,
which only its log tells apart; read it with :class:`~lsdask.io.tables.delta.DeltaTable`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lsdask.errors import DataError
from lsdask.io.tables.location import TableLocation
from lsdask.io.tables.table import DataFile, TableOptions

__all__ = ["ParquetTable", "is_data_file"]


def is_data_file(rel: str) -> bool:
    """Whether the file ``rel`` (relative to the root) is a data file: no part of
    its path starts with ``_`` or ``.``."""
    return not any(part.startswith(("_", ".")) for part in rel.split("/"))


@dataclass(frozen=True)
class ParquetTable(TableOptions):
    """A folder or store prefix of Parquet files, one document per row.

    Parameters
    ----------
    path : str or os.PathLike
        The table's root: a local folder, or a URL (``s3://bucket/table``,
        ``gs://...``, ``memory://...``, ``file://...``) of a file system that
        fsspec knows (its package installed here and on the Dask workers).
    **options
        How rows are read as documents (``tokens``, ``counts``, ``text``,
        ``vocabulary``, ``storage_options``, ...): see
        :class:`~lsdask.io.tables.table.TableOptions`.

    Examples
    --------
    >>> table = ParquetTable("s3://bucket/docs", tokens="token_ids",
    ...                      vocabulary="s3://bucket/vocab.txt")  # doctest: +SKIP
    >>> source, vocabulary = table.source()  # doctest: +SKIP
    >>> lsdask.LDA(50).fit(source, vocabulary=vocabulary)  # doctest: +SKIP

    ``source()`` lists the files anew each time: a fit resumed from its
    checkpoint takes in files added since as new batches and drops removed
    ones (a batch's key is the file's path, size and footer digest with the
    row group).
    """

    path: str | os.PathLike[str]

    @property
    def root(self) -> str:
        return os.fspath(self.path)

    def data_files(self, location: TableLocation) -> tuple[list[DataFile], str]:
        listed = location.list_files()
        if any(rel.split("/")[0] == "_delta_log" for rel, _ in listed):
            raise DataError(
                f"table {location.shown}: is a Delta table (it holds _delta_log/); its folder "
                "also holds files the table removed. Read it with lsdask.DeltaTable (lsdask "
                "fit: --delta)"
            )
        files = [DataFile(rel, size) for rel, size in listed if is_data_file(rel)]
        if not files:
            raise DataError(
                f"table {location.shown}: holds no data files ({len(listed)} files, all with a "
                "name that starts with '_' or '.', which are skipped)"
            )
        return files, f"Parquet table {location.shown} ({len(files)} files)"
