"""A Delta Lake table, read in place through the ``deltalake`` package.

The table's log (read by ``deltalake``, an optional extra: ``pip install
lsdask[delta]``) says which Parquet files make up a version; their rows are
read as any Parquet table's, one batch per row group, each task opening its
own file. A data file's name is never reused in a Delta table, so a batch's
key is the file's path with its row group: retraining on a newer version
keeps the memo of the files still in it, takes in the files it added and
drops those it removed (an ``OPTIMIZE`` that rewrites files is a removal and
an addition).

Two features of the Delta protocol change what a data file's rows mean, and
are refused rather than misread: deletion vectors (rows deleted without
rewriting their file) and column mapping (columns renamed in the log only).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from lsdask.errors import DataError
from lsdask.io.tables.location import TableLocation
from lsdask.io.tables.table import DataFile, TableOptions

__all__ = ["DeltaTable"]


def _deltalake() -> Any:
    try:
        import deltalake
    except ImportError as exc:
        raise ImportError(
            "reading a Delta table needs the package 'deltalake', which is not installed: "
            "pip install 'lsdask[delta]' (or pip install deltalake)"
        ) from exc
    return deltalake


@dataclass(frozen=True)
class DeltaTable(TableOptions):
    """A Delta Lake table, one document per row.

    Parameters
    ----------
    path : str or os.PathLike
        The table's root: a local folder or a URL (``s3://bucket/table``, ...).
    version : int or None
        The table version to read; None: the current one.
    delta_storage_options : dict or None
        Options of ``deltalake`` for reading the log (its own keys, e.g.
        ``AWS_ENDPOINT_URL``; see the deltalake documentation). The data files
        are read through fsspec with ``storage_options``, as a
        :class:`~lsdask.io.tables.parquet.ParquetTable`'s.
    **options
        How rows are read as documents: see
        :class:`~lsdask.io.tables.table.TableOptions`.

    Examples
    --------
    >>> table = DeltaTable("/data/reviews", text="body", min_df=5)  # doctest: +SKIP
    >>> source, vocabulary = table.source()  # doctest: +SKIP
    >>> lda = lsdask.LDA(50, checkpoint_dir="ck", resume=True)  # doctest: +SKIP
    >>> lda.fit(source, vocabulary=vocabulary)  # doctest: +SKIP
    """

    path: str | os.PathLike[str]
    version: int | None = None
    delta_storage_options: dict[str, str] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.version is not None and (
            not isinstance(self.version, int) or isinstance(self.version, bool) or self.version < 0
        ):
            raise ValueError(
                f"version must be a table version (an int >= 0) or None for the current one; "
                f"got {self.version!r}"
            )

    @property
    def root(self) -> str:
        return os.fspath(self.path)

    def open_log(self, location: TableLocation) -> Any:
        """The ``deltalake.DeltaTable`` of the version asked for."""
        deltalake = _deltalake()
        where = location.resolve()
        uri = where.root if where.is_local else location.url
        try:
            return deltalake.DeltaTable(
                uri, version=self.version, storage_options=self.delta_storage_options
            )
        except Exception as exc:  # deltalake's errors have no common public base
            if type(exc).__name__ == "TableNotFoundError":
                raise FileNotFoundError(
                    f"Delta table {location.shown}: no table there (no _delta_log/ with a "
                    f"version{'' if self.version is None else ' ' + str(self.version)})"
                ) from exc
            raise DataError(
                f"Delta table {location.shown}: deltalake cannot read its log "
                f"({type(exc).__name__}: {' '.join(str(exc).split())[:300]})"
            ) from exc

    def data_files(self, location: TableLocation) -> tuple[list[DataFile], str]:
        import pyarrow as pa

        log = self.open_log(location)
        _refuse_column_mapping(log, location)
        actions = pa.table(log.get_add_actions(flatten=True))
        paths = actions.column("path").to_pylist()
        sizes = actions.column("size_bytes").to_pylist()
        _refuse_deletion_vectors(log, location)
        files = []
        for raw, size in zip(paths, sizes, strict=True):
            rel = unquote(raw)  # the log holds paths URL-encoded
            if "://" in rel or rel.startswith("/"):
                raise DataError(
                    f"Delta table {location.shown}: the data file {raw!r} lies outside the table's "
                    "folder (a shallow clone?); lsdask reads only files below the table's root"
                )
            files.append(DataFile(rel, int(size), named_once=True))
        if not files:
            raise DataError(
                f"Delta table {location.shown}: version {log.version()} holds no data files; "
                "nothing to learn from"
            )
        description = f"Delta table {location.shown} version {log.version()} ({len(files)} files)"
        return sorted(files), description


def _refuse_column_mapping(log: Any, location: TableLocation) -> None:
    mode = log.metadata().configuration.get("delta.columnMapping.mode", "none")
    if mode not in (None, "none"):
        raise DataError(
            f"Delta table {location.shown}: uses column mapping (mode {mode!r}): its data files "
            "name the columns otherwise than its schema, which lsdask does not translate. "
            "Write a copy without column mapping"
        )


def _refuse_deletion_vectors(log: Any, location: TableLocation) -> None:
    import pyarrow as pa

    features = log.protocol().reader_features or []
    if "deletionVectors" not in features:
        return
    has = pa.table(log.deletion_vectors().read_all())
    if has.num_rows:
        first = has.column("filepath")[0].as_py()
        raise DataError(
            f"Delta table {location.shown}: {has.num_rows} data files have rows deleted by a "
            f"deletion vector ({first} first), which lsdask does not apply. Rewrite them "
            "(REORG TABLE ... APPLY (PURGE), or OPTIMIZE) before fitting"
        )
