"""Ingesting one text column of a CSV or Parquet table: one row, one document.

The public function :func:`ingest_table` (re-exported by
:mod:`lsdask.io.ingest`) and the streaming CSV and Parquet readers behind it.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Unpack

import pyarrow as pa
import pyarrow.parquet as pq

from lsdask.errors import DataError
from lsdask.io import guarded
from lsdask.io.ingest.common import IngestSummary, _Doc, _ingest_texts, _TextSource, document_id
from lsdask.io.ingest.inputs import (
    check_line_encoding,
    check_out_of_input,
    existing_file,
    not_text_error,
    numbered_lines,
    open_input,
)
from lsdask.io.ingest.options import (
    PathLike,
    TextIngestKeywords,
    TextIngestOptions,
    option_keywords,
)


def _missing_column(path: Path, column: str, names: list[str], option: str) -> DataError:
    return DataError(
        f"{path}: no column {column!r}; the columns are {names}. Pass {option} one of them."
    )


def _missing_csv_column(
    path: Path, column: str, names: list[str], delimiter: str, option: str
) -> DataError:
    error = _missing_column(path, column, names, option)
    if len(names) == 1 and any(c in names[0] for c in ",;\t|" if c != delimiter):
        return DataError(
            f"{error} The header is one field: is the delimiter another than {delimiter!r}? "
            "Pass it: delimiter= (lsdask: --delimiter)."
        )
    return error


def _text_lines(f: Any, path: Path, encoding: str) -> Iterator[str]:
    """The lines of a binary file as text, or a DataError naming the first line
    that is not text in ``encoding``."""
    for lineno, raw in numbered_lines(f, path):
        try:
            line = raw.decode(encoding)
        except UnicodeDecodeError as exc:
            raise not_text_error(f"{path}, line {lineno}", encoding, exc, raw) from None
        # a byte order mark (Excel's UTF-8 CSV) goes before the csv reader sees the
        # header: a quoted first column name would keep its quotes otherwise
        yield line.removeprefix("\ufeff") if lineno == 1 else line


def _csv_docs(
    path: Path, column: str, delimiter: str, encoding: str, id_column: str | None
) -> Iterator[_Doc]:
    old_limit = csv.field_size_limit()
    csv.field_size_limit(max(old_limit, 2**31 - 1))  # long texts exceed the 128 KiB default
    try:
        with open_input(path) as f:
            # strict: a quote left open is an error, not the rest of the file in one field
            reader = csv.reader(_text_lines(f, path, encoding), delimiter=delimiter, strict=True)
            try:
                header = next(reader, None)
                if header is None:
                    raise DataError(f"{path}: the file is empty; expected a header row")
                if column not in header:
                    raise _missing_csv_column(path, column, header, delimiter, _TEXT_OPTION)
                if id_column is not None and id_column not in header:
                    raise _missing_csv_column(path, id_column, header, delimiter, _ID_OPTION)
                j = header.index(column)
                i = None if id_column is None else header.index(id_column)
                while True:
                    first = reader.line_num + 1  # the line the record starts on
                    row = next(reader, None)
                    if row is None:
                        break
                    if not row:
                        continue
                    if len(row) > len(header):
                        raise DataError(
                            f"{path}, line {reader.line_num}: the row has {len(row)} fields but "
                            f"the header has {len(header)}. A field holding the delimiter "
                            f'{delimiter!r} must be quoted ("...", a quote inside doubled); '
                            "fix the row or the file's writer"
                        )
                    if len(row) <= max(j, i or 0):
                        raise DataError(
                            f"{path}, line {reader.line_num}: the row has {len(row)} fields; "
                            f"the header has {len(header)}"
                        )
                    name = None
                    if i is not None:
                        name = document_id(row[i], f"{path}, line {reader.line_num}", id_column)
                    yield name, row[j]
            except csv.Error as exc:
                last = reader.line_num
                span = f"line {first}" if first >= last else f"lines {first}-{last}"
                raise DataError(
                    f"{path}, {span}: malformed CSV ({exc}); a quoted field must end with a "
                    'quote, and a quote inside it is doubled ("")'
                ) from exc
    finally:
        csv.field_size_limit(old_limit)


def _parquet_parts(folder: Path) -> list[Path]:
    """The Parquet files of a dataset folder (as Spark, Dask or pyarrow write
    them, partition subfolders included), in sorted order; names starting with
    "." or "_" (``_SUCCESS``, ``_metadata``, checksums) are skipped. A link or a
    special file anywhere in the folder is refused (:func:`lsdask.io.guarded.check_tree`)."""
    found = []
    for name in guarded.check_tree(folder):
        p = folder / name
        if p.suffix in (".parquet", ".pq") and not any(
            part.startswith((".", "_")) for part in p.relative_to(folder).parts
        ):
            found.append(p)
    return found


def _is_text_type(kind: pa.DataType) -> bool:
    """Strings, large strings, string views, or a dictionary of strings (pandas'
    categorical)."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    is_view = getattr(pa.types, "is_string_view", lambda _: False)
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or is_view(kind)


def _parquet_files(path: Path) -> list[Path]:
    """A Parquet file, or the files of a dataset folder (listed once per ingest)."""
    if not path.is_dir():
        return [path]
    files = _parquet_parts(path)
    if not files:
        raise DataError(f"{path}: a folder without Parquet files (*.parquet)")
    return files


def _parquet_docs(
    files: list[Path], column: str, batch_rows: int, id_column: str | None
) -> Iterator[_Doc]:
    """The documents of every file in turn."""
    for file in files:
        yield from _parquet_file_docs(file, column, batch_rows, id_column)


