"""Latent Dirichlet allocation with the L-sparse local step (lsparse Sec. 5, App. C-D).

Documents are rows of word counts. Topics ``phi_k ~ Dir(eta)`` with posterior
``q(phi_k) = Dir(lambda_k)``, ``lambda = eta + S`` where
``S[k, v] = sum_d sum_u c_du r_duk [w_du = v]``; document frequencies
``pi_d ~ Dir(alpha_1, ..., alpha_K)`` (``alpha / K`` each for the symmetric prior of
the paper's Eq. 37) and ``q(pi_d) = Dir(N_d + alpha)`` are inferred afresh at every
visit (cold start, App. D.4) and summarized per batch into:

- ``words``: S at its nonzero (topic, word) pairs (a :class:`SparseBlock`,
  16 bytes per entry), all within the batch's own vocabulary: at most
  K x V_b entries, not K x V, and a small share of K x V_b under the L-sparse step;
- ``H``: the assignment entropy ``-sum c r log r``;
- ``alloc``: ``sum_d c_Dir(alpha) - c_Dir(N_d + alpha)``, the document
  allocation terms at their optimal ``q(pi_d)``;
- ``N``: tokens per topic; ``n_docs``;
- where alpha is learned (``learn_alpha``), also ``S`` (here ``S_k = sum_d
  E[log pi_dk]``, a K-vector), ``W`` and ``Cdir``, from which the allocation term
  at any other prior follows with the ``q(pi_d)`` fixed
  (:func:`lsdask.models.dirichlet_prior.allocation_at`).

The ELBO (App. C) is then exact from the statistics:
``sum_kv S_kv E[log phi_kv] - sum_k KL(Dir(lambda_k) || Dir(eta)) + H + alloc``,
with ``alloc`` taken at the current alpha where it is learned. The globals are
:class:`LDAGlobals`: ``q(phi)`` and the prior alpha the local step uses; the global
step fits alpha (``learn_alpha``) and eta (``learn_eta``) to the whole-data statistics
(:mod:`lsdask.models.dirichlet_prior`), so they are a function of those alone.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from lsdask.kernels.lda import lda_batch_step_pairs
from lsdask.kernels.sparse_columns import entries_unequal_to
from lsdask.models.dirichlet_logs import DirichletPosterior
from lsdask.models.dirichlet_prior import (
    allocation_at,
    fit_asymmetric_alpha,
    fit_symmetric_eta_to_counts,
)
from lsdask.models.observation import Rows
from lsdask.models.stats import SparseBlock, Stat, SuffStats

#: the statistics a memo keeps for a learned alpha (see the module docstring)
PRIOR_STATS = ("S", "W", "Cdir")


@dataclass(frozen=True)
class LocalStepOptions:
    """Tunables of the per-document iterations (lsparse Sec. 5)."""

    max_iters: int = 100
    conv_thresh: float = 0.05
    eps: float = 1e-8
    restarts: bool = True
    max_restarts: int = 5  # proposals per document, smallest-mass topics first
    restart_iters: int = 3  # iterations per proposal (2-5 in the HDP supplement, Sec. E)


def as_csr_batch(X: Rows) -> sp.csr_matrix:
    """A batch of documents as CSR with int64 indptr, int32 ids, float64 counts."""
    X = X if sp.issparse(X) else sp.csr_matrix(np.asarray(X))
    X = sp.csr_matrix(X)
    data = np.asarray(X.data, dtype=np.float64)
    if data.size and (not np.isfinite(data).all() or data.min() < 0):  # every batch: fast
        bad = ~(np.isfinite(data) & (data >= 0))
        i = int(np.argmax(bad))
        row = int(np.searchsorted(X.indptr, i, side="right") - 1)
        raise ValueError(
            f"word counts must be finite and non-negative; document (row) {row}, word id "
            f"{int(X.indices[i])} has {float(data[i])!r} ({int(bad.sum())} such entries in all)"
        )
    return X


@dataclass(frozen=True, eq=False)
class LDAGlobals(DirichletPosterior):
    """LDA's globals: the topics ``q(phi_k) = Dir(lambda_k)`` (a
    :class:`DirichletPosterior`, whose prior is eta) and the document-topic prior
    ``alpha`` (K,), per topic, that the local step uses (``theta_d = N_d + alpha``).

    Build it with :meth:`of`. Everything that reads a :class:`DirichletPosterior`
    (``lam``, ``topics``, ``logs``, the ELBO terms) reads it as one.
    """

    alpha: np.ndarray

    def __post_init__(self) -> None:
        super().__post_init__()
        alpha = np.asarray(self.alpha, dtype=np.float64)
        K = self.logs.shape[1]
        if alpha.shape != (K,) or not (np.isfinite(alpha).all() and alpha.min() > 0):
            raise ValueError(
                f"alpha must hold {K} positive finite values, one per topic; got {self.alpha!r}"
            )
        object.__setattr__(self, "alpha", alpha)

    @classmethod
    def of(cls, topics: DirichletPosterior, alpha: Any) -> LDAGlobals:
        """The topics ``topics`` with the document-topic prior ``alpha`` (K,)."""
        return cls(topics.logs, topics.stored, alpha)

    @property
    def eta(self) -> float:
        """The topic-word prior of ``lambda``."""
        return float(self.logs.prior)

    def for_workers(self) -> LDAGlobals:
        """What a local step reads: E[log phi]'s stored entries and alpha."""
        return LDAGlobals(self.logs, None, self.alpha)


