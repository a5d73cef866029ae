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
    command : dict or None
        The command that runs the fit (:mod:`lsdask.jobs.corpus_lda`): ``id``
        (the hash of its arguments), ``target`` (the laps in all it asked for)
        and ``done`` (whether its output was written). Rerunning an interrupted
        command finishes exactly what it asked for.
    validation_trace : list of float
        Early stopping's validation score of the start (lap 0) and after every
        lap (:mod:`lsdask.learn.early_stopping`); empty without it.
    validation_keys : list of str
        The batches early stopping held out, by key: a resumed run holds out the
        same ones wherever they are still in the data.
    best : dict or None
        Early stopping's best lap: ``lap``, ``score``, the model's
        ``n_components`` then and what its globals ``carried``; where it is an
        earlier lap than ``lap``, the checkpoint keeps its statistics
        (``best.npz``).
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
    validation_trace: list[float] = field(default_factory=list)
    validation_keys: list[str] = field(default_factory=list)
    best: dict[str, Any] | None = None
    pending: list[dict[str, Any]] = field(default_factory=list)
    command: dict[str, Any] | None = None

    def finished(self, n_laps: int) -> bool:
        """Whether the run had ended (converged, or made the laps it was to make;
        ``n_laps``, the laps now asked for, where the checkpoint does not say)."""
        target = self.target_laps if self.target_laps is not None else n_laps
        return self.converged or self.lap >= target

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: Any, n_batches: int | None = None) -> LearnState:
        """The state :meth:`to_json` wrote, checked field by field (a ValueError names
        the field and what it holds): laps and positions are counts within bounds,
        ``order`` a permutation of the ``n_batches`` batches (where given), the
        traces lists of numbers."""
        if not isinstance(data, dict):
            raise ValueError(f"the state must be a JSON object; got {type(data).__name__}")
        unknown = sorted(set(data) - set(cls.__dataclass_fields__))
        if unknown:
            raise ValueError(f"the state has unknown fields {unknown}")
        state = cls(**data)
        _check_count("lap", state.lap)
        _check_count("position", state.position, n_batches)
        if state.target_laps is not None:
            _check_count("target_laps", state.target_laps)
        if not isinstance(state.converged, bool):
            raise ValueError(f"converged must be true or false; got {state.converged!r}")
        if state.order is not None:
            order = state.order
            ok = isinstance(order, list) and all(_is_int(b) for b in order)
            if (
                not ok
                or len(set(order)) != len(order)
                or (n_batches is not None and sorted(order) != list(range(n_batches)))
            ):
                raise ValueError(
                    "order must list every batch index once"
                    + (f" (0 .. {n_batches - 1})" if n_batches is not None else "")
                )
            if state.position > len(order):
                raise ValueError(f"position {state.position} is past the order's end")
        for name in ("elbo_trace", "lap_trace", "time_trace", "size_trace", "lap_elbos",
                     "components_trace", "validation_trace"):  # fmt: skip
            values = getattr(state, name)
            if not isinstance(values, list) or not all(_is_number(v) for v in values):
                raise ValueError(f"{name} must be a list of numbers")
        if state.rng_state is not None and not isinstance(state.rng_state, dict):
            raise ValueError("rng_state must be a JSON object")
        carried = state.carried
        if carried is not None and not (
            isinstance(carried, dict)
            and all(isinstance(v, list) and all(_is_number(x) for x in v) for v in carried.values())
        ):
            raise ValueError("carried must map names to lists of numbers")
        if not isinstance(state.pending, list) or not all(
            isinstance(p, dict) and isinstance(p.get("map"), dict)
            and isinstance(p.get("batches"), list) and all(_is_int(b) for b in p["batches"])
            for p in state.pending
        ):  # fmt: skip
            raise ValueError("pending must be a list of {map, batches} objects")
        _check_best(state.best, state.lap)
        keys = state.validation_keys
        if not (isinstance(keys, list) and all(isinstance(k, str) for k in keys)):
            raise ValueError("validation_keys must be a list of batch keys (strings)")
        command = state.command
        if command is not None and not (
            isinstance(command, dict)
            and isinstance(command.get("id"), str)
            and _is_int(command.get("target"))
            and 0 <= command["target"] <= _MAX_COUNT
            and isinstance(command.get("done"), bool)
        ):
            raise ValueError("command must be an object of id, target (laps) and done")
        return state

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


#: the largest count a checkpoint may hold (laps, positions): far beyond any run
_MAX_COUNT = 10**9


def _check_best(best: Any, lap: int) -> None:
    """``best`` is None or {lap (at most ``lap``), score, n_components, carried}."""
    if best is None:
        return
    ok = (
        isinstance(best, dict)
        and set(best) == {"lap", "score", "n_components", "carried"}
        and _is_int(best["lap"]) and 0 <= best["lap"] <= lap
        and _is_number(best["score"])
        and _is_int(best["n_components"]) and 1 <= best["n_components"] <= _MAX_COUNT
        and (best["carried"] is None or (
            isinstance(best["carried"], dict)
            and all(isinstance(v, list) and all(_is_number(x) for x in v)
                    for v in best["carried"].values())))
    )  # fmt: skip
    if not ok:
        raise ValueError(
            f"best must be an object of lap (0 to {lap}), score, n_components and carried"
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_count(name: str, value: Any, most: int | None = None) -> None:
    high = _MAX_COUNT if most is None else most
    if not (_is_int(value) and 0 <= value <= high):
        raise ValueError(f"{name} must be a whole number in 0 .. {high}; got {value!r}")
