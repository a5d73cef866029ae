"""``lsdask fit --table``: the options of a table read in place, and the table they make.

A Parquet dataset or (with ``--delta``) a Delta Lake table is fitted where it
lies (:mod:`lsdask.io.tables`, docs/tables.md) in place of a corpus: its words
come from ``--tokens-column`` (with ``--vocabulary``) or ``--text-column``.
"""

from __future__ import annotations

import argparse
from typing import Any

from lsdask.cli.ingest import _count_or_fraction
from lsdask.validation import parse_nonnegative_int, parse_positive_int

__all__ = ["TABLE_OPTIONS", "add_table_options", "table_from_args"]

#: the destinations of the table options (absent from the namespace unless given)
TABLE_OPTIONS = (
    "table", "delta", "table_version", "tokens_column", "counts_column", "text_column",
    "vocabulary", "min_df", "max_df", "max_vocab",
)  # fmt: skip


def add_table_options(group: argparse._ActionsContainer) -> None:
    """The options of ``lsdask fit --table`` (absent from the namespace unless given)."""
    hidden = argparse.SUPPRESS
    group.add_argument(
        "--table", metavar="PATH_OR_URL", default=hidden,
        help="fit a Parquet dataset that another tool wrote (a folder or URL of Parquet "
        "files, hive-partitioned or not), read in place, instead of CORPUS",
    )  # fmt: skip
    group.add_argument(
        "--delta", action="store_true", default=hidden,
        help="--table is a Delta Lake table (pip install 'lsdask[delta]')",
    )  # fmt: skip
    group.add_argument(
        "--table-version", type=parse_nonnegative_int, metavar="N", default=hidden,
        help="with --delta: the table version to read (default: the current one)",
    )  # fmt: skip
    words = group.add_mutually_exclusive_group()
    words.add_argument(
        "--tokens-column", metavar="COLUMN", default=hidden,
        help="the column of token-id lists (list<int>, one id per token) of --vocabulary",
    )  # fmt: skip
    words.add_argument(
        "--text-column", metavar="COLUMN", default=hidden,
        help="the column of text, cut into words as lsdask ingest does",
    )  # fmt: skip
    group.add_argument(
        "--counts-column", metavar="COLUMN", default=hidden,
        help="with --tokens-column: the count of each token id (a parallel list column)",
    )  # fmt: skip
    group.add_argument(
        "--vocabulary", metavar="FILE_OR_URL", default=hidden,
        help="the words the token ids index, one per line (a model's vocab.txt); with "
        "--text-column, default: built from the table (--min-df, --max-df, --max-vocab)",
    )  # fmt: skip
    group.add_argument(
        "--min-df", type=_count_or_fraction, default=hidden,
        help="with --text-column and no --vocabulary: drop words in fewer documents (a count, "
        "or a fraction such as 0.01; default 5)",
    )  # fmt: skip
    group.add_argument(
        "--max-df", type=_count_or_fraction, default=hidden,
        help="as --min-df: drop words in more documents (default 0.5)",
    )  # fmt: skip
    group.add_argument(
        "--max-vocab", type=parse_positive_int, default=hidden,
        help="as --min-df: keep at most N words",
    )  # fmt: skip


def table_from_args(args: argparse.Namespace, corpus: Any) -> Any:
    """The table of ``--table`` and its options (None without ``--table``).

    Raises
    ------
    ValueError
        A table option without ``--table``, ``--table`` with a CORPUS, neither,
        or options that do not go together (the table's own checks).
    """
    given = [name for name in TABLE_OPTIONS if hasattr(args, name)]
    flags = ", ".join("--" + name.replace("_", "-") for name in given if name != "table")
    if not hasattr(args, "table"):
        if given:
            raise ValueError(f"{flags}: options of a table read in place; they need --table")
        if corpus is None:
            raise ValueError("give a CORPUS to fit, or a table read in place: --table PATH")
        return None
    if corpus is not None:
        raise ValueError(f"give a CORPUS ({corpus}) or --table ({args.table}), not both")
    if hasattr(args, "table_version") and not hasattr(args, "delta"):
        raise ValueError("--table-version is a Delta table's version; it needs --delta")
    if not (hasattr(args, "tokens_column") or hasattr(args, "text_column")):
        raise ValueError("--table needs --tokens-column or --text-column: the column of words")
    from lsdask.io.stores import parse_storage_options
    from lsdask.io.tables import DeltaTable, ParquetTable

    options: dict[str, Any] = {
        "tokens": getattr(args, "tokens_column", None),
        "counts": getattr(args, "counts_column", None),
        "text": getattr(args, "text_column", None),
        "vocabulary": getattr(args, "vocabulary", None),
        "storage_options": parse_storage_options(getattr(args, "storage_option", None) or []),
        "min_df": getattr(args, "min_df", None),
        "max_df": getattr(args, "max_df", None),
        "max_vocab": getattr(args, "max_vocab", None),
    }
    if hasattr(args, "delta"):
        return DeltaTable(args.table, version=getattr(args, "table_version", None), **options)
    return ParquetTable(args.table, **options)
