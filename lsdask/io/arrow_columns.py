"""Columns of a row group read by pyarrow, as the readers of corpora and tables want them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["first_null", "one_array"]


def one_array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One Arrow array for a column: its only chunk as it is (no copy), else the
    chunks joined (an empty array of the column's type where there are none)."""
    if isinstance(column, pa.Array):
        return column
    if column.num_chunks == 1:
        return column.chunk(0)
    if column.num_chunks == 0:
        return pa.array([], type=column.type)
    return pa.concat_arrays(column.chunks)


def first_null(array: pa.Array) -> int:
    """Position of the first null of ``array`` (which holds one)."""
    return int(np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False))[0])
