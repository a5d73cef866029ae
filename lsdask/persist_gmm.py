"""Deprecated: saved mixtures moved to :mod:`lsdask.persist.gmm`."""

import warnings

from lsdask.persist.gmm import *  # noqa: F403
from lsdask.persist.gmm import load_gmm as load_gmm
from lsdask.persist.gmm import save_gmm as save_gmm

warnings.warn(
    "lsdask.persist_gmm is deprecated; import from lsdask.persist", DeprecationWarning, stacklevel=2
)
