"""Save a fitted :class:`lsdask.LDA` to a directory and load it back, exactly.

A model directory holds::

    model/
        params.json   # format, version, the estimator's parameters (no client, no
                      # checkpoint folder),
                      # fitted scalars (n_laps_, converged_, vocab size, ...)
        arrays.npz    # components_ (lambda), elbo_trace_, lap_trace_, time_trace_,
                      # and the statistics stats_ (words, H, alloc, N, n_docs);
                      # init, when the init parameter was an array
        vocab.txt     # UTF-8, one word per line (only when vocabulary_ is set)

The statistics are what :meth:`lsdask.LDA.partial_fit` adds new documents to,
so a loaded model keeps learning where the saved one stopped. Arrays are
stored in float64 as they are and read with ``allow_pickle=False``; the
posterior is rebuilt from them, so ``components_``, ``transform``, ``score``
and ``top_words`` of the loaded model are identical to the saved one's.

:func:`save_lda` writes everything under a temporary sibling directory and
renames it into place at the end, so a reader never sees half a model.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.io.atomic import replace_dir, temp_sibling

logger = logging.getLogger(__name__)

__all__ = ["FORMAT", "VERSION", "check_save_target", "load_lda", "save_lda"]

#: Value of ``params.json["format"]``.
FORMAT = "lsdask-lda"
#: Value of ``params.json["version"]`` written by this module.
VERSION = 1
PARAMS_NAME = "params.json"
#: ``params.json["params"]["init"]`` of a model whose ``init`` was an array
#: (saved as ``init`` in ``arrays.npz``).
INIT_IN_ARRAYS = "<array in arrays.npz>"
ARRAYS_NAME = "arrays.npz"
VOCAB_NAME = "vocab.txt"

#: Fields of ``stats_``, stored as ``stats_<name>`` in ``arrays.npz``.
STATS_FIELDS = ("words", "H", "alloc", "N", "n_docs")
#: Optional traces, stored when the model has them (models saved before a
#: trace was kept lack it).
TRACE_FIELDS = ("lap_trace_", "time_trace_", "size_trace_")


def _json_value(name: str, value: Any) -> Any:
    """A parameter as JSON, or an error naming it."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise ValueError(
        f"cannot save parameter {name}={value!r} ({type(value).__name__}): only None, "
        "numbers and strings can be stored in params.json; set it to a plain value "
        "(e.g. random_state=0) before saving"
    )


def _is_model_dir(path: Path) -> bool:
    return path.is_dir() and (path / PARAMS_NAME).is_file()


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
    from lsdask import LDA
    from lsdask.models.stats import as_dense

    if not isinstance(model, LDA):
        raise TypeError(f"save_lda saves an lsdask.LDA; got {type(model).__name__}")
    model._check_fitted()
    out = Path(path)
    check_save_target(out, overwrite)
    params = model._params_as_fitted()
    # the model as fitted, whatever set_params changed since (also for models fitted
    # before the parameters of the fit were recorded)
    fitted_model = model.model_
    params.update(
        n_components=int(fitted_model.n_components),
        alpha=float(fitted_model.alpha),
        eta=float(fitted_model.eta),
    )
    init_counts = model._init_counts(None, params["init"])  # an array travels in arrays.npz
    if init_counts is not None:
        params["init"] = INIT_IN_ARRAYS
    params = {
        name: _json_value(name, value) for name, value in params.items() if name not in NOT_SAVED
    }
    vocab = model.vocabulary_
    if vocab is not None:
        vocab = [str(w) for w in vocab]
        bad = next((i for i, w in enumerate(vocab) if "\n" in w or "\r" in w), None)
        if bad is not None:
            raise ValueError(f"vocabulary_[{bad}] = {vocab[bad]!r} contains a line break")
    K, V = model.components_.shape
    arrays: dict[str, np.ndarray] = {
        "components_": np.asarray(model.components_, dtype=np.float64),
        "elbo_trace_": np.asarray(model.elbo_trace_, dtype=np.float64),
    }
    for name in TRACE_FIELDS:
        if hasattr(model, name):
            arrays[name] = np.asarray(getattr(model, name), dtype=np.float64)
    for name in STATS_FIELDS:
        arrays[f"stats_{name}"] = np.asarray(as_dense(model.stats_[name]), dtype=np.float64)
    if init_counts is not None:
        arrays["init"] = init_counts
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "estimator": type(model).__name__,
        "params": params,
        "fitted": {
            "n_components": int(K),
            "vocab_size": int(V),
            "n_features_in_": int(getattr(model, "n_features_in_", V)),
            "n_laps_": int(model.n_laps_),
            "converged_": bool(model.converged_),
            "has_vocabulary": vocab is not None,
        },
        "arrays": sorted(arrays),
    }

    texts = {} if vocab is None else {VOCAB_NAME: "".join(w + "\n" for w in vocab)}
    write_model_dir(out, meta, arrays, overwrite, texts)
    logger.info("saved LDA K=%d, V=%d to %s", K, V, out)
    return out


