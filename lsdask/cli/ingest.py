"""``lsdask ingest FORMAT``: text and bag-of-words files into a Parquet corpus.

One subcommand per format; each calls :func:`lsdask.jobs.ingest.run_ingest`
and prints its summary. The tokenizer options (raw text formats) change the
tokenizer of the corpus appended to or whose vocabulary is imposed; the
cleaning options (``--strip-mail``, ``--phrases``), left out, clean as that
corpus was cleaned.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from lsdask import config
from lsdask.cli.options import add_storage_options, add_verbose, out_path, path_or_url
from lsdask.io import guarded
from lsdask.io.corpus.store import Corpus
from lsdask.io.ingest.common import recorded_tokenizer
from lsdask.io.ingest.stopwords import ENGLISH_STOPWORDS
from lsdask.io.ingest.words import DEFAULT_TOKEN_PATTERN, Tokenizer
from lsdask.jobs import commit
from lsdask.jobs.ingest import format_ingest_summary, run_ingest
from lsdask.validation import parse_positive_int

__all__ = ["INGEST_DF_DEFAULTS", "add_lock_options", "add_parser", "run"]


def _count_or_fraction(text: str) -> int | float:
    """``5`` -> 5 documents; ``0.5`` -> a fraction of the documents."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a document count (5) or a fraction (0.5), got {text!r}"
        ) from None


