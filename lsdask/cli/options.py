"""Options several ``lsdask`` commands share: output paths, logging, where jobs
run (``--scheduler``/``--workers``/``--sync``) and checkpoints."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lsdask.io.stores import is_store_url
from lsdask.jobs.cluster import DEFAULT_WORKERS, dask_client
from lsdask.validation import parse_positive_int

__all__ = [
    "add_checkpoints",
    "add_execution",
    "add_fit_options",
    "add_storage_options",
    "add_texts",
    "add_verbose",
    "client_from_args",
    "local_cluster_from_args",
    "out_path",
    "path_or_url",
]


def path_or_url(text: str) -> Path | str:
    """A local path, or a store URL (``s3://bucket/prefix``: kept as text, which a
    Path would fold)."""
    if is_store_url(text):
        return text
    return Path(text)


def out_path(text: str) -> Path | str:
    """An output path; ``.`` or ``..`` made absolute, so that it has a name
    (outputs are written under a temporary sibling name, then renamed); a store
    URL as it is."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name the output")
    if is_store_url(text):
        return text
    path = Path(text)
    return path.resolve() if path.name in ("", ".", "..") else path


def add_storage_options(parser: argparse._ActionsContainer) -> None:
    """``--storage-option KEY=VALUE`` (repeatable): fsspec options of the store
    URLs the command reads or writes."""
    parser.add_argument(
        "--storage-option", action="append", metavar="KEY=VALUE", default=None,
        help="an option of the file system of store URLs (fsspec), e.g. anon=true or "
        "client_kwargs.endpoint_url=http://host:9000 (repeatable; docs/storage.md)",
    )  # fmt: skip


def add_verbose(parser: argparse._ActionsContainer, default: Any) -> None:
    parser.add_argument(
        "-v", "--verbose", action="store_true", default=default, help="log progress (INFO)"
    )


def add_execution(parser: argparse._ActionsContainer, *, scheduler: bool) -> None:
    """``--scheduler ADDRESS`` (with ``scheduler``), ``--workers N`` or ``--sync``."""
    group = parser.add_mutually_exclusive_group()
    if scheduler:
        group.add_argument(
            "--scheduler", metavar="ADDRESS", help="address of a running Dask scheduler (tcp://...)"
        )
    group.add_argument(
        "--workers",
        type=parse_positive_int,
        metavar="N",
        help=f"worker processes of a local Dask cluster (default {DEFAULT_WORKERS})",
    )
    group.add_argument("--sync", action="store_true", help="run in this process, without Dask")
    parser.add_argument(
        "--dashboard-address",
        metavar="ADDRESS",
        help="HOST:PORT of the local cluster's Dask dashboard, e.g. 0.0.0.0:8787 to open it "
        "to other machines (default: a free port on 127.0.0.1)",
    )


@contextlib.contextmanager
def local_cluster_from_args(args: argparse.Namespace) -> Iterator[None]:
    """With ``--dashboard-address``: start the command's LocalCluster (of
    ``--workers``) with its dashboard there, for the time of the block, and
    let :func:`client_from_args` hand out its client. A ValueError (nothing
    started) with ``--scheduler`` or ``--sync``. Without it: nothing."""
    address = getattr(args, "dashboard_address", None)
    if address is None:
        yield
        return
    if getattr(args, "sync", False) or getattr(args, "scheduler", None):
        other = "--sync" if args.sync else "--scheduler"
        raise ValueError(
            f"--dashboard-address goes with a local cluster, not with {other} "
            "(no cluster is started here)"
        )
    with dask_client(None, args.workers, dashboard_address=address) as client:
        args.started_client = client
        try:
            yield
        finally:
            del args.started_client


def client_from_args(args: argparse.Namespace) -> tuple[Any, int | None]:
    """``(client, n_workers)`` of the execution options, as the estimators take them
    (the client of :func:`local_cluster_from_args` while it runs)."""
    started = getattr(args, "started_client", None)
    if started is not None:
        return started, args.workers
    if args.sync:
        return "sync", None
    scheduler = getattr(args, "scheduler", None)
    if scheduler:
        return scheduler, None
    return None, args.workers


def add_checkpoints(parser: argparse._ActionsContainer, resume_help: str) -> None:
    """``--checkpoint DIR`` or ``--resume DIR`` (``resume_help`` tells what a
    finished run does when resumed)."""
    checkpoints = parser.add_mutually_exclusive_group()
    checkpoints.add_argument(
        "--checkpoint", type=path_or_url, metavar="DIR",
        help="write a checkpoint to DIR after every lap and on Ctrl-C/SIGTERM",
    )  # fmt: skip
    checkpoints.add_argument(
        "--resume", type=path_or_url, metavar="DIR",
        help=f"continue the checkpoint in DIR (a fresh start if it holds none); {resume_help}",
    )  # fmt: skip


def add_fit_options(parser: argparse._ActionsContainer, resume_help: str) -> None:
    """The options every fitting command ends with: checkpoints (``resume_help``
    as for :func:`add_checkpoints`), where it runs, and ``-v``."""
    add_checkpoints(parser, resume_help)
    add_execution(parser, scheduler=True)
    add_verbose(parser, argparse.SUPPRESS)


def add_texts(parser: argparse._ActionsContainer, shown: str) -> None:
    """``--texts FOLDER_OR_TAR``: where the documents' text is read, ``shown`` says
    what of it (e.g. "each document's first words")."""
    parser.add_argument(
        "--texts", type=Path, metavar="FOLDER_OR_TAR",
        help=f"the folder (or tar archive) of text files the corpus was ingested from: "
        f"{shown} are read there (never from a folder the corpus names)",
    )  # fmt: skip
