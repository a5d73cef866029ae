"""Executors: where batch tasks run (in-process, or on Dask)."""

from lsdask.engine.dask_executor import DaskExecutor, make_executor
from lsdask.engine.executor import Executor, SerialExecutor
from lsdask.errors import ClusterError

__all__ = ["ClusterError", "DaskExecutor", "Executor", "SerialExecutor", "make_executor"]
