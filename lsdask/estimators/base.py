"""The estimator base: scikit-learn conventions over lsdask's learn loop.

Keyword-only ``__init__`` that only stores parameters; parameters checked in
``fit`` by the estimator's table (:mod:`lsdask.estimators.params`); ``fit``
returns ``self``; fitted attributes end in ``_``. Subclasses declare their
signature and table, and say which observation model to use and which fitted
attributes to expose.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.special import logsumexp

from lsdask import config
from lsdask.estimators.learning import VariationalEstimator
from lsdask.estimators.params import read_only
from lsdask.estimators.state import checkpoint_settings
from lsdask.io.sources import as_batch_source
from lsdask.learn import initial_stats
from lsdask.models import MixtureModel, ObservationModel
from lsdask.persist.resume import holding_checkpoint_folder, open_resume
from lsdask.validation import check_sparsity


class MixtureEstimatorBase(VariationalEstimator):
    """Shared fit/predict/score for L-sparse mixtures.

    Parameters common to all mixtures
    ---------------------------------
    n_components : int
        K, the number of clusters.
    sparsity : int or None
        L: responsibilities kept per observation (1 <= L <= K); None is dense.
    algorithm : {"memo", "svi", "vb", "esvi"}
        Memoized VI, stochastic VI, full-batch VB, or model-parallel ESVI
        (esvi paper, Alg. 4; docs/esvi.md): the components dealt at random into
        ``n_blocks`` blocks at every rotation, one block per worker, each worker
        updating its own rows against the block it holds; ``n_laps`` counts
        rotations; dense responsibilities (``sparsity=None``); it starts from
        ``init``'s seeds, as memoized VI does.
    n_laps : int
        Maximum passes over the data.
    tol : float
        Relative ELBO change between laps below which memo and vb stop (0:
        never before ``n_laps``).
    batch_size : int or None
        Rows per batch; default the Zarr chunk rows (one chunk per batch), a
        dask array's row chunks, or 10,000 for in-memory arrays.
    batches_per_update : int or None
        Batches visited against the same globals per global step (memo, svi);
        default the number of parallel workers.
    alpha : float
        Concentration of the cluster weights, ``pi ~ Dir(alpha / K)``.
    init : {"kmeans++", "random"}
        Seeds by k-means++ under the model's Bregman divergence, or random
        examples.
    n_blocks : int or None
        ESVI: P, the component blocks and workers (default ``n_workers``, or 1
        with ``client="sync"``).
    schedule : {"rotation", "nomadic"}
        ESVI: the blocks passed on in lockstep sub-steps (rotation), or routed
        at random from part to part as each finishes, with no barrier but at a
        rotation's end (nomadic, the paper's asynchronous schedule). Every
        meeting is an exact coordinate step either way (a mixture shares no
        totals); on a cluster the nomadic order depends on which meeting ends
        first, so two runs differ.
    n_init : int
        Independent initializations; the run with the highest final ELBO is
        kept (as scikit-learn's ``n_init``).
    svi_delay, svi_kappa : float
        SVI learning rate ``(delay + t) ** (-kappa)``.
    random_state : int, numpy Generator or None
    client : None, "sync", a distributed.Client, or a scheduler address
        Where batch tasks run. None starts a LocalCluster of worker
        processes for the fit (but data of a single batch, where a cluster
        could not save what it costs to start, runs in this process);
        "sync" runs in this process.
    n_workers : int or None
        Worker processes of a LocalCluster started by fit.
    verbose : int
        0 warnings only, 1 one log line per lap, 2 debug.
    progress : bool or None
        Progress bar per lap; None shows it only on a terminal.
    checkpoint_dir : str or None
        Folder for checkpoints (memoized VI and ESVI). Memo: the per-batch
        memo lives there on disk, a checkpoint is written atomically after
        every lap and when SIGINT/SIGTERM asks the fit to stop (it then raises
        :class:`lsdask.errors.FitInterrupted`). ESVI: every rotation is written
        block by block into its ``esvi/`` folder, each worker its own part
        (docs/esvi.md); ``resume`` goes on to ``n_laps`` rotations in all.
    resume : bool
        Continue the latest checkpoint in ``checkpoint_dir`` (a fresh start if
        there is none). An unfinished run continues to ``n_laps`` laps in all,
        equal to a run never stopped; a finished one runs ``n_laps`` more laps,
        with batches added since then starting with empty memo and batches
        removed since then subtracted.
    storage_options : dict or None
        fsspec options (credentials, an endpoint) of the store URLs the fit
        reads or writes: a corpus at ``s3://...``, a ``checkpoint_dir`` in a
        store (docs/storage.md). A run-time setting: never saved with the model.
    """

    # hooks -------------------------------------------------------------------
    @abstractmethod
    def _make_observation(self) -> ObservationModel:
        """The (unconfigured) observation model for this estimator's parameters."""

    @abstractmethod
    def _set_fitted(self, model: MixtureModel) -> None:
        """Expose the observation posterior as fitted attributes."""

    #: whether the observation model takes a scipy sparse matrix (word counts do)
    _takes_sparse = True

    def _batch_source(self, X: Any) -> Any:
        """X's batches; a scipy sparse matrix is refused, saying what to do, where
        the observation model needs dense rows."""
        if not self._takes_sparse and sp.issparse(X):
            raise ValueError(
                f"X is a scipy sparse matrix ({type(X).__name__}, shape {X.shape}); "
                f"{type(self).__name__} does not take sparse input. Convert it with "
                "X.toarray() if it fits in memory, or write it to a Zarr array (block by "
                "block) and pass its path: lsdask reads a Zarr array chunk by chunk"
            )
        return as_batch_source(X, self.batch_size)

    # fitting -----------------------------------------------------------------
    @holding_checkpoint_folder
    def fit(self, X: Any, y: Any = None, *, callback: Any = None) -> MixtureEstimatorBase:
        """Learn the mixture from X.

        Parameters
        ----------
        X : Zarr array or path to one, dask array, numpy array (n, D)
            (or, for count models, a scipy sparse matrix).
        y : ignored
        callback : callable or None
            Called after every lap with the run's
            :class:`lsdask.learn.base.LearnResult` so far (globals, traces).

        Returns
        -------
        self
        """
        self.check_params()
        rng = np.random.default_rng(self.random_state)
        source = self._batch_source(X)
        observation = self._make_observation()
        if self.algorithm == "esvi":
            from lsdask.estimators.mixture_esvi import fit_mixture_esvi

            return fit_mixture_esvi(self, source, observation, rng, callback)
        asked = {
            "class": type(observation).__name__,
            "dim": source.n_features,
            "alpha": float(self.alpha),
        }
        resumed = open_resume(checkpoint_settings(self), asked)
        if resumed is not None:
            model, sample = resumed["model"], None
        else:
            sample = source.sample(config.INIT_SAMPLE_ROWS, rng, check=observation.check_data)
            observation = observation.with_data_defaults(sample)
            model = MixtureModel(observation, self.n_components, float(self.alpha))
        result = self._learn(
            model,
            source,
            lambda r: initial_stats(model, sample, self.init, r),
            rng,
            resumed,
            callback,
        )
        self.model_ = model
        self.posterior_ = result.globals
        self.weights_ = read_only(model.allocation.mean_weights(result.globals.theta))
        self._set_fitted(model)
        self._record_fit_params()
        return self

    # inference -----------------------------------------------------------------
    def _blocks(self, X: Any):
        self._check_fitted()
        source = self._batch_source(X)
        if source.n_features != self.n_features_in_:
            raise ValueError(
                f"X has {source.n_features} features, but this model was fitted with "
                f"{self.n_features_in_}"
            )
        for batch in source.batches:
            yield batch.load()

    def predict_proba(self, X: Any) -> Any:
        """Responsibilities: a scipy CSR matrix (n, K) with at most L entries per
        row when ``sparsity`` is set, else a dense array."""
        self._check_fitted()
        parts = []
        K = self.model_.n_components  # as fitted, whatever set_params said since
        L = check_sparsity(self.sparsity, K)  # may change after fit; at most the fitted K
        for rows in self._blocks(X):
            out = self.model_.responsibilities(rows, self.posterior_, L)
            if L is None:
                parts.append(out)
            else:
                resp, idx = out
                n, width = resp.shape
                indptr = np.arange(0, n * width + 1, width)
                block = sp.csr_matrix((resp.ravel(), idx.ravel(), indptr), shape=(n, K))
                block.eliminate_zeros()  # canonical: no stored zeros, columns sorted
                block.sort_indices()
                parts.append(block)
        return np.concatenate(parts) if L is None else sp.vstack(parts, format="csr")

    def fit_predict(self, X: Any, y: Any = None, **fit_params: Any) -> np.ndarray:
        """``fit(X, **fit_params)``, then ``predict(X)``."""
        return self.fit(X, **fit_params).predict(X)

    @property
    def lower_bound_(self) -> float:
        """The final ELBO per row, as scikit-learn's (``elbo_trace_[-1]`` is the total)."""
        self._check_fitted()
        return float(self.elbo_trace_[-1] / self.size_trace_[-1])

    @property
    def n_iter_(self) -> int:
        """Laps run (scikit-learn's name; ``n_laps_``)."""
        self._check_fitted()
        return int(self.n_laps_)

    def predict(self, X: Any) -> np.ndarray:
        """Most responsible cluster of each row."""
        parts = []
        for rows in self._blocks(X):
            block = self.model_.observation.prepare(rows)
            parts.append(np.argmax(self.model_.log_weights(block, self.posterior_), axis=1))
        return np.concatenate(parts)

    def score_samples(self, X: Any) -> np.ndarray:
        """``log sum_k pi_k F(x_n | phi_k)`` at point estimates (lsparse Sec. 4)."""
        log_pi = np.log(self.weights_)
        parts = []
        for rows in self._blocks(X):
            loglik = self.model_.observation.point_log_lik(rows, self.posterior_.obs)
            parts.append(logsumexp(loglik + log_pi, axis=1))
        return np.concatenate(parts)

    def score(self, X: Any, y: Any = None) -> float:
        """Mean heldout log-likelihood per row."""
        return float(np.mean(self.score_samples(X)))
