"""The one task every algorithm maps over batches."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic

from lsdask.errors import DataError
from lsdask.learn.protocols import Batch, G, Model
from lsdask.models.stats import SuffStats


@dataclass(frozen=True)
class LocalStepTask(Generic[G]):
    """Load a batch and run the model's local step against the globals.

    A pure function of (batch, globals): running it twice gives the same
    statistics, so a task retried after a lost worker never double-counts.
    """

    model: Model[G]
    sparsity: int | None

    def __call__(self, batch: Batch, glob: G) -> SuffStats:
        rows = batch.load()
        try:
            return self.model.local_step(rows, glob, self.sparsity)
        except DataError:
            raise
        except ValueError as exc:  # data the model cannot take: say which batch
            raise DataError(f"{batch.where}: {exc}") from exc
