"""The split job: a corpus's documents at random into a train and a heldout corpus, streaming.

``pipelines/corpus_lda.py`` holds out documents with :func:`split_corpus`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from typing import Any

import numpy as np

from lsdask.io.corpus.store import Corpus
from lsdask.jobs.inputs import open_corpus

logger = logging.getLogger(__name__)

__all__ = ["split_corpus"]


def _heldout_mask(n_docs: int, batch_index: int, fraction: float, random_state: int) -> np.ndarray:
    """Which documents of a batch are held out: the same for the same seed and batch."""
    rng = np.random.default_rng([int(random_state), int(batch_index)])
    return rng.random(n_docs) < fraction


def split_corpus(
    corpus: Any,
    train_dir: str | os.PathLike[str],
    heldout_dir: str | os.PathLike[str],
    *,
    heldout_fraction: float = 0.1,
    random_state: int = 0,
    overwrite: bool = False,
) -> tuple[Any, Any]:
    """Split a corpus's documents at random into a train and a heldout corpus.

    Each document is held out with probability ``heldout_fraction``
    (independently, seeded by ``random_state`` and its batch), keeping its
    ``doc_id``, vocabulary and row-group size. The corpus is read twice,
    one row group at a time, so this works on corpora larger than memory.

    Parameters
    ----------
    corpus : str, os.PathLike or Corpus
    train_dir, heldout_dir : str or os.PathLike
        The two corpora to write (:meth:`lsdask.io.corpus.Corpus.write`).
    heldout_fraction : float, default 0.1
        In (0, 1).
    random_state : int, default 0
    overwrite : bool, default False
        Replace existing corpora.

    Returns
    -------
    (Corpus, Corpus)
        The train and heldout corpora.
    """
    fraction = float(heldout_fraction)
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"heldout_fraction must be in (0, 1); got {heldout_fraction!r}")
    source = open_corpus(corpus, "corpus")

    def documents(keep_heldout: bool) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        for index, batch in enumerate(source.batches):
            loaded = batch.load()
            mask = _heldout_mask(loaded.n_docs, index, fraction, random_state)
            for i in np.flatnonzero(mask == keep_heldout):
                ids, counts = loaded.doc(int(i))
                yield int(loaded.doc_ids[i]), ids, counts

    info = {
        "format": "split",
        "source": source.path,
        "heldout_fraction": fraction,
        "random_state": int(random_state),
    }
    parts = []
    for keep_heldout, out in ((False, train_dir), (True, heldout_dir)):
        parts.append(
            Corpus.write(
                out,
                documents(keep_heldout),
                source.vocab,
                docs_per_row_group=source.docs_per_row_group,
                ingest_info={**info, "part": "heldout" if keep_heldout else "train"},
                overwrite=overwrite,
            )
        )
    logger.info(
        "split %s: %d train, %d heldout documents", source.path, parts[0].n_docs, parts[1].n_docs
    )
    return parts[0], parts[1]
