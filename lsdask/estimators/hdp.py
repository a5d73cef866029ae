"""``lsdask.HDP``: the hierarchical Dirichlet process topic model (memoized VI)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from lsdask import config
from lsdask.estimators.lda import LDA, TransformTask
from lsdask.estimators.params import AUTO, HDP_PARAMS, read_only
from lsdask.models.hdp import HDPGlobals, HDPModel
from lsdask.models.hdp_moves import MoveSettings
from lsdask.models.lda import LocalStepOptions
from lsdask.models.stats import SuffStats
from lsdask.validation import check_sparsity


class HDP(LDA):
    """The HDP topic model (Hughes, Kim & Sudderth 2015), learned by memoized VI
    with LDA's L-sparse local step.

    Topics ``phi_k ~ Dir(eta)``; global topic weights ``beta`` by stick breaking,
    ``u_k ~ Beta(1, gamma)``, truncated at ``max_components`` topics plus a
    leftover mass; each document's ``pi_d ~ Dir(alpha beta)``. The local step is
    LDA's with the prior ``alpha E[beta_k]`` per topic; the global step sets the
    topics as LDA's and fits the stick posteriors ``q(u_k)`` from their previous
    values (kept only where the objective rises). The objective is the
    *surrogate ELBO* (docs/math.md, :mod:`lsdask.models.hdp`): the ELBO with
    ``E[c_Dir(alpha beta)]`` replaced by a lower bound, computed exactly from
    the memo after every visit. After every lap but the first, delete and merge
    moves (:mod:`lsdask.models.hdp_moves`) may lower the number of topics, each
    accepted only if it raises that objective; with ``moves=()`` K stays
    ``max_components`` and topics the data does not need keep a small weight.

    Parameters
    ----------
    max_components : int
        K, the most topics (the truncation), >= 2.
    sparsity : int or None
        L, as for :class:`lsdask.LDA`.
    alpha : float
        Document concentration: topic k's pseudo-count in each document is
        ``alpha E[beta_k]``, the leftover's ``alpha E[beta_{K+1}]``.
    gamma : float
        Top-level stick concentration, ``u_k ~ Beta(1, gamma)``: larger values
        spread the weight over more topics.
    eta : float or "auto"
        Topic-word pseudo-count, as for :class:`lsdask.LDA` (``"auto"`` learns it).
    moves : tuple of str
        The moves that lower K: ``"delete"`` and ``"merge"`` (default both);
        ``()`` for none. There are no birth moves: K never rises.
    algorithm : {"memo", "vb"}
        Memoized VI or full-batch VB. SVI is refused: the sticks are fitted to
        the whole corpus's statistics.
    n_laps, tol, early_stopping, validation_fraction, n_iter_no_change, batch_size,
    batches_per_update, restarts, max_local_iters, local_conv_thresh, init, gibbs_sweeps,
    gibbs_tol, gibbs_tokens, n_init, random_state, client, n_workers, verbose, progress,
    checkpoint_dir, resume
        As for :class:`lsdask.LDA`.

    Attributes
    ----------
    components_ : (K, V) topic-word pseudo-counts ``lambda``, the topics in order of
        decreasing ``E[beta_k]``
    topic_word_ : (K, V) ``E[phi]``, in the same order
    topic_weights_ : (K,) ``E[beta_k]``, decreasing
    leftover_weight_ : float, ``E[beta_{K+1}]``, the mass of the topics beyond K
    topic_order_ : (K,) the model's index of each topic of ``components_``
    alpha_ : (K,) each topic's document prior ``alpha E[beta_k]`` (the leftover's
        left out), in the same order
    n_components_ : int, K at the end of the fit
    n_components_trace_ : (n_laps_,) K after every lap
    alpha_trace_ : (n_laps_,) ``sum_k alpha E[beta_k]`` after every lap
    eta_, vocabulary_, elbo_trace_ (the surrogate ELBO), n_laps_, converged_,
    validation_trace_, best_lap_
        As for :class:`lsdask.LDA`.

    The order of the fitted attributes is for display only: the model
    (``model_``, ``posterior_``, ``stats_``, checkpoints and saved files) keeps
    the sticks in their own order, since the surrogate bound depends on it and
    reordering the sticks would change the objective. ``transform`` gives its
    columns in the order of ``components_``.
    """

    param_table = HDP_PARAMS

    def __init__(
        self,
        max_components: int = 100,
        *,
        sparsity: int | None = 8,
        alpha: float = 0.5,
        gamma: float = 10.0,
        eta: float | str = 0.1,
        moves: tuple = ("delete", "merge"),
        algorithm: str = "memo",
        n_laps: int = 10,
        tol: float = config.DEFAULT_TOL,
        early_stopping: bool | str = "auto",
        validation_fraction: float = config.VALIDATION_FRACTION,
        n_iter_no_change: int = config.EARLY_STOPPING_PATIENCE,
        batch_size: int | None = None,
        batches_per_update: int | None = None,
        restarts: bool = True,
        max_local_iters: int = 100,
        local_conv_thresh: float = 0.05,
        init: str = "auto",
        gibbs_sweeps: int = config.GIBBS_SWEEPS,
        gibbs_tol: float | None = None,
        gibbs_tokens: int = config.GIBBS_SAMPLE_TOKENS,
        n_init: int = 1,
        random_state: Any = None,
        client: Any = None,
        n_workers: int | None = None,
        verbose: int = 0,
        progress: bool | None = None,
        checkpoint_dir: str | None = None,
        resume: bool = False,
        storage_options: dict | None = None,
    ) -> None:
        self._store(locals())

    @property
    def n_components(self) -> int:
        """K, ``max_components``: what LDA's machinery (initialization, checkpoints)
        reads as the number of topics."""
        return self.max_components

    # -- the model ----------------------------------------------------------------
    def _priors(self) -> dict[str, Any]:
        """The model's prior settings: ``alpha``, ``gamma``, ``eta`` (the fixed value,
        or the default a learned one starts from) and ``learn_eta``."""
        learn_eta = isinstance(self.eta, str) and self.eta == AUTO
        return {
            "alpha": float(self.alpha),
            "gamma": float(self.gamma),
            "eta": float(HDP_PARAMS["eta"].default if learn_eta else self.eta),
            "learn_eta": learn_eta,
        }

    def _model(self, vocab_size: int) -> HDPModel:
        options = LocalStepOptions(
            max_iters=self.max_local_iters,
            conv_thresh=self.local_conv_thresh,
            restarts=bool(self.restarts),
        )
        moves = MoveSettings(
            delete="delete" in self.moves,
            merge="merge" in self.moves,
            delete_max_docs=config.HDP_DELETE_MAX_DOCS,
            max_deletes=config.HDP_MAX_DELETES,
            max_target_docs=config.HDP_MAX_TARGET_DOCS,
            max_pairs=config.HDP_MAX_MERGE_PAIRS,
            delete_work=config.HDP_DELETE_WORK,
            delete_work_floor=config.HDP_DELETE_WORK_FLOOR,
        )
        return HDPModel(
            self.max_components, vocab_size, options=options, moves=moves, **self._priors()
        )

    # -- fitting --------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None, *, callback: Any = None, vocabulary: Any = None) -> HDP:
        """Learn topics and their weights from a Parquet corpus (path or Corpus), a
        scipy sparse matrix or a dense array of word counts, as :meth:`LDA.fit`."""
        super().fit(X, y, callback=callback, vocabulary=vocabulary)
        trace = self._components_trace
        self.n_components_trace_ = (
            np.asarray(trace, dtype=np.float64)
            if len(trace) == int(self.n_laps_)
            else np.full(int(self.n_laps_), float(self.n_components_))
        )
        return self

    def partial_fit(self, X: Any, y: Any = None, *, vocabulary: Any = None) -> HDP:
        """Not supported: the HDP takes in new documents by resuming its checkpoint."""
        raise NotImplementedError(
            "HDP.partial_fit is not supported. To take in new documents, fit with "
            "checkpoint_dir and later fit again with resume=True on the corpus that holds "
            "them (new Parquet files become new batches of the memo)."
        )

    def _set_fitted(self, model: HDPModel, glob: HDPGlobals, stats: SuffStats, vocab) -> None:
        """The fitted attributes, the topics in order of decreasing ``E[beta_k]``."""
        K = model.n_components
        beta = glob.topic_weights
        order = np.argsort(-beta[:K], kind="stable")
        self.model_ = model
        self.posterior_ = glob
        self.stats_ = stats
        self.topic_order_ = read_only(order)
        self.topic_weights_ = read_only(beta[:K][order])
        self.leftover_weight_ = float(beta[K])
        self.components_ = read_only(glob.lam[order])
        self.topic_word_ = read_only(glob.topics[order])
        self.alpha_ = read_only(glob.alpha[order])
        self.eta_ = glob.eta
        self.vocabulary_ = vocab
        self.n_components_ = K

    # -- inference ------------------------------------------------------------------
    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """The names of transform's columns, ``hdp0 .. hdp{K-1}``, in the order of
        ``components_``."""
        self._check_fitted()
        return np.array([f"hdp{k}" for k in range(self.model_.n_components)], dtype=object)

    def transform_task(self) -> OrderedTransformTask:
        """:meth:`transform` of one batch as a task (see :meth:`LDA.transform_task`),
        its columns in the order of ``components_``."""
        self._check_fitted()
        L = check_sparsity(self.sparsity, None)  # may change after fit
        return OrderedTransformTask(
            self.model_, L, self.topics_per_document, tuple(int(k) for k in self.topic_order_)
        )


@dataclass(frozen=True)
class OrderedTransformTask(TransformTask):
    """:class:`TransformTask` with the columns in the order ``order`` (the model's
    topic index of each column): the HDP's topics by decreasing weight."""

    order: tuple[int, ...] = ()

    def weights(self, X: sp.csr_matrix, posterior: Any) -> sp.csr_matrix:
        out = super().weights(X, posterior)[:, list(self.order)].tocsr()
        out.sort_indices()
        return out
