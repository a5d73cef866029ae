"""Reading ``.npz`` files that lsdask wrote, trusting nothing in them.

A saved model's ``arrays.npz``, a memo file, a checkpoint's ``init.npz`` or
an ESVI or SVI-Gibbs payload may be damaged or crafted. :func:`read_npz` opens
the file through :mod:`lsdask.io.guarded` (a regular file below its folder,
reached without links) and checks the archive and every member's ``.npy``
header before anything is allocated, refusing with a ValueError that names
the file and the array:

- a member that is compressed (lsdask writes its archives uncompressed, so a
  member never holds more bytes than it occupies in the file), that claims
  more bytes than the file holds, that overlaps another, or whose name repeats:
  together these bound what is allocated by the size of the file;
- a dtype that is not a real number or a bool (complex, strings, objects,
  structured records), or a Fortran-ordered or big-endian layout lsdask never
  writes;
- a shape beyond what the caller allows (``shapes``: the largest shape or the
  most entries of each named member, from the model's sizes), or a total beyond
  ``max_bytes``;
- a shape whose bytes differ from what the member holds;

and pickles are never loaded. Each array is read into a buffer of the size its
header declares and no further. :func:`check_values` then checks the values:
finite, and where asked at least a bound.
"""

from __future__ import annotations

import itertools
import math
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import IO

import numpy as np

from lsdask.io import guarded

#: the dtype kinds lsdask writes: float, signed and unsigned int, bool
_KINDS = "fiub"
#: the widest item lsdask writes (float64, int64)
_MAX_ITEMSIZE = 8
#: bytes read at a time from a member
_CHUNK = 1 << 22

#: a member's bound: the largest shape (as many dimensions, each at most this)
#: or the most entries (any shape)
Bound = tuple[int, ...] | int


def read_npz(
    file: str | os.PathLike[str],
    where: str,
    *,
    root: str | os.PathLike[str] | None = None,
    shapes: Mapping[str, Bound] | None = None,
    max_bytes: int | None = None,
) -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` file ``file``, checked (see the module
    docstring); ``where`` starts every error message. Raises ValueError
    (:class:`lsdask.io.guarded.UnsafePath` for a link or special file),
    FileNotFoundError where the file is missing.

    ``root`` is the folder the file was handed in (a model or checkpoint
    folder; default: the file's own folder): no step below it may be a link.
    ``shapes`` bounds named members (a member not named may hold no more than
    it occupies in the file, as every member does); ``max_bytes`` bounds the
    bytes of all arrays together (default: the file's size).
    """
    path = Path(file)
    top = Path(root) if root is not None else path.parent
    rel = path if root is not None else Path(path.name)
    with guarded.open_read(top, rel) as fh:
        size = os.fstat(fh.fileno()).st_size
        try:
            archive = zipfile.ZipFile(fh)
        except (OSError, zipfile.BadZipFile, ValueError, EOFError) as exc:
            raise ValueError(
                f"{where} cannot be read ({type(exc).__name__}: {exc}); the file is corrupt"
            ) from exc
        with archive:
            infos = archive.infolist()
            budget = size if max_bytes is None else min(size, max_bytes)
            _check_archive(infos, size, budget, where)
            out: dict[str, np.ndarray] = {}
            for info in infos:
                name = _name(info)
                bound = None if shapes is None else shapes.get(name)
                try:
                    with archive.open(info) as member:
                        out[name] = _read_member(member, info.file_size, bound, where, name)
                except ValueError:
                    raise
                except (OSError, EOFError, zipfile.BadZipFile, RuntimeError) as exc:
                    raise ValueError(
                        f"{where}: array {name!r} cannot be read ({type(exc).__name__}: {exc}); "
                        "the file is corrupt"
                    ) from exc
    return out


def _name(info: zipfile.ZipInfo) -> str:
    return info.filename[:-4] if info.filename.endswith(".npy") else info.filename


def _check_archive(infos: list[zipfile.ZipInfo], size: int, budget: int, where: str) -> None:
    """Refuse an archive whose members could make a reader allocate more than the
    file holds: compressed, past the file's end, overlapping, or repeated."""
    seen: set[str] = set()
    total = 0
    for info in infos:
        name = _name(info)
        if name in seen:
            raise ValueError(f"{where} holds the array {name!r} twice; the file is damaged")
        seen.add(name)
        if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
            raise ValueError(
                f"{where}: array {name!r} is compressed ({info.compress_size:,} bytes said to "
                f"hold {info.file_size:,}); lsdask writes its .npz files uncompressed, so the "
                "file is not lsdask's or was rewritten. Restore it from a copy"
            )
        if info.header_offset + info.compress_size > size:
            raise ValueError(
                f"{where}: array {name!r} claims {info.file_size:,} bytes at offset "
                f"{info.header_offset:,}, past the end of the file ({size:,} bytes); the file "
                "is damaged"
            )
        total += info.file_size
    if total > budget:
        raise ValueError(
            f"{where}: its arrays claim {total:,} bytes in all, more than the {budget:,} it may "
            "hold; the file is damaged"
        )
    # a member's local header (30 bytes and its name, at least) and data
    spans = sorted(
        (i.header_offset, i.header_offset + 30 + len(i.orig_filename) + i.compress_size, _name(i))
        for i in infos
    )
    for (_, end, first), (start, _, second) in itertools.pairwise(spans):
        if start < end:
            raise ValueError(
                f"{where}: arrays {first!r} and {second!r} overlap in the file; the file is "
                "crafted or damaged"
            )


def _within(shape: tuple[int, ...], bound: Bound) -> bool:
    if isinstance(bound, int):
        return math.prod(shape) <= bound
    return len(shape) == len(bound) and all(n <= m for n, m in zip(shape, bound, strict=True))


def _read_member(
    member: IO[bytes], size: int, bound: Bound | None, file_where: str, name: str
) -> np.ndarray:
    where = f"{file_where}: array {name!r}"
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
    if fortran or dtype.byteorder == ">" or dtype.itemsize > _MAX_ITEMSIZE:
        raise ValueError(f"{where} has a layout lsdask does not write ({dtype}, fortran={fortran})")
    if bound is not None and not _within(shape, bound):
        wanted = f"at most {bound:,} entries" if isinstance(bound, int) else f"{bound} at most"
        raise ValueError(
            f"{file_where}: {name} has shape {shape}, expected {wanted} (the model's sizes: "
            "a file of another model, or a damaged one); refused before reading it"
        )
    header = member.tell()
    declared = math.prod(shape) * dtype.itemsize
    if declared != size - header:
        raise ValueError(
            f"{where} declares shape {shape} ({declared:,} bytes) but holds {size - header:,} "
            "bytes; the file is damaged"
        )
    buffer = np.empty(declared, dtype=np.uint8)
    view, filled = memoryview(buffer), 0
    while filled < declared:
        chunk = member.read(min(_CHUNK, declared - filled))
        if not chunk:
            raise ValueError(f"{where} is cut short; the file is damaged")
        view[filled : filled + len(chunk)] = chunk
        filled += len(chunk)
    if member.read(1):
        raise ValueError(f"{where} holds more bytes than its shape; the file is damaged")
    return buffer.view(dtype).reshape(shape)


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