def _parquet_file_docs(
    path: Path, column: str, batch_rows: int, id_column: str | None
) -> Iterator[_Doc]:
    try:
        with pq.ParquetFile(path) as f:
            names = f.schema_arrow.names
            if column not in names:
                raise _missing_column(path, column, names, _TEXT_OPTION)
            kind = f.schema_arrow.field(column).type
            if not _is_text_type(kind):
                raise DataError(f"{path}: column {column!r} has type {kind}; expected strings")
            columns = [column]
            if id_column is not None:
                if id_column not in names:
                    raise _missing_column(path, id_column, names, _ID_OPTION)
                columns.append(id_column)
                id_type = f.schema_arrow.field(id_column).type
            row = 0
            for batch in f.iter_batches(batch_size=batch_rows, columns=columns):
                texts = batch.column(0).to_pylist()
                ids = batch.column(1).to_pylist() if id_column else [None] * len(texts)
                for text, value in zip(texts, ids, strict=True):
                    name = None
                    if id_column is not None:
                        where = f"{path}, row {row + 1} (column {id_column!r}: {id_type})"
                        name = document_id(value, where, id_column)
                    row += 1
                    yield name, text or ""
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{path}: could not read the Parquet file ({type(exc).__name__}: {exc})"
        ) from exc


_TEXT_OPTION = "text_column= (lsdask: --column)"
_ID_OPTION = "id_column= (lsdask: --id)"

_TABLE_FORMATS = {".csv": ("csv", ","), ".tsv": ("csv", "\t"), ".tab": ("csv", "\t")}
_TABLE_FORMATS.update({".parquet": ("parquet", ""), ".pq": ("parquet", "")})


def _table_format(path: Path, fmt: str | None, delimiter: str | None) -> tuple[str, str]:
    suffix = Path(path.name.removesuffix(".gz")).suffix.lower()
    guess = _TABLE_FORMATS.get(suffix)
    if guess is None and path.is_dir():
        guess = ("parquet", "")  # a dataset folder written by Spark, Dask or pyarrow
    if fmt is None:
        if guess is None:
            raise ValueError(
                f"cannot tell the format of {str(path)!r} from its suffix {suffix!r}; pass "
                "format='csv' or format='parquet' (lsdask: --format csv|parquet)"
            )
        fmt = guess[0]
    if fmt not in ("csv", "parquet"):
        raise ValueError(f"format must be 'csv', 'parquet' or None; got {fmt!r}")
    default_delimiter = guess[1] if guess is not None and guess[0] == "csv" else ","
    return fmt, delimiter or default_delimiter


@option_keywords(TextIngestOptions)
def ingest_table(
    path: PathLike,
    out_dir: PathLike,
    text_column: str,
    *,
    id_column: str | None = None,
    format: str | None = None,
    delimiter: str | None = None,
    encoding: str = "utf-8",
    batch_rows: int = 10_000,
    options: TextIngestOptions | None = None,
    **keywords: Unpack[TextIngestKeywords],
) -> IngestSummary:
    """Ingest one text column of a CSV or Parquet table: one row, one document.

    Parameters
    ----------
    path : str or os.PathLike
        A CSV file (``.csv``, ``.tsv``, optionally ``.gz``; read with the
        :mod:`csv` module, streaming, with a header row; a row with more
        fields than the header, or a quote left open, is an error naming the
        line), a Parquet file (``.parquet``; read ``batch_rows`` rows at a
        time), or a folder of Parquet files (a dataset as Spark, Dask or
        pyarrow write it: its ``*.parquet`` files in sorted order, names
        starting with "." or "_" skipped).
    out_dir : str or os.PathLike
    text_column : str
        The column holding the text; empty or null cells give empty documents.
    id_column : str, optional
        A column of distinct integer ids, stored as each document's
        ``doc_id`` (so the weights ``lsdask transform`` writes join back to
        the rows); default the row number, 0, 1, 2, ...
    format : {"csv", "parquet"} or None
        Default: from the suffix.
    delimiter : str, optional
        CSV field delimiter; default ``","`` (tab for ``.tsv``).
    encoding : str, default "utf-8"
        CSV text encoding; bytes that are not text in it stop the ingest with
        an error naming the file and line (nothing is written). A byte order
        mark before the header is dropped. UTF-16 and UTF-32 are refused (the
        file is split into lines before decoding): convert such files to UTF-8.
    batch_rows : int, default 10000
        Rows per Parquet read.
    options, **keywords
        As in :func:`~lsdask.io.ingest.ingest_text_folder`.

    Raises
    ------
    DataError
        If the column is missing (naming the file and the available columns),
        is not a string column, or a CSV row is malformed (naming the line).
    """
    options = TextIngestOptions.merge(options, keywords, ingest_table)
    p = existing_file(path, "path")
    fmt, sep = _table_format(p, format, delimiter)
    if fmt == "csv":
        check_line_encoding(encoding)
        if p.is_dir():
            raise DataError(
                f"{p}: a folder; a CSV input is one file (a folder of Parquet files "
                "is read as one table)"
            )

        def docs() -> Iterator[_Doc]:
            return _csv_docs(p, text_column, sep, encoding, id_column)
    else:
        if p.is_dir():
            check_out_of_input(out_dir, p, "table")  # its parts would be read as input
        files = _parquet_files(p)

        def docs() -> Iterator[_Doc]:
            return _parquet_docs(files, text_column, batch_rows, id_column)

    info = {"format": fmt, "source": str(p), "text_column": text_column, "id_column": id_column}
    source = _TextSource(docs, info, f"{fmt} table {p}", ids=id_column is not None)
    return _ingest_texts(source, out_dir, options)
