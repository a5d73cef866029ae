"""``lsdask report``: a saved topic model's topics as one self-contained HTML page."""

from __future__ import annotations

import argparse
from typing import Any

from lsdask.cli.options import (
    add_execution,
    add_texts,
    add_verbose,
    client_from_args,
    out_path,
    path_or_url,
)
from lsdask.jobs.report import format_summary, write_report
from lsdask.validation import parse_positive_int

__all__ = ["add_parser", "run"]


def add_parser(sub: Any) -> None:
    report = sub.add_parser(
        "report",
        help="write a saved LDA or HDP model's topics as one HTML page",
        description=(
            "Write one self-contained HTML file (it opens from disk, with no network): an "
            "intertopic distance map (Jensen-Shannon distances scaled to 2-D, circle area "
            "the topic's share), each topic's terms ranked by relevance with a lambda "
            "slider, its top documents of CORPUS, UMass and NPMI coherence, an HDP's "
            "weights, and the fit's ELBO, heldout and K traces."
        ),
    )
    report.add_argument("model_dir", type=path_or_url, metavar="MODEL_DIR", help="saved model")
    report.add_argument(
        "--corpus", type=path_or_url, metavar="CORPUS",
        help="Parquet corpus over the model's vocabulary (usually its training corpus): "
        "word frequencies, coherence and top documents (without it: none of these)",
    )  # fmt: skip
    report.add_argument(
        "--out", type=out_path, required=True, metavar="FILE", help="the HTML file to write"
    )
    report.add_argument(
        "--terms", type=parse_positive_int, default=30, metavar="N",
        help="terms shown per topic (default 30)",
    )  # fmt: skip
    report.add_argument(
        "--docs", type=parse_positive_int, default=10, metavar="N",
        help="top documents per topic (default 10)",
    )  # fmt: skip
    add_texts(report, "the top documents' first words")
    report.add_argument("--overwrite", action="store_true", help="replace an existing FILE")
    add_execution(report, scheduler=True)
    add_verbose(report, argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    client, n_workers = client_from_args(args)
    summary = write_report(
        args.model_dir, args.out, corpus=args.corpus, n_terms=args.terms, n_docs=args.docs,
        overwrite=args.overwrite, texts=args.texts, client=client, n_workers=n_workers,
    )  # fmt: skip
    print(format_summary(summary))
    return 0
