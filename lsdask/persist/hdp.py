"""Save a fitted HDP topic model to a directory and load it back, exactly.

A model directory holds::

    model/
        params.json   # format, version, the estimator's parameters (no client, no
                      # checkpoint folder; moves as a list), fitted scalars (K, V, ...)
        arrays.npz    # the sticks rho (K,) and omega (K,); the statistics stats_
                      # (words, H, alloc, N, n_docs, S (K + 1,), W, Cdir); the traces
                      # (elbo_trace_, lap_trace_, time_trace_, size_trace_,
                      # alpha_trace_, n_components_trace_); init, when the init
                      # parameter was an array
        vocab.txt     # UTF-8, one word per line (only when vocabulary_ is set)

The topics are the global step of the statistics (``lambda = eta + S_words``,
eta refitted where it is learned, all deterministic) and the sticks are stored
as they are, so the loaded posterior is the saved one, bit for bit; everything
is kept in the model's own stick order (the fitted attributes' order by weight
is recomputed). Arrays are float64, read with ``allow_pickle=False``.

This module knows the files (written and read by
:class:`~lsdask.persist.topic_model.TopicFormat`, shared with LDA); the
estimator registered for :data:`KIND` (:mod:`lsdask.persist.registry`) turns a
fitted model into a :class:`~lsdask.persist.registry.ModelState` and back.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from lsdask.persist.model_dir import model_root
from lsdask.persist.registry import ModelState
from lsdask.persist.topic_model import TopicFormat

logger = logging.getLogger(__name__)

__all__ = ["FORMAT", "KIND", "VERSION", "load_hdp", "save_hdp"]

#: The registry kind of an HDP topic model.
KIND = "hdp"
#: Value of ``params.json["format"]``.
FORMAT = "lsdask-hdp"
#: Value of ``params.json["version"]`` written by this module.
VERSION = 1

#: Fields of ``stats_``, stored as ``stats_<name>`` in ``arrays.npz``.
STATS_FIELDS = ("words", "H", "alloc", "N", "n_docs", "S", "W", "Cdir")

_FILES = TopicFormat(
    kind=KIND,
    format=FORMAT,
    version=VERSION,
    name="HDP",
    logger=logger,
    sizes_array="stats_words",
    required=lambda K, V: {
        "rho": (K,),
        "omega": (K,),
        "stats_words": (K, V),
        "stats_H": (1,),
        "stats_alloc": (1,),
        "stats_N": (K,),
        "stats_n_docs": (1,),
        "stats_S": (K + 1,),
        "stats_W": (1,),
        "stats_Cdir": (1,),
    },
    fitted_keys=("n_components", "vocab_size", "n_features_in_", "n_laps_", "converged_"),
    tuple_params=("moves",),
)


def save_hdp(model: Any, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Save a fitted :class:`lsdask.HDP` to the directory ``path``, atomically.

    Raises
    ------
    TypeError
        If ``model`` is not an :class:`lsdask.HDP`.
    lsdask.errors.NotFittedError
        If the model is not fitted.
    FileExistsError
        If ``path`` exists and ``overwrite`` is false, or it is not a model directory.
    ValueError
        If a parameter cannot be stored as JSON or a word contains a line break.
    """
    return _FILES.save(model, path, overwrite, "save_hdp")


def write_hdp(state: ModelState, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the state of an HDP model (see :func:`save_hdp`) to ``path``."""
    return _FILES.write(state, path, overwrite)


def read_hdp(path: str | os.PathLike[str]) -> ModelState:
    """The state of the HDP model saved at ``path``, checked (see :func:`load_hdp`)."""
    root = model_root(path)
    if not root.is_dir():
        what = "the path does not exist" if not root.exists() else "it is a file"
        raise FileNotFoundError(f"no HDP model at {str(root)!r}: {what}")
    return _FILES.read(root)


def load_hdp(path: str | os.PathLike[str], *, client: Any = None) -> Any:
    """Load an :class:`lsdask.HDP` saved by :func:`save_hdp` (or
    :func:`lsdask.persist.save_model`), with ``client`` as its client.

    Raises
    ------
    FileNotFoundError
        If ``path`` or one of its files does not exist.
    ValueError
        If a file is corrupt or the files do not belong together (the message
        names the path and the file).
    """
    root = Path(path)
    state = read_hdp(root)
    model = _FILES.load(root, state, client)
    logger.info("loaded HDP K=%d from %s", state.arrays["rho"].shape[0], root)
    return model
