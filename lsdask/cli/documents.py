"""``lsdask docs``: a saved topic model's topics back to the documents most about them."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lsdask.cli.options import (
    add_execution,
    add_texts,
    add_verbose,
    client_from_args,
    path_or_url,
)
from lsdask.jobs.documents import TopDocuments, format_top_documents, top_documents
from lsdask.validation import parse_positive_int

__all__ = ["add_parser", "run"]


def _topic_id(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a topic id (0, 1, ...), got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"topic ids count from 0; got {value}")
    return value


def add_parser(sub: Any) -> None:
    docs = sub.add_parser(
        "docs",
        help="list the documents most about each topic of a saved model",
        description=(
            "For each topic (or those given with --topic), list the --top documents of "
            "CORPUS most about it, by their posterior share E[pi_dk] of the topic: rank, "
            "share, length, doc_id, the document's name (the file it was ingested from, "
            "where the corpus records it) and, with --texts, its first words. One pass over "
            "the corpus, on a Dask cluster for a corpus of more than one row group."
        ),
    )
    docs.add_argument(
        "model_dir", type=path_or_url, metavar="MODEL_DIR", help="saved model (LDA or HDP)"
    )
    docs.add_argument(
        "--corpus", type=path_or_url, required=True, metavar="CORPUS",
        help="Parquet corpus over the model's vocabulary (usually its training corpus)",
    )  # fmt: skip
    docs.add_argument(
        "--topic", type=_topic_id, action="append", metavar="K",
        help="a topic to list (repeat for several; default: every topic)",
    )  # fmt: skip
    docs.add_argument(
        "--top", type=parse_positive_int, default=10, metavar="N",
        help="documents per topic (default 10)",
    )  # fmt: skip
    add_texts(docs, "each document's first words")
    docs.add_argument(
        "--words", type=int, default=30, metavar="N",
        help="words of each document's text to show with --texts (default 30)",
    )  # fmt: skip
    docs.add_argument(
        "--format", choices=("text", "json"), default="text",
        help="text (default) or json: one object per topic with its documents",
    )  # fmt: skip
    add_execution(docs, scheduler=True)
    add_verbose(docs, argparse.SUPPRESS)


def as_json(found: TopDocuments) -> str:
    """:class:`TopDocuments` as JSON: the corpus, K, and each topic's documents."""
    return json.dumps(
        {
            "corpus": found.corpus,
            "K": found.K,
            "n_docs": found.n_docs,
            "topics": [
                {
                    "topic": k,
                    "documents": [
                        {
                            "doc_id": h.doc_id,
                            "name": h.name,
                            "share": h.share,
                            "tokens": h.tokens,
                            "text": h.text,
                        }
                        for h in hits
                    ],
                }
                for k, hits in found.by_topic.items()
            ],
        },
        indent=1,
    )


def run(args: argparse.Namespace) -> int:
    if args.words < 0:
        raise ValueError(f"--words must be 0 or more; got {args.words}")
    client, n_workers = client_from_args(args)
    found = top_documents(
        args.model_dir, args.corpus, topics=args.topic, n=args.top, text_words=args.words,
        texts=args.texts, client=client, n_workers=n_workers,
    )  # fmt: skip
    print(as_json(found) if args.format == "json" else format_top_documents(found))
    return 0