def _threshold(text: str) -> float:
    """``--phrase-threshold``: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(
            f"expected a score, a finite number >= 0 such as 10 (higher joins fewer pairs), "
            f"got {text!r}"
        )
    return value


def _field_list(text: str) -> list[str]:
    fields = [f.strip() for f in text.split(",") if f.strip()]
    if not fields:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return fields


#: Positional inputs of each ``lsdask ingest`` format: (dest, help).
_INGEST_INPUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "text": (("path_or_tar", "folder or .tar/.tar.gz archive of text files"),),
    "jsonl": (("path", "JSON lines file (.jsonl[.gz])"),),
    "table": (("path", "CSV (.csv/.tsv[.gz]) or Parquet file, or a folder of Parquet files"),),
    "ldac": (("dat", "LDA-C .dat file"), ("vocab_file", "vocabulary, one word per line")),
    "uci": (("docword", "docword.*.txt[.gz]"), ("vocab_file", "vocab.*.txt, one word a line")),
}


#: ``--min-df``/``--max-df`` defaults shown by ``lsdask ingest KIND --help``
INGEST_DF_DEFAULTS = {
    kind: {"min_df": config.DEFAULT_MIN_DF, "max_df": config.DEFAULT_MAX_DF}
    for kind in ("text", "jsonl", "table")
}


def add_parser(sub: Any) -> None:
    ingest = sub.add_parser(
        "ingest",
        help="turn text or bag-of-words files into a Parquet corpus",
        description="Ingest documents into a Parquet corpus directory (lsdask.io.ingest).",
    )
    kinds = ingest.add_subparsers(dest="kind", metavar="FORMAT", required=True)

    def add(name: str, help_text: str) -> Any:
        p = kinds.add_parser(name, help=help_text, description=help_text)
        for dest, what in _INGEST_INPUTS[name]:
            p.add_argument(dest, type=Path, metavar=dest.upper(), help=what)
        target = p.add_mutually_exclusive_group(required=True)
        target.add_argument("--out", type=out_path, help="corpus directory to write")
        target.add_argument(
            "--append-to", type=path_or_url, metavar="CORPUS",
            help="add the documents to an existing corpus as a new part file: its "
            "vocabulary and tokenizer, doc_ids after its largest (retraining data)",
        )  # fmt: skip
        # as in the ingest functions' signatures (a test checks); LDA-C/UCI keep every word
        defaults = INGEST_DF_DEFAULTS.get(name, {"min_df": "none", "max_df": "none"})
        p.add_argument(
            "--min-df", type=_count_or_fraction,
            help="drop words in fewer documents: an integer count, or a fraction such as 0.01 "
            f"(default {defaults['min_df']})",
        )  # fmt: skip
        p.add_argument(
            "--max-df", type=_count_or_fraction,
            help="drop words in more documents: an integer count (1 means one document), or "
            f"a fraction such as 0.5 (1.0: all) (default {defaults['max_df']})",
        )  # fmt: skip
        p.add_argument("--max-vocab", type=parse_positive_int, help="keep at most N words")
        add_storage_options(p)
        p.add_argument(
            "--vocab", type=Path, metavar="CORPUS_OR_VOCAB_TXT",
            help="impose the vocabulary of an existing corpus or a vocab.txt (one word a line)",
        )  # fmt: skip
        p.add_argument(
            "--docs-per-row-group", type=parse_positive_int,
            help="documents per row group, one batch (default "
            f"{config.DEFAULT_DOCS_PER_ROW_GROUP})",
        )  # fmt: skip
        p.add_argument(
            "--docs-per-file", type=parse_positive_int,
            help="documents per Parquet part file, whole row groups (default "
            f"{config.DEFAULT_DOCS_PER_FILE:,}); retraining takes in or retires part files",
        )  # fmt: skip
        p.add_argument("--overwrite", action="store_true", help="replace an existing corpus")
        add_lock_options(p, "with --append-to: ")
        if name in INGEST_DF_DEFAULTS:  # raw text: tokenizer options
            p.add_argument(
                "--stopwords", metavar="english|none|FILE",
                help="words to drop: the built-in English list (the Glasgow list, with no, nor "
                "and not; docs/ingest.md), none, or a file of one word a line (default "
                "english; with --vocab CORPUS, that corpus's tokenizer)",
            )  # fmt: skip
            p.add_argument(
                "--add-stopwords", type=_field_list, metavar="WORD,...",
                help="comma-separated words to drop besides --stopwords",
            )  # fmt: skip
            p.add_argument(
                "--token-pattern", metavar="REGEX",
                help="regular expression of a token (default: words of two or more letters, "
                f"{DEFAULT_TOKEN_PATTERN!r})",
            )  # fmt: skip
            _add_cleaning_options(p)
        add_verbose(p, argparse.SUPPRESS)
        return p

    text = add("text", "one document per text file of a folder or tar archive")
    text.add_argument("--subset", metavar="PREFIX", help="only files whose path starts so")
    text.add_argument(
        "--include", action="append", metavar="GLOB",
        help="only files whose path relative to the folder matches GLOB (repeatable; * also "
        "matches /, a GLOB without / matches the file name too: --include '*.txt')",
    )  # fmt: skip
    text.add_argument(
        "--exclude", action="append", metavar="GLOB",
        help="leave out files matching GLOB, as --include (repeatable). Files that are not "
        "text (images, PDFs, archives) are skipped anyway, with a warning counting them",
    )  # fmt: skip
    text.add_argument(
        "--encoding", default="utf-8",
        help="text encoding of the files (default utf-8; latin-1 for 20 Newsgroups)",
    )  # fmt: skip
    text.add_argument(
        "--strip-headers", action="store_true",
        help="drop each file's mail header (lines up to the first blank one), as in 20 Newsgroups",
    )  # fmt: skip
    jsonl = add("jsonl", "one document per JSON line")
    jsonl.add_argument(
        "--fields", type=_field_list, default=["title", "abstract", "text"],
        help="comma-separated text fields (default title,abstract,text)",
    )  # fmt: skip
    jsonl.add_argument(
        "--id", metavar="FIELD",
        help="field of distinct integer ids to keep as doc_id (default: 0, 1, 2, ...)",
    )  # fmt: skip
    table = add("table", "one document per row of a CSV or Parquet table")
    table.add_argument("--column", default="text", help="text column (default text)")
    table.add_argument(
        "--encoding", default="utf-8", help="text encoding of a CSV file (default utf-8)"
    )
    table.add_argument(
        "--format", choices=("csv", "parquet"),
        help="the file's format (default: from its suffix, .csv/.tsv/.parquet)",
    )  # fmt: skip
    table.add_argument("--delimiter", help="CSV field delimiter (default , and a tab for .tsv)")
    table.add_argument(
        "--id", metavar="COLUMN",
        help="column of distinct integer ids to keep as doc_id (default: the row number)",
    )  # fmt: skip
    add("ldac", "LDA-C bag-of-words file (Blei's lda-c) and its vocabulary")
    add("uci", "UCI bag-of-words docword file and its vocabulary")


def run(args: argparse.Namespace) -> int:
    inputs = [getattr(args, dest) for dest, _ in _INGEST_INPUTS[args.kind]]
    options: dict[str, Any] = {
        "min_df": args.min_df,
        "max_df": args.max_df,
        "max_vocab": args.max_vocab,
        "docs_per_row_group": args.docs_per_row_group,
        "docs_per_file": args.docs_per_file,
        "overwrite": args.overwrite,
    }
    if args.kind in INGEST_DF_DEFAULTS:
        options.update(
            tokenizer=_tokenizer_from_args(args), strip_mail=args.strip_mail, phrases=args.phrases,
            phrase_min_count=args.phrase_min_count, phrase_threshold=args.phrase_threshold,
        )  # fmt: skip
    if args.kind == "text":
        options.update(
            subset=args.subset, include=args.include, exclude=args.exclude,
            encoding=args.encoding, strip_headers=args.strip_headers,
        )  # fmt: skip
    elif args.kind == "jsonl":
        options.update(text_fields=args.fields, id_field=args.id)
    elif args.kind == "table":
        options.update(
            text_column=args.column, id_column=args.id, encoding=args.encoding,
            format=args.format, delimiter=args.delimiter,
        )  # fmt: skip
    appending = args.append_to is not None
    if appending and args.overwrite:
        raise ValueError("--overwrite replaces a corpus; --append-to adds to one: drop one of them")
    summary = run_ingest(
        args.kind, inputs, args.append_to if appending else args.out, options=options,
        vocab=args.vocab, append=appending, wait=args.wait, lock=not args.no_lock,
    )  # fmt: skip
    commit.committed(f"the corpus {summary.path}")
    print(format_ingest_summary(summary))
    return 0


def _add_cleaning_options(p: argparse.ArgumentParser) -> None:
    """``--strip-mail`` and ``--phrases`` (raw text); left out, they are False,
    or with --append-to/--vocab CORPUS, as that corpus was ingested."""
    p.add_argument(
        "--strip-mail", action="store_true", default=None,
        help="clean mail and news posts: drop the header block, quoted reply lines (> ...) and "
        "'In article ... writes:' lines, the signature (after a '-- ' line), encoded data "
        "and e-mail addresses",
    )  # fmt: skip
    p.add_argument(
        "--phrases", action="store_true", default=None,
        help="join frequent pairs of words into one token (new_york), as gensim's Phrases",
    )  # fmt: skip
    p.add_argument(
        "--phrase-min-count", type=parse_positive_int, metavar="N",
        help="with --phrases: never join a pair seen N times or fewer (default "
        f"{config.DEFAULT_PHRASE_MIN_COUNT})",
    )  # fmt: skip
    p.add_argument(
        "--phrase-threshold", type=_threshold, metavar="SCORE",
        help="with --phrases: join the pairs a b whose score (n_ab - min_count) * V / (n_a * "
        "n_b) exceeds SCORE (n: counts, V: distinct words and pairs); higher joins fewer "
        f"(default {config.DEFAULT_PHRASE_THRESHOLD:g})",
    )  # fmt: skip


def _seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return seconds


def add_lock_options(p: argparse._ActionsContainer, when: str = "") -> None:
    """``--wait SECONDS`` and ``--no-lock``: what a writer does when another
    process holds the folder's lock (lsdask.io.locks)."""
    p.add_argument(
        "--wait", type=_seconds, default=0.0, metavar="SECONDS",
        help=f"{when}wait up to SECONDS for another process that writes the same folder "
        "(default 0: stop at once with an error naming it)",
    )  # fmt: skip
    p.add_argument(
        "--no-lock", action="store_true",
        help=f"{when}do not lock the folder: only on a file system without locks, and only "
        "where no other process writes it at the same time",
    )  # fmt: skip


