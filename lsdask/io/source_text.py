"""The first words of documents whose corpus points at their text.

A corpus ingested from a folder of text files (or a tar archive of them)
records the folder in ``manifest["ingest"]["source"]`` and each document's
relative file name (:class:`lsdask.io.corpus.names.DocumentNames`): that is a
pointer to the document's text, which :func:`first_words` follows to show what
a document says beside its topics. Where the source has moved, or the corpus
was ingested from JSON lines, a table or bags of words, there is no text to
show and the documents are shown by name alone.

The manifest and the names in it are untrusted: a folder's files are read
through :mod:`lsdask.io.guarded` (no links, no ``..``, regular files only) and
only the first :data:`HEAD_BYTES` of each; a file that cannot be read so is
left without text and logged, never an error of the command that asked.
"""

from __future__ import annotations

import logging
import tarfile
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lsdask.errors import DataError
from lsdask.io import guarded
from lsdask.io.ingest.mail import clean_mail

logger = logging.getLogger(__name__)

__all__ = ["HEAD_BYTES", "first_words"]

#: Bytes read from the start of a document's file.
HEAD_BYTES = 16_384


def first_words(info: dict[str, Any], names: Iterable[str], n_words: int = 30) -> dict[str, str]:
    """The first ``n_words`` words of each named document, by name, for a corpus
    whose ingest info ``info`` (``Corpus.ingest_info``) points at a text folder
    or a tar archive; the names it cannot read are left out (empty for any
    other corpus). A recorded ``strip_headers`` or ``strip_mail`` cleans the
    text as the ingest did."""
    wanted = sorted({n for n in names if isinstance(n, str) and n})
    source, kind = info.get("source"), info.get("format")
    if not wanted or not isinstance(source, str) or n_words < 1:
        return {}
    recorded = info.get("encoding")
    encoding = recorded if isinstance(recorded, str) else "utf-8"
    strip = info.get("strip_headers") is True
    cleaning = info.get("cleaning")
    mail = isinstance(cleaning, dict) and cleaning.get("strip_mail") is True
    if kind == "text folder" and Path(source).is_dir():
        raw = _from_folder(Path(source), wanted)
    elif kind == "tar archive" and Path(source).is_file():
        raw = _from_tar(Path(source), set(wanted))
    else:
        return {}
    return {name: _words(data, encoding, strip, mail, n_words) for name, data in raw.items()}


def _from_folder(root: Path, names: list[str]) -> dict[str, bytes]:
    found = {}
    for name in names:
        try:
            with guarded.open_read(root, name) as f:
                found[name] = f.read(HEAD_BYTES)
        except (OSError, DataError) as exc:
            logger.info("the text of %r in %s is not shown: %s", name, root, exc)
    return found


def _from_tar(path: Path, names: set[str]) -> dict[str, bytes]:
    """The named regular members of the archive, in one pass over it."""
    found: dict[str, bytes] = {}
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                name = member.name.removeprefix("./")
                if name in names and member.isfile():
                    handle = tar.extractfile(member)
                    found[name] = handle.read(HEAD_BYTES) if handle is not None else b""
                    if len(found) == len(names):
                        break
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        logger.info("the documents' text in %s is not shown: %s", path, exc)
    return found


def _words(data: bytes, encoding: str, strip_headers: bool, mail: bool, n_words: int) -> str:
    try:
        text = data.decode(encoding, errors="replace")
    except LookupError:
        text = data.decode("utf-8", errors="replace")
    if strip_headers:
        text = _after_headers(text)
    if mail:
        text = clean_mail(text)
    words = text.split()
    more = " ..." if len(words) > n_words else ""
    return " ".join(words[:n_words]) + more


def _after_headers(text: str) -> str:
    """The text after its first blank line, as ``strip_headers`` ingests it."""
    _, blank, body = text.replace("\r\n", "\n").partition("\n\n")
    return body if blank else text
