"""``lsdask fit``, ``topics`` and ``transform``: LDA on a Parquet corpus.

``fit`` takes the model's options from :data:`lsdask.estimators.params.LDA_PARAMS`
(:mod:`lsdask.cli.params`), builds the estimator and runs
:func:`lsdask.jobs.corpus_lda.fit_corpus_lda` on it; ``topics`` and
``transform`` read a saved model (:mod:`lsdask.jobs.topics`,
:mod:`lsdask.jobs.transform`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from lsdask.cli.ingest import add_lock_options
from lsdask.cli.options import (
    add_execution,
    add_fit_options,
    add_verbose,
    client_from_args,
    out_path,
)
from lsdask.cli.params import add_params, params_from_args, run_params
from lsdask.estimators.lda import LDA
from lsdask.estimators.params import LDA_PARAMS
from lsdask.io.locks import lock_settings
from lsdask.jobs.corpus_lda import fit_corpus_lda, format_fit_report
from lsdask.jobs.topics import format_topics, topic_report
from lsdask.jobs.transform import format_transform_summary, transform_corpus
from lsdask.validation import parse_positive_int

__all__ = ["add_fit", "add_topics", "add_transform", "run_fit", "run_topics", "run_transform"]

#: ``fit``'s model options, its run's, and how the topics start (the job's
#: options stand between them)
MODEL = ("sparsity", "algorithm", "n_laps", "alpha", "eta", "restarts")
RUN = ("random_state", "batches_per_update", "init", "gibbs_sweeps", "gibbs_tokens")


def add_fit(sub: Any) -> None:
    fit = sub.add_parser(
        "fit",
        help="fit LDA to a Parquet corpus and save the model",
        description=(
            "Fit L-sparse LDA to a Parquet corpus (one batch per row group), save the model "
            "and elbo.png in MODEL_DIR, and print the top words of the first topics."
        ),
    )
    fit.add_argument("corpus", type=Path, metavar="CORPUS", help="Parquet corpus directory")
    add_params(fit, LDA_PARAMS, ["n_components"])
    fit.add_argument(
        "--out", type=out_path, required=True, metavar="MODEL_DIR", help="model folder"
    )
    add_params(fit, LDA_PARAMS, MODEL)
    fit.add_argument("--heldout", type=Path, metavar="CORPUS", help="heldout corpus to score")
    add_params(fit, LDA_PARAMS, RUN)
    fit.add_argument("--overwrite", action="store_true", help="replace an existing MODEL_DIR")
    add_fit_options(
        fit,
        "a finished run gets --laps more laps over the corpus as it is now (part files added "
        "to or removed from it are taken in); replaces the model in --out",
    )
    add_lock_options(fit, "with --checkpoint/--resume: ")


def run_fit(args: argparse.Namespace) -> int:
    model = LDA(**params_from_args(args, ("n_components", *MODEL, *RUN)), **run_params(args))
    # the checkpoint folder's lock: another fit on it is waited for or refused
    with lock_settings(wait=args.wait, enabled=not args.no_lock):
        report = fit_corpus_lda(
            model,
            args.corpus,
            out_dir=args.out,
            heldout=args.heldout,
            overwrite=args.overwrite or args.resume is not None,
        )
    print(format_fit_report(report, title=f"lsdask fit {args.corpus}"))
    return 0


def add_topics(sub: Any) -> None:
    topics = sub.add_parser(
        "topics",
        help="print a saved LDA model's topics (with coherence over a corpus)",
        description="Print each topic's top words; with --corpus, UMass coherence too.",
    )
    topics.add_argument("model_dir", type=Path, metavar="MODEL_DIR", help="saved model")
    topics.add_argument(
        "--top", type=parse_positive_int, default=10, help="words per topic (default 10)"
    )
    topics.add_argument("--corpus", type=Path, metavar="CORPUS", help="corpus for coherence")
    add_verbose(topics, argparse.SUPPRESS)


def run_topics(args: argparse.Namespace) -> int:
    print(format_topics(topic_report(args.model_dir, n_top=args.top, corpus=args.corpus)))
    return 0


def add_transform(sub: Any) -> None:
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
    transform.add_argument("--out", type=out_path, required=True, help="Parquet file to write")
    transform.add_argument("--overwrite", action="store_true", help="replace an existing file")
    add_execution(transform, scheduler=True)
    add_verbose(transform, argparse.SUPPRESS)


def run_transform(args: argparse.Namespace) -> int:
    client, n_workers = client_from_args(args)
    summary = transform_corpus(
        args.model_dir, args.corpus, args.out, overwrite=args.overwrite, client=client,
        n_workers=n_workers,
    )  # fmt: skip
    print(format_transform_summary(summary))
    return 0
