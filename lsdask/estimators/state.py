"""The estimators' state as plain data, for :mod:`lsdask.persist`.

persist sits below the estimators and imports none of them. What it saves
and checkpoints, the estimators hand it here as plain values:

- :func:`lda_state` / :func:`lda_from_state`, :func:`hdp_state` /
  :func:`hdp_from_state` and :func:`mixture_state` /
  :func:`mixture_from_state` turn a fitted estimator into a
  :class:`~lsdask.persist.registry.ModelState` and back; the estimators
  package registers them with :func:`lsdask.persist.registry.register`;
- :func:`checkpoint_settings`: what a fit asks of its checkpoint folder.

These functions belong to the estimators package, so they use the
estimators' private methods; nothing outside it does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lsdask.estimators.params import AUTO, read_only
from lsdask.models.dirichlet_logs import DirichletPosterior
from lsdask.models.lda import PRIOR_STATS, LDAGlobals
from lsdask.models.stats import SuffStats, as_dense
from lsdask.persist import gmm as gmm_files
from lsdask.persist import hdp as hdp_files
from lsdask.persist import lda as lda_files
from lsdask.persist.model_config import (
    model_from_config,
    model_to_config,
    posterior_from_arrays,
    posterior_to_arrays,
)
from lsdask.persist.model_dir import TRACE_FIELDS
from lsdask.persist.registry import ModelState, kind_of
from lsdask.persist.resume import CheckpointSettings

#: the traces of a fit, stored when the estimator has them
_TRACES = ("elbo_trace_", *TRACE_FIELDS)


def lda_state(model: Any) -> ModelState:
    """A fitted LDA estimator as plain data: the fit's parameters (an array
    ``init`` as float64 topic-word counts), ``components_``, the priors ``alpha_``
    (K,) and ``eta_`` (1,), the statistics ``stats_<field>`` (dense; with a learned
    alpha also ``stats_S``, ``stats_W``, ``stats_Cdir``) and the traces; its
    vocabulary, if any."""
    if kind_of(model) != lda_files.KIND:  # an HDP is an LDA estimator of a kind of its own
        raise TypeError(
            f"an lsdask.{type(model).__name__} is saved as {kind_of(model)!r}, not as an LDA "
            "model: use lsdask.persist.save_model"
        )
    model._check_fitted()
    params = model._params_as_fitted()
    # the model as fitted, whatever set_params changed since (also for models fitted
    # before the parameters of the fit were recorded)
    fitted_model = model.model_
    params.update(
        n_components=int(fitted_model.n_components),
        alpha=AUTO if fitted_model.learn_alpha else fitted_model.total_alpha,
        eta=AUTO if fitted_model.learn_eta else float(fitted_model.eta),
    )
    init_counts = model._init_counts(None, params["init"])
    if init_counts is not None:
        params["init"] = init_counts
    arrays = {
        "components_": model.components_,
        "elbo_trace_": model.elbo_trace_,
        "alpha_": model.alpha_,
        "eta_": np.array([model.eta_]),
    }
    for name in (*TRACE_FIELDS, "alpha_trace_"):
        if hasattr(model, name):
            arrays[name] = getattr(model, name)
    for name in model.stats_.keys():
        arrays[f"stats_{name}"] = as_dense(model.stats_[name])
    vocab = model.vocabulary_
    V = model.components_.shape[1]
    return ModelState(
        kind=lda_files.KIND,
        params=params,
        fitted={
            "n_features_in_": int(getattr(model, "n_features_in_", V)),
            "n_laps_": int(model.n_laps_),
            "converged_": bool(model.converged_),
        },
        arrays=arrays,
        texts={} if vocab is None else {lda_files.VOCABULARY: [str(w) for w in vocab]},
        info={"estimator": type(model).__name__},
    )


def lda_from_state(cls: type, state: ModelState, client: Any = None) -> Any:
    """A fitted ``cls`` (an LDA estimator) from :func:`lda_state`'s data, with
    ``client`` as its client.

    The posterior is the global step of the saved statistics (which fits learned
    priors again, to the same values) unless the saved ``components_`` or ``alpha_``
    differ from it (an SVI fit stopped between updates): then the saved ones are kept,
    as the saved model used them. Models saved before ``alpha_`` and ``eta_`` were
    kept have the fixed priors of their parameters.
    """
    arrays, fitted = state.arrays, state.fitted
    model = cls(**state.params)
    model.set_params(client=client)
    model.check_params()
    lam = arrays["components_"]
    K, V = lam.shape
    if int(model.n_components) != K:
        raise ValueError(f"n_components={model.n_components} but the arrays have K={K}")
    lda_model = model._model(V)
    fields = [*lda_files.STATS_FIELDS]
    fields += [name for name in PRIOR_STATS if f"stats_{name}" in arrays]
    stats = SuffStats(**{name: arrays[f"stats_{name}"] for name in fields})
    glob = lda_model.global_step(stats)
    alpha = arrays.get("alpha_", glob.alpha)
    eta = float(arrays["eta_"][0]) if "eta_" in arrays else glob.eta
    if not (np.array_equal(glob.lam, lam) and np.array_equal(glob.alpha, alpha)):
        glob = LDAGlobals.of(DirichletPosterior.from_lam(lam, eta), alpha)
    model._set_fitted(lda_model, glob, stats, state.texts.get(lda_files.VOCABULARY))
    model._record_fit_params()
    model.elbo_trace_ = arrays["elbo_trace_"]
    for name in (*TRACE_FIELDS, "alpha_trace_"):
        if name in arrays:
            setattr(model, name, arrays[name])
    if "alpha_trace_" not in arrays:  # saved before it was kept: a fixed alpha
        model.alpha_trace_ = np.full(int(fitted["n_laps_"]), float(np.sum(model.alpha_)))
    model.n_laps_ = int(fitted["n_laps_"])
    model.converged_ = bool(fitted["converged_"])
    model.n_features_in_ = int(fitted.get("n_features_in_", V))
    _set_best_lap(model)
    return model


def _set_best_lap(model: Any) -> None:
    """``validation_trace_`` (empty where the file has none) and ``best_lap_``, the
    first lap of its best score (lap 0: the start): the lap early stopping kept
    (None without it)."""
    trace = np.asarray(getattr(model, "validation_trace_", np.zeros(0)), dtype=np.float64)
    model.validation_trace_ = trace
    model.best_lap_ = int(np.argmax(trace)) if trace.size else None


def _fit_params(model: Any) -> dict[str, Any]:
    """The fit's parameters, an array ``init`` as float64 topic-word counts."""
    params = model._params_as_fitted()
    init_counts = model._init_counts(None, params["init"])
    if init_counts is not None:
        params["init"] = init_counts
    return params


