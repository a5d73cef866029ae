"""Ingesting raw text documents: folders of text files, tar archives, JSON lines.

The public functions :func:`ingest_text_folder` and :func:`ingest_jsonl`
(re-exported by :mod:`lsdask.io.ingest`) and the readers that stream their
``(name, text)`` documents to the two passes of
:func:`lsdask.io.ingest.common._ingest_texts`.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import stat
import tarfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Unpack

from lsdask.errors import DataError
from lsdask.io import guarded
from lsdask.io.ingest.common import IngestSummary, _Doc, _ingest_texts, _TextSource, document_id
from lsdask.io.ingest.inputs import (
    binary_kind,
    check_encoding,
    check_out_of_input,
    existing_file,
    not_text_error,
    numbered_lines,
    open_input,
)
from lsdask.io.ingest.options import (
    PathLike,
    TextIngestKeywords,
    TextIngestOptions,
    option_keywords,
)

logger = logging.getLogger(__name__)


def _is_hidden(relative: str) -> bool:
    return any(part.startswith(".") for part in relative.split("/"))


@dataclass(frozen=True)
class _Selection:
    """Which files of a folder or archive are documents: ``subset`` (a prefix,
    or a glob with * ? [), then ``include`` and ``exclude`` globs."""

    subset: str | None = None
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def __call__(self, relative: str) -> bool:
        """Does a file's path relative to the folder (or member name) pass?"""
        if not _in_subset(relative, self.subset):
            return False
        if self.include and not any(_glob_match(relative, g) for g in self.include):
            return False
        return not any(_glob_match(relative, g) for g in self.exclude)


def _in_subset(relative: str, subset: str | None) -> bool:
    """Does a member path pass the ``subset`` filter (a prefix, or a glob with * ? [)?"""
    if subset is None:
        return True
    if any(ch in subset for ch in "*?["):
        return fnmatch.fnmatchcase(relative, subset) or fnmatch.fnmatchcase(
            relative, subset.rstrip("/") + "/*"
        )
    return relative.startswith(subset)


def _glob_match(relative: str, glob: str) -> bool:
    """A glob matches the whole relative path (``*`` crosses ``/``), or, for a
    glob without ``/``, the file name alone."""
    if fnmatch.fnmatchcase(relative, glob):
        return True
    return "/" not in glob and fnmatch.fnmatchcase(relative.rpartition("/")[2], glob)


def _globs(value: str | Sequence[str] | None, name: str) -> tuple[str, ...]:
    """``include``/``exclude`` (``name``) as a tuple of globs, or a ValueError."""
    if value is None:
        return ()
    if isinstance(value, str):
        globs: tuple[Any, ...] = (value,)
    elif isinstance(value, Sequence):
        globs = tuple(value)
    else:
        globs = (None,)  # refused below
    for glob in globs:
        if not isinstance(glob, str) or not glob:
            raise ValueError(
                f"{name} must be a glob or a list of globs matched on the path relative to the "
                f"folder, such as '*.txt' or 'sci.space/*'; got {value!r}"
            )
    return globs


def _decode(data: bytes, encoding: str, where: str) -> str:
    """``data`` as text, or a DataError naming the file and the first bad byte."""
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise not_text_error(where, encoding, exc, data) from None


def _is_tar(path: Path) -> bool:
    """Whether ``path`` is a tar archive; one cut short inside its first block
    (``tarfile.is_tarfile`` then raises) is a DataError naming the file."""
    try:
        return tarfile.is_tarfile(path)
    except _TAR_ERRORS as exc:
        raise _tar_error(path, exc) from exc


def _text_or_skip(
    data: bytes, encoding: str, relative: str, where: str, skipped: list[tuple[str, str]]
) -> str | None:
    """The text of a file, or None for one whose bytes are not text (then
    listed in ``skipped``): it is never decoded, whatever the encoding."""
    kind = binary_kind(data, encoding)
    if kind is not None:
        skipped.append((relative, kind))
        return None
    return _decode(data, encoding, where)


def _folder_docs(
    root: Path,
    selected: _Selection,
    encoding: str,
    seen: set[str],
    skipped: list[tuple[str, str]],
) -> Iterator[_Doc]:
    """Regular files under ``root`` (recursive, sorted, hidden ones skipped), one
    document each. Links (to files or folders) and special files (FIFOs,
    devices, sockets) are skipped with a warning: nothing outside the folder is
    read through them, and nothing blocks on a FIFO. Binary files are skipped
    and listed in ``skipped``."""
    for dirpath, dirnames, filenames in os.walk(root):
        folder = Path(dirpath)
        kept = []
        for d in sorted(dirnames):
            if d.startswith("."):
                continue
            if (folder / d).is_symlink():
                _skip(root, folder / d, "a symbolic link to a folder")
            else:
                kept.append(d)
        dirnames[:] = kept
        for name in sorted(filenames):
            path = folder / name
            relative = path.relative_to(root).as_posix()
            if len(seen) < 20:
                seen.add(relative.split("/")[0])
            if name.startswith(".") or not selected(relative):
                continue
            mode = path.lstat().st_mode
            if not stat.S_ISREG(mode):
                _skip(root, path, "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file")
                continue
            data = guarded.read_bytes(root, relative, "document")
            text = _text_or_skip(data, encoding, relative, f"file {str(path)!r}", skipped)
            if text is not None:
                yield relative, text


def _skip(root: Path, path: Path, what: str) -> None:
    logger.warning(
        "input folder %s: skipped %s, %s (lsdask reads only the regular files in it)",
        root, path.relative_to(root).as_posix(), what,
    )  # fmt: skip


def _tar_docs(
    path: Path,
    selected: _Selection,
    encoding: str,
    seen: set[str],
    skipped: list[tuple[str, str]],
) -> Iterator[_Doc]:
    """Regular-file members of a tar archive, in archive order, one document
    each; binary ones skipped and listed in ``skipped``."""
    try:
        with tarfile.open(path, "r:*") as tar:
            for member in tar:
                relative = member.name.removeprefix("./")
                if len(seen) < 20:
                    seen.add(relative.split("/")[0])
                if not member.isfile() or _is_hidden(relative) or not selected(relative):
                    continue
                handle = tar.extractfile(member)
                data = handle.read() if handle is not None else b""
                where = f"{path} member {relative!r}"
                text = _text_or_skip(data, encoding, relative, where, skipped)
                if text is not None:
                    yield relative, text
    except _TAR_ERRORS as exc:
        raise _tar_error(path, exc) from exc


_TAR_ERRORS = (tarfile.TarError, EOFError, zlib.error, OSError)


def _tar_error(path: Path, exc: BaseException) -> DataError:
    return DataError(
        f"tar archive {path}: could not be read ({type(exc).__name__}: {exc}); it is "
        "probably truncated or not a tar file. Download or re-create it."
    )


def _without_headers(docs: Iterator[_Doc], strip: bool) -> Iterator[_Doc]:
    """Each document's text after its first blank line, when ``strip``."""
    for name, text in docs:
        if strip:
            _, blank, body = text.replace("\r\n", "\n").partition("\n\n")
            text = body if blank else text
        yield name, text


@option_keywords(TextIngestOptions)
def ingest_text_folder(
    path_or_tar: PathLike,
    out_dir: PathLike,
    *,
    subset: str | None = None,
    include: str | Sequence[str] | None = None,
    exclude: str | Sequence[str] | None = None,
    encoding: str = "utf-8",
    strip_headers: bool = False,
    options: TextIngestOptions | None = None,
    **keywords: Unpack[TextIngestKeywords],
) -> IngestSummary:
    """Ingest a folder of text files, or a tar archive of them: one file, one document.

    Parameters
    ----------
    path_or_tar : str or os.PathLike
        A folder (read recursively, in sorted order, hidden files and folders
        skipped) or a ``.tar``, ``.tar.gz``/``.tgz`` or ``.tar.bz2`` archive
        (read member by member, in archive order).
    out_dir : str or os.PathLike
        The corpus directory to write.
    subset : str, optional
        Keep only files whose path relative to the folder (or member name)
        starts with this prefix, e.g. ``"20news-bydate-train/"``; a pattern
        with ``*``, ``?`` or ``[`` is matched as a glob instead.
    include, exclude : str or list of str, optional
        Globs matched on the path relative to the folder (or the member name
        in the archive); ``*`` also matches ``/``, and a glob without ``/``
        matches the file name alone too (``"*.png"`` at any depth). A file is
        read when it matches ``subset``, any ``include`` glob (if given) and
        no ``exclude`` glob.
    encoding : str, default "utf-8"
        Text encoding of the files. A file that is not valid text in it stops
        the ingest with an error naming the file (nothing is written), rather
        than be read garbled; pass ``"latin-1"`` for the 20 Newsgroups posts.
        A file whose bytes are not text at all (a NUL byte in its first 8 KiB,
        or the signature of an image, PDF, archive or executable) is skipped,
        whatever the encoding, and counted (``n_skipped_files``, a warning
        naming the first ones, ``manifest["ingest"]["skipped_files"]``).
    strip_headers : bool, default False
        Drop everything up to the first blank line of each file: the mail or
        news headers (``From:``, ``Subject:``, ``Lines:``, ...) of posts such as
        20 Newsgroups', which otherwise become the most frequent "words".
        ``strip_mail=True`` does this and more.
    options : TextIngestOptions, optional
        The tokenizer, cleaning, vocabulary and output options as one object.
    **keywords
        The same options one by one, replacing those of ``options``:
        ``tokenizer``, ``strip_mail``, ``phrases``, ``phrase_min_count``,
        ``phrase_threshold``, ``vocab``, ``min_df``, ``max_df``, ``max_vocab``,
        ``docs_per_row_group``, ``docs_per_file``, ``overwrite`` and
        ``progress``, as in :class:`~lsdask.io.ingest.options.TextIngestOptions`.

    Returns
    -------
    IngestSummary
        The corpus written and what was dropped. Document ``doc_id`` is its
        running index; relative file names are kept in
        ``manifest["ingest"]["doc_names"]`` when there are fewer than 100,000.

    Raises
    ------
    FileNotFoundError
        If ``path_or_tar`` does not exist.
    DataError
        If no file matches, a file is not text in ``encoding``, or the archive
        cannot be read.
    TypeError
        For a keyword argument it does not take.
    """
    options = TextIngestOptions.merge(options, keywords, ingest_text_folder)
    path = existing_file(path_or_tar, "path_or_tar")
    check_encoding(encoding)
    selected = _Selection(subset, _globs(include, "include"), _globs(exclude, "exclude"))
    seen: set[str] = set()
    skipped: list[tuple[str, str]] = []  # of the latest pass
    if path.is_dir():
        kind = "text folder"
        check_out_of_input(out_dir, path, "text")

        def docs() -> Iterator[_Doc]:
            skipped.clear()
            found = _folder_docs(path, selected, encoding, seen, skipped)
            return _without_headers(found, strip_headers)
    elif _is_tar(path):
        kind = "tar archive"

        def docs() -> Iterator[_Doc]:
            skipped.clear()
            found = _tar_docs(path, selected, encoding, seen, skipped)
            return _without_headers(found, strip_headers)
    else:
        raise DataError(
            f"path_or_tar {str(path)!r} is neither a folder nor a tar archive (.tar, .tar.gz, "
            ".tgz); for other formats use ingest_jsonl or ingest_table (lsdask ingest jsonl / "
            "table)"
        )

    def hint() -> str:
        rules = [f"{name} {value!r}" for name, value in (
            ("subset", subset), ("include", list(selected.include)),
            ("exclude", list(selected.exclude))) if value]  # fmt: skip
        said = ""
        if rules:
            said = f" matching {', '.join(rules)}; top-level entries seen: {sorted(seen)}"
        if skipped:
            said += f" ({len(skipped)} files skipped as not text, e.g. {skipped[0][0]})"
        return said

    info = {
        "format": kind,
        "source": str(path),
        "subset": subset,
        "include": list(selected.include),
        "exclude": list(selected.exclude),
        "encoding": encoding,
        "strip_headers": strip_headers,
    }
    source = _TextSource(docs, info, f"{kind} {path}", hint, skipped=skipped)
    return _ingest_texts(source, out_dir, options)


def _record_text(record: Any, fields: Sequence[str], where: str) -> str | None:
    """Join the present text fields of one JSON record; None if it has none of them."""
    if not isinstance(record, dict):
        raise DataError(
            f"{where}: expected a JSON object with text fields {list(fields)}; found a "
            f"{type(record).__name__}"
        )
    parts: list[str] = []
    found = False
    for key in fields:
        value = record.get(key)
        if value is None:
            continue
        found = True
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            parts.extend(value)
        else:
            raise DataError(
                f"{where}: field {key!r} holds a {type(value).__name__}; expected a string "
                "(or a list of strings)"
            )
    return " ".join(parts) if found else None


def _jsonl_docs(path: Path, fields: Sequence[str], id_field: str | None) -> Iterator[_Doc]:
    n_records = n_without = 0
    first_keys: list[str] = []
    with open_input(path) as f:
        for lineno, raw in numbered_lines(f, path):
            where = f"{path}, line {lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"{where}: not valid UTF-8 ({exc}); JSON lines are UTF-8") from exc
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(
                    f"{where}: not valid JSON ({exc.msg} at column {exc.colno}); every line must "
                    "be one JSON object. Fix or delete the line."
                ) from None
            except RecursionError:
                raise DataError(
                    f"{where}: JSON nested too deeply to read; every line must be one JSON "
                    "object holding the text fields. Fix or delete the line."
                ) from None
            text = _record_text(record, fields, where)
            n_records += 1
            if text is None:
                n_without += 1
                first_keys = first_keys or list(record)[:20]
            name = None
            if id_field is not None:
                if id_field not in record:
                    raise DataError(
                        f"{where}: no id field {id_field!r}; the record has keys "
                        f"{list(record)[:20]}. Every record needs one, or leave id_field "
                        "(lsdask: --id) out to number the documents"
                    )
                name = document_id(record[id_field], where, id_field)
            yield name, text or ""
    if n_records and n_without == n_records:
        raise DataError(
            f"{path}: none of the {n_records} records has any of the text fields "
            f"{list(fields)}; the first has keys {first_keys}. Pass text_fields= (lsdask: "
            "--fields) naming the fields that hold the text."
        )
    if n_without:
        logger.warning("%s: %d of %d records have none of %s", path, n_without, n_records, fields)


@option_keywords(TextIngestOptions)
def ingest_jsonl(
    path: PathLike,
    out_dir: PathLike,
    text_fields: Sequence[str] = ("title", "abstract", "text"),
    *,
    id_field: str | None = None,
    options: TextIngestOptions | None = None,
    **keywords: Unpack[TextIngestKeywords],
) -> IngestSummary:
    """Ingest JSON lines (UTF-8, optionally ``.gz``): one object per line, one document.

    The text of a document is its ``text_fields`` that are present (strings,
    or lists of strings), joined with a space; blank lines are skipped. With
    ``id_field``, every record's integer id in that field becomes its
    ``doc_id`` (distinct ids required; the weights ``lsdask transform`` writes
    then join back to the records); without, documents are numbered 0, 1, 2,
    ... in file order. The other parameters are as in :func:`ingest_text_folder`.

    Raises
    ------
    DataError
        For a line that is not a JSON object (naming the file and line
        number), a text field that is not a string, or when no record has any
        of ``text_fields``.
    """
    options = TextIngestOptions.merge(options, keywords, ingest_jsonl)
    p = existing_file(path, "path")
    fields = [text_fields] if isinstance(text_fields, str) else list(text_fields)
    if not fields:
        raise ValueError("text_fields is empty; name at least one field holding text")
    info = {"format": "jsonl", "source": str(p), "text_fields": fields, "id_field": id_field}
    return _ingest_texts(
        _TextSource(
            lambda: _jsonl_docs(p, fields, id_field),
            info,
            f"JSON lines {p}",
            ids=id_field is not None,
        ),
        out_dir,
        options,
    )
