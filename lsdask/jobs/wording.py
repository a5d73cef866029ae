"""Small helpers for the text the commands print."""

from __future__ import annotations

__all__ = ["plural"]


def plural(n: int, word: str) -> str:
    """``"1 row group"``, ``"3 row groups"``: a count with its noun (``,`` thousands)."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"
