"""Save a fitted LDA model to a directory and load it back, exactly.

A model directory holds::

    model/
        params.json   # format, version, the estimator's parameters (no client, no
                      # checkpoint folder),
                      # fitted scalars (n_laps_, converged_, vocab size, ...)
        arrays.npz    # components_ (lambda), elbo_trace_, lap_trace_, time_trace_,
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

__all__ = ["FORMAT", "KIND", "VERSION", "check_save_target", "load_lda", "save_lda"]

#: The registry kind of an LDA model.
KIND = "lda"
#: Value of ``params.json["format"]``.
FORMAT = "lsdask-lda"
#: Value of ``params.json["version"]`` written by this module.
VERSION = 1
#: ``params.json["params"]["init"]`` of a model whose ``init`` was an array
#: (saved as ``init`` in ``arrays.npz``).
INIT_IN_ARRAYS = "<array in arrays.npz>"
VOCAB_NAME = "vocab.txt"
#: The word list of the state that ``vocab.txt`` holds.
VOCABULARY = "vocabulary"

#: Fields of ``stats_``, stored as ``stats_<name>`` in ``arrays.npz``.
STATS_FIELDS = ("words", "H", "alloc", "N", "n_docs")


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
    found = entry(KIND)
    if not isinstance(model, found.cls):
        raise TypeError(
            f"save_lda saves an lsdask.{found.cls.__name__}; got {type(model).__name__}"
        )
    return write_lda(found.get_state(model), path, overwrite=overwrite)


def write_lda(state: ModelState, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the state of an LDA model (see :func:`save_lda`) to ``path``."""
    out = Path(path)
    check_save_target(out, overwrite)
    params = dict(state.params)
    init = params.get("init")
    if isinstance(init, np.ndarray):  # an array travels in arrays.npz
        params["init"] = INIT_IN_ARRAYS
    params = saved_params(params)
    vocab = state.texts.get(VOCABULARY)
    if vocab is not None:
        vocab = [str(w) for w in vocab]
        bad = next((i for i, w in enumerate(vocab) if "\n" in w or "\r" in w), None)
        if bad is not None:
            raise ValueError(f"vocabulary_[{bad}] = {vocab[bad]!r} contains a line break")
    arrays = {name: np.asarray(a, dtype=np.float64) for name, a in state.arrays.items()}
    if isinstance(init, np.ndarray):
        arrays["init"] = np.asarray(init, dtype=np.float64)
    K, V = arrays["components_"].shape
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "estimator": state.info.get("estimator", entry(KIND).cls.__name__),
        "params": params,
        "fitted": {
            "n_components": int(K),
            "vocab_size": int(V),
            "n_features_in_": int(state.fitted.get("n_features_in_", V)),
            "n_laps_": int(state.fitted["n_laps_"]),
            "converged_": bool(state.fitted["converged_"]),
            "has_vocabulary": vocab is not None,
        },
        "arrays": sorted(arrays),
    }
    texts = {} if vocab is None else {VOCAB_NAME: "".join(w + "\n" for w in vocab)}
    write_model_dir(out, meta, arrays, overwrite, texts)
    logger.info("saved LDA K=%d, V=%d to %s", K, V, out)
    return out


# --------------------------------------------------------------------------- loading


def _read_params(root: Path) -> dict[str, Any]:
    file = root / PARAMS_NAME
    if not file.is_file():
        raise FileNotFoundError(
            f"model {str(root)!r}: {PARAMS_NAME} is missing; this is not an lsdask model "
            "directory (save one with lsdask.persist.save_lda or `lsdask fit`)"
        )
    meta = read_meta(root, FORMAT, VERSION, "LDA")
    params, fitted = meta.get("params"), meta.get("fitted")
    if not isinstance(params, dict) or not isinstance(fitted, dict):
        raise ValueError(f"model {str(root)!r}: {PARAMS_NAME} lacks 'params' or 'fitted'")
    for key in ("n_components", "vocab_size", "n_laps_", "converged_", "has_vocabulary"):
        if key not in fitted:
            raise ValueError(f"model {str(root)!r}: {PARAMS_NAME} lacks fitted[{key!r}]")
    return meta


