"""Small Arrow helpers for reading columns of tables that other tools wrote.

A row group read by pyarrow gives one chunked column per name; the word
readers (:mod:`lsdask.io.tables.token_ids`, :mod:`lsdask.io.tables.text`) want
one array, its rows as offsets and values, and the row of the first null. They
live here so that both readers (and their errors) see columns the same way.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from lsdask.io.arrow_columns import first_null, one_array

__all__ = ["first_null", "is_list", "list_parts", "one_array", "type_name"]


def is_list(kind: pa.DataType) -> bool:
    """A variable-length list type (``list<...>`` or ``large_list<...>``)."""
    return bool(pa.types.is_list(kind) or pa.types.is_large_list(kind))


def list_parts(array: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """The rows of a list array (without nulls) as ``(indptr, values)``: row ``i``
    holds ``values[indptr[i]:indptr[i + 1]]``; ``indptr`` starts at 0 (int64)
    and ``values`` is the slice of the child array the rows use, also where the
    array is itself a slice of a longer one."""
    offsets = array.offsets.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    start, stop = int(offsets[0]), int(offsets[-1])
    return offsets - start, array.values.slice(start, stop - start)


def type_name(kind: pa.DataType) -> str:
    """An Arrow type as a reader of the error sees it (``list<item: int32>`` -> ``list<int32>``)."""
    if is_list(kind):
        outer = "large_list" if pa.types.is_large_list(kind) else "list"
        return f"{outer}<{type_name(kind.value_type)}>"
    return str(kind)
