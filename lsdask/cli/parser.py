"""The ``lsdask`` argument parser: one subcommand per entry of :data:`COMMANDS`."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from lsdask.cli import demo, documents, gmm, ingest, lda, patches, report
from lsdask.cli.options import add_storage_options, add_verbose

__all__ = ["COMMANDS", "build_parser"]

#: the commands that read or write corpora and models, which may be in stores
ON_STORES = ("fit", "topics", "score", "transform", "docs", "report")  # ingest: per format

#: each command's name, the function that adds its parser and the one that runs it
COMMANDS: dict[str, tuple[Callable[[Any], None], Callable[[argparse.Namespace], int]]] = {
    "demo": (demo.add_parser, demo.run),
    "patches": (patches.add_parser, patches.run),
    "fit-gmm": (gmm.add_parser, gmm.run),
    "ingest": (ingest.add_parser, ingest.run),
    "fit": (lda.add_fit, lda.run_fit),
    "topics": (lda.add_topics, lda.run_topics),
    "score": (lda.add_score, lda.run_score),
    "transform": (lda.add_transform, lda.run_transform),
    "docs": (documents.add_parser, documents.run),
    "report": (report.add_parser, report.run),
}


def build_parser() -> argparse.ArgumentParser:
    """Return the ``lsdask`` argument parser."""
    parser = argparse.ArgumentParser(
        prog="lsdask",
        description="L-sparse variational inference for mixtures and topic models, on Dask.",
    )
    add_verbose(parser, False)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (add, _) in COMMANDS.items():
        add(sub)
        if name in ON_STORES:
            add_storage_options(sub.choices[name])
    return parser
