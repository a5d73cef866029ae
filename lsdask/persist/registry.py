"""A fitted model as plain data, and the estimators that make and take it.

persist sits below the estimators: it never imports an estimator class. An
estimator hands persist its state as a :class:`ModelState` (JSON-able
parameters, named arrays, word lists) and is rebuilt from one. The functions
that do so live with the estimators (:mod:`lsdask.estimators.state`), which
:func:`register` them here under the model's *kind* when the estimators
package is imported (``import lsdask`` does). Saving looks a model's kind up
by its class (:func:`kind_of`); loading builds the estimator of the kind a
model folder records (:func:`entry`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["Entry", "ModelState", "entry", "kind_of", "rebuild", "register", "state_to_save"]


@dataclasses.dataclass
class ModelState:
    """What a fitted estimator is, as plain data.

    Attributes
    ----------
    kind : str
        The registered kind (``"lda"``, ``"gmm"``): which estimator rebuilds it.
    params : dict
        The estimator's parameters as fitted, by name. Values are JSON-able
        but for an array parameter (LDA's ``init``), which the format module
        stores among the arrays, and the run-time settings of
        :data:`~lsdask.persist.model_dir.NOT_SAVED` (``client``, ...), which
        no format stores.
    fitted : dict
        Fitted scalars (``n_laps_``, ``converged_``, ``n_features_in_``, sizes).
    arrays : dict of str to numpy.ndarray
        Named arrays: the posterior, statistics and traces.
    texts : dict of str to list of str
        Named word lists (``"vocabulary"``), each word free of line breaks.
    info : dict
        Other JSON-able descriptions the kind needs (a mixture's model
        configuration and the class of its posterior).
    """

    kind: str
    params: dict[str, Any]
    fitted: dict[str, Any]
    arrays: dict[str, np.ndarray]
    texts: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Entry:
    """A registered estimator: its class and the two functions of its state.

    ``get_state(estimator) -> ModelState`` raises
    :class:`lsdask.errors.NotFittedError` for an unfitted estimator;
    ``from_state(cls, state, client) -> estimator`` builds a fitted ``cls``
    whose ``client`` parameter is ``client``, and raises ``TypeError`` or
    ``ValueError`` when the state does not make one.
    """

    kind: str
    cls: type
    get_state: Callable[[Any], ModelState]
    from_state: Callable[[type, ModelState, Any], Any]


_ENTRIES: dict[str, Entry] = {}


def register(
    kind: str,
    cls: type,
    get_state: Callable[[Any], ModelState],
    from_state: Callable[[type, ModelState, Any], Any],
) -> None:
    """Make ``cls`` savable as ``kind`` (registering a kind again replaces it)."""
    _ENTRIES[kind] = Entry(kind, cls, get_state, from_state)


def entry(kind: str) -> Entry:
    """The estimator registered for ``kind``."""
    try:
        return _ENTRIES[kind]
    except KeyError:
        known = sorted(_ENTRIES) or "none"
        raise LookupError(
            f"no estimator is registered for models of kind {kind!r}; known: {known}"
        ) from None


def kind_of(estimator: Any) -> str:
    """The kind an estimator is saved as: that of its own class, else of the nearest
    registered base class (an HDP estimator, a kind of LDA estimator, is ``"hdp"``);
    or a ``TypeError`` naming those that can be saved."""
    for cls in type(estimator).__mro__:
        for kind, found in _ENTRIES.items():
            if found.cls is cls:
                return kind
    names = ", ".join(e.cls.__name__ for e in _ENTRIES.values()) or "none registered"
    raise TypeError(f"cannot save a {type(estimator).__name__}; lsdask saves {names}")


def state_to_save(kind: str, model: Any, saver: str) -> ModelState:
    """The state of ``model``, which the save function named ``saver`` saves as
    ``kind``; a ``TypeError`` naming ``saver`` if ``model`` is not of the class
    registered for ``kind``."""
    found = entry(kind)
    if not isinstance(model, found.cls):
        raise TypeError(f"{saver} saves an lsdask.{found.cls.__name__}; got {type(model).__name__}")
    return found.get_state(model)


def rebuild(
    state: ModelState,
    client: Any,
    bad: Callable[[Exception], str],
    catch: tuple[type[Exception], ...] = (TypeError, ValueError),
) -> Any:
    """The estimator of ``state.kind`` rebuilt from ``state`` with ``client`` as
    its client; an error of ``catch`` becomes a ``ValueError`` with message
    ``bad(error)``."""
    found = entry(state.kind)
    try:
        return found.from_state(found.cls, state, client)
    except catch as exc:
        raise ValueError(bad(exc)) from exc
