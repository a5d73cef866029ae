"""Parameter checks with messages that name the parameter, what was expected,
what was received and how to fix it (after zarr's ``parse_*`` helpers); and
the parsers of command-line text that go with them."""

from __future__ import annotations

import argparse
import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from lsdask.errors import NotFittedError as NotFittedError  # its home before lsdask.errors


def check_int(name: str, value: Any, low: int, high: int | None = None, hint: str = "") -> int:
    """An integer in ``[low, high]`` (``high=None``: no upper bound)."""
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    ok = ok and value >= low and (high is None or value <= high)
    if not ok:
        rng = f"[{low}, {high}]" if high is not None else f">= {low}"
        msg = f"{name} must be an integer {'in ' if high is not None else ''}{rng}; got {value!r}."
        raise ValueError(f"{msg} {hint}".strip())
    return int(value)


def check_positive_float(name: str, value: Any, hint: str = "", *, zero: bool = False) -> float:
    """``value`` as a float if it is a finite number > 0 (>= 0 with ``zero``)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    ok = ok and (value >= 0 if zero else value > 0)
    if not ok or value != value or value == float("inf"):
        what = "a finite number >= 0" if zero else "a positive finite number"
        raise ValueError(f"{name} must be {what}; got {value!r}. {hint}".strip())
    return float(value)


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    if value not in choices:
        options = ", ".join(repr(c) for c in choices)
        raise ValueError(f"{name} must be one of {options}; got {value!r}")
    return value


def check_sparsity(sparsity: Any, upper: int | None) -> int | None:
    """None (dense) or an integer L in [1, upper] (``upper=None``: no bound)."""
    if sparsity is None:
        return None
    return check_int(
        "sparsity", sparsity, 1, upper, hint="Use sparsity=None for dense responsibilities."
    )


def check_bool(name: str, value: Any) -> bool:
    """True or False (numpy's bools too); not a string such as ``"no"``."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True or False; got {value!r}")
    return bool(value)


def check_random_state(value: Any) -> None:
    """None, an integer >= 0, or a numpy SeedSequence, BitGenerator or Generator:
    what ``numpy.random.default_rng`` takes."""
    try:
        np.random.default_rng(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"random_state must be None, an integer >= 0 or a numpy Generator; got {value!r} "
            f"({exc})"
        ) from None


def _parse_int(text: str, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def parse_nonnegative_int(text: str) -> int:
    """Command-line text of an integer >= 0 (an argparse ``type``)."""
    return _parse_int(text, 0, "an integer >= 0")


def parse_positive_int(text: str) -> int:
    """Command-line text of an integer >= 1 (an argparse ``type``)."""
    return _parse_int(text, 1, "a positive integer")


def parse_nonnegative_float(text: str) -> float:
    """Command-line text of a finite number >= 0 (an argparse ``type``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def parse_positive_float(text: str) -> float:
    """Command-line text of a finite number > 0 (an argparse ``type``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


#: the largest word count a document may hold (what a corpus's int32 counts hold)
MAX_WORD_COUNT = 2**31 - 1


def check_word_count_bound(X: Any, name: str = "X") -> None:
    """Refuse a matrix of word counts (a NumPy array or scipy sparse matrix) with
    a count above :data:`MAX_WORD_COUNT`, naming the first such entry: counts that
    large are not word counts, and sums of them overflow (a document would seem
    empty, or a sample too small)."""
    import scipy.sparse as sp

    M = None
    if sp.issparse(X):
        M = sp.csr_matrix(X)  # no copy for a CSR matrix
        values = np.asarray(M.data)
    elif isinstance(X, np.ndarray) and X.ndim == 2:
        values = X
    else:
        return
    if values.size == 0 or values.dtype.kind not in "iuf":
        return
    big = values > MAX_WORD_COUNT
    if not big.any():
        return
    first = int(np.flatnonzero(big.ravel())[0])
    if M is None:
        row, col = divmod(first, X.shape[1])
    else:
        row = int(np.searchsorted(M.indptr, first, side="right")) - 1
        col = int(M.indices[first])
    raise ValueError(
        f"{name}: word counts must be at most {MAX_WORD_COUNT:,}; document (row) {row}, word "
        f"id {col} holds {values.ravel()[first]:.6g}. Counts this large are not word counts "
        f"(ids, hashes or uninitialized memory in place of counts?): check how {name} was built"
    )
