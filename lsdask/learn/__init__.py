"""Learning algorithms, written against the :mod:`~lsdask.learn.protocols`
(Model, Executor, MemoStore); none of them imports Dask."""

from lsdask.learn.base import LearnResult
from lsdask.learn.init import INIT_METHODS, initial_stats
from lsdask.learn.memo import MemoizedVI
from lsdask.learn.protocols import Batch, Executor, MemoStore, Model
from lsdask.learn.svi import StochasticVI
from lsdask.learn.vb import FullBatchVB

ALGORITHMS = {"memo": MemoizedVI, "svi": StochasticVI, "vb": FullBatchVB}

__all__ = [
    "ALGORITHMS",
    "INIT_METHODS",
    "Batch",
    "Executor",
    "FullBatchVB",
    "LearnResult",
    "MemoStore",
    "MemoizedVI",
    "Model",
    "StochasticVI",
    "initial_stats",
]
