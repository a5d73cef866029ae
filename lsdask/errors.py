"""Every exception type lsdask raises on purpose, in one place.

Each is a subclass of the built-in exception a caller would catch anyway
(``ValueError`` for bad input, ``RuntimeError`` for a failing cluster), so
code written against the built-ins keeps working.
"""

from __future__ import annotations

from typing import Any


def one_line(exc: BaseException, limit: int = 200) -> str:
    """An exception's message on one line (a library's may span several), cut to
    ``limit`` characters; its type's name where it has no message."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


class DataError(ValueError):
    """Input data that cannot be learned from; the message names where it is."""


class NotFittedError(ValueError, AttributeError):
    """A fitted attribute or method used before ``fit`` (as scikit-learn's, a
    ValueError and an AttributeError)."""


class ClusterError(RuntimeError):
    """The Dask cluster failed under a run: its scheduler is gone, or its workers
    were lost more times in a row than the executor retries."""


class LockError(RuntimeError):
    """A folder that another process is writing (a corpus being appended to, a
    checkpoint folder under a fit), or on a file system without locks; the
    message names the holder and what to do. The environment, not bad input:
    the command line exits with status 1."""


class FitInterrupted(Exception):
    """Raised when a stop was requested (SIGINT/SIGTERM) and a checkpoint written."""

    def __init__(self, checkpoint: Any) -> None:
        super().__init__(f"stopped on request; checkpoint written to {checkpoint}")
        self.checkpoint = checkpoint
        self.signal: int | None = None  # the signal that asked for the stop, where one did


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised wherever the command is, so that it unwinds as on Ctrl-C:
    writers remove their temporary outputs (a fit with a checkpoint folder
    catches SIGTERM itself, to write a checkpoint first)."""


__all__ = [
    "ClusterError",
    "DataError",
    "FitInterrupted",
    "LockError",
    "NotFittedError",
    "Terminated",
    "one_line",
]
