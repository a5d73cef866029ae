"""Where memoized VI keeps each batch's statistics between visits.

:class:`MemoryMemo` holds them in the driver's memory (small data, tests).
The on-disk store for large runs, :class:`lsdask.persist.memo_files.DiskMemo`,
has the same methods; both satisfy :class:`lsdask.learn.protocols.MemoStore`.
"""

from __future__ import annotations

from collections.abc import Iterator

from lsdask.models.stats import SuffStats


class MemoryMemo:
    """Per-batch statistics held in memory."""

    def __init__(self, n_batches: int) -> None:
        self._items: list[SuffStats | None] = [None] * n_batches

    def __len__(self) -> int:
        return len(self._items)

    def get(self, b: int) -> SuffStats | None:
        return self._items[b]

    def put(self, b: int, stats: SuffStats) -> None:
        self._items[b] = stats

    def has(self, b: int) -> bool:
        return self._items[b] is not None

    def values(self) -> Iterator[SuffStats]:
        return (s for s in self._items if s is not None)

    def as_list(self) -> list[SuffStats | None]:
        return list(self._items)
