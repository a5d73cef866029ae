"""Where a memoized run stands: enough to continue it exactly."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lsdask.errors import FitInterrupted as FitInterrupted  # its home before lsdask.errors


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
    rng_state : dict or None
        The numpy Generator's bit-generator state after ``order`` was drawn.
    elbo_trace, lap_trace, time_trace, size_trace, lap_elbos : lists of float
    converged : bool
    target_laps : int or None
        The laps the run was to make (its ``n_laps``): a run resumed after
        reaching them is a finished one taken up again (None in checkpoints
        written before it was kept).
    pending : list of dict
        Moves still owed to memo entries not visited since
        (:meth:`lsdask.learn.pending_maps.PendingMaps.pending`): each a map and
        the batches it applies to.
    carried : dict of str to list of float, or None
        What the next global step starts from, of the current globals, for a
        model whose global step reads the globals it replaces
        (:class:`lsdask.learn.protocols.StepsFromPrevious`: the HDP's sticks);
        None for the others, whose globals follow from the memo alone.
    """

    lap: int = 0
    position: int = 0
    order: list[int] | None = None
    rng_state: Mapping[str, Any] | None = None
    elbo_trace: list[float] = field(default_factory=list)
    lap_trace: list[float] = field(default_factory=list)
    time_trace: list[float] = field(default_factory=list)
    size_trace: list[float] = field(default_factory=list)
    lap_elbos: list[float] = field(default_factory=list)
    converged: bool = False
    target_laps: int | None = None
    carried: dict[str, list[float]] | None = None
    components_trace: list[float] = field(default_factory=list)
    pending: list[dict[str, Any]] = field(default_factory=list)

    def finished(self, n_laps: int) -> bool:
        """Whether the run had ended (converged, or made the laps it was to make;
        ``n_laps``, the laps now asked for, where the checkpoint does not say)."""
        target = self.target_laps if self.target_laps is not None else n_laps
        return self.converged or self.lap >= target

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LearnState:
        return cls(**data)

    def rekey(self, old_keys: list[str] | None, new_keys: list[str]) -> None:
        """Carry the lap under way over to another batch list (a corpus rescanned
        between a stop and its resume): ``order`` holds positions in
        ``old_keys``. The lap's visited batches stay visited, removed ones leave,
        and new ones join the rest of the lap. Without ``old_keys`` (an older
        checkpoint) the list is taken as unchanged while it has as many batches,
        and otherwise the lap starts over, from the memo as it is."""
        if old_keys is not None and old_keys != new_keys and self.pending:
            index = {k: i for i, k in enumerate(new_keys)}
            for owed in self.pending:  # a removed batch owes nothing; a new one holds no memo
                owed["batches"] = sorted(
                    index[old_keys[b]] for b in owed["batches"] if old_keys[b] in index
                )
        if self.order is None or old_keys == new_keys:
            return
        if old_keys is None:
            if len(self.order) != len(new_keys):
                self.order, self.position = None, 0
            return
        index = {k: i for i, k in enumerate(new_keys)}
        moved = [index.get(old_keys[b]) for b in self.order]
        done = [i for i in moved[: self.position] if i is not None]
        rest = [i for i in moved[self.position :] if i is not None]
        seen = set(done) | set(rest)
        self.order = done + rest + [i for i in range(len(new_keys)) if i not in seen]
        self.position = len(done)
