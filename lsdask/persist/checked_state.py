"""Fields of checkpoint files, checked where they are parsed.

A checkpoint's ``state.json`` (or an SVI-Gibbs checkpoint's JSON member) may
be damaged or crafted. The learning loops receive only values checked here:
a field of the wrong type or out of range is a ValueError naming it, which
the reader turns into a :class:`~lsdask.errors.DataError` naming the file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["check_rng_state"]

#: the bit generators whose state a checkpoint may hold, by the name numpy records
_BIT_GENERATORS = {
    cls.__name__: cls
    for cls in (np.random.PCG64, np.random.PCG64DXSM, np.random.MT19937, np.random.Philox,
                np.random.SFC64)
}  # fmt: skip


def _plain(value: Any) -> Any:
    """A generator's state as JSON holds it (arrays as lists, numpy ints as ints)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.integer):
        return int(value)
    return value


def check_rng_state(value: Any) -> dict[str, Any]:
    """``value`` if it is the state of a numpy bit generator, exactly as one
    reports it (every number a whole number in its range, every list of its
    length), else a ValueError naming ``rng_state`` and what is wrong."""
    if not isinstance(value, dict):
        raise ValueError(f"rng_state must be a JSON object; got {type(value).__name__}")
    name = value.get("bit_generator")
    if name not in _BIT_GENERATORS:
        raise ValueError(
            f"rng_state names the bit generator {str(name)[:40]!r}; expected one of "
            f"{sorted(_BIT_GENERATORS)}"
        )
    generator = _BIT_GENERATORS[name]()
    try:
        generator.state = value
    except (TypeError, ValueError, OverflowError, KeyError, IndexError, AttributeError) as exc:
        raise ValueError(f"rng_state is not a state of {name} ({type(exc).__name__}: "
                         f"{str(exc)[:120]})") from None  # fmt: skip
    if _plain(generator.state) != value:
        raise ValueError(
            f"rng_state holds values outside the range of a {name} state (a number too "
            "large, negative or of the wrong type)"
        )
    return value
