"""The ``lsdask`` command line: argument parsing and dispatch to :mod:`lsdask.jobs`.

Subcommands::

    lsdask demo [--out DIR] [--components K] [--sparsity L] [--laps N] [--workers N | --sync]
    lsdask patches IMAGE_DIR... --out DIR [--patch-size ...] [--stride ...] ...
    lsdask fit-gmm ZARR_PATH --components K [--sparsity L] [--heldout ZARR_PATH] ...
    lsdask ingest {text,jsonl,table,ldac,uci} INPUT... --out DIR [--min-df ...] ...
    lsdask fit CORPUS --topics K --out MODEL_DIR [--sparsity L | --dense] ...
    lsdask topics MODEL_DIR [--top 10] [--corpus CORPUS]
    lsdask transform MODEL_DIR CORPUS --out weights.parquet

``demo`` needs no download and no data files: it fits an L-sparse and a dense
Gaussian mixture to 8x8 patches of the two halves of a photograph shipped
with matplotlib, then LDA to the synthetic "bars" corpus, on one local Dask
cluster, and reports heldout scores and pictures.

Each ``_cmd_*`` function turns parsed arguments into one call of a job
function and prints its report; the jobs (:mod:`lsdask.jobs`) do the work
and never print. :func:`main` reports bad input as one line
``lsdask: error: <message>`` on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lsdask import config
from lsdask.errors import FitInterrupted, Terminated
from lsdask.io.ingest.stopwords import ENGLISH_STOPWORDS
from lsdask.io.ingest.words import DEFAULT_TOKEN_PATTERN, Tokenizer
from lsdask.jobs.cluster import DEFAULT_WORKERS, describe_client
from lsdask.jobs.patch_gmm import PATCH_ALPHA

logger = logging.getLogger(__name__)

__all__ = ["build_parser", "main"]


# --------------------------------------------------------------------------- argument types


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


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


def _field_list(text: str) -> list[str]:
    fields = [f.strip() for f in text.split(",") if f.strip()]
    if not fields:
        raise argparse.ArgumentTypeError(f"expected comma-separated names, got {text!r}")
    return fields


# --------------------------------------------------------------------------- shared options


def _add_verbose(parser: argparse.ArgumentParser, default: Any) -> None:
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="log progress (INFO)"
    )


def _add_execution(parser: argparse.ArgumentParser, *, scheduler: bool) -> None:
    group = parser.add_mutually_exclusive_group()
    if scheduler:
        group.add_argument(
            "--scheduler", metavar="ADDRESS", help="address of a running Dask scheduler (tcp://...)"
        )
    group.add_argument(
        "--workers",
        type=_positive_int,
        metavar="N",
        help=f"worker processes of a local Dask cluster (default {DEFAULT_WORKERS})",
    )
    group.add_argument("--sync", action="store_true", help="run in this process, without Dask")


def _client_from_args(args: argparse.Namespace) -> tuple[Any, int | None]:
    if args.sync:
        return "sync", None
    scheduler = getattr(args, "scheduler", None)
    if scheduler:
        return scheduler, None
    return None, args.workers


def _out_path(text: str) -> Path:
    """An output path; ``.`` or ``..`` made absolute, so that it has a name
    (outputs are written under a temporary sibling name, then renamed)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name the output")
    path = Path(text)
    return path.resolve() if path.name in ("", ".", "..") else path


# --------------------------------------------------------------------------- parsers


def _add_demo(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="patch GMM on a sample photograph and LDA on synthetic bars (no download)",
        description=(
            "Cut the two halves of a photograph shipped with matplotlib into 8x8 patches (one "
            "trains, one is held out), fit an L-sparse and a dense zero-mean Gaussian mixture; "
            "then fit L-sparse LDA to the synthetic bars corpus; all on one local Dask cluster. "
            "Reports "
            "heldout scores and pictures (elbo.png, clusters.png, topics.png)."
        ),
    )
    demo.add_argument("--out", type=_out_path, default=Path("lsdask-demo"), help="output folder")
    demo.add_argument("--components", type=_positive_int, default=25, help="GMM K (default 25)")
    demo.add_argument("--sparsity", type=_positive_int, default=4, help="GMM L (default 4)")
    demo.add_argument("--laps", type=_positive_int, default=10, help="GMM laps (default 10)")
    demo.add_argument(
        "--bars-laps", type=_positive_int, default=20, help="bars LDA laps (default 20)"
    )
    demo.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    _add_execution(demo, scheduler=False)
    _add_verbose(demo, argparse.SUPPRESS)


