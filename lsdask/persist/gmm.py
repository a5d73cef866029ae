"""Save a fitted Gaussian mixture to a directory and load it back, exactly.

A model directory holds::

    model/
        params.json   # format, version, the estimator's parameters (no client, no
                      # checkpoint folder), the model configuration, fitted scalars
        arrays.npz    # the posterior: theta, elogpi and every field of the
                      # observation posterior (obs_<field>); the traces

The posterior is stored field by field, as it is (float64, read with
``allow_pickle=False``), so ``predict_proba``, ``score`` and the fitted
attributes of the loaded model equal the saved one's, whichever algorithm
fitted it. :func:`save_gmm` writes under a temporary sibling directory and
renames it into place at the end.

This module knows the files; the estimator registered for :data:`KIND`
(:mod:`lsdask.persist.registry`) turns a fitted model into a
:class:`~lsdask.persist.registry.ModelState` and back.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.io import guarded
from lsdask.persist.checked_npz import Bound
from lsdask.persist.model_config import MIXTURE_POSTERIORS, posterior_fields
from lsdask.persist.model_dir import (
    ARRAYS_NAME,
    PARAMS_NAME,
    check_save_target,
    drop_not_saved,
    model_root,
    read_arrays,
    read_meta,
    saved_params,
    write_model_dir,
)
from lsdask.persist.registry import ModelState, rebuild, state_to_save

__all__ = ["FORMAT", "KIND", "VERSION", "load_gmm", "save_gmm"]

#: The registry kind of a Gaussian mixture.
KIND = "gmm"
#: Value of ``params.json["format"]``.
FORMAT = "lsdask-gmm"
VERSION = 1


def save_gmm(model: Any, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Save a fitted :class:`lsdask.GaussianMixture` to the directory ``path``, atomically.

    Raises
    ------
    TypeError
        If ``model`` is not a GaussianMixture.
    lsdask.errors.NotFittedError
        If it is not fitted.
    FileExistsError
        If ``path`` exists and ``overwrite`` is false, or it is not a model directory.
    ValueError
        If a parameter cannot be stored as JSON (e.g. a Generator as ``random_state``).
    """
    return write_gmm(state_to_save(KIND, model, "save_gmm"), path, overwrite=overwrite)


def write_gmm(state: ModelState, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
    """Write the state of a Gaussian mixture (see :func:`save_gmm`) to ``path``."""
    out = Path(path)
    check_save_target(out, overwrite)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "params": saved_params(state.params),  # the fit's (set_params may have changed them since)
        "model": state.info["model"],
        "posterior": state.info["posterior"],
        "fitted": {
            "n_features_in_": int(state.fitted["n_features_in_"]),
            "n_laps_": int(state.fitted["n_laps_"]),
            "converged_": bool(state.fitted["converged_"]),
        },
    }
    write_model_dir(out, meta, state.arrays, overwrite)
    return out


def read_gmm(path: str | os.PathLike[str]) -> ModelState:
    """The state of the Gaussian mixture saved at ``path`` (see :func:`load_gmm`)."""
    root = model_root(path)
    where = f"model {str(root)!r}"
    if not guarded.is_file(root, PARAMS_NAME):
        raise FileNotFoundError(
            f"no GaussianMixture model at {str(root)!r}: {PARAMS_NAME} is missing (save one "
            "with lsdask.persist.save_gmm)"
        )
    meta = read_meta(root, FORMAT, VERSION, "GaussianMixture")
    if meta.get("posterior") not in MIXTURE_POSTERIORS:
        raise ValueError(f"{where}: unknown posterior {meta.get('posterior')!r}")
    arrays = read_arrays(root, _bounds(meta))
    config, params = meta.get("model"), meta.get("params")
    for key, value in (("model", config), ("params", params), ("fitted", meta.get("fitted"))):
        if not isinstance(value, dict):
            raise ValueError(f"{where}: {PARAMS_NAME}[{key!r}] is not a JSON object")
    params = drop_not_saved(root, params)
    K = config.get("n_components") if isinstance(config, dict) else None
    theta = arrays.get("theta")
    if isinstance(K, int) and theta is not None and theta.shape != (K,):
        raise ValueError(f"{where}: theta has shape {theta.shape}, expected ({K},)")
    n = params.get("n_components") if isinstance(params, dict) else None
    if isinstance(K, int) and isinstance(n, int) and n != K:
        raise ValueError(f"{where}: {PARAMS_NAME} says n_components={n} but the model has K={K}")
    _check_positive_definite(f"{where}: {ARRAYS_NAME}", arrays)
    return ModelState(
        kind=KIND,
        params=params,
        fitted=meta.get("fitted", {}),
        arrays=arrays,
        info={"model": config, "posterior": meta["posterior"]},
    )


