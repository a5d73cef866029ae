"""The ingest job: raw text or bag-of-words files -> a Parquet corpus.

:func:`run_ingest` dispatches ``lsdask ingest text|jsonl|table|ldac|uci`` to
the functions of :mod:`lsdask.io.ingest`, turning the command line's
strings into their arguments (``--min-df 5`` is a count, ``--min-df 0.01`` a
fraction; ``--vocab`` is a corpus directory or a ``vocab.txt``);
:func:`format_ingest_summary` is the text of the returned summary.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsdask.io.ingest.common import IngestSummary
from lsdask.io.stores import is_store_url
from lsdask.jobs import commit
from lsdask.jobs.wording import plural

logger = logging.getLogger(__name__)

__all__ = [
    "INGEST_KINDS",
    "AppendSummary",
    "format_ingest_summary",
    "read_vocab_arg",
    "run_ingest",
]

#: ``lsdask ingest`` subcommands and the names of their positional inputs.
INGEST_KINDS: dict[str, tuple[str, ...]] = {
    "text": ("path_or_tar",),
    "jsonl": ("path",),
    "table": ("path",),
    "ldac": ("dat_path", "vocab_path"),
    "uci": ("docword_path", "vocab_path"),
}


@dataclass(frozen=True, eq=False)
class AppendSummary(IngestSummary):
    """The summary of documents appended to a corpus (``run_ingest(append=True)``).

    As :class:`~lsdask.io.ingest.common.IngestSummary`, for the documents
    added, but ``path`` is the corpus appended to and ``n_batches`` the row
    groups added.

    Attributes
    ----------
    appended_part : str or None
        The part file added; None when there were no documents.
    corpus_docs : int
        The documents of the corpus after the append.
    """

    appended_part: str | None
    corpus_docs: int


def read_vocab_arg(vocab: str | os.PathLike[str] | None) -> Any:
    """The ``vocab=`` argument of the ingest functions from a path.

    Parameters
    ----------
    vocab : str, os.PathLike or None
        A corpus directory (passed on as it is: the ingest functions open
        it) or a text file of one word per line (UTF-8; read into a list as
        LDA-C and UCI vocabulary files are: a byte order mark and spaces
        around a word dropped; blank or repeated words are an error naming
        the line).

    Returns
    -------
    None, the path of a corpus, or a list of words.

    Raises
    ------
    FileNotFoundError
        If the path does not exist.
    ValueError
        If the file is empty, or has blank or repeated words.
    """
    if vocab is None:
        return None
    path = Path(vocab)
    if not path.exists():
        raise FileNotFoundError(f"--vocab: {str(path)!r} does not exist")
    if path.is_dir():
        return str(path)
    # read as the vocabulary files of LDA-C and UCI corpora are: lines split at
    # newlines only, a byte order mark and surrounding spaces dropped, and blank
    # or repeated words refused naming the line
    from lsdask.io.ingest.bow import read_word_list

    words = read_word_list(path)
    if not words:
        raise ValueError(f"--vocab: {str(path)!r} is empty; expected one word per line")
    return words


def run_ingest(
    kind: str,
    inputs: list[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str],
    *,
    options: Mapping[str, Any] | None = None,
    vocab: str | os.PathLike[str] | None = None,
    progress: bool | None = None,
    append: bool = False,
    wait: float | None = None,
    lock: bool | None = None,
) -> IngestSummary:
    """Ingest ``inputs`` into the corpus ``out_dir`` with the ``kind`` function.

    With ``append``, ``out_dir`` is an existing corpus that gains the documents
    as one new part file (:meth:`~lsdask.io.corpus.Corpus.append_corpus`):
    encoded over its vocabulary by the tokenizer it was ingested with, and
    numbered after its largest doc_id (unless they bring ids of their own).
    They are ingested into a hidden sibling folder first, so a failure leaves
    the corpus as it was. The append holds the corpus's lock from the start
    (:mod:`lsdask.io.locks`): a second writer of the corpus is refused, or
    waits ``wait`` seconds for it.

    Parameters
    ----------
    kind : {"text", "jsonl", "table", "ldac", "uci"}
        :func:`~lsdask.io.ingest.ingest_text_folder`,
        :func:`~lsdask.io.ingest.ingest_jsonl`,
        :func:`~lsdask.io.ingest.ingest_table`,
        :func:`~lsdask.io.ingest.import_ldac` or
        :func:`~lsdask.io.ingest.import_uci`.
    inputs : list of paths
        The positional inputs of that function (:data:`INGEST_KINDS`).
    out_dir : str or os.PathLike
        The corpus directory to write.
    options : mapping, optional
        Keyword arguments of that function (e.g. ``min_df``, ``subset``,
        ``text_fields``); None values are left out, so the function's
        defaults apply.
    vocab : str, os.PathLike or None
        An existing corpus or ``vocab.txt`` whose vocabulary is imposed
        (:func:`read_vocab_arg`).
    progress : bool or None, default None
        Progress bars (None: only on a terminal).
    wait : float or None
        With ``append``: seconds to wait for the corpus while another process
        writes it (None: :func:`lsdask.io.locks.lock_settings`'s, by default
        0, refuse at once).
    lock : bool or None
        With ``append``: False appends without the corpus's lock (a file
        system without locks, and no other writer); None: lock.

    Returns
    -------
    IngestSummary
        The ingest function's summary; an :class:`AppendSummary` with
        ``append``.

    Raises
    ------
    lsdask.errors.LockError
        With ``append``, if another process writes the corpus (past ``wait``).
    """
    from lsdask.io import ingest

    functions = {
        "text": ingest.ingest_text_folder,
        "jsonl": ingest.ingest_jsonl,
        "table": ingest.ingest_table,
        "ldac": ingest.import_ldac,
        "uci": ingest.import_uci,
    }
    if kind not in functions:
        raise ValueError(f"unknown ingest kind {kind!r}; expected one of {sorted(functions)}")
    if len(inputs) != len(INGEST_KINDS[kind]):
        raise ValueError(
            f"ingest {kind} takes {len(INGEST_KINDS[kind])} input(s) "
            f"({', '.join(INGEST_KINDS[kind])}); got {len(inputs)}"
        )
    kwargs = {k: v for k, v in (options or {}).items() if v is not None}
    if append and is_store_url(out_dir):
        return _append_to_store(functions[kind], inputs, str(out_dir), kwargs, vocab, progress)
    if append:
        return _append(functions[kind], inputs, out_dir, kwargs, vocab, progress, wait, lock)
    imposed = read_vocab_arg(vocab)
    if imposed is not None:
        kwargs["vocab"] = imposed
    logger.info("ingest %s %s -> %s", kind, [str(p) for p in inputs], out_dir)
    return functions[kind](*inputs, out_dir, progress=progress, **kwargs)


def _append(
    function: Any,
    inputs: list[str | os.PathLike[str]],
    corpus_dir: str | os.PathLike[str],
    kwargs: dict[str, Any],
    vocab: Any,
    progress: bool | None,
    wait: float | None,
    lock: bool | None,
) -> AppendSummary:
    """``run_ingest(..., append=True)``: ingest beside the corpus, then append,
    holding the corpus's lock throughout (a second writer is told at once).

    Every step may be killed: before the commit, the next run appends the
    documents (the stopped append's part is quarantined, its staging folder
    removed); after it, while the staging folder is removed, the commit records
    this command's key and staging folder (``origin`` of its batches), so the
    next identical command finds its staging folder left by a gone process,
    knows the documents are in, and only finishes the clean-up."""
    from lsdask.io.atomic import remove_tree, temp_sibling
    from lsdask.io.corpus.store import Corpus
    from lsdask.io.corpus.transactions import corpus_lock

    if vocab is not None:
        raise ValueError(
            "appending to a corpus imposes that corpus's vocabulary; drop --vocab (vocab=)"
        )
    target = Corpus.open(corpus_dir)
    root = Path(target.path)
    key = _command_key(function, inputs, kwargs)
    with corpus_lock(root, wait=wait, enabled=lock):
        finished = _finish_committed(root, key)
        if finished is not None:
            commit.committed(f"the corpus {target.path}")
            return finished
        staging = temp_sibling(root, "append")
        logger.info("ingest %s -> new part of corpus %s", [str(p) for p in inputs], target.path)
        try:
            summary = function(*inputs, staging, progress=progress, vocab=target, **kwargs)
            keep_ids = bool(kwargs.get("id_field") or kwargs.get("id_column"))
            origin = {
                "command": key,
                "staging": staging.name,
                "summary": {k: summary[k] for k in _SUMMARY_KEYS if k in summary},
            }
            added = target.append_corpus(
                Corpus.open(staging), keep_ids=keep_ids, wait=wait, lock=lock, origin=origin
            )
            # the documents are in: a signal from here on (the clean-up) stops nothing
            commit.committed(f"the corpus {target.path}")
        finally:
            remove_tree(staging)
    return AppendSummary(
        **{**summary, "path": str(target.path), "n_batches": len(added)},
        appended_part=added[0].file if added else None,
        corpus_docs=target.n_docs,
    )


def _append_to_store(
    function: Any,
    inputs: list[str | os.PathLike[str]],
    url: str,
    kwargs: dict[str, Any],
    vocab: Any,
    progress: bool | None,
) -> AppendSummary:
    """``run_ingest(..., append=True)`` into a corpus in a store: ingest into a
    local temporary corpus over the target's words, then append its documents
    as the target's next version (:meth:`StoreCorpus.append`; two appends at
    once both land)."""
    import tempfile

    from lsdask.io.corpus.on_store import StoreCorpus
    from lsdask.io.corpus.store import Corpus

    if vocab is not None:
        raise ValueError(
            "appending to a corpus imposes that corpus's vocabulary; drop --vocab (vocab=)"
        )
    target = StoreCorpus.open(url)
    keep_ids = bool(kwargs.get("id_field") or kwargs.get("id_column"))
    with tempfile.TemporaryDirectory(prefix="lsdask-append-") as tmp:
        staging = Path(tmp) / "staging"
        summary = function(*inputs, staging, progress=progress, vocab=target.vocab, **kwargs)
        staged = Corpus.open(staging)
        documents = (
            (int(batch.doc_ids[d]), *batch.doc(d))
            for part in staged.batches
            for batch in (part.load(),)
            for d in range(batch.n_docs)
        )
        key = _command_key(function, inputs, kwargs)
        added = target.append(documents, origin={"command": key}, renumber=not keep_ids)
    commit.committed(f"the corpus {target.path}")
    return AppendSummary(
        **{**summary, "path": target.path, "n_batches": len(added)},
        appended_part=added[0].file if added else None,
        corpus_docs=target.n_docs,
    )


#: The fields of an ingest summary an append records with its commit (``origin``).
_SUMMARY_KEYS = (
    "n_docs", "n_tokens", "vocab_size", "n_empty_docs", "oov_tokens", "oov_types",
    "vocab_imposed", "n_skipped_files",
)  # fmt: skip


def _command_key(function: Any, inputs: list[str | os.PathLike[str]], kwargs: dict) -> str:
    """A digest of what an append ingests: the ingest function, its options and
    each input (absolute path, and for a file its size and modification time):
    equal for a rerun of the same command over the same, unchanged inputs."""

    def identity(path: str | os.PathLike[str]) -> list[Any]:
        absolute = os.path.abspath(os.fspath(path))
        try:
            st = os.stat(absolute)
        except OSError:
            return [absolute]
        return [absolute, st.st_size, st.st_mtime_ns]

    document = {
        "function": getattr(function, "__name__", repr(function)),
        "inputs": [identity(p) for p in inputs],
        "options": {k: repr(v) for k, v in sorted(kwargs.items())},
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()


def _finish_committed(root: Path, key: str) -> AppendSummary | None:
    """If an earlier run of this same command (``key``) committed its append and
    was stopped while it removed its staging folder (left beside the corpus by
    a process of this host that is gone), finish that clean-up and return that
    run's summary: its documents are in, and must not be appended again.
    None otherwise. Call it holding the corpus's lock."""
    from lsdask.io.atomic import remove_tree, stale_siblings
    from lsdask.io.corpus.store import Corpus

    left = {entry.name: (entry, pid) for entry, pid in stale_siblings(root, "append")}
    if not left:
        return None
    corpus = Corpus.open(root)
    batches = corpus.manifest["batches"]
    for b in reversed(batches):
        origin = b.get("origin")
        if not (isinstance(origin, dict) and origin.get("command") == key):
            continue
        if origin.get("staging") not in left:
            continue
        entry, pid = left[origin["staging"]]
        mine = [e for e in batches if e.get("txn") == b.get("txn")]
        logger.warning(
            "corpus %s: an earlier run of this command (process %d) appended its documents "
            "as %s (committed) and was stopped while it removed its staging folder; removed "
            "%s. Nothing is appended again.",
            root, pid, b["file"], entry.name,
        )  # fmt: skip
        remove_tree(entry)
        recorded = origin.get("summary")
        if not isinstance(recorded, dict):
            recorded = {}
        summary = {k: recorded.get(k, 0) for k in _SUMMARY_KEYS}
        summary["vocab_imposed"] = bool(recorded.get("vocab_imposed", True))
        return AppendSummary(
            path=str(corpus.path),
            n_batches=len(mine),
            appended_part=b["file"],
            corpus_docs=corpus.n_docs,
            **summary,
        )
    return None