def _prior_value(alpha: Any, K: int) -> float | tuple[float, ...]:
    """``alpha`` as LDAModel keeps it: a positive float (the total), or K positive floats."""
    if isinstance(alpha, numbers.Real) and not isinstance(alpha, bool):
        value = float(alpha)
        if not (np.isfinite(value) and value > 0):
            raise ValueError(f"alpha must be a positive finite number; got {alpha!r}")
        return value
    arr = np.asarray(alpha, dtype=np.float64)
    if arr.shape != (K,) or not (np.isfinite(arr).all() and arr.min() > 0):
        raise ValueError(
            f"alpha must be a positive number (the total, alpha / K per topic) or {K} "
            f"positive values, one per topic; got {alpha!r}"
        )
    return tuple(float(x) for x in arr)


@dataclass(frozen=True)
class LDAModel:
    """LDA with K topics over V words.

    Parameters
    ----------
    n_components : int
        K.
    vocab_size : int
        V.
    alpha : float or sequence of K floats
        The document-topic prior: a float is the total concentration, alpha / K
        per topic (the paper's symmetric prior); K values are each topic's own
        ``alpha_k``. Where alpha is learned, the start of every fit.
    eta : float
        Topic-word Dirichlet pseudo-count; where eta is learned, the start of every fit.
    options : LocalStepOptions
    learn_alpha : bool
        Fit an asymmetric alpha in every global step
        (:func:`~lsdask.models.dirichlet_prior.fit_asymmetric_alpha` on the whole-data
        ``S``); the statistics then carry ``S``, ``W`` and ``Cdir``.
    learn_eta : bool
        Fit a symmetric eta, jointly with the topics, in every global step
        (:func:`~lsdask.models.dirichlet_prior.fit_symmetric_eta_to_counts`).
    """

    n_components: int
    vocab_size: int
    alpha: float | tuple[float, ...] = 0.5
    eta: float = 0.1
    options: LocalStepOptions = LocalStepOptions()
    learn_alpha: bool = False
    learn_eta: bool = False

    def __post_init__(self) -> None:
        # a list (from a JSON configuration) or array becomes a hashable tuple
        object.__setattr__(self, "alpha", _prior_value(self.alpha, self.n_components))

    @property
    def total_alpha(self) -> float:
        """``sum_k alpha_k`` of the fixed (or starting) prior."""
        return float(np.sum(self.alpha))

    def prior_vector(self) -> np.ndarray:
        """The fixed (or starting) prior ``alpha_k``, one per topic: alpha / K each for
        a float alpha."""
        K = self.n_components
        if isinstance(self.alpha, tuple):
            return np.array(self.alpha)
        return np.full(K, self.alpha / K)

    @property
    def keeps_prior_stats(self) -> bool:
        """Whether the statistics carry ``S``, ``W`` and ``Cdir`` (a learned alpha)."""
        return self.learn_alpha

    def doc_prior(self, glob: DirichletPosterior) -> np.ndarray:
        """The alpha the local step uses against ``glob``: its own (:class:`LDAGlobals`),
        else the model's fixed one (topics built without a prior, e.g. by hand)."""
        return glob.alpha if isinstance(glob, LDAGlobals) else self.prior_vector()

    def leftover_prior(self, glob: DirichletPosterior) -> float | None:
        """The prior mass ``a_rest`` of a leftover topic that holds no tokens, whose
        ``E[log pi_d]`` the statistics' ``S`` then carries last (K + 1 entries): None
        for LDA, which has none (the HDP's is ``alpha E[beta_{K+1}]``)."""
        return None

    def check_data(self, X: Rows) -> None:
        X = as_csr_batch(X)
        if X.shape[1] != self.vocab_size:
            raise ValueError(
                f"expected count vectors over V={self.vocab_size} words; got {X.shape[1]} columns"
            )

    def doc_topic_step(
        self, X: Rows, glob: DirichletPosterior, sparsity: int | None
    ) -> tuple[dict[str, Stat], np.ndarray, tuple[int, int, int]]:
        """Run the local step on a batch: ``(stats pieces, doc-topic counts N_d,
        (iterations, restarts tried, restarts accepted))``."""
        pieces, doc_topic, info, _ = self._batch_step(X, glob, sparsity, None)
        return pieces, doc_topic, info

    def _batch_step(
        self,
        X: Rows,
        glob: DirichletPosterior,
        sparsity: int | None,
        pairs: tuple[np.ndarray, np.ndarray] | None,
    ) -> tuple[dict[str, Stat], np.ndarray, tuple[int, int, int], tuple[np.ndarray, ...]]:
        """:meth:`doc_topic_step` that also returns the merge terms ``(H, S, C)`` of
        the topic pairs ``pairs = (j, k)`` (see
        :func:`~lsdask.kernels.lda.lda_batch_step_pairs`; empty without pairs)."""
        X = as_csr_batch(X)
        K = self.n_components
        cols, local = np.unique(X.indices, return_inverse=True)
        C = glob.logs.rows(cols)  # E[log phi] of the batch's own words only
        out_words = np.zeros((K, cols.size))
        doc_topic = np.zeros((X.shape[0], K))
        S = np.zeros(K + 1)
        o = self.options
        L = 0 if sparsity is None else int(sparsity)
        a_rest = self.leftover_prior(glob)
        pj, pk = pairs if pairs is not None else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        pair_map = np.full((K, K) if pj.size else (0, 0), -1, dtype=np.int32)
        pair_map[pj, pk] = pair_map[pk, pj] = np.arange(pj.size, dtype=np.int32)
        terms = (np.zeros(pj.size), np.zeros(pj.size), np.zeros(pj.size))
        entropy, alloc, W, Cdir, iters, tried, accepted = lda_batch_step_pairs(
            X.indptr.astype(np.int64), local.astype(np.int32), X.data.astype(np.float64),
            C, np.ascontiguousarray(self.doc_prior(glob)), a_rest or 0.0, L, o.max_iters,
            o.conv_thresh, o.eps, o.max_restarts if o.restarts else 0, o.restart_iters,
            out_words, doc_topic, S, pair_map, pj, pk, *terms,
        )  # fmt: skip
        pieces: dict[str, Stat] = {
            "words": SparseBlock.from_columns(cols, out_words, self.vocab_size),
            "H": np.array([entropy]),
            "alloc": np.array([alloc]),
            "N": out_words.sum(axis=1),
            "n_docs": np.array([float(X.shape[0])]),
        }
        if self.keeps_prior_stats:  # S[K]: the leftover topic's, where there is one
            S = S if a_rest is not None else S[:K]
            pieces.update(S=S, W=np.array([W]), Cdir=np.array([Cdir]))
        return pieces, doc_topic, (iters, tried, accepted), terms

    def local_step(self, X: Rows, glob: DirichletPosterior, sparsity: int | None) -> SuffStats:
        pieces, _, _ = self.doc_topic_step(X, glob, sparsity)
        return SuffStats(**pieces)

    def empty_stats(self) -> SuffStats:
        K = self.n_components
        prior = (
            {"S": np.zeros(K), "W": np.zeros(1), "Cdir": np.zeros(1)}
            if self.keeps_prior_stats
            else {}
        )
        return SuffStats(
            words=np.zeros((K, self.vocab_size)),
            H=np.zeros(1),
            alloc=np.zeros(1),
            N=np.zeros(K),
            n_docs=np.zeros(1),
            **prior,
        )

    def for_local_step(self, glob: LDAGlobals) -> LDAGlobals:
        """What the workers need: the stored entries of E[log phi] and alpha."""
        return glob.for_workers()

    def row_count(self, stats: SuffStats) -> float:
        """Documents summarized in the statistics."""
        return float(stats.array("n_docs")[0])

    def token_count(self, stats: SuffStats) -> float:
        """Word tokens summarized in the statistics."""
        return float(stats.array("N").sum())

    def data_size(self, stats: SuffStats) -> float:
        """What the ELBO is reported per: tokens."""
        return self.token_count(stats)

    # -- the global step --------------------------------------------------------

    def fitted_alpha(self, stats: SuffStats) -> np.ndarray:
        """The document-topic prior of the global step: with ``learn_alpha``, the
        maximizer of the ELBO's allocation term given the whole-data ``S``
        (:func:`~lsdask.models.dirichlet_prior.fit_asymmetric_alpha`, Newton's method
        from :meth:`prior_vector`); else, or without local-step statistics (those of
        an initialization carry no ``S``), or for a single topic, :meth:`prior_vector`."""
        start = self.prior_vector()
        D = self.row_count(stats)
        if not self.learn_alpha or "S" not in stats.keys() or D <= 0 or self.n_components < 2:
            return start
        return fit_asymmetric_alpha(stats.array("S"), D, start)

    def fitted_eta(self, stats: SuffStats) -> float:
        """The topic-word prior of the global step: with ``learn_eta``, the eta that,
        with ``lambda = eta + S``, maximizes the ELBO's topic terms given the counts
        (:func:`~lsdask.models.dirichlet_prior.fit_symmetric_eta_to_counts` from
        ``eta``); else, or for counts without tokens, ``eta``."""
        if not self.learn_eta or self.vocab_size < 2:
            return self.eta
        words = np.ascontiguousarray(stats.array("words"), dtype=np.float64)
        row_ptr, cols, values = entries_unequal_to(words, 0.0, 0.0)
        # memo arithmetic (S - S_b(old) + S_b(new)) can leave -1e-17 for a zero count
        values = np.maximum(values, 0.0)
        if not values.sum() > 0:
            return self.eta
        counts = sp.csr_matrix((values, cols, row_ptr), shape=words.shape)
        return fit_symmetric_eta_to_counts(counts, self.eta)

    def globals_at(self, stats: SuffStats, alpha: Any, eta: float) -> LDAGlobals:
        """The topics ``lambda = eta + S`` of the statistics, with the prior alpha."""
        topics = DirichletPosterior.from_counts(stats.array("words"), eta)
        return LDAGlobals.of(topics, alpha)

    def global_step(self, stats: SuffStats) -> LDAGlobals:
        """The globals given whole-data statistics: ``lambda = eta + S`` (App. C) with
        the priors of :meth:`fitted_alpha` and :meth:`fitted_eta`, a function of the
        statistics alone (a resume or a load recomputes them)."""
        return self.globals_at(stats, self.fitted_alpha(stats), self.fitted_eta(stats))

    def allocation(self, stats: SuffStats, alpha: np.ndarray) -> float:
        """The ELBO's allocation term (lsparse Eq. 45) with the statistics' ``q(pi_d)``
        at the prior alpha: ``alloc`` itself, or, where the statistics carry ``S``,
        :func:`~lsdask.models.dirichlet_prior.allocation_at` (which equals ``alloc`` at
        the prior the documents were fitted with, whatever prior that was)."""
        if "S" not in stats.keys():
            return float(stats.array("alloc")[0])
        return allocation_at(
            alpha,
            stats.array("S"),
            float(stats.array("W")[0]),
            float(stats.array("Cdir")[0]),
            self.row_count(stats),
        )

    def elbo(self, stats: SuffStats, glob: DirichletPosterior) -> float:
        """The ELBO (App. C, Eq. 42-45) from the statistics: the topic terms at the
        globals' eta, the entropy, and the allocation term at their alpha."""
        return (
            glob.elbo_terms(stats.array("words"))
            + float(stats.array("H")[0])
            + self.allocation(stats, self.doc_prior(glob))
        )
