"""The moment a command's work is saved, and the signals that come after it.

A command's work is *committed* once its output is in place: a fit's model
folder renamed in and its checkpoint marked done, ``transform``'s Parquet file
renamed in, an append's manifest written. A SIGTERM or Ctrl-C that arrives
after that changes nothing: the command finishes and exits 0, and says that the
signal came after its work was saved. A retry loop that reruns a command ended
by a signal therefore never reruns one whose work is saved (a rerun would fit
more laps, or refuse the existing output).

The output step itself (:func:`output_step`: a model folder written and renamed
in, a checkpoint marked done) takes seconds; a signal during it is held until
the output is in place, so that a signal never leaves the work half committed
(the output written but the checkpoint not marked done). A second Ctrl-C
during the step abandons it at once; what was written under a temporary name
is removed, as on any interrupted write.

Only ``lsdask`` (:func:`lsdask.cli.app.main`) asks :func:`on_signal` what to do
with a signal; called from Python, the jobs keep Python's own handling.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field

from lsdask.io.faults import fault_point

logger = logging.getLogger(__name__)

__all__ = ["begin", "committed", "is_committed", "on_signal", "output_step"]


@dataclass
class _Command:
    """The state of the command this process runs."""

    step: str | None = None  # the output being written (signals are held meanwhile)
    saved: str | None = None  # what was committed
    held: list[int] = field(default_factory=list)  # signals that came during the step


_command = _Command()


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def begin() -> None:
    """A command starts: nothing written yet, no signal held."""
    global _command
    _command = _Command()


def is_committed() -> bool:
    """Whether the running command's work is saved."""
    return _command.saved is not None


def committed(what: str) -> None:
    """Record that the command's work is saved (``what``: the output, in words);
    the first record stands, later ones do nothing."""
    if _command.saved is not None:
        return
    _command.saved = what
    if _command.held:
        logger.warning(
            "%s came while %s was being written; it is saved, so the command ends normally",
            " and ".join(_name(s) for s in _command.held), what,
        )  # fmt: skip
    fault_point("command.committed")


@contextlib.contextmanager
def output_step(what: str) -> Iterator[None]:
    """Write the command's output (``what``, in words) in the block: signals are
    held until it ends (see the module's documentation); the work is committed
    when the block ends without an exception."""
    _command.step = what
    try:
        yield
    finally:
        _command.step = None
    committed(what)


def on_signal(signum: int) -> bool:
    """What a SIGINT or SIGTERM does: True where the command goes on (its work is
    saved, or its output step holds the signal), False where it stops."""
    name = _name(signum)
    if _command.saved is not None:
        logger.warning(
            "%s came after the work was saved (%s): nothing to stop; the command ends "
            "normally",
            name, _command.saved,
        )  # fmt: skip
        return True
    if _command.step is None:
        return False
    if signum == signal.SIGINT and signal.SIGINT in _command.held:
        return False  # a second Ctrl-C: abandon the output step now
    _command.held.append(signum)
    logger.warning(
        "%s: finishing %s first (seconds; a second Ctrl-C abandons it)", name, _command.step
    )
    return True
