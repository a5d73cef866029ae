"""Early stopping: keep the lap whose globals predict held-out documents best.

Memoized VI climbs its objective lap after lap, but on some corpora the topics
it climbs to predict new documents worse than those of earlier laps (VB's
fixed point smooths less than the collapsed Gibbs start it leaves; see
docs/math.md, "Why heldout can fall while the ELBO rises"). A few documents
held out of training (validation batches) are scored after every lap by a
function of the globals the caller gives (document completion under the
model's own prior, for a topic model); the run keeps the globals, statistics
and model of the best-scoring lap, and ends once ``patience`` laps in a row
did not beat it. The learner knows neither how the score is computed nor
where the documents came from.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lsdask.config import PROGRESS

logger = logging.getLogger(__name__)


@dataclass
class Best:
    """What a run returns if no later lap beats it."""

    lap: int
    score: float
    glob: Any
    stats: Any
    model: Any


@dataclass
class EarlyStopping:
    """The validation score of every lap, and the best lap so far.

    Parameters
    ----------
    score : callable
        ``score(model, glob)``: the held-out score of the globals (higher is better).
    patience : int
        Laps in a row without a better score after which the run ends.
    keys : list of str
        The held-out batches' keys, which a checkpoint records so that a resumed
        run holds out the same ones.
    """

    score: Callable[[Any, Any], float]
    patience: int
    keys: list[str] = field(default_factory=list)
    trace: list[float] = field(default_factory=list)
    best: Best | None = None

    def after_lap(self, lap: int, model: Any, glob: Any, stats: Any) -> bool:
        """Score the lap's globals, keep them if best; whether the run should end."""
        value = float(self.score(model, glob))
        self.trace.append(value)
        if self.best is None or value > self.best.score:
            self.best = Best(lap, value, glob, stats.dense_copy(), model)
        stale = lap - self.best.lap
        logger.info(
            "validation score %.5f after lap %d (best %.5f, lap %d)",
            value, lap, self.best.score, self.best.lap, extra=PROGRESS,
        )  # fmt: skip
        return stale >= self.patience

    def restore(self, trace: list[float], best: Best | None) -> None:
        """Continue the trace and best lap of a checkpoint."""
        self.trace = list(trace)
        self.best = best
