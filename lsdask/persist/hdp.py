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

This module knows the files; the estimator registered for :data:`KIND`
(:mod:`lsdask.persist.registry`) turns a fitted model into a
:class:`~lsdask.persist.registry.ModelState` and back.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.persist.lda import INIT_IN_ARRAYS, VOCAB_NAME, VOCABULARY, _read_vocab
from lsdask.persist.model_dir import (
    ARRAYS_NAME,
    PARAMS_NAME,
    check_save_target,
    model_root,
    read_arrays,
    read_meta,
    saved_params,
    write_model_dir,
)
from lsdask.persist.registry import ModelState, entry

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
    found = entry(KIND)
    if not isinstance(model, found.cls):
        raise TypeError(
            f"save_hdp saves an lsdask.{found.cls.__name__}; got {type(model).__name__}"
        )
    return write_hdp(found.get_state(model), path, overwrite=overwrite)


def write_hdp(state: ModelState, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the state of an HDP model (see :func:`save_hdp`) to ``path``."""
    out = Path(path)
    check_save_target(out, overwrite)
    params = dict(state.params)
    init = params.get("init")
    if isinstance(init, np.ndarray):  # an array travels in arrays.npz
        params["init"] = INIT_IN_ARRAYS
    moves = params.pop("moves", ())
    params = saved_params(params)
    params["moves"] = [str(m) for m in moves]  # a list of names in JSON, a tuple when loaded
    vocab = state.texts.get(VOCABULARY)
    if vocab is not None:
        vocab = [str(w) for w in vocab]
        bad = next((i for i, w in enumerate(vocab) if "\n" in w or "\r" in w), None)
        if bad is not None:
            raise ValueError(f"vocabulary_[{bad}] = {vocab[bad]!r} contains a line break")
    arrays = {name: np.asarray(a, dtype=np.float64) for name, a in state.arrays.items()}
    if isinstance(init, np.ndarray):
        arrays["init"] = np.asarray(init, dtype=np.float64)
    K, V = arrays["stats_words"].shape
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "estimator": state.info.get("estimator", entry(KIND).cls.__name__),
        "params": params,
        "fitted": {
            "n_components": int(K),
            "vocab_size": int(V),
            **{k: state.fitted[k] for k in ("n_features_in_", "n_laps_", "converged_")},
            "has_vocabulary": vocab is not None,
        },
        "arrays": sorted(arrays),
    }
    texts = {} if vocab is None else {VOCAB_NAME: "".join(w + "\n" for w in vocab)}
    write_model_dir(out, meta, arrays, overwrite, texts)
    logger.info("saved HDP K=%d, V=%d to %s", K, V, out)
    return out


def _check_arrays(root: Path, arrays: dict[str, np.ndarray], K: int, V: int) -> None:
    where = f"model {str(root)!r}: {ARRAYS_NAME}"
    expected = {
        "rho": (K,), "omega": (K,), "stats_words": (K, V), "stats_H": (1,),
        "stats_alloc": (1,), "stats_N": (K,), "stats_n_docs": (1,), "stats_S": (K + 1,),
        "stats_W": (1,), "stats_Cdir": (1,),
    }  # fmt: skip
    for name, shape in expected.items():
        if name not in arrays:
            raise ValueError(f"{where} lacks the array {name!r}; found {sorted(arrays)}")
        if arrays[name].shape != shape:
            raise ValueError(
                f"{where}: {name} has shape {arrays[name].shape}, expected {shape} "
                f"(K={K}, V={V} in {PARAMS_NAME})"
            )
    if "elbo_trace_" not in arrays or arrays["elbo_trace_"].ndim != 1:
        raise ValueError(f"{where} lacks a 1-D array 'elbo_trace_'")


def read_hdp(path: str | os.PathLike[str]) -> ModelState:
    """The state of the HDP model saved at ``path``, checked (see :func:`load_hdp`)."""
    root = model_root(path)
    if not root.is_dir():
        what = "the path does not exist" if not root.exists() else "it is a file"
        raise FileNotFoundError(f"no HDP model at {str(root)!r}: {what}")
    if not (root / PARAMS_NAME).is_file():
        raise FileNotFoundError(
            f"model {str(root)!r}: {PARAMS_NAME} is missing; this is not an lsdask model "
            "directory (save one with lsdask.persist.save_model)"
        )
    meta = read_meta(root, FORMAT, VERSION, "HDP")
    params, fitted = meta.get("params"), meta.get("fitted")
    if not isinstance(params, dict) or not isinstance(fitted, dict):
        raise ValueError(f"model {str(root)!r}: {PARAMS_NAME} lacks 'params' or 'fitted'")
    keys = ("n_components", "vocab_size", "n_features_in_", "n_laps_", "converged_")
    for key in (*keys, "has_vocabulary"):
        if key not in fitted:
            raise ValueError(f"model {str(root)!r}: {PARAMS_NAME} lacks fitted[{key!r}]")
    K, V = int(fitted["n_components"]), int(fitted["vocab_size"])
    arrays = read_arrays(root)
    _check_arrays(root, arrays, K, V)
    params = dict(params)
    if isinstance(params.get("moves"), list):
        params["moves"] = tuple(params["moves"])
    if params.get("init") == INIT_IN_ARRAYS:
        if "init" not in arrays:
            raise ValueError(
                f"model {str(root)!r}: {PARAMS_NAME} says init is an array, but "
                f"{ARRAYS_NAME} has no 'init'"
            )
        params["init"] = arrays["init"]
    return ModelState(
        kind=KIND,
        params=params,
        fitted={k: fitted[k] for k in keys[2:]},
        arrays={name: a for name, a in arrays.items() if name != "init"},
        texts={VOCABULARY: _read_vocab(root, V)} if fitted["has_vocabulary"] else {},
        info={"estimator": meta.get("estimator")},
    )


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
    found = entry(KIND)
    try:
        model = found.from_state(found.cls, state, client)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"model {str(root)!r}: bad parameters in {PARAMS_NAME}: {exc}") from exc
    logger.info("loaded HDP K=%d from %s", state.arrays["rho"].shape[0], root)
    return model
