"""Everything lsdask writes to disk and reads back, in one place.

persist knows no estimator class: an estimator hands it a plain
:class:`~lsdask.persist.registry.ModelState` and is rebuilt from one by the
functions the estimators package registers.

- :mod:`~lsdask.persist.registry`: the state of a fitted model, and the
  estimators registered to make and take it;
- :mod:`~lsdask.persist.model_dir`: the folder of a saved model (written
  atomically, read with clear errors);
- :mod:`~lsdask.persist.lda` and :mod:`~lsdask.persist.gmm`: the files of a
  saved LDA model and Gaussian mixture;
- :mod:`~lsdask.persist.topic_model`: the folder of a saved topic model, written
  and read for :mod:`~lsdask.persist.lda` and :mod:`~lsdask.persist.hdp` alike;
- :mod:`~lsdask.persist.saved_model`: save or load any of them by its kind;
- :mod:`~lsdask.persist.model_config`: a model's configuration as JSON and a
  mixture's posterior as arrays, and back;
- :mod:`~lsdask.persist.checkpoint`: checkpoint folders of a run;
- :mod:`~lsdask.persist.memo_files`: memoized per-batch statistics on disk;
- :mod:`~lsdask.persist.resume`: resuming a run from its checkpoint.
"""

from lsdask.persist.gmm import load_gmm, save_gmm
from lsdask.persist.lda import FORMAT, VERSION, load_lda, save_lda
from lsdask.persist.model_dir import check_save_target
from lsdask.persist.registry import ModelState, register
from lsdask.persist.saved_model import load_model, save_model

__all__ = [
    "FORMAT",
    "VERSION",
    "ModelState",
    "check_save_target",
    "load_gmm",
    "load_lda",
    "load_model",
    "register",
    "save_gmm",
    "save_lda",
    "save_model",
]