def _whole(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return value if ok else None


def _bounds(meta: dict[str, Any]) -> dict[str, Bound]:
    """The most entries each array of the mixture may declare, from ``params.json``'s
    number of components K and of features D (an observation posterior's field
    holds at most K x D x D numbers; theta and elogpi K); none where those are
    not whole numbers (the reader refuses the file for that)."""
    config, fitted = meta.get("model"), meta.get("fitted")
    K = _whole(config.get("n_components")) if isinstance(config, dict) else None
    D = _whole(fitted.get("n_features_in_")) if isinstance(fitted, dict) else None
    if K is None or D is None:
        return {}
    names = [f"obs_{name}" for name in posterior_fields(str(meta.get("posterior")))]
    return {"theta": (K,), "elogpi": (K,), **{name: K * D * max(D, 2) for name in names}}


#: the arrays of a mixture's posterior that are stacks of symmetric positive
#: definite matrices: a scale matrix and the expected precision
_POSITIVE_DEFINITE = ("obs_B", "obs_E_phi")


def _check_positive_definite(where: str, arrays: dict[str, Any]) -> None:
    """Refuse a scale or precision matrix that is not symmetric positive
    definite (its Cholesky factor must exist): a model holding one would load
    and predict densities that are not densities."""
    for name in _POSITIVE_DEFINITE:
        stack = arrays.get(name)
        if stack is None:
            continue
        if stack.ndim != 3 or stack.shape[1] != stack.shape[2]:
            raise ValueError(
                f"{where}: {name} has shape {stack.shape}; expected (K, D, D) matrices"
            )
        for k, matrix in enumerate(stack):
            scale = max(float(np.abs(matrix).max()), 1e-300)
            if not np.allclose(matrix, matrix.T, rtol=1e-10, atol=1e-12 * scale):
                raise ValueError(
                    f"{where}: {name}[{k}] is not symmetric; expected a symmetric positive "
                    "definite matrix (the file is damaged or was modified)"
                )
            try:
                np.linalg.cholesky(matrix)
            except np.linalg.LinAlgError:
                raise ValueError(
                    f"{where}: {name}[{k}] is not positive definite (it has no Cholesky "
                    "factor); expected a symmetric positive definite matrix (the file is "
                    "damaged or was modified)"
                ) from None


def load_gmm(path: str | os.PathLike[str], *, client: Any = None) -> Any:
    """Load a :class:`lsdask.GaussianMixture` saved by :func:`save_gmm`.

    ``client`` becomes the loaded estimator's ``client`` (it is not saved).

    Raises
    ------
    FileNotFoundError
        If ``path`` or one of its files does not exist.
    ValueError
        If a file is corrupt, not a GaussianMixture model, or its parts do not
        belong together (the message names the path and the file).
    """
    root = Path(path)
    return rebuild(
        read_gmm(root),
        client,
        lambda exc: f"model {str(root)!r}: the files do not make a model ({exc})",
        (KeyError, TypeError, ValueError, AttributeError, OverflowError),
    )
