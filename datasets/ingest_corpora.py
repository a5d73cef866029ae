"""Convert the shared text datasets into lsdask Parquet corpora.

Writes, under ``--out``:

* ``ap/``: the Associated Press corpus (LDA-C ``ap.dat`` + ``vocab.txt``),
  imported as it is;
* ``20news/``: the 20 Newsgroups "bydate" training split, read from the
  tar.gz (latin-1), each post's mail header dropped, tokenized with the
  default tokenizer (lower case, words of two or more letters, English
  stopwords removed) and pruned with ``min_df=5``, ``max_df=0.5``;
* ``20news-test/``: the test split over the training vocabulary (words the
  training split does not know are dropped and counted);
* ``imdb/``: the 95,000 movie reviews of the Large Movie Review Dataset (train
  and test, labelled or not, in archive order), tokenized as 20 Newsgroups with
  ``br`` (of the reviews' ``<br />`` tags) also dropped, pruned with
  ``min_df=5`` and ``max_vocab=20000`` (no ``max_df``: "movie" and "film"
  stay, in about 10.1M tokens, 106 per review).

It prints the summaries of the corpora written, as JSON.

Example::

    python datasets/ingest_corpora.py --shared ../shared/data --out data/corpora
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:
    from lsdask.io import ingest
    from lsdask.io.corpus import Corpus
    from lsdask.io.ingest import IngestSummary, TextIngestOptions
    from lsdask.io.ingest.stopwords import ENGLISH_STOPWORDS
    from lsdask.io.ingest.words import Tokenizer
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from lsdask.io import ingest
    from lsdask.io.corpus import Corpus
    from lsdask.io.ingest import IngestSummary, TextIngestOptions
    from lsdask.io.ingest.stopwords import ENGLISH_STOPWORDS
    from lsdask.io.ingest.words import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
NEWS_ARCHIVE = "20newsgroups/20news-bydate.tar.gz"
IMDB_ARCHIVE = "imdb/aclImdb-reviews.tar.gz"
DATASETS = ("ap", "20news", "imdb")


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of this script."""
    parser = argparse.ArgumentParser(
        description=(
            "Convert the shared AP, 20 Newsgroups and IMDB data into lsdask Parquet corpora."
        )
    )
    parser.add_argument(
        "--shared",
        type=Path,
        default=ROOT.parent / "shared" / "data",
        help="the shared data folder holding ap/ and 20newsgroups/ (default: ../shared/data)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=ROOT / "data" / "corpora",
        help="output folder; corpora are written to OUT/ap, OUT/20news, OUT/20news-test, OUT/imdb",
    )
    parser.add_argument(
        "--only", choices=DATASETS, nargs="+", default=list(DATASETS), help="datasets to convert"
    )
    parser.add_argument(
        "--docs-per-row-group", type=int, default=1000, help="documents per batch (row group)"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace corpora that already exist"
    )
    parser.add_argument("--no-progress", action="store_true", help="do not show progress bars")
    return parser


def convert_ap(shared: Path, out: Path, **options: Any) -> IngestSummary:
    """Import the AP corpus (LDA-C) as it is."""
    ap = shared / "ap"
    return ingest.import_ldac(ap / "ap.dat", ap / "vocab.txt", out / "ap", **options)


def convert_20news(shared: Path, out: Path, **options: Any) -> dict[str, IngestSummary]:
    """Ingest the 20 Newsgroups train split, then the test split over its vocabulary."""
    shared_options = TextIngestOptions(**options)

    def split(name: str, subset: str, **vocabulary: Any) -> IngestSummary:
        return ingest.ingest_text_folder(
            shared / NEWS_ARCHIVE,
            out / name,
            subset=subset,
            encoding="latin-1",
            strip_headers=True,
            options=shared_options,
            **vocabulary,
        )

    train = split("20news", "20news-bydate-train/", min_df=5, max_df=0.5)
    test = split("20news-test", "20news-bydate-test/", vocab=Corpus.open(out / "20news"))
    return {"20news": train, "20news-test": test}


def convert_imdb(shared: Path, out: Path, **options: Any) -> IngestSummary:
    """Ingest every movie review, its ``<br />`` tags' ``br`` dropped with the stopwords."""
    tokenizer = Tokenizer(stopwords=frozenset(ENGLISH_STOPWORDS) | {"br"})
    return ingest.ingest_text_folder(
        shared / IMDB_ARCHIVE,
        out / "imdb",
        subset="aclImdb/*/*/*.txt",
        options=TextIngestOptions(tokenizer=tokenizer, **options),
        min_df=5,
        max_df=1.0,
        max_vocab=20_000,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the script; return the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    options = {
        "docs_per_row_group": args.docs_per_row_group,
        "overwrite": args.overwrite,
        "progress": False if args.no_progress else None,
    }
    summaries: dict[str, IngestSummary] = {}
    try:
        if "ap" in args.only:
            summaries["ap"] = convert_ap(args.shared, args.out, **options)
        if "20news" in args.only:
            summaries.update(convert_20news(args.shared, args.out, **options))
        if "imdb" in args.only:
            summaries["imdb"] = convert_imdb(args.shared, args.out, **options)
    except (OSError, ValueError) as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    print(json.dumps({name: dict(summary) for name, summary in summaries.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
