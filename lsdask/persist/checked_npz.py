"""Reading ``.npz`` files that lsdask wrote, trusting nothing in them.

A saved model's ``arrays.npz``, a memo file or a checkpoint's ``init.npz`` may
be damaged or crafted. :func:`read_npz` reads each member's ``.npy`` header
first and refuses, naming the file and the array, before anything is
allocated:

- a dtype that is not a real number or a bool (complex, strings, objects,
  structured records), or a Fortran-ordered or big-endian layout lsdask never
  writes;
- a shape whose bytes differ from what the member holds (a header that claims
  more data than the file has would make ``numpy`` allocate it);

and pickles are never loaded. :func:`check_values` then checks the values:
finite, and where asked at least a bound.
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

#: the dtype kinds lsdask writes: float, signed and unsigned int, bool
_KINDS = "fiub"


def read_npz(file: Path, where: str) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` file ``file``, checked (see the module
    docstring); ``where`` starts every error message. Raises ValueError."""
    try:
        archive = zipfile.ZipFile(file)
    except (OSError, zipfile.BadZipFile, ValueError) as exc:
        raise ValueError(
            f"{where} cannot be read ({type(exc).__name__}: {exc}); the file is corrupt"
        ) from exc
    out: dict[str, np.ndarray] = {}
    with archive:
        for info in archive.infolist():
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            try:
                with archive.open(info) as member:
                    out[name] = _read_member(member, info.file_size, f"{where}: array {name!r}")
            except ValueError:
                raise
            except (OSError, EOFError, zipfile.BadZipFile, RuntimeError) as exc:
                raise ValueError(
                    f"{where}: array {name!r} cannot be read ({type(exc).__name__}: {exc}); "
                    "the file is corrupt"
                ) from exc
    return out


def _read_member(member: Any, size: int, where: str) -> np.ndarray:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(member)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(member)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(member)
        else:
            raise ValueError(f"format version {version}")
    except ValueError as exc:
        raise ValueError(f"{where} is not a valid .npy member ({exc})") from exc
    if dtype.kind not in _KINDS or dtype.hasobject or dtype.fields is not None:
        raise ValueError(f"{where} holds values of type {dtype}; expected real numbers")
    if fortran or dtype.byteorder == ">":
        raise ValueError(f"{where} has a layout lsdask does not write ({dtype}, fortran={fortran})")
    header = member.tell()
    declared = math.prod(shape) * dtype.itemsize
    if declared != size - header:
        raise ValueError(
            f"{where} declares shape {shape} ({declared:,} bytes) but holds {size - header:,} "
            "bytes; the file is damaged"
        )
    data = member.read(declared)
    if len(data) != declared:
        raise ValueError(f"{where} is cut short; the file is damaged")
    return np.frombuffer(data, dtype=dtype).reshape(shape).copy()


def check_values(
    where: str,
    name: str,
    values: np.ndarray,
    *,
    low: float | None = None,
    high: float | None = None,
) -> np.ndarray:
    """``values`` as float64 if every one is finite and within ``[low, high]``
    (where given), else a ValueError naming the array, the first bad index and value."""
    arr = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(arr)
    if low is not None:
        bad |= arr < low
    if high is not None:
        bad |= arr > high
    if bad.any():
        index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), arr.shape))
        wanted = (
            "finite"
            + (f", >= {low}" if low is not None else "")
            + (f", <= {high}" if high is not None else "")
        )
        raise ValueError(
            f"{where}: {name}{list(index)} is {float(arr[index])!r} ({int(bad.sum())} bad values); "
            f"expected {wanted} values: the file is damaged"
        )
    return arr
