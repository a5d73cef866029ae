"""Running the ``lsdask`` command line: logging to stderr, signals, and errors
turned into one line and an exit status."""

from __future__ import annotations

import errno
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from lsdask.cli.options import local_cluster_from_args
from lsdask.cli.parser import COMMANDS, build_parser
from lsdask.config import NOTICE
from lsdask.errors import ClusterError, FitInterrupted, LockError, Terminated, one_line
from lsdask.io.stores import parse_storage_options, storage_settings
from lsdask.jobs import commit
from lsdask.kernels.cache import cache_dir, kernels_compiled

logger = logging.getLogger(__name__)

#: the commands that run lsdask's numba kernels, which the first run of a version
#: compiles (and numba caches), and how long that took the demo on two cores
COMPILING = frozenset({"demo", "fit", "fit-gmm", "transform"})
COMPILE_TIME = "3 minutes on two cores"

__all__ = ["main"]


class _TerseFormatter(logging.Formatter):
    """``lsdask: warning: ...`` for warnings and errors, ``lsdask: ...`` for notices,
    ``lsdask [HH:MM:SS] ...`` for progress lines (a log read later wants the time)."""

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "progress", False) and record.levelno < logging.WARNING:
            return f"lsdask [{self.formatTime(record, '%H:%M:%S')}] {record.getMessage()}"
        kind = "warning: " if record.levelno >= logging.WARNING else ""
        return f"lsdask: {kind}{record.getMessage()}"


def _warnings_and_notices(record: logging.LogRecord) -> bool:
    """What reaches stderr without -v: warnings, the INFO lines logged with
    ``extra=lsdask.config.NOTICE`` (the Dask dashboard's address) and, where
    stderr is not a terminal (no progress bar shows), those logged with
    ``extra=lsdask.config.PROGRESS`` (one line per start phase and lap)."""
    if record.levelno >= logging.WARNING or getattr(record, "notice", False):
        return True
    return getattr(record, "progress", False) and not _stderr_is_terminal()


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):  # replaced or closed
        return False


class _DaskClientErrors(logging.Filter):
    """Drops the ERROR records of the Dask client and its connections (tracebacks
    of its reconnection attempts): a failing cluster is reported as one lsdask
    line. Dask's warnings (a worker over its memory limit, say) still show."""

    _NAMES = ("distributed.client", "distributed.comm", "distributed.core")

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno >= logging.ERROR and record.name.startswith(self._NAMES))


def _quiet_dask() -> list[tuple[logging.Handler, logging.Filter]]:
    """Put a :class:`_DaskClientErrors` on the handlers of Dask's loggers; returns
    them, to remove it.

    Filters go on the handlers: Dask configures its loggers when it is imported
    (so it is imported here), several with a handler of their own and no
    propagation."""
    import distributed  # noqa: F401  (configures its loggers)

    quiet = _DaskClientErrors()
    handlers = [
        h
        for name, log in logging.root.manager.loggerDict.items()
        if (name == "distributed" or name.startswith("distributed."))
        and isinstance(log, logging.Logger)
        for h in log.handlers
    ]
    for h in handlers:
        h.addFilter(quiet)
    return [(h, quiet) for h in handlers]


def _is_cluster_failure(err: BaseException) -> bool:
    """A failure of the Dask cluster under the command, not of lsdask's code."""
    return isinstance(err, ClusterError) or type(err).__module__.startswith("distributed.")


def _cluster_failure_message(err: BaseException) -> str:
    if isinstance(err, ClusterError):
        return str(err)
    return (
        f"the Dask cluster failed ({type(err).__name__}: {one_line(err, 300)}). "
        "Check that its scheduler and workers run (their logs say why they stopped); a fit "
        "with a checkpoint folder resumes from its last lap (--resume DIR)"
    )


#: what to do about an OSError, by errno: the environment, not the input
_OS_HINTS = {
    errno.ENOSPC: "free space on that file system, or write somewhere else",
    errno.EDQUOT: "free space within your quota, or write somewhere else",
    errno.EROFS: "the file system is read-only: write somewhere else",
    errno.EACCES: "give yourself permission to it, or write somewhere else",
    errno.EPERM: "give yourself permission to it, or write somewhere else",
    errno.EIO: "the disk or network file system failed: check it and run the command again",
    errno.EMFILE: "too many open files: raise the limit (ulimit -n)",
}


def _os_failure_message(err: OSError) -> str:
    where = f" ({err.filename})" if err.filename else ""
    hint = _OS_HINTS.get(err.errno or -1, "check the path and the file system, then run again")
    return f"{err.strerror or err}{where}: {hint}"


def _input_failure_message(err: BaseException) -> str:
    if isinstance(err, IsADirectoryError):
        return f"expected a file, found a folder: {err.filename}"
    if isinstance(err, NotADirectoryError):
        return f"expected a folder, found a file: {err.filename}"
    if isinstance(err, RecursionError):
        return "an input file is nested too deeply to be read (a damaged or crafted file)"
    return (
        f"the arithmetic overflowed ({one_line(err, 200)}): the data holds values too large "
        "for float64; rescale it (e.g. standardize each column)"
    )


#: what to do when a command runs out of memory: the options it has
_MEMORY_ADVICE = {
    "fit": "Use smaller batches (ingest the corpus again with --docs-per-row-group N: "
    "each row group is one batch), fewer --topics, a smaller --sparsity, or more memory",
    "transform": "Use smaller batches (ingest the corpus again with --docs-per-row-group N: "
    "each row group is one batch) or more memory",
    "fit-gmm": "Use smaller batches (--batch-size N rows), fewer --components or more memory",
    "patches": "Use smaller Zarr chunks (--batch-size N rows), fewer images (--max-images) or "
    "more memory",
    None: "Use smaller inputs or more memory",
}


