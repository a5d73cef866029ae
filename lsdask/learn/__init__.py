"""Learning algorithms, written against an executor; none of them imports Dask."""

from lsdask.learn.base import LearnResult
from lsdask.learn.init import INIT_METHODS, initial_stats
from lsdask.learn.memo import MemoizedVI
from lsdask.learn.svi import StochasticVI
from lsdask.learn.vb import FullBatchVB

ALGORITHMS = {"memo": MemoizedVI, "svi": StochasticVI, "vb": FullBatchVB}

__all__ = [
    "ALGORITHMS",
    "INIT_METHODS",
    "FullBatchVB",
    "LearnResult",
    "MemoizedVI",
    "StochasticVI",
    "initial_stats",
]