def _add_patches(sub: Any) -> None:
    patches = sub.add_parser(
        "patches",
        help="cut image folders into patches in train/heldout Zarr arrays",
        description=(
            "Cut images into square grayscale patches with their own mean removed "
            "(Hughes & Sudderth, Sec. 4) and write OUT/train.zarr and OUT/heldout.zarr, "
            "split by image."
        ),
    )
    patches.add_argument(
        "image_dirs", nargs="+", type=Path, metavar="IMAGE_DIR",
        help="folders searched recursively for .jpg, .jpeg and .png files (pooled: a random "
        "--heldout-fraction of all their images is held out)",
    )  # fmt: skip
    patches.add_argument(
        "--out", type=_out_path, required=True,
        help="output folder: new, empty, or a previous patch store (replaced when done)",
    )  # fmt: skip
    patches.add_argument("--patch-size", type=_positive_int, default=8, help="patch side")
    patches.add_argument("--stride", type=_positive_int, default=4, help="step between patches")
    patches.add_argument(
        "--batch-size", type=_positive_int, default=36816, help="patches per Zarr chunk"
    )
    patches.add_argument(
        "--heldout-fraction", type=float, default=0.1, help="fraction of images held out"
    )
    patches.add_argument("--seed", type=int, default=0, help="seed of the train/heldout split")
    patches.add_argument("--max-images", type=_positive_int, help="use only the first N images")
    _add_verbose(patches, argparse.SUPPRESS)


def _add_fit_gmm(sub: Any) -> None:
    fit = sub.add_parser(
        "fit-gmm",
        help="fit a Gaussian mixture to a Zarr array",
        description="Fit an (L-sparse) Gaussian mixture to the rows of a 2-D Zarr array.",
    )
    fit.add_argument("zarr_path", type=Path, metavar="ZARR_PATH", help="training Zarr array")
    fit.add_argument("--components", type=_positive_int, required=True, help="K")
    fit.add_argument("--sparsity", type=_positive_int, help="L (default: dense)")
    fit.add_argument("--algorithm", choices=("memo", "svi", "vb"), default="memo")
    fit.add_argument("--laps", type=_positive_int, default=10, help="maximum laps (default 10)")
    fit.add_argument(
        "--covariance", choices=("zero-mean", "full", "diag"), default="zero-mean",
        help="covariance type (default zero-mean)",
    )  # fmt: skip
    fit.add_argument(
        "--alpha", type=float, default=PATCH_ALPHA,
        help=f"weight concentration (default {PATCH_ALPHA})",
    )  # fmt: skip
    fit.add_argument("--batch-size", type=_positive_int, help="rows per batch (default chunks)")
    fit.add_argument("--heldout", type=Path, metavar="ZARR_PATH", help="heldout Zarr array")
    fit.add_argument("--out", type=_out_path, help="folder for elbo.png and clusters.png")
    fit.add_argument(
        "--save", type=_out_path, metavar="MODEL_DIR",
        help="save the fitted model there (lsdask.persist.load_gmm reads it back)",
    )  # fmt: skip
    fit.add_argument("--overwrite", action="store_true", help="replace an existing model at --save")
    fit.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    fit.add_argument(
        "--batches-per-update", type=_positive_int, metavar="N",
        help="batches visited between global steps (default: the number of workers, 1 with "
        "--sync); the same --seed gives the same model only with the same N",
    )  # fmt: skip
    _add_checkpoints(
        fit,
        "a finished run gets --laps more laps over the array as it is now (chunks appended "
        "to it are taken in)",
    )
    _add_execution(fit, scheduler=True)
    _add_verbose(fit, argparse.SUPPRESS)