def hdp_state(model: Any) -> ModelState:
    """A fitted HDP estimator as plain data: the fit's parameters, the sticks ``rho``
    and ``omega``, the statistics ``stats_<field>`` (dense), all in the model's own
    stick order, and the traces; its vocabulary, if any."""
    model._check_fitted()
    glob = model.posterior_
    arrays = {"rho": glob.rho, "omega": glob.omega}
    # not the moves' working fields; a start's statistics (kept where early stopping
    # keeps lap 0) have no local-step fields such as S: zeros (the saved sticks, not
    # S, make the loaded posterior)
    missing = [name for name in hdp_files.STATS_FIELDS if name not in model.stats_.keys()]
    empty = model.model_.empty_stats() if missing else None
    for name in hdp_files.STATS_FIELDS:
        kept = empty[name] if name in missing else model.stats_[name]
        arrays[f"stats_{name}"] = as_dense(kept)
    for name in (*_TRACES, "alpha_trace_", "n_components_trace_"):
        if hasattr(model, name):
            arrays[name] = np.asarray(getattr(model, name))
    vocab = model.vocabulary_
    V = model.model_.vocab_size
    return ModelState(
        kind=hdp_files.KIND,
        params=_fit_params(model),
        fitted={
            "n_features_in_": int(getattr(model, "n_features_in_", V)),
            "n_laps_": int(model.n_laps_),
            "converged_": bool(model.converged_),
        },
        arrays=arrays,
        texts={} if vocab is None else {lda_files.VOCABULARY: [str(w) for w in vocab]},
        info={"estimator": type(model).__name__},
    )


