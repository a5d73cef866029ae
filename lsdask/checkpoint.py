"""Deprecated: checkpoint folders moved to :mod:`lsdask.persist.checkpoint`."""

import warnings

from lsdask.persist.checkpoint import *  # noqa: F403
from lsdask.persist.checkpoint import CheckpointDir as CheckpointDir

warnings.warn(
    "lsdask.checkpoint is deprecated; import from lsdask.persist.checkpoint",
    DeprecationWarning,
    stacklevel=2,
)
