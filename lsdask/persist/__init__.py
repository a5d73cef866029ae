"""Everything lsdask writes to disk and reads back, in one place.

- :mod:`~lsdask.persist.lda` and :mod:`~lsdask.persist.gmm`: saved models;
- :mod:`~lsdask.persist.checkpoint`: checkpoint folders of a run;
- :mod:`~lsdask.persist.memo_files`: memoized per-batch statistics on disk;
- :mod:`~lsdask.persist.resume`: resuming a run from its checkpoint;
- :mod:`~lsdask.persist.model_config`: a model object as plain JSON and back.
"""

from lsdask.persist.gmm import load_gmm, save_gmm
from lsdask.persist.lda import FORMAT, VERSION, check_save_target, load_lda, save_lda

__all__ = ["FORMAT", "VERSION", "check_save_target", "load_gmm", "load_lda", "save_gmm", "save_lda"]
