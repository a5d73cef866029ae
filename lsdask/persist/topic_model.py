"""The folder of a saved topic model (LDA, HDP), written and read for any of them.

A topic-model folder holds ``params.json`` (format, version, the estimator's
parameters, the fitted scalars), ``arrays.npz`` (float64, read with
``allow_pickle=False``; an array ``init`` parameter among them) and, when the
model has a vocabulary, ``vocab.txt``. What differs between the kinds (format
name, the arrays checked, parameters kept as tuples, ...) is a
:class:`TopicFormat`; :mod:`~lsdask.persist.lda` and :mod:`~lsdask.persist.hdp`
each define one and wrap these functions.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from lsdask.io import guarded
from lsdask.persist.checked_npz import check_values
from lsdask.persist.model_dir import (
    ARRAYS_NAME,
    PARAMS_NAME,
    check_save_target,
    drop_not_saved,
    read_arrays,
    read_meta,
    saved_params,
    write_model_dir,
)
from lsdask.persist.registry import ModelState, entry, rebuild, state_to_save

__all__ = ["INIT_IN_ARRAYS", "VOCABULARY", "VOCAB_NAME", "TopicFormat"]

#: ``params.json["params"]["init"]`` of a model whose ``init`` was an array
#: (saved as ``init`` in ``arrays.npz``).
INIT_IN_ARRAYS = "<array in arrays.npz>"
VOCAB_NAME = "vocab.txt"
#: The word list of the state that ``vocab.txt`` holds.
VOCABULARY = "vocabulary"


def _no_arrays(K: int) -> dict[str, tuple[int, ...]]:
    return {}


@dataclasses.dataclass(frozen=True)
class TopicFormat:
    """What the folder of one kind of topic model holds."""

    #: The registry kind, ``params.json["format"]`` and ``["version"]``.
    kind: str
    format: str
    version: int
    #: The model's name in messages ("LDA").
    name: str
    #: Where this module's messages and logs go.
    logger: logging.Logger
    #: The (K, V) array whose shape is written as the model's K and V.
    sizes_array: str
    #: The arrays every file holds, by name, with their shapes for K and V (checked in order).
    required: Callable[[int, int], dict[str, tuple[int, ...]]]
    #: Arrays a file may hold, with their shapes for K.
    optional: Callable[[int], dict[str, tuple[int, ...]]] = _no_arrays
    #: The keys of ``params.json["fitted"]`` every file holds (checked in order).
    fitted_keys: tuple[str, ...] = ("n_components", "vocab_size", "n_laps_", "converged_")
    #: Parameters written as lists of names (always) and loaded as tuples.
    tuple_params: tuple[str, ...] = ()
    #: Check ``params["n_components"]`` against the arrays' K.
    check_n_components: bool = False
    #: How to save one, said when ``params.json`` is missing.
    save_hint: str = "lsdask.persist.save_model"

    def save(self, model: Any, path: str | os.PathLike[str], overwrite: bool, saver: str) -> Path:
        """``model`` written to ``path`` by the save function named ``saver``."""
        return self.write(state_to_save(self.kind, model, saver), path, overwrite)

    def write(self, state: ModelState, path: str | os.PathLike[str], overwrite: bool) -> Path:
        """The state of a model written to the folder ``path``, atomically."""
        out = Path(path)
        check_save_target(out, overwrite)
        params = dict(state.params)
        init = params.get("init")
        if isinstance(init, np.ndarray):  # an array travels in arrays.npz
            params["init"] = INIT_IN_ARRAYS
        listed = {name: params.pop(name, ()) for name in self.tuple_params}
        params = saved_params(params)
        for name, names in listed.items():  # a list of names in JSON, a tuple when loaded
            params[name] = [str(m) for m in names]
        vocab = state.texts.get(VOCABULARY)
        if vocab is not None:
            vocab = [str(w) for w in vocab]
            bad = next((i for i, w in enumerate(vocab) if "\n" in w or "\r" in w), None)
            if bad is not None:
                raise ValueError(f"vocabulary_[{bad}] = {vocab[bad]!r} contains a line break")
        arrays = {name: np.asarray(a, dtype=np.float64) for name, a in state.arrays.items()}
        if isinstance(init, np.ndarray):
            arrays["init"] = np.asarray(init, dtype=np.float64)
        K, V = arrays[self.sizes_array].shape
        meta = {
            "format": self.format,
            "version": self.version,
            "estimator": state.info.get("estimator", entry(self.kind).cls.__name__),
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
        self.logger.info("saved %s K=%d, V=%d to %s", self.name, K, V, out)
        return out

    def read(self, root: Path) -> ModelState:
        """The state of the model in the existing folder ``root``, checked."""
        if not guarded.is_file(root, PARAMS_NAME):
            raise FileNotFoundError(
                f"model {str(root)!r}: {PARAMS_NAME} is missing; this is not an lsdask model "
                f"directory (save one with {self.save_hint})"
            )
        meta = read_meta(root, self.format, self.version, self.name)
        params, fitted = meta.get("params"), meta.get("fitted")
        if not isinstance(params, dict) or not isinstance(fitted, dict):
            raise ValueError(f"model {str(root)!r}: {PARAMS_NAME} lacks 'params' or 'fitted'")
        for key in (*self.fitted_keys, "has_vocabulary"):
            if key not in fitted:
                raise ValueError(f"model {str(root)!r}: {PARAMS_NAME} lacks fitted[{key!r}]")
        K = _whole(root, fitted, "n_components", 1)
        V = _whole(root, fitted, "vocab_size", 1)
        _whole(root, fitted, "n_laps_", 0)
        if not isinstance(fitted["converged_"], bool):
            raise ValueError(f"model {str(root)!r}: {PARAMS_NAME}: fitted.converged_ is not a bool")
        arrays = self._read_arrays(root, K, V)
        texts = {VOCABULARY: read_vocab(root, V)} if fitted["has_vocabulary"] else {}
        params = drop_not_saved(root, params)
        for name in self.tuple_params:
            if isinstance(params.get(name), list):
                params[name] = tuple(params[name])
        if params.get("init") == INIT_IN_ARRAYS:
            if "init" not in arrays:
                raise ValueError(
                    f"model {str(root)!r}: {PARAMS_NAME} says init is an array, but "
                    f"{ARRAYS_NAME} has no 'init'"
                )
            params["init"] = arrays["init"]
        n = params.get("n_components")
        if self.check_n_components and isinstance(n, int) and not isinstance(n, bool) and n != K:
            raise ValueError(
                f"model {str(root)!r}: {PARAMS_NAME} says n_components={n} but the arrays "
                f"have K={K}"
            )
        return ModelState(
            kind=self.kind,
            params=params,
            fitted={
                "n_features_in_": _whole(
                    root, {"n_features_in_": V, **fitted}, "n_features_in_", 1
                ),
                "n_laps_": int(fitted["n_laps_"]),
                "converged_": bool(fitted["converged_"]),
            },
            arrays={name: a for name, a in arrays.items() if name != "init"},
            texts=texts,
            info={"estimator": meta.get("estimator")},
        )

    def _read_arrays(self, root: Path, K: int, V: int) -> dict[str, np.ndarray]:
        where = f"model {str(root)!r}: {ARRAYS_NAME}"
        # every array of the model bounded by K and V before it is read
        shapes: dict[str, tuple[int, ...]] = {
            **self.optional(K), **self.required(K, V), "init": (K, V)
        }  # fmt: skip
        arrays = read_arrays(root, shapes)
        for name, shape in self.required(K, V).items():
            if name not in arrays:
                raise ValueError(f"{where} lacks the array {name!r}; found {sorted(arrays)}")
            if arrays[name].shape != shape:
                raise ValueError(
                    f"{where}: {name} has shape {arrays[name].shape}, expected {shape} "
                    f"(K={K}, V={V} in {PARAMS_NAME})"
                )
        if "elbo_trace_" not in arrays or arrays["elbo_trace_"].ndim != 1:
            raise ValueError(f"{where} lacks a 1-D array 'elbo_trace_'")
        _check_ranges(where, arrays)
        for name, shape in self.optional(K).items():
            if name in arrays and arrays[name].shape != shape:
                raise ValueError(
                    f"{where}: {name} has shape {arrays[name].shape}, expected {shape} "
                    f"(K={K} in {PARAMS_NAME})"
                )
        return arrays

    def load(self, root: Path, state: ModelState, client: Any) -> Any:
        """The estimator rebuilt from ``state``, read from ``root``."""
        return rebuild(
            state,
            client,
            lambda exc: f"model {str(root)!r}: bad parameters in {PARAMS_NAME}: {exc}",
        )


def _whole(root: Path, fitted: dict[str, Any], key: str, low: int) -> int:
    """``fitted[key]``, a whole number >= ``low``, else a ValueError naming it."""
    value = fitted[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(
            f"model {str(root)!r}: {PARAMS_NAME}: fitted.{key} is {value!r}; expected a whole "
            f"number >= {low}"
        )
    return value


#: the arrays of a topic model whose values a kernel relies on, and their range:
#: counts (the memo's arithmetic may leave -1e-17 for a zero), pseudo-counts,
#: priors and the sticks' posterior
_RANGES = {
    "components_": (0.0, None),
    "stats_words": (-1e-6, None),
    "stats_N": (-1e-6, None),
    "stats_n_docs": (0.0, None),
    "alpha_": (0.0, None),
    "rho": (0.0, 1.0),
    "omega": (0.0, None),
}


def _check_ranges(where: str, arrays: dict[str, np.ndarray]) -> None:
    """The values of :data:`_RANGES`' arrays within range (finiteness is checked
    when the file is read); a concentration must be positive, not only >= 0."""
    for name, (low, high) in _RANGES.items():
        if name in arrays:
            check_values(where, name, arrays[name], low=low, high=high)
    for name in ("components_", "alpha_", "omega"):
        if name in arrays and arrays[name].size and not (arrays[name] > 0).all():
            raise ValueError(f"{where}: {name} holds a value <= 0; expected positive values")
    if "rho" in arrays and not ((arrays["rho"] > 0) & (arrays["rho"] < 1)).all():
        raise ValueError(f"{where}: rho holds a value outside (0, 1)")


def read_vocab(root: Path, V: int) -> list[str]:
    """The ``V`` words of ``vocab.txt`` in the model folder ``root``."""
    try:
        text = guarded.read_text(root, VOCAB_NAME, "vocab")
    except FileNotFoundError:
        raise FileNotFoundError(
            f"model {str(root)!r}: {VOCAB_NAME} is missing ({PARAMS_NAME} says the model has "
            "a vocabulary)"
        ) from None
    except guarded.UnsafePath:
        raise
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
