"""Corpus LDA (Hughes & Sudderth, Sec. 6): LDA-C corpus -> Parquet -> L-sparse LDA -> topics.

The steps are the library's: :func:`lsdask.io.ingest.import_ldac` (through
:func:`lsdask.jobs.ingest.run_ingest`), :func:`lsdask.jobs.split.split_corpus`,
:func:`lsdask.jobs.corpus_lda.fit_corpus_lda` and
:func:`lsdask.jobs.topics.topic_report`; this file chains them, builds the
model and parses the command line.

1. ingest ``DATA/ap.dat`` and ``DATA/vocab.txt`` (LDA-C) into ``WORK/corpus``;
2. split its documents at random into ``WORK/train`` and ``WORK/heldout``
   (10% by default);
3. fit LDA (K=100, L=8 by default) on the train corpus, save the model in
   ``WORK/model`` with ``elbo.png``, and score the heldout documents by
   document completion (App. E, nats per token);
4. print every topic's top words with its UMass coherence over the training
   documents.

Examples
--------
On the Associated Press corpus (2,246 documents, 10,473 words), on a local
Dask cluster of 2 workers::

    python pipelines/corpus_lda.py --data ../shared/data/ap --work runs/ap

In this process, a quick look::

    python pipelines/corpus_lda.py --topics 20 --laps 5 --sync
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import lsdask  # noqa: F401
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from lsdask.cli.options import add_execution, add_verbose, client_from_args
from lsdask.estimators.lda import LDA
from lsdask.jobs.corpus_lda import CorpusFitReport, fit_corpus_lda, format_fit_report
from lsdask.jobs.ingest import format_ingest_summary, run_ingest
from lsdask.jobs.split import split_corpus
from lsdask.jobs.topics import TopicReport, format_topics, topic_report

logger = logging.getLogger(__name__)

#: Where the AP corpus is found from the project's root.
DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "ap"


@dataclass
class CorpusLdaRun:
    """What :func:`run_corpus_lda` did: the ingest summary, the documents of the
    split, the fit's report and the topic report (coherence over the training
    documents)."""

    ingest: Any
    n_train: int
    n_heldout: int
    fit: CorpusFitReport
    topics: TopicReport


def run_corpus_lda(
    data_dir: str | os.PathLike[str] = DEFAULT_DATA,
    work_dir: str | os.PathLike[str] = "runs/corpus_lda",
    model: LDA | None = None,
    *,
    heldout_fraction: float = 0.1,
    docs_per_row_group: int = 250,
    n_top: int = 10,
    random_state: int = 0,
    progress: bool | None = False,
) -> CorpusLdaRun:
    """Ingest an LDA-C corpus, split it, fit LDA, score heldout documents, read topics.

    Parameters
    ----------
    data_dir : str or os.PathLike
        Folder holding ``ap.dat`` (or the only ``*.dat``) and ``vocab.txt``.
    work_dir : str or os.PathLike
        Output folder: ``corpus/``, ``train/``, ``heldout/`` (Parquet
        corpora) and ``model/`` (the saved model and ``elbo.png``); replaced
        on every run.
    model : lsdask.LDA or None
        The LDA to fit (:func:`lsdask.jobs.corpus_lda.fit_corpus_lda`); None:
        ``LDA(100, n_laps=20)`` seeded with ``random_state``, on a local
        Dask cluster of 2 workers.
    heldout_fraction : float, default 0.1
        Fraction of the documents held out.
    docs_per_row_group : int, default 250
        Documents per batch (AP: 9 batches).
    n_top : int, default 10
        Words per topic in the topic report.
    random_state : int, default 0
        Seed of the split (and of the default model).
    progress : bool or None, default False
        Progress bars of the ingest and the default model (None: only on a
        terminal).

    Returns
    -------
    CorpusLdaRun
    """
    if model is None:
        model = LDA(100, n_laps=20, random_state=random_state, progress=progress)
    data = Path(data_dir)
    if not data.is_dir():
        raise FileNotFoundError(f"--data: no folder at {str(data)!r}")
    dat = data / "ap.dat"
    if not dat.is_file():
        candidates = sorted(data.glob("*.dat"))
        if len(candidates) != 1:
            raise FileNotFoundError(
                f"--data: {str(data)!r} holds no ap.dat and {len(candidates)} other .dat files; "
                "expected one LDA-C .dat file and vocab.txt"
            )
        dat = candidates[0]
    work = Path(work_dir)
    summary = run_ingest(
        "ldac",
        [dat, data / "vocab.txt"],
        work / "corpus",
        options={"docs_per_row_group": docs_per_row_group, "overwrite": True},
        progress=progress,
    )
    train, heldout = split_corpus(
        summary["path"],
        work / "train",
        work / "heldout",
        heldout_fraction=heldout_fraction,
        random_state=random_state,
        overwrite=True,
    )
    fit = fit_corpus_lda(model, train, out_dir=work / "model", heldout=heldout, overwrite=True)
    topics = topic_report(fit.model, n_top=n_top, corpus=train)
    return CorpusLdaRun(summary, train.n_docs, heldout.n_docs, fit, topics)


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of this script."""
    parser = argparse.ArgumentParser(
        description=(
            "Corpus LDA: ingest an LDA-C corpus (default: AP) into Parquet, hold out a share "
            "of its documents, fit L-sparse LDA, score heldout document completion, and print "
            "the topics with their UMass coherence."
        ),
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LDA-C folder")
    parser.add_argument("--work", type=Path, default=Path("runs/corpus_lda"), help="output folder")
    parser.add_argument("--topics", type=int, default=100, help="K (default 100)")
    parser.add_argument("--sparsity", type=int, default=8, help="L (default 8; 0 = dense)")
    parser.add_argument("--laps", type=int, default=20, help="maximum laps (default 20)")
    parser.add_argument("--algorithm", choices=("memo", "svi", "vb"), default="memo")
    parser.add_argument("--alpha", type=float, default=0.5, help="document-topic total")
    parser.add_argument("--eta", type=float, default=0.1, help="topic-word pseudo-count")
    parser.add_argument("--heldout-fraction", type=float, default=0.1, help="default 0.1")
    parser.add_argument("--docs-per-row-group", type=int, default=250, help="documents/batch")
    parser.add_argument("--top", type=int, default=10, help="words per topic (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    add_execution(parser, scheduler=True)
    add_verbose(parser, False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the pipeline from the command line; return the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    client, n_workers = client_from_args(args)
    model = LDA(
        args.topics,
        sparsity=args.sparsity or None,
        n_laps=args.laps,
        algorithm=args.algorithm,
        alpha=args.alpha,
        eta=args.eta,
        random_state=args.seed,
        client=client,
        n_workers=n_workers,
        verbose=1 if args.verbose else 0,
        progress=None,
    )
    start = time.perf_counter()
    try:
        result = run_corpus_lda(
            args.data,
            args.work,
            model,
            heldout_fraction=args.heldout_fraction,
            docs_per_row_group=args.docs_per_row_group,
            n_top=args.top,
            random_state=args.seed,
            progress=None,
        )
    except (ValueError, FileNotFoundError, FileExistsError) as err:
        parser.exit(2, f"{parser.prog}: error: {err}\n")
    print("ingest:")
    print(format_ingest_summary(result.ingest))
    print(f"split: {result.n_train:,} train, {result.n_heldout:,} heldout documents\n")
    print(format_fit_report(result.fit, title="corpus LDA (Hughes & Sudderth, Sec. 6)"))
    print()
    print(format_topics(result.topics))
    print(f"\ntotal time: {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
