"""Estimator parameters the scikit-learn way, without depending on scikit-learn.

An estimator's ``__init__`` only stores its keyword arguments under the same
names; :class:`Parameters` then reads them back (``get_params``), changes them
(``set_params``) and shows the ones that differ from their defaults
(``repr``), and :func:`clone` makes an unfitted copy with the same parameters.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, TypeVar

import numpy as np

E = TypeVar("E", bound="Parameters")


def read_only(array: Any) -> Any:
    """A read-only view of a fitted array that aliases the model's state, so that
    an in-place edit (``components_ /= ...``) fails instead of changing the
    model behind its back; edit a copy."""
    view = np.asarray(array).view()
    view.flags.writeable = False
    return view


class Parameters:
    """Mixin: parameters are the arguments of ``__init__``, stored as attributes."""

    @classmethod
    def _param_names(cls) -> list[str]:
        signature = inspect.signature(cls.__init__)
        return sorted(
            name
            for name, p in signature.parameters.items()
            if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        """The estimator's parameters by name (``deep`` is accepted for
        scikit-learn compatibility; lsdask estimators hold no sub-estimators)."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self: E, **params: Any) -> E:
        """Set parameters by name; returns the estimator."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(
                    f"invalid parameter {name!r} for {type(self).__name__}; valid parameters "
                    f"are {valid}"
                )
            setattr(self, name, value)
        return self

    def __sklearn_tags__(self) -> Any:
        """scikit-learn's tags (asked only by scikit-learn, e.g. ``cross_val_score``;
        imported here so that lsdask itself does not need scikit-learn)."""
        from sklearn.utils import Tags, TargetTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=False))

    def __repr__(self) -> str:
        defaults = {
            name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items()
        }
        changed = []
        for name, value in self.get_params().items():
            default = defaults.get(name, inspect.Parameter.empty)
            try:
                same = bool(value is default or value == default)
            except (ValueError, TypeError):  # arrays compare elementwise
                same = False
            if not same:
                changed.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(changed)})"


def clone(estimator: E) -> E:
    """A new, unfitted estimator of the same class with copies of the same
    parameters (deep copies, as scikit-learn's ``clone``: a cloned estimator's
    fit does not advance the original's random Generator), but the ``client``,
    which is shared."""
    return type(estimator)(
        **{
            name: value if name == "client" else copy.deepcopy(value)
            for name, value in estimator.get_params().items()
        }
    )
