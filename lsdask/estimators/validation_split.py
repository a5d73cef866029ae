"""The validation documents of a topic model's early stopping.

A few whole batches are held out of training, evenly spaced over the data (so
that a corpus in archive order, one kind of document after another, gives
some of each), and are the same on every run over the same batches. Their
documents' word types are split once, 80/20 (lsparse App. E, as
:func:`lsdask.evaluate.split_documents`); after every lap the model's topics
and its own document-topic prior are scored by document completion on them
(:mod:`lsdask.learn.early_stopping`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np
import scipy.sparse as sp

from lsdask import config
from lsdask.evaluate import completion_score, document_completion_sums, split_documents
from lsdask.io.sources import BatchSource

logger = logging.getLogger(__name__)


def validation_positions(
    n_batches: int,
    fraction: float,
    keys: list[str] | None = None,
    held: list[str] | None = None,
    rows_per_batch: float = 0.0,
) -> list[int]:
    """``max(1, round(fraction * n_batches))`` batch positions, evenly spaced, but
    no more than hold about ``config.VALIDATION_MAX_DOCS`` documents at
    ``rows_per_batch``; or, where the batches' ``keys`` include some of those a
    checkpoint ``held`` out, theirs (a resumed fit, over the same data or with
    batches added since)."""
    if keys is not None and held:
        again = [i for i, k in enumerate(keys) if k in set(held)]
        if again:
            return again
    n = max(1, round(fraction * n_batches))
    if rows_per_batch > 0:
        n = max(1, min(n, round(config.VALIDATION_MAX_DOCS / rows_per_batch)))
    return sorted({int((i + 0.5) * n_batches / n) for i in range(n)})


def hold_out(source: BatchSource, positions: list[int]) -> tuple[BatchSource, list]:
    """``source`` without the batches at ``positions``, and those batches."""
    held = set(positions)
    keep = [i for i in range(source.n_batches) if i not in held]
    training = dataclasses.replace(
        source,
        batches=[source.batches[i] for i in keep],
        batch_rows=[source.batch_rows[i] for i in keep],
        description=f"{source.description} less {len(held)} validation batches",
    )
    return training, [source.batches[i] for i in positions]


def uses_early_stopping(setting: Any, algorithm: str, n_batches: int) -> bool:
    """Whether a fit holds out validation batches: ``early_stopping`` True, or
    "auto" on data of at least ``config.EARLY_STOPPING_MIN_BATCHES`` batches;
    memoized VI only."""
    if setting is False:
        return False
    if algorithm != "memo":
        if setting is True:
            raise ValueError(
                f"early_stopping=True needs algorithm='memo'; got algorithm={algorithm!r}. "
                "Pass early_stopping=False or 'auto' (on only for memo)"
            )
        return False
    if setting is True:
        if n_batches < 2:
            raise ValueError(
                "early_stopping=True holds out whole batches for validation, and the data "
                f"has {n_batches}; pass more batches (a smaller batch_size) or "
                "early_stopping=False"
            )
        return True
    return n_batches >= config.EARLY_STOPPING_MIN_BATCHES


class CompletionScorer:
    """Document completion of held-out documents under the model's own prior."""

    def __init__(self, documents: sp.csr_matrix, seed: int = 0) -> None:
        self.A, self.B = split_documents(documents, 0.8, seed)
        if not self.B.sum() > 0:
            raise ValueError(
                "the validation documents hold no words to predict (each has one word type); "
                "pass early_stopping=False"
            )

    def __call__(self, model: Any, glob: Any) -> float:
        alpha = model.doc_prior(glob)
        return completion_score(*document_completion_sums(self.A, self.B, glob.topics, alpha))


def scorer_of(batches: list) -> CompletionScorer:
    """The scorer of the documents of ``batches`` (read here, once)."""
    rows = [sp.csr_matrix(b.load()) for b in batches]
    documents = sp.vstack(rows, format="csr").astype(np.float64)
    logger.info("early stopping: %d validation documents held out", documents.shape[0])
    return CompletionScorer(documents)
