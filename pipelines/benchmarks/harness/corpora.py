"""The AP, 20 Newsgroups and IMDB corpora of the topic-model benchmarks, and their heldout split.

All are lsdask Parquet corpora made from the shared data by
``datasets/ingest_corpora.py`` (``ap``, ``20news``, ``20news-test``, ``imdb``).

- AP: a seeded choice of ``n_test`` documents is held out; the others are
  written as their own corpus (``ap_docs_per_batch`` documents per row group
  = memoized batch) under the work folder.
- IMDB (95,000 movie reviews): held out as AP, the training corpus written
  with the ingested corpus's 1,000 documents per row group.
- 20 Newsgroups: training on ``20news``; heldout a seeded choice of
  ``n_test`` documents of ``20news-test`` (the same vocabulary).

Each heldout document's word types are split once, 80/20 (seeded), into
``A`` (fit the document's topic weights) and ``B`` (scored): lsparse App. E
document completion, :mod:`harness.scoring`.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from harness import REPO, SHARED_DATA
from harness.run import log

CORPORA = ("ap", "20news", "imdb")
#: the corpora ``datasets/ingest_corpora.py`` writes
INGESTED = ("ap", "20news", "20news-test", "imdb")
#: where the benchmarks look for them and keep what they make from them
CORPORA_DIR = REPO / "data" / "corpora"
WORK_DIR = REPO / "data" / "lda_bench"


@dataclass
class CorpusData:
    """A training corpus (Parquet, for lsdask) and its heldout documents."""

    name: str
    train_path: str
    X_train: sp.csr_matrix  # the same documents in memory, for the peers
    vocab_size: int
    n_batches: int
    A: sp.csr_matrix  # heldout documents, 80% of each one's word types
    B: sp.csr_matrix  # the other 20%
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_tokens(self) -> float:
        return float(self.X_train.sum())


def ensure_corpora(corpora_dir: Path) -> None:
    """Ingest the shared AP, 20 Newsgroups and IMDB data into ``corpora_dir`` if missing."""
    if all((corpora_dir / c / "manifest.json").exists() for c in INGESTED):
        return
    log(f"corpora missing under {corpora_dir}: running datasets/ingest_corpora.py")
    subprocess.run(
        [
            sys.executable,
            "datasets/ingest_corpora.py",
            "--shared",
            str(SHARED_DATA),
            "--out",
            str(corpora_dir),
        ],
        cwd=REPO,
        check=True,
    )


def prepare_corpus(
    name: str,
    corpora_dir: Path = CORPORA_DIR,
    work_dir: Path = WORK_DIR,
    *,
    n_test: int = 500,
    seed: int = 0,
    ap_docs_per_batch: int = 250,
) -> CorpusData:
    """The training documents and the heldout split of ``name`` ("ap", "20news", "imdb")."""
    from lsdask.evaluate import split_documents
    from lsdask.io.corpus import Corpus, read_all

    work_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    if name in ("ap", "imdb"):
        src = Corpus.open(corpora_dir / name)
        per_batch = ap_docs_per_batch if name == "ap" else src.docs_per_row_group
        X = read_all(src).tocsr().astype(np.float64)
        test = np.sort(rng.choice(X.shape[0], n_test, replace=False))
        train = np.setdiff1d(np.arange(X.shape[0]), test)
        X_train, X_test = X[train], X[test]
        out = work_dir / f"{name}-train-{n_test}-seed{seed}"
        ok = False
        if (out / "manifest.json").exists():
            c = Corpus.open(out)
            ok = c.n_docs == X_train.shape[0] and c.docs_per_row_group == per_batch
        if not ok:
            Corpus.write(
                out,
                X_train,
                src.vocab,
                docs_per_row_group=per_batch,
                ingest_info={
                    "from": str(corpora_dir / name),
                    "heldout_docs": test.tolist(),
                    "seed": seed,
                },
                overwrite=True,
            )
        train_path = str(out)
        X_train = read_all(out).tocsr().astype(np.float64)  # exactly what lsdask reads
    elif name == "20news":
        train_path = str(corpora_dir / "20news")
        X_train = read_all(train_path).tocsr().astype(np.float64)
        X_all = read_all(corpora_dir / "20news-test").tocsr().astype(np.float64)
        test = np.sort(rng.choice(X_all.shape[0], n_test, replace=False))
        X_test = X_all[test]
    else:
        raise ValueError(f"unknown corpus {name!r}")
    A, B = split_documents(X_test, 0.8, seed)
    corpus = Corpus.open(train_path)
    return CorpusData(
        name=name,
        train_path=train_path,
        X_train=X_train,
        vocab_size=X_train.shape[1],
        n_batches=len(corpus.batches),
        A=A,
        B=B,
        info={
            "train_path": train_path,
            "train_docs": int(X_train.shape[0]),
            "train_tokens": float(X_train.sum()),
            "vocab_size": int(X_train.shape[1]),
            "batches": len(corpus.batches),
            "docs_per_batch": corpus.docs_per_row_group,
            "test_docs": int(X_test.shape[0]),
            "test_tokens_A": float(A.sum()),
            "test_tokens_B": float(B.sum()),
            "test_ids_first": [int(i) for i in test[:10]],
        },
    )


def load_corpora(
    names: tuple[str, ...] | list[str], corpora_dir: Path, work_dir: Path, **split: Any
) -> dict[str, CorpusData]:
    """Ingest the corpora if missing, then :func:`prepare_corpus` each of ``names``."""
    ensure_corpora(corpora_dir)
    return {name: prepare_corpus(name, corpora_dir, work_dir, **split) for name in names}
