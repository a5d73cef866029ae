"""lsdask: L-sparse variational inference for clusters and topics on Dask.

Each observation keeps only its top-L cluster responsibilities (Hughes &
Sudderth, "Fast learning of clusters and topics via sparse posteriors"), so
the local and summary steps cost O(L) instead of O(K); the learning loop runs
as a dataflow of one task per stored batch.
"""

import logging

from lsdask._version import __version__
from lsdask.estimators import HDP, LDA, GaussianMixture, MultinomialMixture

__all__ = [
    "HDP",
    "LDA",
    "DeltaTable",
    "GaussianMixture",
    "MultinomialMixture",
    "ParquetTable",
    "__version__",
]

#: names imported when first used: the tables load pyarrow, which `import lsdask`
#: does not pay for
_LAZY = {"ParquetTable": "lsdask.io.tables", "DeltaTable": "lsdask.io.tables"}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'lsdask' has no attribute {name!r}")


logging.getLogger(__name__).addHandler(logging.NullHandler())