def write_model_dir(
    out: Path,
    meta: dict[str, Any],
    arrays: dict[str, np.ndarray],
    overwrite: bool,
    texts: dict[str, str] | None = None,
) -> None:
    """Write ``params.json`` (``meta``), ``arrays.npz`` and ``texts`` (file name ->
    UTF-8 text) into a temporary folder beside ``out``, then put it in place of
    ``out`` (checked again just before): a failed save leaves nothing behind."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(out)
    try:
        tmp.mkdir()
        with open(tmp / ARRAYS_NAME, "wb") as f:
            np.savez(f, **arrays)
        for name, text in (texts or {}).items():
            with open(tmp / name, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
        with open(tmp / PARAMS_NAME, "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=2)
            f.write("\n")
        check_save_target(out, overwrite)
        replace_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def check_save_target(path: str | os.PathLike[str], overwrite: bool = False) -> None:
    """Raise unless :func:`save_lda` may write to ``path`` (check before a long fit).

    Raises
    ------
    FileExistsError
        If ``path`` exists and is not a model directory, or is one and
        ``overwrite`` is false.
    """
    out = Path(path)
    if not out.exists():
        return
    if not _is_model_dir(out):
        raise FileExistsError(
            f"{str(out)!r} exists and is not an lsdask model directory (no {PARAMS_NAME}); "
            "choose another path"
        )
    if not overwrite:
        raise FileExistsError(
            f"a model already exists at {str(out)!r}; pass overwrite=True (lsdask: "
            "--overwrite) to replace it, or choose another path"
        )


# --------------------------------------------------------------------------- loading


def read_meta(root: Path, fmt: str, version: int, kind: str) -> dict[str, Any]:
    """``params.json`` of a model directory, checked to be of format ``fmt`` and
    ``version`` (``kind`` names the model in errors)."""
    try:
        meta = json.loads((root / PARAMS_NAME).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"model {str(root)!r}: {PARAMS_NAME} is not valid JSON: {exc}") from exc
    if not isinstance(meta, dict) or meta.get("format") != fmt:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise ValueError(
            f"model {str(root)!r}: {PARAMS_NAME} is not an lsdask {kind} model "
            f"(format {found!r}, expected {fmt!r})"
        )
    if meta.get("version") != version:
        raise ValueError(
            f"model {str(root)!r}: {PARAMS_NAME} has version {meta.get('version')!r}; this "
            f"lsdask reads version {version}"
        )
    return meta


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


def read_arrays(root: Path) -> dict[str, np.ndarray]:
    """The arrays of a model folder's ``arrays.npz``, with clear errors when it
    is missing or corrupt (no pickles are loaded)."""
    file = root / ARRAYS_NAME
    where = f"model {str(root)!r}: {ARRAYS_NAME}"
    if not file.is_file():
        raise FileNotFoundError(f"{where} is missing")
    try:
        with np.load(file, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(
            f"{where} cannot be read ({type(exc).__name__}: {exc}); the file is corrupt"
        ) from exc


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


#: run-time settings that belong to the fit, not to the model: a loaded model
#: gets the defaults (no client, no checkpoint folder of the run that made it)
NOT_SAVED = ("client", "checkpoint_dir", "resume")


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
    from lsdask import LDA
    from lsdask.models.dirichlet_logs import DirichletPosterior
    from lsdask.models.stats import SuffStats

    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"no LDA model at {str(root)!r}: the path does not exist")
    if not root.is_dir():
        raise ValueError(f"{str(root)!r} is a file, not an lsdask model directory")
    meta = _read_params(root)
    fitted = meta["fitted"]
    K, V = int(fitted["n_components"]), int(fitted["vocab_size"])
    arrays = _read_arrays(root, K, V)
    vocab = _read_vocab(root, V) if fitted["has_vocabulary"] else None

    params = dict(meta["params"])
    if params.get("init") == INIT_IN_ARRAYS:
        if "init" not in arrays:
            raise ValueError(
                f"model {str(root)!r}: {PARAMS_NAME} says init is an array, but "
                f"{ARRAYS_NAME} has no 'init'"
            )
        params["init"] = arrays["init"]
    try:
        model = LDA(**params)
        model.set_params(client=client)
        model._check_params()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"model {str(root)!r}: bad parameters in {PARAMS_NAME}: {exc}") from exc
    if int(model.n_components) != K:
        raise ValueError(
            f"model {str(root)!r}: {PARAMS_NAME} says n_components={model.n_components} but "
            f"the arrays have K={K}"
        )
    lda_model = model._model(V)
    stats = SuffStats(**{name: arrays[f"stats_{name}"] for name in STATS_FIELDS})
    lam = arrays["components_"]
    glob = lda_model.global_step(stats)
    if not np.array_equal(glob.lam, lam):
        # lambda is not eta + words (e.g. an SVI fit stopped between updates):
        # keep the saved lambda, which is what the saved model used.
        glob = DirichletPosterior.from_lam(lam, lda_model.eta)
    model._set_fitted(lda_model, glob, stats, vocab)
    model._record_fit_params()
    model.elbo_trace_ = arrays["elbo_trace_"]
    for name in TRACE_FIELDS:
        if name in arrays:
            setattr(model, name, arrays[name])
    model.n_laps_ = int(fitted["n_laps_"])
    model.converged_ = bool(fitted["converged_"])
    model.n_features_in_ = int(fitted.get("n_features_in_", V))
    logger.info("loaded LDA K=%d, V=%d from %s", K, V, root)
    return model
