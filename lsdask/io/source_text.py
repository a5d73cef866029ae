"""The first words of documents, read from the folder or archive they were ingested from.

A corpus ingested from a folder of text files (or a tar archive of them)
records each document's relative file name
(:class:`lsdask.io.corpus.names.DocumentNames`): a pointer to its text, which
:func:`first_words` follows to show what a document says beside its topics.

The folder or archive is the one the *user* names (``lsdask docs --texts``,
``texts=`` in Python), never the one the manifest records
(``manifest["ingest"]["source"]``, shown only as a hint by
:func:`recorded_source`): a corpus folder is untrusted, and a crafted manifest
must not make lsdask print (or put in a shared report) the files of some other
folder of the machine. Below the named folder the names are untrusted too:
its files are read through :mod:`lsdask.io.guarded` (no links, no ``..``,
regular files only), only the first :data:`HEAD_BYTES` of each; a file that
cannot be read so is left without text and logged, never an error of the
command that asked. The manifest's encoding and cleaning (``strip_headers``,
``strip_mail``) are applied, as the ingest did.
"""

from __future__ import annotations

import logging
import os
import tarfile
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lsdask.errors import DataError
from lsdask.io import guarded
from lsdask.io.ingest.mail import clean_mail

logger = logging.getLogger(__name__)

__all__ = ["HEAD_BYTES", "first_words", "recorded_source"]

#: Bytes read from the start of a document's file.
HEAD_BYTES = 16_384


def first_words(
    texts: str | os.PathLike[str], info: dict[str, Any], names: Iterable[str], n_words: int = 30
) -> dict[str, str]:
    """The first ``n_words`` words of each named document, by name, read from
    ``texts`` (a folder of text files, or a tar archive of them, that the user
    named), decoded and cleaned as the corpus's ingest info ``info``
    (``Corpus.ingest_info``) records; the names it cannot read are left out."""
    wanted = sorted({n for n in names if isinstance(n, str) and n})
    root = Path(texts)
    if not wanted or n_words < 1:
        return {}
    recorded = info.get("encoding")
    encoding = recorded if isinstance(recorded, str) else "utf-8"
    strip = info.get("strip_headers") is True
    cleaning = info.get("cleaning")
    mail = isinstance(cleaning, dict) and cleaning.get("strip_mail") is True
    if root.is_dir():
        raw = _from_folder(root, wanted)
    elif root.is_file():
        raw = _from_tar(root, set(wanted))
    else:
        raise FileNotFoundError(
            f"texts {str(root)!r}: no such folder or archive; name the folder (or tar "
            "archive) the corpus was ingested from"
        )
    return {name: _words(data, encoding, strip, mail, n_words) for name, data in raw.items()}


def recorded_source(info: dict[str, Any]) -> str | None:
    """The folder or archive a text corpus says it was ingested from (to suggest
    as ``--texts``; never read without the user naming it), or None."""
    source = info.get("source")
    if info.get("format") in ("text folder", "tar archive") and isinstance(source, str):
        return source
    return None


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
