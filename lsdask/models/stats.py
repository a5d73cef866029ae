"""Additive bags of sufficient statistics.

Memoized VI rests on statistics being additive over batches: the whole-data
statistics are the sum of per-batch ones, so visiting batch b replaces its
contribution with ``S <- S - S_b(old) + S_b(new)``. :class:`SuffStats` is that
bag: named float64 arrays with ``+``, ``-`` and scaling, and a fixed set of
names so that a typo is an error rather than a new field.
"""

from __future__ import annotations

from collections.abc import ItemsView, Iterable, KeysView
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from lsdask.kernels.sparse_columns import add_entries, entries_unequal_to


class SparseBlock:
    """A (K, V) statistic stored as its nonzero entries.

    Topic models summarize a batch over its own vocabulary, and under the
    L-sparse step most (topic, word) pairs of even that stay zero, so a
    batch's topic-word counts are kept as entries ``values[p]`` at
    ``(rows[p], cols[p])``, each pair at most once (16 bytes each). Adding it
    to a dense array scatters the entries; adding two blocks gives a dense
    array. ``numpy`` defers to these operators.
    """

    __array_ufunc__ = None  # let ndarray + SparseBlock call __radd__

    __slots__ = ("cols", "rows", "shape", "values")

    def __init__(
        self, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, shape: tuple[int, int]
    ) -> None:
        self.shape = (int(shape[0]), int(shape[1]))
        self.rows = np.asarray(rows, dtype=np.int32)
        # column ids in 4 bytes while they fit: 16 bytes per entry, not 20
        self.cols = np.asarray(cols, dtype=np.int32 if self.shape[1] < 2**31 else np.int64)
        self.values = np.asarray(values, dtype=np.float64)
        n = self.values.shape[0]
        if not (self.rows.ndim == self.cols.ndim == self.values.ndim == 1):
            raise ValueError("a sparse block's rows, cols and values must be 1-D arrays")
        if not (self.rows.shape[0] == self.cols.shape[0] == n):
            raise ValueError(
                f"a sparse block needs as many rows and cols as values; got {self.rows.shape[0]}, "
                f"{self.cols.shape[0]} and {n}"
            )
        if n and not (
            0 <= self.rows.min() <= self.rows.max() < self.shape[0]
            and 0 <= self.cols.min() <= self.cols.max() < self.shape[1]
        ):
            raise ValueError(f"a sparse block's entries fall outside its shape {self.shape}")

    @classmethod
    def from_columns(cls, cols: np.ndarray, block: np.ndarray, width: int) -> SparseBlock:
        """The nonzero entries of ``block`` (K, len(cols)), whose columns are ``cols``,
        by row (the order of ``np.nonzero``; one compiled pass to count and one to
        copy, instead of ``np.nonzero`` and a gather)."""
        block = np.ascontiguousarray(block, dtype=np.float64)
        row_ptr, j, values = entries_unequal_to(block, 0.0, 0.0)
        rows = np.repeat(np.arange(block.shape[0], dtype=np.int32), np.diff(row_ptr))
        return cls(rows, np.asarray(cols, dtype=np.int64)[j], values, (block.shape[0], width))

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.cols.nbytes + self.rows.nbytes

    def toarray(self) -> np.ndarray:
        out = np.zeros(self.shape)
        out[self.rows, self.cols] = self.values
        return out

    def _scatter(self, dense: np.ndarray, sign: float) -> np.ndarray:
        out = np.array(dense, dtype=np.float64, copy=True)
        _check_shape(out, self)
        add_entries(out, self.rows, self.cols, self.values, sign)
        return out

    def __add__(self, other: Stat) -> np.ndarray:
        dense = other.toarray() if isinstance(other, SparseBlock) else other
        return self._scatter(dense, 1.0)

    __radd__ = __add__

    def __sub__(self, other: Stat) -> np.ndarray:
        if isinstance(other, SparseBlock):
            return other._scatter(self.toarray(), -1.0)
        return self._scatter(-np.asarray(other, dtype=np.float64), 1.0)

    def __rsub__(self, other: np.ndarray) -> np.ndarray:
        return self._scatter(other, -1.0)

    def __mul__(self, scale: float) -> SparseBlock:
        return SparseBlock(self.rows, self.cols, self.values * float(scale), self.shape)

    __rmul__ = __mul__


def _check_shape(dense: np.ndarray, block: SparseBlock) -> None:
    if dense.shape != block.shape:
        raise ValueError(
            f"cannot combine a sparse block of shape {block.shape} with an array of shape "
            f"{dense.shape}"
        )


#: one statistic: a float64 array, or the nonzero entries of one
Stat: TypeAlias = "np.ndarray | SparseBlock"


def as_dense(value: Stat) -> np.ndarray:
    """A statistic as a plain array (scatters a :class:`SparseBlock`)."""
    return value.toarray() if isinstance(value, SparseBlock) else value


