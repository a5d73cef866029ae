"""A data file's footer: its row groups, its schema and its identity.

The driver reads the footer of every data file (a few KiB at the file's end,
never the data) to cut the table into batches, one per row group, and to check
each file's columns before any task runs. The footer's bytes also give the
file an identity: the SHA-256 of the footer with the file's size. A file
rewritten in place (same name, other rows) gets another identity, hence other
batch keys, so a resumed fit does not take the memo of its old rows for its
new ones.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lsdask.errors import DataError, one_line
from lsdask.io.sources import missing_here
from lsdask.io.tables.location import TableLocation
from lsdask.io.tables.place import Place

__all__ = ["MAGIC", "FileFooter", "read_footer"]

#: The 4 bytes that end (and start) every Parquet file.
MAGIC = b"PAR1"
#: The largest footer read (its length is checked before it is read).
MAX_FOOTER_BYTES = 256 << 20


@dataclass(frozen=True)
class FileFooter:
    """What the driver knows of one data file.

    Attributes
    ----------
    file : str
        Path relative to the table's root.
    size : int
        Bytes of the file.
    digest : str
        The first 16 hex digits of the SHA-256 of the footer's bytes.
    row_groups : tuple of (n_rows, bytes)
        Each row group's rows and the uncompressed bytes of the word columns
        in it (the work of its task, relative to the others).
    schema : pyarrow.Schema
    """

    file: str
    size: int
    digest: str
    row_groups: tuple[tuple[int, int], ...]
    schema: pa.Schema

    @property
    def identity(self) -> str:
        """The file's size and footer digest, as a batch key holds them."""
        return f"{self.size}:{self.digest}"


def read_footer(location: TableLocation, file: str, columns: list[str]) -> FileFooter:
    """The footer of ``file`` (below ``location``), the bytes of ``columns`` per
    row group.

    Raises
    ------
    DataError
        The file is missing, is no Parquet file, or its footer cannot be read;
        the message names the table and the file.
    """
    place = Place(location.shown, file)
    try:
        handle = location.open_input(file)
    except FileNotFoundError:
        raise DataError(f"{place}: {missing_here(location.full_path(file))}") from None
    try:
        with handle:
            size = handle.seek(0, 2)
            footer = _footer_bytes(handle, size, place)
            handle.seek(0)
            meta = pq.ParquetFile(handle).metadata
            schema = meta.schema.to_arrow_schema()
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{place}: could not read the Parquet footer ({type(exc).__name__}: "
            f"{one_line(exc, 300)}). The file is probably truncated or not Parquet: rewrite it "
            "or move it out of the table"
        ) from exc
    leaves = [
        i
        for i in range(meta.num_columns)
        if meta.schema.column(i).path.split(".")[0] in set(columns)
    ]
    row_groups = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        nbytes = sum(int(group.column(i).total_uncompressed_size) for i in leaves)
        row_groups.append((int(group.num_rows), nbytes))
    digest = hashlib.sha256(footer).hexdigest()[:16]
    return FileFooter(file, int(size), digest, tuple(row_groups), schema)


def _footer_bytes(handle: Any, size: int, place: Place) -> bytes:
    """The footer's bytes, after checking the magic bytes and the footer's length."""
    if size < 12:
        raise DataError(
            f"{place}: holds {size} bytes, too few for a Parquet file (which ends in "
            f"{MAGIC!r}). Move files that are not Parquet out of the table, or give them a "
            "name that starts with '_' or '.' (ignored, as Spark and pyarrow ignore them)"
        )
    handle.seek(size - 8)
    tail = handle.read(8)
    length, magic = struct.unpack("<I", tail[:4])[0], tail[4:]
    if magic != MAGIC:
        raise DataError(
            f"{place}: is not a Parquet file (it ends in {magic!r}, not {MAGIC!r}). Move files "
            "that are not Parquet out of the table, or give them a name that starts with '_' "
            "or '.' (ignored, as Spark and pyarrow ignore them)"
        )
    if length > min(size - 12, MAX_FOOTER_BYTES):
        raise DataError(
            f"{place}: its footer claims {length:,} bytes of a {size:,}-byte file; the file is "
            "truncated or damaged: rewrite it"
        )
    handle.seek(size - 8 - length)
    return bytes(handle.read(length))
