"""Save a fitted LDA model to a directory and load it back, exactly.

A model directory holds::

    model/
        params.json   # format, version, the estimator's parameters (no client, no
                      # checkpoint folder),
                      # fitted scalars (n_laps_, converged_, vocab size, ...)
        arrays.npz    # components_ (lambda), elbo_trace_, lap_trace_, time_trace_,
                      # validation_trace_ (early stopping's, from lap 0;
                      # best_lap_ is its first maximum),
                      # the priors alpha_ (K,) and eta_ (1,), alpha_trace_,
                      # and the statistics stats_ (words, H, alloc, N, n_docs;
                      # S, W, Cdir with a learned alpha);
                      # init, when the init parameter was an array
        vocab.txt     # UTF-8, one word per line (only when vocabulary_ is set)

The statistics are what ``partial_fit`` adds new documents to, so a loaded
model keeps learning where the saved one stopped. ``params.json`` holds
``alpha``/``eta`` as fitted: a number, or ``"auto"`` for a learned prior, whose
values are ``alpha_`` and ``eta_``; files written before those were kept (a
number in ``params.json``, no ``alpha_``) load with that fixed prior. Arrays are stored in
float64 as they are and read with ``allow_pickle=False``; the posterior is
rebuilt from them, so ``components_``, ``transform``, ``score`` and
``top_words`` of the loaded model are identical to the saved one's.

This module knows the files (written and read by
:class:`~lsdask.persist.topic_model.TopicFormat`, shared with HDP); the
estimator registered for :data:`KIND` (:mod:`lsdask.persist.registry`) turns a
fitted model into a :class:`~lsdask.persist.registry.ModelState` and back.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from lsdask.persist.model_dir import check_save_target, model_root
from lsdask.persist.registry import ModelState
from lsdask.persist.topic_model import INIT_IN_ARRAYS as INIT_IN_ARRAYS
from lsdask.persist.topic_model import VOCAB_NAME as VOCAB_NAME
from lsdask.persist.topic_model import VOCABULARY as VOCABULARY
from lsdask.persist.topic_model import TopicFormat

logger = logging.getLogger(__name__)

__all__ = ["FORMAT", "KIND", "VERSION", "check_save_target", "load_lda", "save_lda"]

#: The registry kind of an LDA model.
KIND = "lda"
#: Value of ``params.json["format"]``.
FORMAT = "lsdask-lda"
#: Value of ``params.json["version"]`` written by this module.
VERSION = 1

#: Fields of ``stats_``, stored as ``stats_<name>`` in ``arrays.npz``.
STATS_FIELDS = ("words", "H", "alloc", "N", "n_docs")

_FILES = TopicFormat(
    kind=KIND,
    format=FORMAT,
    version=VERSION,
    name="LDA",
    logger=logger,
    sizes_array="components_",
    required=lambda K, V: {
        "components_": (K, V),
        "stats_words": (K, V),
        "stats_N": (K,),
        "stats_H": (1,),
        "stats_alloc": (1,),
        "stats_n_docs": (1,),
    },
    # kept since priors can be learned (absent from older files)
    optional=lambda K: {
        "alpha_": (K,),
        "eta_": (1,),
        "stats_S": (K,),
        "stats_W": (1,),
        "stats_Cdir": (1,),
    },
    check_n_components=True,
    save_hint="lsdask.persist.save_lda or `lsdask fit`",
)


def save_lda(model: Any, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Save a fitted :class:`lsdask.LDA` to the directory ``path``, atomically.

    Parameters
    ----------
    model : lsdask.LDA
        A fitted model (``fit`` or ``partial_fit`` was called).
    path : str or os.PathLike
        The model directory to create.
    overwrite : bool, default False
        Replace an existing model directory at ``path`` (once the new one is
        complete). A folder that is not a model directory is never replaced.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        If ``model`` is not an :class:`lsdask.LDA`.
    lsdask.errors.NotFittedError
        If the model is not fitted.
    FileExistsError
        If ``path`` exists and ``overwrite`` is false, or it is not a model
        directory.
    ValueError
        If a parameter cannot be stored as JSON (e.g. a
        ``numpy.random.Generator`` as ``random_state``) or a word of the
        vocabulary contains a line break.
    """
    from lsdask.persist.esvi_model import is_partitioned, save_esvi_lda

    if is_partitioned(model):  # fitted by ESVI: written block by block by the workers
        return save_esvi_lda(model, path, overwrite=overwrite)
    return _FILES.save(model, path, overwrite, "save_lda")


def write_lda(state: ModelState, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the state of an LDA model (see :func:`save_lda`) to ``path``."""
    return _FILES.write(state, path, overwrite)


def read_lda(path: str | os.PathLike[str]) -> ModelState:
    """The state of the LDA model saved at ``path``, checked (see :func:`load_lda`)."""
    root = model_root(path)
    if not root.exists():
        raise FileNotFoundError(f"no LDA model at {str(root)!r}: the path does not exist")
    if not root.is_dir():
        raise ValueError(f"{str(root)!r} is a file, not an lsdask model directory")
    return _FILES.read(root)


def load_lda(path: str | os.PathLike[str], *, client: Any = None) -> Any:
    """Load an :class:`lsdask.LDA` saved by :func:`save_lda`.

    Parameters
    ----------
    path : str or os.PathLike
        The model directory.
    client : None, "sync", str or distributed.Client, default None
        The loaded estimator's ``client`` parameter (it is not saved), used
        by a later ``fit`` or ``partial_fit``.

    Returns
    -------
    lsdask.LDA
        Fitted: ``components_``, ``topic_word_``, ``vocabulary_``,
        ``elbo_trace_``, ``n_laps_``, ``converged_``, ``stats_`` and the
        posterior are restored, so ``transform``, ``score``, ``top_words``,
        ``coherence`` and ``partial_fit`` work as on the saved model.

    Raises
    ------
    FileNotFoundError
        If ``path`` or one of its files does not exist (the message names it).
    ValueError
        If a file is corrupt or the files do not belong together (the message
        names the path and the file).
    """
    root = Path(path)
    state = read_lda(root)
    model = _FILES.load(root, state, client)
    K, V = state.arrays["components_"].shape
    logger.info("loaded LDA K=%d, V=%d from %s", K, V, root)
    return model
