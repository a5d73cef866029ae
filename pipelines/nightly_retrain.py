"""Scheduled retraining of an LDA model on a corpus that changes every night.

An end-to-end demo of lsdask's checkpoint/resume for production jobs
(memoized VI, lsparse paper Sec. 3.4): the per-batch statistics (the memo)
live on disk in the checkpoint folder, so a nightly job only runs the local
step on the batches that arrived since the last run and subtracts the
statistics of the batches that were removed.

* **night 0**: make a small synthetic corpus with known topics
  (``datasets/make_synthetic_corpus.py``) and a fixed heldout set drawn from
  the same topics, then fit ``lsdask.LDA`` with ``checkpoint_dir`` (memo on disk).
* **night n >= 1**: append one Parquet file of new documents
  (:meth:`lsdask.io.corpus.Corpus.append`), delete the oldest Parquet file
  (retention), and run the *same* fit with ``resume=True``: a finished run
  taken up again runs ``laps_per_night`` more laps in which the new row groups
  enter as new batches and the removed ones are subtracted.

Every night reports the batches with memo / new / removed, the laps run so
far, the ELBO, the heldout document-completion score (nats per token, lsparse
App. E) on the same heldout documents, the mean L1 distance of the learned
topics to the true ones, and the checkpoint folder.

Example::

    python pipelines/nightly_retrain.py --work-dir data/nightly --overwrite
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

try:
    import lsdask
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import lsdask
from lsdask.io.corpus import Corpus, corpus_source
from lsdask.persist.checkpoint import CheckpointDir
from lsdask.synthetic import match_topics

logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[1]

__all__ = ["NightReport", "format_reports", "run_nightly"]

CORPUS_DIR = "corpus"
HELDOUT_DIR = "heldout"
CHECKPOINT_DIR = "checkpoints"
_HELDOUT_STREAM = 1000
_NIGHT_STREAM = 2000


def _load_generator() -> Any:
    """``datasets/make_synthetic_corpus.py`` as a module (``datasets/`` is not a package)."""
    name = "lsdask_datasets_make_synthetic_corpus"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(
        name, REPO / "datasets" / "make_synthetic_corpus.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@dataclass
class NightReport:
    """What one night's job did.

    Attributes
    ----------
    night : int
        0 for the first fit.
    n_docs, n_batches : int
        Documents and batches (row groups) of the corpus that night.
    with_memo, new, removed : int
        Batches whose statistics came from the checkpoint's memo, batches
        without memo (new files), and memo batches whose files are gone.
    added_file, removed_file : str or None
        The Parquet file appended and the one deleted before the fit.
    laps : int
        Laps run in all, over every night (``n_laps_``).
    elbo : float
        Final ELBO of the night's fit.
    heldout_score : float
        Heldout document completion, nats per token (higher is better).
    topic_l1 : float
        Mean L1 distance between the true topics and their matched learned
        topics (in [0, 2]; lower is better).
    checkpoint : str
        The latest checkpoint folder after the fit.
    seconds : float
        Wall time of the night (changing the corpus, fit, scores).
    """

    night: int
    n_docs: int
    n_batches: int
    with_memo: int
    new: int
    removed: int
    added_file: str | None
    removed_file: str | None
    laps: int
    elbo: float
    heldout_score: float
    topic_l1: float
    checkpoint: str
    seconds: float


def _memo_keys(checkpoint_dir: Path) -> set[str]:
    """Batch keys with memo in the latest checkpoint (empty before the first fit)."""
    if not (checkpoint_dir / "LATEST").exists():
        return set()
    return set(CheckpointDir(checkpoint_dir).read()["memo"])


def _prepare_work_dir(work_dir: Path, overwrite: bool) -> None:
    owned = [work_dir / d for d in (CORPUS_DIR, HELDOUT_DIR, CHECKPOINT_DIR)]
    if any(p.exists() for p in owned):
        if not overwrite:
            raise FileExistsError(
                f"work_dir {str(work_dir)!r} already holds {CORPUS_DIR}/, {HELDOUT_DIR}/ or "
                f"{CHECKPOINT_DIR}/ from an earlier run; pass overwrite=True (--overwrite) to "
                "start over, or choose another folder"
            )
        for p in owned:
            if p.exists():
                shutil.rmtree(p)
    work_dir.mkdir(parents=True, exist_ok=True)


def _new_documents(
    topics: np.ndarray, n_docs: int, first_doc_id: int, seed: Any, **kw: Any
) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """Documents drawn from the true topics as (doc_id, word_ids, counts), ids given."""
    gen = _load_generator()
    X = gen.draw_corpus_matrix(topics, n_docs, seed=seed, **kw)
    spans = zip(X.indptr[:-1], X.indptr[1:], strict=True)
    return [(first_doc_id + i, X.indices[a:b], X.data[a:b]) for i, (a, b) in enumerate(spans)]


def run_nightly(
    work_dir: str | os.PathLike[str],
    *,
    nights: int = 2,
    n_docs: int = 6000,
    new_docs_per_night: int = 1500,
    n_heldout: int = 500,
    vocab_size: int = 1000,
    n_topics: int = 10,
    mean_doc_length: float = 80,
    docs_per_row_group: int = 250,
    docs_per_file: int = 1500,
    alpha: float = 0.1,
    eta: float = 0.01,
    sparsity: int = 4,
    first_laps: int = 5,
    laps_per_night: int = 2,
    seed: int = 0,
    client: Any = None,
    n_workers: int = 2,
    overwrite: bool = False,
) -> list[NightReport]:
    """Run ``nights`` nightly jobs: a first fit, then appends, removals and resumed fits.

    Parameters
    ----------
    work_dir : str or os.PathLike
        Gets ``corpus/``, ``heldout/`` (Parquet corpora) and ``checkpoints/``.
    nights : int, default 2
        Night 0 makes the corpus and fits; each further night changes the
        corpus and resumes.
    n_docs : int, default 6000
        Documents of the night-0 corpus.
    new_docs_per_night : int, default 1500
        Documents appended every night, as one new Parquet file.
    n_heldout : int, default 500
        Fixed heldout documents (drawn from the same topics, never trained on).
    vocab_size, n_topics, mean_doc_length, docs_per_row_group, docs_per_file, alpha, eta
        Of the synthetic corpus (see ``make_corpus``); the model has
        ``n_topics`` topics too, with the corpus's ``alpha`` and ``eta``.
    sparsity : int, default 4
        L of the L-sparse local step.
    first_laps : int, default 5
        Laps of the night-0 fit.
    laps_per_night : int, default 2
        Further laps of every resumed fit (at least one, so that every new
        batch is visited).
    seed : int, default 0
        Seeds the corpus, heldout set, new documents and the model.
    client : None, "sync", a distributed.Client, or a scheduler address
        None starts one LocalCluster of ``n_workers`` processes for the whole
        run; "sync" runs everything in this process.
    n_workers : int, default 2
    overwrite : bool, default False
        Remove the ``corpus/``, ``heldout/`` and ``checkpoints/`` of an
        earlier run in ``work_dir`` first.

    Returns
    -------
    list of NightReport
        One per night.

    Raises
    ------
    FileExistsError
        If ``work_dir`` holds an earlier run and ``overwrite`` is false.
    ValueError
        For invalid sizes.
    """
    if nights < 1 or laps_per_night < 1 or first_laps < 1:
        raise ValueError(
            f"nights, first_laps and laps_per_night must be >= 1; got {nights}, "
            f"{first_laps}, {laps_per_night}"
        )
    work = Path(work_dir)
    _prepare_work_dir(work, overwrite)
    owned: list[Any] = []
    if client is None:
        from distributed import Client, LocalCluster

        cluster = LocalCluster(
            n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0"
        )
        client = Client(cluster)
        owned = [client, cluster]
    try:
        return _run_nights(
            work, nights=nights, n_docs=n_docs, new_docs_per_night=new_docs_per_night,
            n_heldout=n_heldout, vocab_size=vocab_size, n_topics=n_topics,
            mean_doc_length=mean_doc_length, docs_per_row_group=docs_per_row_group,
            docs_per_file=docs_per_file, alpha=alpha, eta=eta, sparsity=sparsity,
            first_laps=first_laps, laps_per_night=laps_per_night, seed=seed, client=client,
        )  # fmt: skip
    finally:
        for obj in owned:
            obj.close()


def _run_nights(work: Path, *, nights: int, client: Any, **cfg: Any) -> list[NightReport]:
    gen = _load_generator()
    corpus_path, ckpt = work / CORPUS_DIR, work / CHECKPOINT_DIR
    draw_kw = {"alpha": cfg["alpha"], "mean_doc_length": cfg["mean_doc_length"]}
    t0 = time.perf_counter()
    corpus = gen.make_corpus(
        corpus_path,
        n_docs=cfg["n_docs"],
        vocab_size=cfg["vocab_size"],
        n_topics=cfg["n_topics"],
        mean_doc_length=cfg["mean_doc_length"],
        docs_per_row_group=cfg["docs_per_row_group"],
        docs_per_file=cfg["docs_per_file"],
        alpha=cfg["alpha"],
        eta=cfg["eta"],
        seed=cfg["seed"],
        client=client,
    )
    topics = np.load(corpus_path / gen.TRUE_TOPICS_NAME)
    heldout = Corpus.write(
        work / HELDOUT_DIR,
        gen.draw_corpus_matrix(
            topics, cfg["n_heldout"], seed=[cfg["seed"], _HELDOUT_STREAM], **draw_kw
        ),
        corpus.vocab,
        docs_per_row_group=cfg["docs_per_row_group"],
    )
    next_doc_id = corpus.n_docs
    reports = []
    for night in range(nights):
        added = removed_file = None
        if night > 0:
            t0 = time.perf_counter()
            corpus = Corpus.open(corpus_path, rescan=True)
            oldest = corpus.batches[0].file
            new_batches = corpus.append(
                _new_documents(
                    topics,
                    cfg["new_docs_per_night"],
                    next_doc_id,
                    [cfg["seed"], _NIGHT_STREAM + night],
                    **draw_kw,
                )
            )
            next_doc_id += cfg["new_docs_per_night"]
            added = new_batches[0].file if new_batches else None
            os.remove(corpus_path / oldest)  # retention: the oldest partition goes
            removed_file = oldest
            logger.info("night %d: appended %s, removed %s", night, added, oldest)
        memo_keys = _memo_keys(ckpt)
        source, _ = corpus_source(corpus_path)  # rescans: the batches this fit will see
        keys = {str(b.key) for b in source.batches}
        model = lsdask.LDA(
            cfg["n_topics"],
            sparsity=cfg["sparsity"],
            alpha=cfg["alpha"] * cfg["n_topics"],  # lsdask's alpha / K per topic
            eta=cfg["eta"],
            n_laps=cfg["first_laps"] if night == 0 else cfg["laps_per_night"],
            random_state=cfg["seed"],
            client=client,
            checkpoint_dir=str(ckpt),
            resume=True,
            progress=False,
        ).fit(str(corpus_path))
        _, dist = match_topics(topics, model.components_)
        latest = CheckpointDir(ckpt).latest()
        reports.append(
            NightReport(
                night=night,
                n_docs=int(source.n_rows),
                n_batches=len(keys),
                with_memo=len(keys & memo_keys),
                new=len(keys - memo_keys),
                removed=len(memo_keys - keys),
                added_file=added,
                removed_file=removed_file,
                laps=int(model.n_laps_),
                elbo=float(model.elbo_trace_[-1]),
                heldout_score=float(model.score(heldout.path, random_state=cfg["seed"])),
                topic_l1=float(np.nanmean(dist)),
                checkpoint=str(latest),
                seconds=time.perf_counter() - t0,
            )
        )
        logger.info("night %d: %s", night, reports[-1])
    return reports


def format_reports(reports: Sequence[NightReport]) -> str:
    """The reports as a Markdown table."""
    head = (
        "| night | docs | batches | with memo | new | removed | laps | ELBO | heldout nats/token "
        "| topic L1 | s | checkpoint |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
    )
    rows = [
        f"| {r.night} | {r.n_docs:,} | {r.n_batches} | {r.with_memo} | {r.new} | {r.removed} "
        f"| {r.laps} | {r.elbo:.6e} | {r.heldout_score:.4f} | {r.topic_l1:.3f} "
        f"| {r.seconds:.1f} | {r.checkpoint} |"
        for r in reports
    ]
    return "\n".join([head, *rows])


def build_parser() -> argparse.ArgumentParser:
    """Return the command-line parser of this script."""
    p = argparse.ArgumentParser(
        description="Nightly LDA retraining demo: synthetic corpus, fit with checkpoints, "
        "then every night append a Parquet file, drop the oldest and resume."
    )
    p.add_argument("--work-dir", type=Path, default=REPO / "data" / "nightly", help="folder")
    p.add_argument("--nights", type=int, default=2, help="nights to run (default 2)")
    p.add_argument("--n-docs", type=int, default=6000, help="documents on night 0")
    p.add_argument("--new-docs", type=int, default=1500, help="documents appended per night")
    p.add_argument("--heldout", type=int, default=500, help="fixed heldout documents")
    p.add_argument("--vocab-size", type=int, default=1000, help="V")
    p.add_argument("--topics", type=int, default=10, help="K, true and learned")
    p.add_argument("--sparsity", type=int, default=4, help="L")
    p.add_argument("--first-laps", type=int, default=5, help="laps of the night-0 fit")
    p.add_argument("--laps-per-night", type=int, default=2, help="laps of each resumed fit")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    p.add_argument("--sync", action="store_true", help="run in this process (no Dask)")
    p.add_argument("--overwrite", action="store_true", help="start over in --work-dir")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the script; return the process exit status."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("lsdask").setLevel(logging.INFO)
    try:
        reports = run_nightly(
            args.work_dir,
            nights=args.nights,
            n_docs=args.n_docs,
            new_docs_per_night=args.new_docs,
            n_heldout=args.heldout,
            vocab_size=args.vocab_size,
            n_topics=args.topics,
            sparsity=args.sparsity,
            first_laps=args.first_laps,
            laps_per_night=args.laps_per_night,
            seed=args.seed,
            client="sync" if args.sync else None,
            n_workers=args.workers,
            overwrite=args.overwrite,
        )
    except (FileExistsError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for r in reports:
        change = "" if r.night == 0 else f" (added {r.added_file}, removed {r.removed_file})"
        print(
            f"night {r.night}{change}: {r.n_docs:,} documents in {r.n_batches} batches: "
            f"{r.with_memo} with memo, {r.new} new, {r.removed} removed; {r.laps} laps in all, "
            f"ELBO {r.elbo:.6e}, heldout {r.heldout_score:.4f} nats/token, "
            f"topic L1 {r.topic_l1:.3f}; checkpoint {r.checkpoint}"
        )
    print()
    print(format_reports(reports))
    return 0


if __name__ == "__main__":
    sys.exit(main())
