"""Where a row of a table lies, said the same way in every error.

A table written by another tool is untrusted input: every error about its
data names the table, the file (relative to the table's root), the row group
and the row, so that whoever reads it can find the bad row with any Parquet
reader (``pyarrow.parquet.ParquetFile(f).read_row_group(g)``, row ``r``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Place"]


@dataclass(frozen=True)
class Place:
    """A file of a table, or one row group of it.

    Attributes
    ----------
    table : str
        The table's root as the user gave it (a folder or a URL).
    file : str
        The data file, relative to the root.
    row_group : int or None
        The row group; None for the file as a whole.
    first_row : int
        The row of the file where the row group starts.
    """

    table: str
    file: str
    row_group: int | None = None
    first_row: int = 0

    def __str__(self) -> str:
        text = f"table {self.table}: file {self.file}"
        return text if self.row_group is None else f"{text}, row group {self.row_group}"

    def row(self, i: int) -> str:
        """Row ``i`` of the row group, also as a row of the whole file."""
        return f"{self}, row {i} (row {self.first_row + i} of the file)"