def _add_checkpoints(parser: Any, resume_help: str) -> None:
    """``--checkpoint DIR`` or ``--resume DIR`` (``resume_help`` tells what a
    finished run does when resumed)."""
    checkpoints = parser.add_mutually_exclusive_group()
    checkpoints.add_argument(
        "--checkpoint", type=Path, metavar="DIR",
        help="write a checkpoint to DIR after every lap and on Ctrl-C/SIGTERM",
    )  # fmt: skip
    checkpoints.add_argument(
        "--resume", type=Path, metavar="DIR",
        help=f"continue the checkpoint in DIR (a fresh start if it holds none); {resume_help}",
    )  # fmt: skip


#: Positional inputs of each ``lsdask ingest`` format: (dest, help).
_INGEST_INPUTS: dict[str, tuple[tuple[str, str], ...]] = {
    "text": (("path_or_tar", "folder or .tar/.tar.gz archive of text files"),),
    "jsonl": (("path", "JSON lines file (.jsonl[.gz])"),),
    "table": (("path", "CSV (.csv/.tsv[.gz]) or Parquet file, or a folder of Parquet files"),),
    "ldac": (("dat", "LDA-C .dat file"), ("vocab_file", "vocabulary, one word per line")),
    "uci": (("docword", "docword.*.txt[.gz]"), ("vocab_file", "vocab.*.txt, one word a line")),
}