def _on_signal(signum: int, frame: Any) -> None:
    """SIGTERM raises :class:`Terminated`, SIGINT ``KeyboardInterrupt``, unless the
    command's work is saved or being saved (:func:`lsdask.jobs.commit.on_signal`)."""
    if commit.on_signal(signum):
        return
    if signum == signal.SIGTERM:
        raise Terminated()
    raise KeyboardInterrupt


def _done_anyway(what: str) -> int | None:
    """0, with a warning, where the command's work was saved before ``what``
    happened; None where it was not (``what`` then decides the status)."""
    if not commit.is_committed():
        return None
    logging.getLogger(__name__).warning("%s after the work was saved; it stands", what)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``lsdask`` command line; return the exit status.

    Bad input (a ``ValueError``, ``FileNotFoundError`` or
    ``FileExistsError``) is reported as one line ``lsdask: error: <message>``
    on stderr with status 2; argument errors exit with status 2 through
    argparse. A failing Dask cluster (its scheduler gone, its workers lost
    beyond the executor's retries) is one such line with status 1; without
    ``-v`` the Dask client's own error records (reconnection tracebacks) are
    dropped, its warnings kept. A folder locked by another process (a corpus
    being appended to, a checkpoint folder under another fit) is one such line
    with status 1. SIGTERM exits with 143, Ctrl-C with 130, unless the
    command's work was saved before (:mod:`lsdask.jobs.commit`): it then
    ends normally, with status 0.
    """
    args = build_parser().parse_args(argv)
    args.command_line = list(sys.argv[1:] if argv is None else argv)
    package_logger = logging.getLogger("lsdask")
    old_level = package_logger.level
    # warnings and notices always reach stderr (the package's NullHandler would
    # swallow them); -v adds the INFO lines, with times
    handler = logging.StreamHandler(sys.stderr)
    package_logger.setLevel(logging.INFO)
    if args.verbose:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
        )
    else:
        handler.setFormatter(_TerseFormatter())
        handler.addFilter(_warnings_and_notices)
    package_logger.addHandler(handler)
    # without -v, a failing cluster is one "lsdask: error:" line, not also the Dask
    # client's own log of it with tracebacks (its workers' logs are their own)
    dask_handlers = [] if args.verbose or getattr(args, "sync", True) else _quiet_dask()
    in_main_thread = threading.current_thread() is threading.main_thread()
    commit.begin()
    old_handlers = (
        {sig: signal.signal(sig, _on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        if in_main_thread
        else {}
    )
    if args.command in COMPILING and cache_dir() is not None and not kernels_compiled():
        logger.info(
            "first run of this lsdask version: compiling its numba kernels once (about %s); "
            "later runs load them from %s",
            COMPILE_TIME, cache_dir(), extra=NOTICE,
        )  # fmt: skip
    try:
        options = parse_storage_options(getattr(args, "storage_option", None) or [])
        with local_cluster_from_args(args), storage_settings(options):
            return COMMANDS[args.command][1](args)
    except (ValueError, FileNotFoundError, FileExistsError) as err:
        print(f"lsdask: error: {err}", file=sys.stderr)
        return 2
    except LockError as err:  # another process writes the folder: the environment
        print(f"lsdask: error: {err}", file=sys.stderr)
        return 1
    except (IsADirectoryError, NotADirectoryError, RecursionError, FloatingPointError) as err:
        print(f"lsdask: error: {_input_failure_message(err)}", file=sys.stderr)
        return 2
    except OSError as err:  # the disk, the file system, permissions: the environment
        print(f"lsdask: error: {_os_failure_message(err)}", file=sys.stderr)
        return 1
    except MemoryError:
        advice = _MEMORY_ADVICE.get(args.command, _MEMORY_ADVICE[None])
        print(f"lsdask: error: out of memory. {advice}", file=sys.stderr)
        return 1
    except FitInterrupted as stop:
        started = getattr(args, "checkpoint", None)
        how = (
            f"the same command with --resume {started} in place of --checkpoint {started}"
            if started is not None
            else "the same command"
        )
        print(
            f"lsdask: stopped; checkpoint written to {stop.checkpoint}. Continue with {how}.",
            file=sys.stderr,
        )
        # as a shell reports a process ended by the signal: 143 for SIGTERM, 130 for Ctrl-C
        return 128 + (stop.signal or signal.SIGINT)
    except Exception as err:
        if not _is_cluster_failure(err):
            raise
        done = _done_anyway(f"the Dask cluster failed ({type(err).__name__})")
        if done is not None:
            return done
        print(f"lsdask: error: {_cluster_failure_message(err)}", file=sys.stderr)
        # the Dask client goes on logging its reconnection attempts until the process
        # exits: the filter stays past this return (it drops only those records)
        dask_handlers = []
        return 1
    except Terminated:
        done = _done_anyway("SIGTERM")
        if done is not None:
            return done
        print("lsdask: terminated (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        done = _done_anyway("Ctrl-C (SIGINT)")
        if done is not None:
            return done
        print("lsdask: interrupted", file=sys.stderr)
        return 130
    finally:
        for sig, old in old_handlers.items():
            signal.signal(sig, old)
        for h, quiet in dask_handlers:
            h.removeFilter(quiet)
        package_logger.removeHandler(handler)
        package_logger.setLevel(old_level)
