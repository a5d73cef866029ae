"""Models as plain data, for checkpoints and saved models.

A model's configuration (including data-derived prior settings such as a
prior mean) becomes a JSON-able dictionary and must come back exactly on
resume, or the resumed objective would differ: floats go through ``repr`` in
JSON, which round-trips exactly. A mixture's posterior becomes named arrays,
field by field, so that a saved mixture predicts exactly as the fitted one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from lsdask.models.diag_gaussian import DiagGaussian, NormalGammaPosterior
from lsdask.models.full_gaussian import FullGaussian, NormalWishartPosterior
from lsdask.models.hdp import HDPModel
from lsdask.models.hdp_moves import MoveSettings
from lsdask.models.lda import LDAModel, LocalStepOptions
from lsdask.models.mixture import MixtureGlobals, MixtureModel
from lsdask.models.multinomial import Multinomial
from lsdask.models.zero_mean_gaussian import WishartPosterior, ZeroMeanGaussian

_OBSERVATIONS = {
    cls.__name__: cls for cls in (ZeroMeanGaussian, FullGaussian, DiagGaussian, Multinomial)
}
#: the observation posteriors a saved mixture may hold, by class name (a saved
#: model names one of these; nothing else is instantiated from a file)
_POSTERIORS = {
    cls.__name__: cls for cls in (WishartPosterior, NormalGammaPosterior, NormalWishartPosterior)
}
MIXTURE_POSTERIORS = tuple(_POSTERIORS)


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return {"__array__": value.tolist()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _restore(value: Any) -> Any:
    if isinstance(value, dict) and "__array__" in value:
        return np.asarray(value["__array__"], dtype=np.float64)
    return value


def _fields(obj: Any) -> dict[str, Any]:
    return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def model_to_config(model: Any) -> dict[str, Any]:
    """A JSON-able description of a configured model."""
    if isinstance(model, MixtureModel):
        return {
            "kind": "mixture",
            "n_components": model.n_components,
            "alpha": model.alpha,
            "block_rows": model.block_rows,
            "preselect": model.preselect,
            "observation": {
                "class": type(model.observation).__name__,
                **_fields(model.observation),
            },
        }
    if isinstance(model, LDAModel):  # an HDPModel is one, of its own kind
        kind = "hdp" if isinstance(model, HDPModel) else "lda"
        nested = ("options", "moves")
        out = {"kind": kind, **{k: v for k, v in _fields(model).items() if k not in nested}}
        out["options"] = _fields(model.options)
        if isinstance(model, HDPModel):
            out["moves"] = _fields(model.moves)
        return out
    raise TypeError(f"no configuration for model type {type(model).__name__}")


def model_from_config(config: dict[str, Any]) -> Any:
    """Rebuild a model written by :func:`model_to_config`."""
    kind = config.get("kind")
    if kind == "mixture":
        obs = dict(config["observation"])
        cls = _OBSERVATIONS[obs.pop("class")]
        observation = cls(**{k: _restore(v) for k, v in obs.items()})
        return MixtureModel(
            observation, config["n_components"], config["alpha"], config["block_rows"],
            config.get("preselect"),  # absent from configurations written before it existed
        )  # fmt: skip
    if kind in ("lda", "hdp"):
        params = {k: v for k, v in config.items() if k not in ("kind", "options", "moves")}
        options = LocalStepOptions(**config["options"])
        if kind == "lda":
            return LDAModel(**params, options=options)
        # an HDP checkpoint written before the moves existed has none
        moves = MoveSettings(**config.get("moves", {}))
        return HDPModel(**params, options=options, moves=moves)
    raise ValueError(f"unknown model kind {kind!r} in configuration")


def posterior_to_arrays(posterior: MixtureGlobals) -> tuple[str, dict[str, np.ndarray]]:
    """A mixture's posterior as the class name of its observation posterior and
    named arrays: ``theta``, ``elogpi`` and ``obs_<field>`` for every field of
    the observation posterior that is set."""
    obs = posterior.obs
    if type(obs).__name__ not in _POSTERIORS:
        raise TypeError(f"no array form for the posterior {type(obs).__name__}")
    arrays = {"theta": posterior.theta, "elogpi": posterior.elogpi}
    for field in dataclasses.fields(obs):
        value = getattr(obs, field.name)
        if value is not None:
            arrays[f"obs_{field.name}"] = np.asarray(value)
    return type(obs).__name__, arrays


def posterior_fields(name: str) -> tuple[str, ...]:
    """The fields of the observation posterior class ``name`` (none for an unknown name)."""
    cls = _POSTERIORS.get(name)
    return () if cls is None else tuple(f.name for f in dataclasses.fields(cls))


def posterior_from_arrays(name: str, arrays: dict[str, np.ndarray]) -> MixtureGlobals:
    """Rebuild a posterior written by :func:`posterior_to_arrays`."""
    if name not in _POSTERIORS:
        raise ValueError(f"unknown posterior {name!r}; expected one of {list(_POSTERIORS)}")
    cls = _POSTERIORS[name]
    obs = cls(**{f.name: arrays.get(f"obs_{f.name}") for f in dataclasses.fields(cls)})
    return MixtureGlobals(arrays["theta"], arrays["elogpi"], obs)