def _tokenizer_from_args(args: argparse.Namespace) -> Tokenizer | None:
    """The tokenizer of ``--stopwords``, ``--add-stopwords`` and ``--token-pattern``,
    changing the tokenizer of the ``--append-to``/``--vocab`` corpus where there is
    one (else the default); None when no option is given (then the ingest takes
    that corpus's tokenizer itself)."""
    if args.stopwords is None and args.add_stopwords is None and args.token_pattern is None:
        return None
    base = _corpus_tokenizer(args) or Tokenizer()
    if args.stopwords is None:
        stop = set(base.stopwords)
    elif args.stopwords == "english":
        stop = set(ENGLISH_STOPWORDS)
    elif args.stopwords == "none":
        stop = set()
    else:
        stop = _read_stopwords(Path(args.stopwords))
    stop |= {w.lower() for w in args.add_stopwords or ()}
    # the built-in list is recorded as "english" in the manifest
    stop_arg: Any = ENGLISH_STOPWORDS if stop == set(ENGLISH_STOPWORDS) else stop or None
    pattern = base.pattern if args.token_pattern is None else args.token_pattern
    return Tokenizer(lowercase=base.lowercase, pattern=pattern, stopwords=stop_arg)


def _corpus_tokenizer(args: argparse.Namespace) -> Tokenizer | None:
    """The tokenizer the ``--append-to`` or ``--vocab`` corpus was ingested with."""
    path = args.append_to if args.append_to is not None else args.vocab
    if path is None or not Path(path).is_dir():
        return None
    return recorded_tokenizer(Corpus.open(path))


def _read_stopwords(path: Path) -> set[str]:
    if not path.is_file():
        raise FileNotFoundError(
            f"--stopwords: {str(path)!r} is not a file; expected english, none, or a file of "
            "one word a line"
        )
    real = Path(os.path.realpath(path))  # a link the user gave is theirs to give
    try:
        # a regular file (no FIFO or device) of at most guarded.LIMITS["text"] bytes
        text = guarded.read_text(real.parent, real.name, "text")
        return {w.strip() for w in text.splitlines() if w.strip()}
    except UnicodeDecodeError as exc:
        raise ValueError(f"--stopwords: {str(path)!r} is not UTF-8 text: {exc}") from exc