class SuffStats:
    """Named float64 arrays that add, subtract and scale together.

    Parameters
    ----------
    **arrays : array_like or SparseBlock
        One entry per statistic, e.g. ``N`` (K,), ``H`` (K,), ``xx`` (K, M);
        a :class:`SparseBlock` is kept as it is.
    """

    __slots__ = ("_arrays", "_notes")

    def __init__(self, **arrays: npt.ArrayLike | SparseBlock) -> None:
        self._arrays: dict[str, Stat] = {
            name: a if isinstance(a, SparseBlock) else np.asarray(a, dtype=np.float64)
            for name, a in arrays.items()
        }
        self._notes: dict[str, Stat] = {}

    def __getstate__(self) -> tuple[dict[str, Stat], dict[str, Stat]]:
        return self._arrays, self._notes

    def __setstate__(self, state: tuple[dict[str, Stat], dict[str, Stat]]) -> None:
        self._arrays, self._notes = state

    @property
    def notes(self) -> dict[str, Stat]:
        """What one batch's statistics record beside the additive fields (the HDP's
        delete-move targets): kept with a memo entry, never added, subtracted or
        scaled; the result of arithmetic has none."""
        return self._notes

    def with_notes(self, notes: dict[str, npt.ArrayLike | SparseBlock]) -> SuffStats:
        """These statistics (the same arrays, not copied) with ``notes``."""
        out = SuffStats(**self._arrays)
        out._notes = {
            name: a if isinstance(a, SparseBlock) else np.asarray(a, dtype=np.float64)
            for name, a in notes.items()
        }
        return out

    def __getitem__(self, name: str) -> Stat:
        """Statistic ``name`` as kept (an array, or a :class:`SparseBlock`)."""
        return self._arrays[name]

    def array(self, name: str) -> np.ndarray:
        """Statistic ``name`` as a plain array (the kept one itself, or a
        :class:`SparseBlock` scattered)."""
        return as_dense(self._arrays[name])

    def keys(self) -> KeysView[str]:
        return self._arrays.keys()

    def items(self) -> ItemsView[str, Stat]:
        return self._arrays.items()

    def _check_same(self, other: SuffStats) -> None:
        if self._arrays.keys() != other._arrays.keys():
            raise ValueError(
                f"cannot combine statistics with fields {sorted(self._arrays)} and "
                f"{sorted(other._arrays)}"
            )

    def __add__(self, other: SuffStats) -> SuffStats:
        self._check_same(other)
        return SuffStats(**{k: v + other._arrays[k] for k, v in self._arrays.items()})

    def __sub__(self, other: SuffStats) -> SuffStats:
        self._check_same(other)
        return SuffStats(**{k: v - other._arrays[k] for k, v in self._arrays.items()})

    def __mul__(self, scale: float) -> SuffStats:
        return SuffStats(**{k: v * float(scale) for k, v in self._arrays.items()})

    __rmul__ = __mul__

    def dense_copy(self) -> SuffStats:
        """A copy whose fields are all plain arrays (sparse blocks scattered)."""
        return SuffStats(**{k: np.array(as_dense(v), dtype=np.float64) for k, v in self.items()})

    def replace_(self, old: SuffStats | None, new: SuffStats) -> SuffStats:
        """In place ``self <- self - old + new`` (``old`` may be None).

        ``self`` must hold plain arrays (:meth:`dense_copy`); a sparse block
        touches only its entries, so memoized VI's update of K x V topic
        statistics costs O(entries), not three K x V copies. Rounding is that of
        ``self - old + new``.
        """
        for part, sign in ((old, -1.0), (new, 1.0)):
            if part is None:
                continue
            self._check_same(part)
            for k, v in self._arrays.items():
                p = part._arrays[k]
                if isinstance(v, SparseBlock):
                    raise TypeError("replace_ needs plain arrays; call dense_copy() first")
                if isinstance(p, SparseBlock):
                    _check_shape(v, p)
                    add_entries(v, p.rows, p.cols, p.values, sign)
                elif sign < 0:
                    v -= p
                else:
                    v += p
        return self

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self._arrays.values())

    def allclose(self, other: SuffStats, rtol: float = 1e-10, atol: float = 0.0) -> bool:
        self._check_same(other)
        return all(
            np.allclose(as_dense(v), as_dense(other._arrays[k]), rtol=rtol, atol=atol)
            for k, v in self._arrays.items()
        )

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={v.shape}" for k, v in self._arrays.items())
        return f"SuffStats({shapes})"


def sum_stats(parts: Iterable[SuffStats]) -> SuffStats:
    """Sum an iterable of statistics in order (deterministic rounding, that of
    ``p0 + p1 + ...``) into a fresh bag of plain arrays, one part at a time."""
    total: SuffStats | None = None
    for part in parts:
        if total is None:
            total = part.dense_copy()
        else:
            total.replace_(None, part)
    if total is None:
        raise ValueError("sum_stats needs at least one SuffStats")
    return total