def format_ingest_summary(summary: Mapping[str, Any]) -> str:
    """Readable lines of an ingest summary."""
    lines = [f"corpus: {summary['path']}"]
    if "appended_part" in summary:
        part = summary["appended_part"] or "nothing (no documents)"
        lines = [
            f"appended to corpus: {summary['path']}, as {part} (the corpus now holds "
            f"{summary['corpus_docs']:,} documents)"
        ]
    lines += [
        f"documents: {summary['n_docs']:,} ({summary['n_empty_docs']:,} empty)",
        f"tokens: {summary['n_tokens']:,}",
        f"vocabulary: {summary['vocab_size']:,} words",
        f"batches: {plural(summary['n_batches'], 'row group')}",
    ]
    if summary.get("n_skipped_files"):
        lines.append(
            f"skipped: {plural(summary['n_skipped_files'], 'file')}, not text (images, "
            "archives, ...; the warning names them)"
        )
    if summary.get("oov_tokens"):
        why = (
            "outside the imposed vocabulary"
            if summary.get("vocab_imposed")
            else "pruned from the vocabulary (min_df, max_df, max_vocab)"
        )
        lines.append(
            f"dropped: {summary['oov_tokens']:,} tokens of {summary['oov_types']:,} word types "
            + why
        )
    return "\n".join(lines)