def _read_arrays(root: Path, K: int, V: int) -> dict[str, np.ndarray]:
    where = f"model {str(root)!r}: {ARRAYS_NAME}"
    arrays = read_arrays(root)
    expected = {
        "components_": (K, V),
        "stats_words": (K, V),
        "stats_N": (K,),
        "stats_H": (1,),
        "stats_alloc": (1,),
        "stats_n_docs": (1,),
    }
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
    # kept since priors can be learned (absent from older files)
    optional = {"alpha_": (K,), "eta_": (1,), "stats_S": (K,), "stats_W": (1,), "stats_Cdir": (1,)}
    for name, shape in optional.items():
        if name in arrays and arrays[name].shape != shape:
            raise ValueError(
                f"{where}: {name} has shape {arrays[name].shape}, expected {shape} "
                f"(K={K} in {PARAMS_NAME})"
            )
    return arrays


def _read_vocab(root: Path, V: int) -> list[str]:
    file = root / VOCAB_NAME
    if not file.is_file():
        raise FileNotFoundError(
            f"model {str(root)!r}: {VOCAB_NAME} is missing ({PARAMS_NAME} says the model has "
            "a vocabulary)"
        )
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"model {str(root)!r}: {VOCAB_NAME} cannot be read: {exc}") from exc
    words = text.split("\n")
    if words and words[-1] == "":
        words.pop()
    if len(words) != V:
        raise ValueError(
            f"model {str(root)!r}: {VOCAB_NAME} has {len(words)} words but the model has "
            f"V={V} (in {PARAMS_NAME})"
        )
    return words


def read_lda(path: str | os.PathLike[str]) -> ModelState:
    """The state of the LDA model saved at ``path``, checked (see :func:`load_lda`)."""
    root = model_root(path)
    if not root.exists():
        raise FileNotFoundError(f"no LDA model at {str(root)!r}: the path does not exist")
    if not root.is_dir():
        raise ValueError(f"{str(root)!r} is a file, not an lsdask model directory")
    meta = _read_params(root)
    fitted = meta["fitted"]
    K, V = int(fitted["n_components"]), int(fitted["vocab_size"])
    arrays = _read_arrays(root, K, V)
    texts = {VOCABULARY: _read_vocab(root, V)} if fitted["has_vocabulary"] else {}
    params = dict(meta["params"])
    if params.get("init") == INIT_IN_ARRAYS:
        if "init" not in arrays:
            raise ValueError(
                f"model {str(root)!r}: {PARAMS_NAME} says init is an array, but "
                f"{ARRAYS_NAME} has no 'init'"
            )
        params["init"] = arrays["init"]
    n = params.get("n_components")
    if isinstance(n, int) and not isinstance(n, bool) and n != K:
        raise ValueError(
            f"model {str(root)!r}: {PARAMS_NAME} says n_components={n} but the arrays have K={K}"
        )
    return ModelState(
        kind=KIND,
        params=params,
        fitted={
            "n_features_in_": int(fitted.get("n_features_in_", V)),
            "n_laps_": int(fitted["n_laps_"]),
            "converged_": bool(fitted["converged_"]),
        },
        arrays={name: a for name, a in arrays.items() if name != "init"},
        texts=texts,
        info={"estimator": meta.get("estimator")},
    )


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
    found = entry(KIND)
    try:
        model = found.from_state(found.cls, state, client)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"model {str(root)!r}: bad parameters in {PARAMS_NAME}: {exc}") from exc
    K, V = state.arrays["components_"].shape
    logger.info("loaded LDA K=%d, V=%d from %s", K, V, root)
    return model
