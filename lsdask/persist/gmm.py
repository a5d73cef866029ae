"""Save a fitted :class:`lsdask.GaussianMixture` to a directory and load it back, exactly.

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
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.estimators.params import read_only
from lsdask.persist.lda import (
    NOT_SAVED,
    PARAMS_NAME,
    TRACE_FIELDS,
    _json_value,
    check_save_target,
    read_arrays,
    read_meta,
    write_model_dir,
)

__all__ = ["FORMAT", "load_gmm", "save_gmm"]

#: Value of ``params.json["format"]``.
FORMAT = "lsdask-gmm"
VERSION = 1
_TRACES = ("elbo_trace_", *TRACE_FIELDS)


def _posterior_classes() -> dict[str, type]:
    from lsdask.models.diag_gaussian import NormalGammaPosterior
    from lsdask.models.full_gaussian import NormalWishartPosterior
    from lsdask.models.zero_mean_gaussian import WishartPosterior

    return {c.__name__: c for c in (WishartPosterior, NormalGammaPosterior, NormalWishartPosterior)}


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
    from lsdask import GaussianMixture
    from lsdask.persist.model_config import model_to_config

    if not isinstance(model, GaussianMixture):
        raise TypeError(f"save_gmm saves an lsdask.GaussianMixture; got {type(model).__name__}")
    model._check_fitted()
    out = Path(path)
    check_save_target(out, overwrite)
    params = {  # the fit's (set_params may have changed them since)
        name: _json_value(name, value)
        for name, value in model._params_as_fitted().items()
        if name not in NOT_SAVED
    }
    obs = model.posterior_.obs
    arrays = {"theta": model.posterior_.theta, "elogpi": model.posterior_.elogpi}
    for field in dataclasses.fields(obs):
        value = getattr(obs, field.name)
        if value is not None:
            arrays[f"obs_{field.name}"] = np.asarray(value)
    for name in _TRACES:
        if hasattr(model, name):
            arrays[name] = np.asarray(getattr(model, name))
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "params": params,
        "model": model_to_config(model.model_),
        "posterior": type(obs).__name__,
        "fitted": {
            "n_features_in_": int(model.n_features_in_),
            "n_laps_": int(model.n_laps_),
            "converged_": bool(model.converged_),
        },
    }
    write_model_dir(out, meta, arrays, overwrite)
    return out


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
    from lsdask import GaussianMixture
    from lsdask.models.mixture import MixtureGlobals
    from lsdask.persist.model_config import model_from_config

    root = Path(path)
    where = f"model {str(root)!r}"
    if not (root / PARAMS_NAME).is_file():
        raise FileNotFoundError(
            f"no GaussianMixture model at {str(root)!r}: {PARAMS_NAME} is missing (save one "
            "with lsdask.persist.save_gmm)"
        )
    meta = read_meta(root, FORMAT, VERSION, "GaussianMixture")
    classes = _posterior_classes()
    if meta.get("posterior") not in classes:
        raise ValueError(f"{where}: unknown posterior {meta.get('posterior')!r}")
    arrays = read_arrays(root)
    cls = classes[meta["posterior"]]
    try:
        obs = cls(**{f.name: arrays.get(f"obs_{f.name}") for f in dataclasses.fields(cls)})
        globals_ = MixtureGlobals(arrays["theta"], arrays["elogpi"], obs)
        model = model_from_config(meta["model"])
        estimator = GaussianMixture(**meta["params"]).set_params(client=client)
        estimator._check_common_params()
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: the files do not make a model ({exc})") from exc
    K = int(meta["model"]["n_components"])
    if globals_.theta.shape != (K,) or estimator.n_components != K:
        raise ValueError(f"{where}: theta has shape {globals_.theta.shape}, expected ({K},)")
    estimator.model_ = model
    estimator.posterior_ = globals_
    estimator.weights_ = read_only(model.allocation.mean_weights(globals_.theta))
    estimator._record_fit_params()
    for name in _TRACES:
        if name in arrays:
            setattr(estimator, name, arrays[name])
    fitted = meta.get("fitted", {})
    estimator.n_features_in_ = int(fitted["n_features_in_"])
    estimator.n_laps_ = int(fitted["n_laps_"])
    estimator.converged_ = bool(fitted["converged_"])
    estimator._set_fitted(model)
    return estimator
