"""Opening the input files of an ingest, and the errors that name what went wrong.

The readers of :mod:`lsdask.io.ingest` (:mod:`~lsdask.io.ingest.text_files`,
:mod:`~lsdask.io.ingest.table`, :mod:`~lsdask.io.ingest.bow`) open their files
with :func:`open_input` (``.gz`` decompressed) and read them with
:func:`numbered_lines`, so that a file that cannot be read, or bytes that are
not text in the encoding given, become a :class:`~lsdask.errors.DataError`
naming the file and line and how to fix it.
"""

from __future__ import annotations

import codecs
import gzip
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lsdask import config
from lsdask.errors import DataError
from lsdask.io.ingest.options import PathLike

__all__ = [
    "READ_ERRORS",
    "binary_kind",
    "check_encoding",
    "check_line_encoding",
    "check_out_of_input",
    "existing_file",
    "not_text_error",
    "numbered_lines",
    "open_input",
    "read_error",
]


def existing_file(path: PathLike, what: str) -> Path:
    """``path`` as a Path, or a FileNotFoundError naming the argument ``what``."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what}: {str(p)!r} does not exist")
    return p


def check_out_of_input(out_dir: PathLike, folder: Path, command: str) -> None:
    """Refuse an output inside an input folder: the next ingest of that folder
    would read the corpus's own files as documents."""
    if Path(out_dir).resolve().is_relative_to(folder.resolve()):
        raise ValueError(
            f"out_dir {str(out_dir)!r} is inside the input folder {str(folder)!r}: the next "
            "ingest of that folder would read the corpus's own files as documents. Write "
            f"the corpus outside it (lsdask ingest {command} FOLDER --out ELSEWHERE)"
        )


def check_encoding(encoding: Any) -> str:
    """``encoding`` if Python knows it, else a ValueError naming the parameter."""
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise ValueError(
            f"encoding must name a text encoding such as 'utf-8' or 'latin-1'; got {encoding!r}"
        ) from None
    return encoding


def check_line_encoding(encoding: Any) -> str:
    """``check_encoding`` for files split into lines as bytes before decoding
    (CSV): an encoding whose characters take 2 or 4 bytes is refused."""
    name = codecs.lookup(check_encoding(encoding)).name
    if name.startswith(("utf-16", "utf-32")):
        raise ValueError(
            f"encoding {encoding!r}: CSV files are read line by line, which an encoding of "
            "2 or 4 bytes per character does not allow; convert the file to UTF-8 first "
            f"(e.g. iconv -f {name.upper()} -t UTF-8 in.csv > out.csv)"
        )
    return encoding


def not_text_error(where: str, encoding: str, exc: UnicodeDecodeError, data: bytes) -> DataError:
    """The error for bytes that are not text in ``encoding``, and how to fix it."""
    bad = data[exc.start : exc.start + 4]
    return DataError(
        f"{where}: not {encoding} text (byte {exc.start}: {bad!r}...). If it is text in "
        "another encoding, pass it: encoding='latin-1' (lsdask ingest text|table --encoding "
        "latin-1) for the 20 Newsgroups posts, cp1252 for much Windows text. If it is not "
        "text at all, leave it out (lsdask ingest text --exclude GLOB): a binary file such as "
        "an image is only skipped when its bytes show it (a NUL byte, a known file signature)"
    )


#: File signatures ("magic numbers") of common binary formats, and their names.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"%PDF-", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"PK\x05\x06", "a ZIP archive"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\x7fELF", "an executable"),
)


def binary_kind(data: bytes, encoding: str) -> str | None:
    """What binary data ``data`` is (``"a PNG image"``), or None if it may be text.

    Binary is a known file signature at the start, or, for an encoding other
    than UTF-16 and UTF-32 (whose text holds NUL bytes), a NUL byte in the
    first :data:`~lsdask.config.BINARY_SNIFF_BYTES` bytes: decoding such data
    with a one-byte encoding such as latin-1 would succeed and give garbage.
    """
    for magic, kind in _MAGIC:
        if data.startswith(magic):
            return kind
    wide = codecs.lookup(encoding).name.startswith(("utf-16", "utf-32"))
    if not wide and b"\x00" in data[: config.BINARY_SNIFF_BYTES]:
        return "binary data (NUL bytes)"
    return None


#: what reading an input file to its end can raise besides bad text: a truncated
#: or foreign .gz (EOFError, gzip.BadGzipFile, zlib.error), a folder, no permission
READ_ERRORS = (EOFError, zlib.error, OSError)


def read_error(path: Path, lineno: int | None, exc: BaseException) -> DataError:
    """The error for an input file that cannot be read (to its end), and how to fix it."""
    where = f"{path}, line {lineno}" if lineno else f"{path}"
    if isinstance(exc, IsADirectoryError):
        hint = "it is a folder; pass the file inside it"
    elif isinstance(exc, PermissionError):
        hint = "this user may not read it; fix its permissions"
    elif path.suffix == ".gz":
        hint = (
            "it is probably truncated, or not gzip-compressed despite its .gz name; "
            "download or re-create it (or rename it without .gz if it is plain text)"
        )
    else:
        hint = "it is probably truncated or damaged; download or re-create it"
    return DataError(f"{where}: could not be read ({type(exc).__name__}: {exc}); {hint}")


def open_input(path: Path, encoding: str | None = None):
    """Open an input file (text with strict ``encoding``, else binary), transparently
    decompressing ``.gz``; a folder or an unreadable file is a DataError."""
    try:
        if path.suffix == ".gz":
            return gzip.open(path, "rb" if encoding is None else "rt", encoding=encoding)
        return open(path, "rb") if encoding is None else open(path, encoding=encoding)
    except FileNotFoundError:
        raise
    except READ_ERRORS as exc:
        raise read_error(path, None, exc) from exc


def numbered_lines(
    f: Any, path: Path, start: int = 1, limit: int | None = None
) -> Iterator[tuple[int, Any]]:
    """``enumerate(f, start)``, with a read failure (a truncated .gz, ...) raised as a
    DataError naming the file and the line it could not read, and a line longer than
    ``limit`` (default :data:`lsdask.config.MAX_LINE_BYTES`) refused before it is
    read whole (a binary file, or ``/dev/zero``, would otherwise fill the memory)."""
    most = config.MAX_LINE_BYTES if limit is None else limit
    lineno = start
    while True:
        try:
            line = f.readline(most + 1)
        except READ_ERRORS as exc:
            raise read_error(path, lineno, exc) from exc
        if not line:
            return
        if len(line) > most:
            raise DataError(
                f"{path}, line {lineno}: longer than {most:,} bytes (a binary file, or a record "
                "far larger than any document); split the record, or check that this is the "
                "file you meant"
            )
        yield lineno, line
        lineno += 1
