"""What every lsdask estimator shares: parameter checks, the executor, the
learning loop with ``n_init`` restarts, and the fitted traces.

Subclasses keep scikit-learn's conventions (keyword-only ``__init__`` that only
stores parameters, checks in ``fit``, fitted attributes ending in ``_``;
``get_params``/``set_params`` from :class:`~lsdask.estimators.params.Parameters`)
and supply the model, its initialization and the fitted attributes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from lsdask.config import PROGRESS
from lsdask.engine import make_executor
from lsdask.errors import NotFittedError
from lsdask.estimators.params import Parameters, ParamTable
from lsdask.estimators.state import checkpoint_settings
from lsdask.learn import MemoizedVI, StochasticVI
from lsdask.learn.base import LearnResult
from lsdask.learn.early_stopping import EarlyStopping
from lsdask.learn.vb import FullBatchVB
from lsdask.models.stats import SuffStats
from lsdask.persist.resume import checkpointing, is_rerun, stop_on_signals

logger = logging.getLogger(__name__)
_package_logger = logging.getLogger("lsdask")


class VariationalEstimator(Parameters):
    """Base of the estimators; parameters are documented on the subclasses."""

    #: the estimator's parameters: defaults, checks, help (lsdask.estimators.params)
    param_table: ClassVar[ParamTable]

    def check_params(self, n_features: int | None = None) -> None:
        """Raise ValueError for a parameter its table does not accept (``fit``
        does this first; a job may, before it starts a cluster).

        ``n_features``, where known, is the data's number of columns, for
        parameters whose shape depends on it (LDA's ``init`` counts).
        """
        self.param_table.check(self)

    def _learner(self, model: Any, n_rows: int, init_stats: SuffStats) -> Any:
        if self.algorithm == "memo":
            return self._memoized_vi()
        if self.algorithm == "vb":
            return FullBatchVB(self.n_laps, self.tol, progress=self.progress)
        n_init_rows = max(model.row_count(init_stats), 1.0)
        return StochasticVI(
            self.n_laps,
            self.svi_delay,
            self.svi_kappa,
            self.batches_per_update,
            n_total_rows=n_rows,
            initial_stats=init_stats * (n_rows / n_init_rows),
            progress=self.progress,
        )

    def _learn(
        self,
        model: Any,
        source: Any,
        initial_stats: Callable[[np.random.Generator], SuffStats],
        rng: np.random.Generator,
        resumed: dict[str, Any] | None = None,
        callback: Callable[[LearnResult], None] | None = None,
    ) -> LearnResult:
        """Run the chosen algorithm ``n_init`` times; keep the best final ELBO.

        With ``checkpoint_dir``, the memo lives on disk there and a checkpoint
        is written every lap and on SIGINT/SIGTERM; ``resumed`` (from
        :func:`lsdask.persist.resume.open_resume`) continues a checkpoint.
        """
        if self.n_laps == 0 and not (getattr(self, "checkpoint_dir", None) and self.resume):
            raise ValueError(
                "n_laps=0 trains nothing: it exports a checkpoint as it is; pass checkpoint_dir "
                "and resume=True (lsdask fit --resume DIR --laps 0 --out MODEL_DIR)"
            )
        previous_level = _package_logger.level
        if self.verbose:
            _package_logger.setLevel(logging.INFO if self.verbose == 1 else logging.DEBUG)
        logger.info(
            "fitting %s K=%d L=%s (%s) on %s: %d rows in %d batches",
            type(self).__name__, self.n_components, self.sparsity, self.algorithm,
            source.description, source.n_rows, source.n_batches, extra=PROGRESS,
        )  # fmt: skip
        executor = self._executor(source)
        best = None
        try:
            for attempt in range(self.n_init):
                if resumed is not None and resumed["init_stats"] is None:
                    init_stats = None  # the memo gives the globals
                elif resumed is not None:
                    init_stats = resumed["init_stats"]
                else:
                    init_stats = initial_stats(rng)
                run = self._run_once(model, source, init_stats, rng, executor, resumed, callback)
                logger.info("initialization %d: final ELBO %.6e", attempt, run.elbo_trace[-1])
                if best is None or run.elbo_trace[-1] > best.elbo_trace[-1]:
                    best = run
        finally:
            if executor is not self.client:
                executor.close()
            _package_logger.setLevel(previous_level)
        self.elbo_trace_ = np.asarray(best.elbo_trace)
        self.lap_trace_ = np.asarray(best.lap_trace)
        self.time_trace_ = np.asarray(best.time_trace)
        self.size_trace_ = np.asarray(best.size_trace, dtype=np.float64)
        self.n_laps_ = best.n_laps
        self.converged_ = best.converged
        self.validation_trace_ = np.asarray(best.validation_trace, dtype=np.float64)
        self.best_lap_ = best.best_lap
        self.n_features_in_ = source.n_features
        return best

    def _memoized_vi(self) -> MemoizedVI:
        """Memoized VI with this estimator's settings and a fresh early stopping."""
        return MemoizedVI(
            self.n_laps, self.tol, self.batches_per_update, progress=self.progress,
            early_stopping=self._early_stopping(),
        )  # fmt: skip

    def _early_stopping(self) -> EarlyStopping | None:
        """A fresh early stopping for one run of memoized VI, or None (the
        estimators without validation documents)."""
        return None

    def _executor(self, source) -> Any:
        """Where the batch tasks of ``source`` run: ``client``'s executor; with
        the default client, in this process when the data is one batch (a new
        cluster's start costs seconds a single task cannot win back)."""
        if self.client is None and source.n_batches == 1:
            return make_executor("sync")
        return make_executor(self.client, self.n_workers)

    def _run_once(
        self, model, source, init_stats, rng, executor, resumed, callback=None
    ) -> LearnResult:
        glob = None if init_stats is None else model.global_step(init_stats)
        if self.checkpoint_dir is None:
            learner = self._learner(model, source.n_rows, init_stats)
            if isinstance(learner, MemoizedVI):  # the start's statistics: lap 0 can be kept
                return learner.run(model, executor, source.batches, glob, rng, self.sparsity,
                                   callback, init_stats=init_stats)  # fmt: skip
            return learner.run(model, executor, source.batches, glob, rng, self.sparsity, callback)
        learner = self._memoized_vi()
        state = None if resumed is None else resumed["state"]
        command_id = getattr(self, "_command_id", None)
        if self.n_laps == 0 and state is None:
            raise ValueError(
                f"n_laps=0 exports a checkpoint, and {self.checkpoint_dir!r} holds none yet"
            )
        retry = state is not None and is_rerun(state.command, command_id)
        if retry:
            # the same command, interrupted (its output not written): finish what it asked
            assert state is not None and state.command is not None
            learner.n_laps = int(state.command["target"])
            state.converged = state.converged and state.lap >= learner.n_laps
            logger.info("rerun of an interrupted command: %d laps in all", learner.n_laps)
        elif state is not None and state.finished(self.n_laps):
            # a finished run taken up again (new data, say): n_laps more laps; a
            # stopped one goes on towards n_laps in all, as if never stopped
            learner.n_laps = state.lap + self.n_laps
            state.converged = False
        elif state is not None and self.n_laps <= state.lap:
            logger.warning(
                "resuming a run stopped after %d laps with n_laps=%d (laps in all for a "
                "stopped run): no lap is left to make, so the rest of the lap under way is "
                "not visited either; ask for more laps to go on",
                state.lap, self.n_laps,
            )  # fmt: skip
        if command_id is not None:
            learner.command = {"id": command_id, "target": learner.n_laps, "done": False}
            data = getattr(self, "_command_data", None)  # what the command trains on
            if data is not None:
                learner.command["data"] = data
        memo, write = checkpointing(checkpoint_settings(self), model, source.batches, resumed)
        with stop_on_signals(True) as stop_requested:
            return learner.run(
                model, executor, source.batches, glob, rng, self.sparsity, callback, memo=memo,
                state=state, init_stats=init_stats, checkpoint=write,
                stop_requested=stop_requested,
                best_model=None if resumed is None else resumed.get("best_model"),
                best_stats=None if resumed is None else resumed.get("best_stats"),
            )  # fmt: skip

    def _record_fit_params(self) -> None:
        """Keep the parameters of the fit that made the fitted model: set_params
        may change them afterwards, and a saved model must record the fit's."""
        self._fit_params = {k: v for k, v in self.get_params(deep=False).items() if k != "client"}

    def _params_as_fitted(self) -> dict[str, Any]:
        """The parameters, those of the fit where recorded (see _record_fit_params)."""
        return {**self.get_params(deep=False), **getattr(self, "_fit_params", {})}

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without a live ``client`` (a ``distributed.Client`` or executor
        cannot travel): it unpickles with ``client=None``; ``"sync"`` and
        scheduler addresses are kept."""
        state = self.__dict__.copy()
        if not (self.client is None or isinstance(self.client, str)):
            state["client"] = None
        return state

    def _check_fitted(self) -> None:
        if not hasattr(self, "posterior_"):
            raise NotFittedError(
                f"This {type(self).__name__} is not fitted yet; call fit(X) before using it."
            )
