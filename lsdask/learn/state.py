"""Where a memoized run stands: enough to continue it exactly."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class FitInterrupted(Exception):
    """Raised when a stop was requested (SIGINT/SIGTERM) and a checkpoint written."""

    def __init__(self, checkpoint: Any) -> None:
        super().__init__(f"stopped on request; checkpoint written to {checkpoint}")
        self.checkpoint = checkpoint


@dataclass
class LearnState:
    """Progress of a memoized run.

    Attributes
    ----------
    lap : int
        Laps completed.
    position : int
        Batches of ``order`` already visited in the lap under way (0 at a lap
        boundary, where ``order`` is None).
    order : list of int or None
        Visiting order of the lap under way.
    rng_state : dict
        The numpy Generator's bit-generator state after ``order`` was drawn.
    elbo_trace, lap_trace, time_trace, lap_elbos : lists of float
    converged : bool
    """

    lap: int = 0
    position: int = 0
    order: list[int] | None = None
    rng_state: dict | None = None
    elbo_trace: list[float] = field(default_factory=list)
    lap_trace: list[float] = field(default_factory=list)
    time_trace: list[float] = field(default_factory=list)
    lap_elbos: list[float] = field(default_factory=list)
    converged: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LearnState:
        return cls(**data)
