"""Additive bags of sufficient statistics.

Memoized VI rests on statistics being additive over batches: the whole-data
statistics are the sum of per-batch ones, so visiting batch b replaces its
contribution with ``S <- S - S_b(old) + S_b(new)``. :class:`SuffStats` is that
bag: named float64 arrays with ``+``, ``-`` and scaling, and a fixed set of
names so that a typo is an error rather than a new field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np


class SuffStats:
    """Named float64 arrays that add, subtract and scale together.

    Parameters
    ----------
    **arrays : array_like
        One entry per statistic, e.g. ``N`` (K,), ``H`` (K,), ``xx`` (K, M).
    """

    __slots__ = ("_arrays",)

    def __init__(self, **arrays: np.ndarray) -> None:
        self._arrays = {name: np.asarray(a, dtype=np.float64) for name, a in arrays.items()}

    @classmethod
    def from_mapping(cls, arrays: Mapping[str, np.ndarray]) -> SuffStats:
        return cls(**dict(arrays))

    def __getitem__(self, name: str) -> np.ndarray:
        return self._arrays[name]

    def keys(self) -> Iterable[str]:
        return self._arrays.keys()

    def items(self):
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

    def zeros_like(self) -> SuffStats:
        return SuffStats(**{k: np.zeros_like(v) for k, v in self._arrays.items()})

    @property
    def nbytes(self) -> int:
        return sum(v.nbytes for v in self._arrays.values())

    def allclose(self, other: SuffStats, rtol: float = 1e-10, atol: float = 0.0) -> bool:
        self._check_same(other)
        return all(
            np.allclose(v, other._arrays[k], rtol=rtol, atol=atol) for k, v in self._arrays.items()
        )

    def to_dict(self) -> dict[str, np.ndarray]:
        return dict(self._arrays)

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k}={v.shape}" for k, v in self._arrays.items())
        return f"SuffStats({shapes})"


def sum_stats(parts: Iterable[SuffStats]) -> SuffStats:
    """Sum an iterable of statistics in order (deterministic rounding)."""
    total = None
    for part in parts:
        total = part if total is None else total + part
    if total is None:
        raise ValueError("sum_stats needs at least one SuffStats")
    return total