def hdp_from_state(cls: type, state: ModelState, client: Any = None) -> Any:
    """A fitted ``cls`` (an HDP estimator) from :func:`hdp_state`'s data, with
    ``client`` as its client: the topics are the global step's of the saved
    statistics (deterministic) and the sticks the saved ones, so the posterior is
    the saved one."""
    arrays, fitted = state.arrays, state.fitted
    model = cls(**state.params)
    model.set_params(client=client)
    model.check_params()
    K, V = arrays["stats_words"].shape
    if K > int(model.max_components) or (not model.moves and K != model.max_components):
        raise ValueError(
            f"max_components={model.max_components}, moves={tuple(model.moves)!r} but the "
            f"arrays have K={K} topics (moves only lower K from max_components)"
        )
    hdp_model = model._model(V).resized(K)
    stats = SuffStats(**{name: arrays[f"stats_{name}"] for name in hdp_files.STATS_FIELDS})
    glob = hdp_model.globals_with_sticks(stats, arrays["rho"], arrays["omega"])
    model._set_fitted(hdp_model, glob, stats, state.texts.get(lda_files.VOCABULARY))
    model._record_fit_params()
    for name in (*_TRACES, "alpha_trace_", "n_components_trace_"):
        if name in arrays:
            setattr(model, name, arrays[name])
    model.n_laps_ = int(fitted["n_laps_"])
    model.converged_ = bool(fitted["converged_"])
    model.n_features_in_ = int(fitted["n_features_in_"])
    _set_best_lap(model)
    return model


def mixture_state(model: Any) -> ModelState:
    """A fitted mixture estimator as plain data: the fit's parameters, the
    model configuration, the posterior as named arrays and the traces."""
    model._check_fitted()
    posterior, arrays = posterior_to_arrays(model.posterior_)
    for name in _TRACES:
        if hasattr(model, name):
            arrays[name] = np.asarray(getattr(model, name))
    return ModelState(
        kind=gmm_files.KIND,
        params=model._params_as_fitted(),  # the fit's (set_params may have changed them since)
        fitted={
            "n_features_in_": int(model.n_features_in_),
            "n_laps_": int(model.n_laps_),
            "converged_": bool(model.converged_),
        },
        arrays=arrays,
        info={"model": model_to_config(model.model_), "posterior": posterior},
    )


def mixture_from_state(cls: type, state: ModelState, client: Any = None) -> Any:
    """A fitted ``cls`` (a mixture estimator) from :func:`mixture_state`'s data,
    with ``client`` as its client."""
    posterior = posterior_from_arrays(state.info["posterior"], state.arrays)
    model = model_from_config(state.info["model"])
    estimator = cls(**state.params).set_params(client=client)
    estimator.check_params()
    K = model.n_components
    if posterior.theta.shape != (K,) or estimator.n_components != K:
        raise ValueError(
            f"theta has shape {posterior.theta.shape} and n_components={estimator.n_components}; "
            f"the model has K={K}"
        )
    _check_posterior_shapes(model, state.arrays)
    estimator.model_ = model
    estimator.posterior_ = posterior
    estimator.weights_ = read_only(model.allocation.mean_weights(posterior.theta))
    estimator._record_fit_params()
    for name in _TRACES:
        if name in state.arrays:
            setattr(estimator, name, state.arrays[name])
    estimator.n_features_in_ = int(state.fitted["n_features_in_"])
    estimator.n_laps_ = int(state.fitted["n_laps_"])
    estimator.converged_ = bool(state.fitted["converged_"])
    estimator._set_fitted(model)
    return estimator


def _check_posterior_shapes(model: Any, arrays: dict[str, np.ndarray]) -> None:
    """Every saved posterior array has the shape the model's own posterior has (the
    global step of empty statistics: the prior), and its values are in range where a
    kernel relies on them (positive concentrations): a damaged file cannot reach a
    kernel with the wrong sizes."""
    _, expected = posterior_to_arrays(model.global_step(model.empty_stats()))
    for name, want in expected.items():
        got = arrays.get(name)
        if got is None or got.shape != want.shape:
            raise ValueError(
                f"{name} has shape {None if got is None else got.shape}; the model (K="
                f"{model.n_components}, its dimension) needs {want.shape}"
            )
    if not (arrays["theta"] > 0).all():
        raise ValueError("theta must hold positive values (Dirichlet concentrations)")


def checkpoint_settings(estimator: Any) -> CheckpointSettings:
    """What ``estimator``'s fit asks of its checkpoint folder: its
    ``checkpoint_dir`` and ``resume`` parameters, and the settings a
    checkpoint records and a resume compares."""
    return CheckpointSettings(
        folder=estimator.checkpoint_dir,
        resume=estimator.resume,
        params={
            "estimator": type(estimator).__name__,
            "n_components": estimator.n_components,
            "sparsity": estimator.sparsity,
            "batches_per_update": estimator.batches_per_update,
            "alpha": estimator.alpha,
            # the words of the fit's vocabulary (LDA over a corpus; None otherwise)
            "vocabulary_sha256": getattr(estimator, "_vocabulary_sha256", None),
        },
        algorithm=estimator.algorithm,
        n_init=estimator.n_init,
    )
