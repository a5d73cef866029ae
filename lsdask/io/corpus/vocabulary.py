"""Whether two vocabularies are the same words in the same order, said in words."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence


def vocabulary_difference(expected: Sequence[str], found: Sequence[str]) -> str | None:
    """None if ``found`` is ``expected`` (same words, same ids), else what differs:
    the sizes, or how many ids hold another word and the first of them."""
    if len(found) != len(expected):
        return f"{len(found)} words where {len(expected)} were expected"
    differ = [i for i, (a, b) in enumerate(zip(expected, found, strict=True)) if a != b]
    if not differ:
        return None
    i = differ[0]
    return (
        f"{len(differ)} of its {len(expected)} word ids hold another word (id {i} is "
        f"{found[i]!r}, expected {expected[i]!r})"
    )


def vocabulary_digest(words: Sequence[str]) -> str:
    """A SHA-256 of the words in id order: equal exactly for the same vocabulary."""
    h = hashlib.sha256()
    for w in words:
        h.update(w.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