def _add_ingest(sub: Any) -> None:
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
        target.add_argument("--out", type=_out_path, help="corpus directory to write")
        target.add_argument(
            "--append-to", type=Path, metavar="CORPUS",
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
        p.add_argument("--max-vocab", type=_positive_int, help="keep at most N words")
        p.add_argument(
            "--vocab", type=Path, metavar="CORPUS_OR_VOCAB_TXT",
            help="impose the vocabulary of an existing corpus or a vocab.txt (one word a line)",
        )  # fmt: skip
        p.add_argument(
            "--docs-per-row-group", type=_positive_int,
            help="documents per row group, one batch (default "
            f"{config.DEFAULT_DOCS_PER_ROW_GROUP})",
        )  # fmt: skip
        p.add_argument(
            "--docs-per-file", type=_positive_int,
            help="documents per Parquet part file, whole row groups (default "
            f"{config.DEFAULT_DOCS_PER_FILE:,}); retraining takes in or retires part files",
        )  # fmt: skip
        p.add_argument("--overwrite", action="store_true", help="replace an existing corpus")
        if name in INGEST_DF_DEFAULTS:  # raw text: tokenizer options
            p.add_argument(
                "--stopwords", metavar="english|none|FILE",
                help="words to drop: the built-in English list, none, or a file of one word a "
                "line (default english; with --vocab CORPUS, that corpus's tokenizer)",
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
        _add_verbose(p, argparse.SUPPRESS)
        return p

    text = add("text", "one document per text file of a folder or tar archive")
    text.add_argument("--subset", metavar="PREFIX", help="only files whose path starts so")
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


#: ``--min-df``/``--max-df`` defaults shown by ``lsdask ingest KIND --help``
INGEST_DF_DEFAULTS = {
    kind: {"min_df": config.DEFAULT_MIN_DF, "max_df": config.DEFAULT_MAX_DF}
    for kind in ("text", "jsonl", "table")
}


def _add_fit(sub: Any) -> None:
    fit = sub.add_parser(
        "fit",
        help="fit LDA to a Parquet corpus and save the model",
        description=(
            "Fit L-sparse LDA to a Parquet corpus (one batch per row group), save the model "
            "and elbo.png in MODEL_DIR, and print the top words of the first topics."
        ),
    )
    fit.add_argument("corpus", type=Path, metavar="CORPUS", help="Parquet corpus directory")
    fit.add_argument("--topics", type=_positive_int, required=True, help="K")
    fit.add_argument(
        "--out", type=_out_path, required=True, metavar="MODEL_DIR", help="model folder"
    )
    sparsity = fit.add_mutually_exclusive_group()
    sparsity.add_argument("--sparsity", type=_positive_int, default=8, help="L (default 8)")
    sparsity.add_argument("--dense", action="store_true", help="dense local step (no L)")
    fit.add_argument("--algorithm", choices=("memo", "svi", "vb"), default="memo")
    fit.add_argument("--laps", type=_positive_int, default=10, help="maximum laps (default 10)")
    fit.add_argument(
        "--alpha", type=_positive_float, default=0.5,
        help="document-topic concentration in total, alpha/K per topic (default 0.5)",
    )  # fmt: skip
    fit.add_argument(
        "--eta", type=_positive_float, default=0.1, help="topic-word pseudo-count (default 0.1)"
    )
    fit.add_argument(
        "--no-restarts", action="store_true", help="no restart proposals in the local step"
    )
    fit.add_argument("--heldout", type=Path, metavar="CORPUS", help="heldout corpus to score")
    fit.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    fit.add_argument(
        "--batches-per-update", type=_positive_int, metavar="N",
        help="batches visited between global steps (default: the number of workers, 1 with "
        "--sync); the same --seed gives the same model only with the same N",
    )  # fmt: skip
    fit.add_argument(
        "--init", default="auto", metavar="{auto,kmeans++,random,gibbs,MODEL_DIR,FILE.npy}",
        help="how the topics start: collapsed Gibbs sampling on the corpus or a sample of it "
        "(gibbs: slower to start, better topics), k-means++ seed documents, random "
        "ones, the topics of a saved model over the same vocabulary, or topic-word counts "
        "(K, V) saved with numpy.save; auto (default): gibbs where the counts are whole "
        "tokens, else kmeans++",
    )  # fmt: skip
    fit.add_argument(
        "--gibbs-sweeps", type=_positive_int, default=config.GIBBS_SWEEPS, metavar="N",
        help=f"sweeps of the Gibbs start (--init gibbs or auto; default {config.GIBBS_SWEEPS})",
    )  # fmt: skip
    fit.add_argument(
        "--gibbs-tokens", type=_positive_int, default=config.GIBBS_SAMPLE_TOKENS, metavar="N",
        help="tokens the Gibbs start samples at most: the whole corpus when it holds fewer "
        f"(default {config.GIBBS_SAMPLE_TOKENS:,}); its time and memory grow with it",
    )  # fmt: skip
    fit.add_argument("--overwrite", action="store_true", help="replace an existing MODEL_DIR")
    _add_checkpoints(
        fit,
        "a finished run gets --laps more laps over the corpus as it is now (part files added "
        "to or removed from it are taken in); replaces the model in --out",
    )
    _add_execution(fit, scheduler=True)
    _add_verbose(fit, argparse.SUPPRESS)


def _add_topics(sub: Any) -> None:
    topics = sub.add_parser(
        "topics",
        help="print a saved LDA model's topics (with coherence over a corpus)",
        description="Print each topic's top words; with --corpus, UMass coherence too.",
    )
    topics.add_argument("model_dir", type=Path, metavar="MODEL_DIR", help="saved model")
    topics.add_argument(
        "--top", type=_positive_int, default=10, help="words per topic (default 10)"
    )
    topics.add_argument("--corpus", type=Path, metavar="CORPUS", help="corpus for coherence")
    _add_verbose(topics, argparse.SUPPRESS)


def _add_transform(sub: Any) -> None:
    transform = sub.add_parser(
        "transform",
        help="write each document's top-L topic weights to Parquet",
        description=(
            "Write one row per document of CORPUS: doc_id, topics and weights (its top-L "
            "document-topic weights under the saved model), one row group per corpus batch. "
            "The batches are transformed on a Dask cluster (a local one of --workers "
            "processes by default, for a corpus of more than one row group)."
        ),
    )
    transform.add_argument("model_dir", type=Path, metavar="MODEL_DIR", help="saved model")
    transform.add_argument("corpus", type=Path, metavar="CORPUS", help="Parquet corpus")
    transform.add_argument("--out", type=_out_path, required=True, help="Parquet file to write")
    transform.add_argument("--overwrite", action="store_true", help="replace an existing file")
    _add_execution(transform, scheduler=True)
    _add_verbose(transform, argparse.SUPPRESS)


def build_parser() -> argparse.ArgumentParser:
    """Return the ``lsdask`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="lsdask",
        description="L-sparse variational inference for mixtures and topic models, on Dask.",
    )
    _add_verbose(parser, False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (
        _add_demo, _add_patches, _add_fit_gmm, _add_ingest, _add_fit, _add_topics,
        _add_transform,
    ):  # fmt: skip
        add(sub)
    return parser


# --------------------------------------------------------------------------- commands


def _cmd_demo(args: argparse.Namespace) -> int:
    from lsdask.jobs.demo import format_demo_report, run_full_demo

    client, n_workers = _client_from_args(args)
    print(
        f"lsdask demo: patch GMM (K={args.components}, L={args.sparsity} and dense), then "
        f"bars LDA, {describe_client(client, n_workers)} ..."
    )
    sys.stdout.flush()
    result = run_full_demo(
        args.out,
        n_components=args.components,
        sparsity=args.sparsity,
        n_laps=args.laps,
        bars_laps=args.bars_laps,
        client=client,
        n_workers=n_workers,
        random_state=args.seed,
        verbose=args.verbose,
        progress=None,
    )
    print(format_demo_report(result))
    print(f"\ntotal time: {result['seconds']:.1f} s")
    return 0


def _cmd_patches(args: argparse.Namespace) -> int:
    from lsdask.io.patches import find_images
    from lsdask.jobs.patch_gmm import format_patches_summary, prepare_patches

    images = [path for folder in args.image_dirs for path in find_images(folder)]
    summary = prepare_patches(
        images,
        args.out,
        patch_size=args.patch_size,
        stride=args.stride,
        batch_size=args.batch_size,
        heldout_fraction=args.heldout_fraction,
        random_state=args.seed,
        max_images=args.max_images,
        progress=None,
    )
    print(format_patches_summary(summary))
    return 0


def _cmd_fit_gmm(args: argparse.Namespace) -> int:
    from lsdask.jobs.patch_gmm import fit_and_report, format_report

    for name, path in (("ZARR_PATH", args.zarr_path), ("--heldout", args.heldout)):
        if path is not None and not path.exists():
            raise FileNotFoundError(f"{name}: no Zarr array at {str(path)!r}")
    if args.save is not None:
        from lsdask.persist.lda import check_save_target

        check_save_target(args.save, args.overwrite)  # before the fit, not after it
    client, n_workers = _client_from_args(args)
    result = fit_and_report(
        str(args.zarr_path),
        args.out,
        heldout=None if args.heldout is None else str(args.heldout),
        n_components=args.components,
        sparsity=args.sparsity,
        n_laps=args.laps,
        covariance_type=args.covariance,
        algorithm=args.algorithm,
        compare_dense=False,
        alpha=args.alpha,
        batch_size=args.batch_size,
        random_state=args.seed,
        client=client,
        n_workers=n_workers,
        verbose=args.verbose,
        progress=None,
        checkpoint_dir=args.resume or args.checkpoint,
        resume=args.resume is not None,
        batches_per_update=args.batches_per_update,
    )
    print(format_report(result, title=f"lsdask fit-gmm {args.zarr_path}"))
    if args.save is not None:
        from lsdask.persist.gmm import save_gmm

        model = next(iter(result["models"].values()))
        print(f"model: saved to {save_gmm(model, args.save, overwrite=args.overwrite)}")
    return 0


def _cmd_ingest(args: argparse.Namespace) -> int:
    from lsdask.jobs.ingest import format_ingest_summary, run_ingest

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
        options["tokenizer"] = _tokenizer_from_args(args)
    if args.kind == "text":
        options.update(subset=args.subset, encoding=args.encoding, strip_headers=args.strip_headers)
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
        vocab=args.vocab, append=appending,
    )  # fmt: skip
    print(format_ingest_summary(summary))
    return 0


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
    from lsdask.io.corpus.store import Corpus
    from lsdask.io.ingest.common import recorded_tokenizer

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
    try:
        return {w.strip() for w in path.read_text(encoding="utf-8").splitlines() if w.strip()}
    except UnicodeDecodeError as exc:
        raise ValueError(f"--stopwords: {str(path)!r} is not UTF-8 text: {exc}") from exc


def _cmd_fit(args: argparse.Namespace) -> int:
    from lsdask.jobs.corpus_lda import fit_corpus_lda, format_fit_report

    client, n_workers = _client_from_args(args)
    result = fit_corpus_lda(
        args.corpus,
        args.out,
        n_components=args.topics,
        sparsity=None if args.dense else args.sparsity,
        algorithm=args.algorithm,
        n_laps=args.laps,
        alpha=args.alpha,
        eta=args.eta,
        restarts=not args.no_restarts,
        heldout=args.heldout,
        random_state=args.seed,
        client=client,
        n_workers=n_workers,
        overwrite=args.overwrite or args.resume is not None,
        verbose=args.verbose,
        progress=None,
        checkpoint_dir=args.resume or args.checkpoint,
        resume=args.resume is not None,
        init=args.init,
        gibbs_sweeps=args.gibbs_sweeps,
        gibbs_tokens=args.gibbs_tokens,
        batches_per_update=args.batches_per_update,
    )
    print(format_fit_report(result, title=f"lsdask fit {args.corpus}"))
    return 0


def _cmd_topics(args: argparse.Namespace) -> int:
    from lsdask.jobs.corpus_lda import format_topics, topic_report

    print(format_topics(topic_report(args.model_dir, n_top=args.top, corpus=args.corpus)))
    return 0


def _cmd_transform(args: argparse.Namespace) -> int:
    from lsdask.jobs.corpus_lda import format_transform_summary, transform_corpus

    client, n_workers = _client_from_args(args)
    result = transform_corpus(
        args.model_dir, args.corpus, args.out, overwrite=args.overwrite, client=client,
        n_workers=n_workers,
    )  # fmt: skip
    print(format_transform_summary(result))
    return 0


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": _cmd_demo,
    "patches": _cmd_patches,
    "fit-gmm": _cmd_fit_gmm,
    "ingest": _cmd_ingest,
    "fit": _cmd_fit,
    "topics": _cmd_topics,
    "transform": _cmd_transform,
}


class _TerseFormatter(logging.Formatter):
    """``lsdask: warning: ...`` for warnings and errors, ``lsdask: ...`` for notices."""

    def format(self, record: logging.LogRecord) -> str:
        kind = "warning: " if record.levelno >= logging.WARNING else ""
        return f"lsdask: {kind}{record.getMessage()}"


def _warnings_and_notices(record: logging.LogRecord) -> bool:
    """What reaches stderr without -v: warnings, and the INFO lines logged with
    ``extra=lsdask.config.NOTICE`` (the Dask dashboard's address)."""
    return record.levelno >= logging.WARNING or getattr(record, "notice", False)


class _DaskClientErrors(logging.Filter):
    """Drops the ERROR records of the Dask client and its connections (tracebacks
    of its reconnection attempts): a failing cluster is reported as one lsdask
    line. Dask's warnings (a worker over its memory limit, say) still show."""

    _NAMES = ("distributed.client", "distributed.comm", "distributed.core")

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno >= logging.ERROR and record.name.startswith(self._NAMES))


def _quiet_dask() -> list[tuple[logging.Handler, logging.Filter]]:
    """Put a :class:`_DaskClientErrors` on the handlers of Dask's loggers; returns
    them, to remove it.

    Filters go on the handlers: Dask configures its loggers when it is imported
    (so it is imported here), several with a handler of their own and no
    propagation."""
    import distributed  # noqa: F401  (configures its loggers)

    quiet = _DaskClientErrors()
    handlers = [
        h
        for name, log in logging.root.manager.loggerDict.items()
        if (name == "distributed" or name.startswith("distributed."))
        and isinstance(log, logging.Logger)
        for h in log.handlers
    ]
    for h in handlers:
        h.addFilter(quiet)
    return [(h, quiet) for h in handlers]


def _is_cluster_failure(err: BaseException) -> bool:
    """A failure of the Dask cluster under the command, not of lsdask's code."""
    from lsdask.errors import ClusterError

    return isinstance(err, ClusterError) or type(err).__module__.startswith("distributed.")


def _cluster_failure_message(err: BaseException) -> str:
    from lsdask.engine.dask_executor import one_line
    from lsdask.errors import ClusterError

    if isinstance(err, ClusterError):
        return str(err)
    return (
        f"the Dask cluster failed ({type(err).__name__}: {one_line(err, 300)}). "
        "Check that its scheduler and workers run (their logs say why they stopped); a fit "
        "with a checkpoint folder resumes from its last lap (--resume DIR)"
    )


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``lsdask`` command line; return the exit status.

    Bad input (a ``ValueError``, ``FileNotFoundError`` or
    ``FileExistsError``) is reported as one line ``lsdask: error: <message>``
    on stderr with status 2; argument errors exit with status 2 through
    argparse. A failing Dask cluster (its scheduler gone, its workers lost
    beyond the executor's retries) is one such line with status 1; without
    ``-v`` the Dask client's own error records (reconnection tracebacks) are
    dropped, its warnings kept. SIGTERM exits with
    143, Ctrl-C with 130.
    """
    args = build_parser().parse_args(argv)
    package_logger = logging.getLogger("lsdask")
    old_level = package_logger.level
    # warnings and notices always reach stderr (the package's NullHandler would
    # swallow them); -v adds the INFO lines, with times
    handler = logging.StreamHandler(sys.stderr)
    package_logger.setLevel(logging.INFO)
    if args.verbose:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
        )
    else:
        handler.setFormatter(_TerseFormatter())
        handler.addFilter(_warnings_and_notices)
    package_logger.addHandler(handler)
    # without -v, a failing cluster is one "lsdask: error:" line, not also the Dask
    # client's own log of it with tracebacks (its workers' logs are their own)
    dask_handlers = [] if args.verbose or getattr(args, "sync", True) else _quiet_dask()
    in_main_thread = threading.current_thread() is threading.main_thread()
    old_sigterm = signal.signal(signal.SIGTERM, _terminate) if in_main_thread else None
    try:
        return _COMMANDS[args.command](args)
    except (ValueError, FileNotFoundError, FileExistsError) as err:
        print(f"lsdask: error: {err}", file=sys.stderr)
        return 2
    except FitInterrupted as stop:
        started = getattr(args, "checkpoint", None)
        how = (
            f"the same command with --resume {started} in place of --checkpoint {started}"
            if started is not None
            else "the same command"
        )
        print(
            f"lsdask: stopped; checkpoint written to {stop.checkpoint}. Continue with {how}.",
            file=sys.stderr,
        )
        # as a shell reports a process ended by the signal: 143 for SIGTERM, 130 for Ctrl-C
        return 128 + (stop.signal or signal.SIGINT)
    except Exception as err:
        if not _is_cluster_failure(err):
            raise
        print(f"lsdask: error: {_cluster_failure_message(err)}", file=sys.stderr)
        # the Dask client goes on logging its reconnection attempts until the process
        # exits: the filter stays past this return (it drops only those records)
        dask_handlers = []
        return 1
    except Terminated:
        print("lsdask: terminated (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("lsdask: interrupted", file=sys.stderr)
        return 130
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, old_sigterm)
        for h, quiet in dask_handlers:
            h.removeFilter(quiet)
        package_logger.removeHandler(handler)
        package_logger.setLevel(old_level)
