"""Moves applied to each batch's memo entry when it is next read, not at once.

After a lap's accepted moves (:class:`~lsdask.learn.protocols.HasMoves`) every
batch's memo entry must describe the new topics. Rewriting every entry at the
lap's end is a pass over the whole memo (gigabytes at millions of documents);
but an entry is read only when its batch is next visited (to take it out of
the whole-data statistics) or re-summed, and a visit replaces it. So the
moves' *map* (a small JSON-able description, e.g. which topics were deleted and
merged) is kept beside the memo and applied to an entry when it is read
(:meth:`PendingMaps.get`); a batch's visit (:meth:`PendingMaps.put`) ends it.
A checkpoint keeps the maps and the batches they still apply to, so a
resumed run reads the same entries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from lsdask.learn.protocols import MemoStore
from lsdask.models.stats import SuffStats

#: applies a map (as :meth:`HasMoves.move_map` described it) to one entry
Apply = Callable[[dict[str, Any], SuffStats], SuffStats]


class PendingMaps:
    """A memo whose entries still owe some maps: ``maps`` is a list of ``(map,
    batches)`` in the order the moves were accepted; ``apply`` applies one."""

    def __init__(
        self, inner: MemoStore, apply: Apply, maps: list[tuple[dict[str, Any], set[int]]]
    ) -> None:
        self.inner = inner
        self.apply = apply
        self.maps = maps

    def add(self, move_map: dict[str, Any], batches: set[int]) -> None:
        """Owe ``move_map`` on the entries of ``batches`` (after the maps owed now)."""
        self.maps.append((move_map, set(batches)))

    def pending(self) -> list[dict[str, Any]]:
        """The maps still owed, JSON-able: ``[{"map": ..., "batches": [...]}, ...]``."""
        return [{"map": m, "batches": sorted(bs)} for m, bs in self.maps if bs]

    def __len__(self) -> int:
        return len(self.inner)

    def get(self, b: int) -> SuffStats | None:
        entry = self.inner.get(b)
        if entry is None:
            return None
        for move_map, batches in self.maps:
            if b in batches:
                entry = self.apply(move_map, entry)
        return entry

    def put(self, b: int, stats: SuffStats) -> None:
        self.inner.put(b, stats)
        for _, batches in self.maps:
            batches.discard(b)
        self.maps = [(m, bs) for m, bs in self.maps if bs]

    def has(self, b: int) -> bool:
        return self.inner.has(b)

    def values(self) -> Iterator[SuffStats]:
        for b in range(len(self.inner)):
            entry = self.get(b)
            if entry is not None:
                yield entry

    def as_list(self) -> list[SuffStats | None]:
        return [self.get(b) for b in range(len(self.inner))]

    def __getattr__(self, name: str) -> Any:
        # the inner store's own methods (a DiskMemo's files and commit)
        return getattr(self.inner, name)
