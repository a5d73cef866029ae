"""Documents' names: what a corpus knows of where each of its documents came from.

An ingest of text files keeps each document's relative file name in
``manifest["ingest"]["doc_names"]`` (for corpora of under 100,000 documents,
:data:`lsdask.io.ingest.common.MAX_NAMES_IN_MANIFEST`); the name of the
document ``doc_id = i`` is entry ``i``, since such an ingest numbers its
documents 0, 1, 2, ... Documents appended later are numbered after the largest
id, past the list, and have no name; so have the documents of a corpus written
without one. The manifest is untrusted: a list that is not a list of strings
is ignored with a warning rather than shown.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

logger = logging.getLogger(__name__)

__all__ = ["DocumentNames"]


class DocumentNames:
    """The names a corpus records for its documents, looked up by ``doc_id``.

    ``names(doc_id)`` is the document's name, or None where the corpus records
    none; ``names.label(doc_id)`` is the name, else ``"doc <doc_id>"``.
    """

    def __init__(self, names: list[str] | None = None) -> None:
        self._names = names or []

    @classmethod
    def of(cls, corpus: Any) -> DocumentNames:
        """The names recorded in ``corpus``'s manifest (a :class:`Corpus`)."""
        found = corpus.ingest_info.get("doc_names")
        if found is None:
            return cls()
        if not isinstance(found, list) or not all(isinstance(n, str) for n in found):
            logger.warning(
                "corpus %s: manifest ingest.doc_names is not a list of strings; the documents "
                "are shown by doc_id",
                corpus.path,
            )
            return cls()
        return cls(found)

    def __len__(self) -> int:
        return len(self._names)

    def __call__(self, doc_id: int) -> str | None:
        d = int(doc_id)
        return self._names[d] if 0 <= d < len(self._names) else None

    def label(self, doc_id: int) -> str:
        name = self(doc_id)
        return f"doc {int(doc_id)}" if name is None else name

    def many(self, doc_ids: Iterable[int]) -> list[str | None]:
        return [self(d) for d in doc_ids]
