"""One row group of a table's data file: a memoized batch, read inside its task.

:class:`TableRowGroup` is the loader a :class:`~lsdask.io.sources.BatchSource`
over a table hands out: small and picklable, it carries only where its row
group is (the table's :class:`~lsdask.io.tables.location.TableLocation`, the
file, the row group) and how to read its words (the column names, with the
vocabulary's size or, for text, the vocabulary). ``load()`` opens the file in
the task, reads that row group's columns and nothing else, and returns the
documents as a CSR matrix of word counts.

Its ``key`` names the file by its path and identity (size and footer digest,
or for a Delta table its path, which Delta never reuses) with the row group,
so a resumed fit over a grown table keeps the memo of the row groups it
already knows and takes the others as new batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import scipy.sparse as sp

from lsdask.errors import DataError, one_line
from lsdask.io.sources import missing_here
from lsdask.io.tables.location import TableLocation
from lsdask.io.tables.place import Place
from lsdask.io.tables.text import TextColumn
from lsdask.io.tables.token_ids import TokenIdColumns

__all__ = ["TableRowGroup"]


@dataclass(frozen=True)
class TableRowGroup:
    """Row group ``row_group`` of the data file ``file`` of a table.

    Attributes
    ----------
    location : TableLocation
    file : str
        The data file, relative to the table's root.
    identity : str
        What tells this file from another of the same name (its size and
        footer digest), or "" where the name alone does (a Delta table).
    size : int
        Bytes of the file when the table was listed; a task that finds
        another size refuses to read it.
    row_group : int
    first_row : int
        The file's row where the row group starts (for messages).
    n_docs : int
        Rows in the row group, from the footer.
    nbytes : int
        Uncompressed bytes of its word columns, from the footer.
    words : TokenIdColumns or TextColumn
        The columns that hold the words, and how to read them.
    """

    location: TableLocation
    file: str
    identity: str
    size: int
    row_group: int
    first_row: int
    n_docs: int
    nbytes: int
    words: TokenIdColumns | TextColumn

    @property
    def key(self) -> str:
        """Identifies the row group across runs, also after files were added or removed."""
        name = f"{self.file}@{self.identity}" if self.identity else self.file
        return f"{name}#{self.row_group}"

    @property
    def where(self) -> str:
        """Human-readable location, used in error messages."""
        return str(self.place)

    @property
    def place(self) -> Place:
        return Place(self.location.shown, self.file, self.row_group, self.first_row)

    @property
    def cost(self) -> float:
        """Work of the batch's task, relative to the others: its columns' bytes."""
        return float(max(self.nbytes, 1))

    def load(self) -> sp.csr_matrix:
        """The row group's documents as a (rows x V) CSR matrix of word counts.

        Raises
        ------
        DataError
            The file is gone or changed since the table was listed, cannot be
            read, or holds rows that are not documents; the message names the
            file, the row group and, for a bad row, the row.
        """
        return self.words.to_csr(self.read(), self.place)

    def read_texts(self) -> list[str]:
        """The texts of the row group (a table read through a text column)."""
        if not isinstance(self.words, TextColumn):
            raise TypeError("read_texts needs a batch of a text column")
        return self.words.texts(self.read(), self.place)

    def read(self) -> pa.Table:
        """The row group's word columns, as pyarrow reads them (checksums verified)."""
        place = self.place
        try:
            handle = self.location.open_input(self.file)
        except FileNotFoundError:
            raise DataError(
                f"{place}: {missing_here(self.location.full_path(self.file))}. If the file was "
                "removed from the table, fit again: the table is listed anew"
            ) from None
        try:
            with handle:
                size = handle.seek(0, 2)
                handle.seek(0)
                problem = self._changed(size)
                table = None
                if problem is None:
                    f = pq.ParquetFile(handle, page_checksum_verification=True)
                    problem = self._mismatch(f)
                    if problem is None:
                        self.words.check_schema(f.schema_arrow, place)
                        table = f.read_row_group(self.row_group, columns=self.words.columns)
        except DataError:
            raise
        except (pa.ArrowException, OSError) as exc:
            raise DataError(
                f"{place}: could not read the row group ({type(exc).__name__}: "
                f"{one_line(exc, 300)}). The file is probably truncated or damaged: rewrite it"
            ) from exc
        if table is None:
            raise DataError(
                f"{place}: {problem}; the file changed after the table was listed (rewritten "
                "in place?). Fit again: the table is listed anew"
            )
        if table.num_rows != self.n_docs:
            raise DataError(
                f"{place}: holds {table.num_rows} rows but its footer said {self.n_docs}; the "
                "file changed after the table was listed. Fit again"
            )
        return table

    def _changed(self, size: int) -> str | None:
        if size != self.size:
            return f"it holds {size:,} bytes where it held {self.size:,}"
        return None

    def _mismatch(self, f: Any) -> str | None:
        if self.row_group >= f.num_row_groups:
            return f"it has {f.num_row_groups} row groups"
        return None
